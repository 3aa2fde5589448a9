"""Malleability policies and the wire protocol as plain data, without processes."""

from __future__ import annotations

import pytest

from apgaspy import ConfigurationError, MalleabilityError, Place
from apgaspy.elastic._shrink_answer import check_shrink_answer
from communicators import Order, OrderError, format_order, parse_order, parse_schedule
from apgaspy.wire.protocol import format_notification as notification


@pytest.mark.parametrize("line,order", [
    ("shrink 2", Order("shrink", 2)),
    ("shrink 2\n", Order("shrink", 2)),
    ("grow 2 h1 h2", Order("grow", 2, ("h1", "h2"))),
    ("grow 2 127.0.1.2 127.0.1.3 \n", Order("grow", 2, ("127.0.1.2", "127.0.1.3"))),
    ("grow 1 node-07.cluster", Order("grow", 1, ("node-07.cluster",))),
])
def test_parse_valid_orders(line, order):
    assert parse_order(line) == order
    assert parse_order(format_order(order)) == order


@pytest.mark.parametrize("line,why", [
    ("shrink x", "positive integer"),
    ("shrink 0", "at least 1"),
    ("shrink -1", "positive integer"),
    ("shrink", "expected 'shrink <n>'"),
    ("shrink 1 a b", "needs 1 host names"),
    ("grow 2 onlyonehost", "needs 2 host names"),
    ("grow 1 a b", "needs 1 host names"),
    ("grow", "expected 'grow"),
    ("grow 1 bad/host", "not a host name"),
    ("dance 1", "unknown order"),
    ("", "empty order"),
    ("shrink 1\x00", "printable ASCII"),
    ("shrink ²", "printable ASCII"),
])
def test_parse_rejects_malformed_orders(line, why):
    with pytest.raises(OrderError, match=why):
        parse_order(line)


def test_notification_format():
    assert notification("growTimeAPGAS;2;123", "127.0.1.1") == "growTimeAPGAS;2;123:127.0.1.1\n"
    with pytest.raises(ValueError):
        notification("a:b", "127.0.1.1")


def test_parse_schedule():
    entries = parse_schedule("after 5 s grow 2 on localhost localhost; after 12s shrink 1;"
                             " after 0.5 grow 1")
    assert [(e.at, e.order) for e in entries] == [
        (0.5, Order("grow", 1, ("localhost",))),
        (5.0, Order("grow", 2, ("localhost", "localhost"))),
        (12.0, Order("shrink", 1)),
    ]
    for bad in ["grow 2", "after x s shrink 1", "after 1 s shrink y", "after 1 s grow 2 a"]:
        with pytest.raises(ConfigurationError):
            parse_schedule(bad)


def _slot_of(slots):
    """Places 0..n-1 sitting in the given host slots: {place: slot}."""
    return dict(enumerate(slots))


def test_shrink_answer_accepted():
    assert check_shrink_answer([Place(3), Place(1)], 2, 2, _slot_of([0, 1, 2, 3])) == [1, 3]


@pytest.mark.parametrize("answer,why", [
    ([Place(3)], "asked for 2 places and returned 1"),
    ([Place(3), Place(3)], "twice"),
    ([Place(0), Place(3)], "place\\(0\\)"),
    ([Place(3), Place(9)], "do not exist"),
    ([Place(3), Place(2)], "died"),
    (None, "list of places"),
    (["x", "y"], "must return places"),
])
def test_shrink_answer_refused(answer, why):
    with pytest.raises(MalleabilityError, match=why):
        check_shrink_answer(answer, 2, 2, _slot_of([0, 1, 2, 3]), dead={2})


def test_shrink_answer_must_make_whole_hosts():
    # two places per host: slots 0 (places 0,1), 1 (places 2,3), 2 (places 4,5)
    slot_of = _slot_of([0, 0, 1, 1, 2, 2])
    assert check_shrink_answer([Place(4), Place(5)], 2, 1, slot_of) == [4, 5]
    with pytest.raises(MalleabilityError, match="whole hosts"):
        check_shrink_answer([Place(3), Place(4)], 2, 1, slot_of)
