"""GLB under adverse timing: late steal answers lose no work, dead places fail broadcasts fast.

The late-answer race: a thief waits for the answer of a victim that a shrink releases; it sees
the victim go before the answer arrives (``APGAS_TEST_DELAY`` holds back the messages of the
released place).  The answer may carry loot: it must land in the thief's bag, never be taken
for the answer of a later attempt nor dropped.  Every run must give the exact count.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import pytest
from conftest import env_for, run_program

from apgaspy import ConfigurationError, _test_delay
from apgaspy._config import setting

UTS_11 = 16_526_523
UTS_12 = 66_106_929
QUEENS = {15: 2_279_184, 16: 14_772_512}

# (kernel, size, places, APGAS_TEST_DELAY, APGAS_SCHEDULE).  All the work starts at the last
# place, which the first shrink releases while its answers to thieves are held back.  Delays
# are only ever on messages *from* places that a shrink releases (see apgaspy._test_delay).
LATE_ANSWER_RUNS = [
    ("uts", 11, 4, "3>1:0.6,3>2:0.6", "after 0.2 s shrink 1"),
    ("uts", 11, 4, "3>1:0.6,3>2:0.6", "after 0.3 s shrink 1"),
    ("uts", 11, 4, "3>1:0.3,3>2:0.3", "after 0.25 s shrink 1"),
    ("uts", 11, 4, "3>0:0.1,3>1:0.4,3>2:0.4", "after 0.35 s shrink 1"),
    ("uts", 12, 4, "3>1:0.4,3>2:0.4,4>0:0.2,4>1:0.4,4>2:0.4",
     "after 0.2 s shrink 1; after 0.3 s grow 1; after 1.0 s shrink 1"),
    ("uts", 11, 3, "2>1:0.5", "after 0.2 s shrink 1; after 0.3 s grow 1"),
    ("nqueens", 16, 4, "3>1:0.6,3>2:0.6", "after 0.3 s shrink 1"),
    ("nqueens", 15, 4, "3>0:0.3,3>1:0.3,3>2:0.3", "after 0.15 s shrink 1"),
    ("nqueens", 16, 4, "3>1:0.5,3>2:0.5,4>1:0.5,4>2:0.5",
     "after 0.2 s shrink 1; after 0.25 s grow 1; after 1.0 s shrink 1"),
]


def _expected(kernel: str, size: int) -> int:
    return {11: UTS_11, 12: UTS_12}[size] if kernel == "uts" else QUEENS[size]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kernel,size,places,delay,schedule", LATE_ANSWER_RUNS,
                         ids=[f"{k}{s}-{p}p-{d}-{len(o.split(';'))}orders"
                              for k, s, p, d, o in LATE_ANSWER_RUNS])
def test_late_steal_answers_lose_no_work(kernel, size, places, delay, schedule):
    env = env_for(places, APGAS_TEST_DELAY=delay, APGAS_COMMUNICATOR="schedule",
                  APGAS_SCHEDULE=schedule)
    r = run_program("glb_late_answers.py", places, "spawn", kernel, str(size), "--w", "4",
                    env=env, timeout=45)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.lines[-1])
    assert report["result"] == _expected(kernel, size), report
    assert report["correct"] is True
    kinds = [kind for kind, _ in report["orders"]]
    assert kinds and kinds[0] == "shrink", report["orders"]  # the race needs the shrink
    for complaint in ("test delay:", "went idle", "no answer to steal attempts"):
        assert complaint not in r.stderr, r.stderr


@pytest.mark.timeout(60)
def test_broadcast_to_a_dead_place_fails_at_once():
    """A broadcast whose target dies raises DeadPlaceError in seconds, not GLB_REPLY_TIMEOUT;
    so does a malleable computation whose shrink waits on a place killed just before it (the
    communicator kills it, then orders the shrink: no timing race)."""
    env = env_for(4, APGAS_COMMUNICATOR="__main__:KillThenShrink")
    t = time.monotonic()
    r = run_program("glb_dead_broadcast.py", 4, "spawn", env=env, timeout=45)
    took = time.monotonic() - t
    assert r.returncode == 0, r.stderr
    broadcast, compute = r.json_lines()
    assert broadcast["errors"] == [["DeadPlaceError", 3]], broadcast
    assert broadcast["seconds"] < 5, broadcast  # death detection takes ~1 s
    assert compute["value"] is None and compute["errors"], compute
    assert {name for name, _ in compute["errors"]} == {"DeadPlaceError"}, compute
    assert {place for _, place in compute["errors"]} == {compute["killed"]}, compute
    assert compute["order_error"] == [["DeadPlaceError", compute["killed"]]], compute
    assert compute["seconds"] < 8, compute
    assert took < 30, took


@pytest.mark.timeout(90)
def test_broadcast_to_a_silent_place_times_out_with_and_without_skip_dead():
    """A target that neither answers nor dies ends the wait after GLB_REPLY_TIMEOUT, also in
    a resilient computation's wait (which skips dead places; it used to wait forever)."""
    env = env_for(2, GLB_REPLY_TIMEOUT="1")
    r = run_program("glb_silent_broadcast.py", 2, "spawn", env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    plain, resilient = r.json_lines()
    for line, skip_dead in ((plain, False), (resilient, True)):
        assert line["skip_dead"] is skip_dead
        assert line["error"] == "TimeoutError", line
        assert 1.0 <= line["seconds"] < 10, line


# ---------------------------------------------------------------------- the test hook itself

def test_delay_format():
    assert _test_delay.parse_delays(None) == {}
    assert _test_delay.parse_delays(" ") == {}
    assert _test_delay.parse_delays("2>1:0.3, 3 > 1 : 0.25,") == {(2, 1): 0.3, (3, 1): 0.25}
    for bad in ["2>1", "2:0.3", "a>1:0.3", "2>1:x", "2>1:-1", "1>1:0.1", "-1>2:0.1",
                "2>1:inf", "2>1:0.3:4"]:
        with pytest.raises(ValueError):
            _test_delay.parse_delays(bad)


def test_delay_setting_is_off_by_default_and_checked(monkeypatch):
    monkeypatch.delenv("APGAS_TEST_DELAY", raising=False)
    assert setting("TEST_DELAY") is None
    monkeypatch.setenv("APGAS_TEST_DELAY", "2>1:zero")
    with pytest.raises(ConfigurationError, match="APGAS_TEST_DELAY"):
        setting("TEST_DELAY")


class _FakeRuntime:
    """Stands in for a Runtime: records the real sends."""

    def __init__(self, here: int, table: set[int]) -> None:
        self.here = here
        self.table = table
        self.sent: list[tuple[int, bytes, float]] = []
        self.cv = threading.Condition()

    def send(self, dest: int, msg: bytes) -> None:
        if _test_delay.ACTIVE and _test_delay.delay_send(self, dest, msg):
            return
        if dest not in self.table:
            raise ValueError(f"no place {dest}")
        with self.cv:
            self.sent.append((dest, msg, time.monotonic()))
            self.cv.notify_all()


@pytest.fixture
def fresh_hook(monkeypatch):
    """The hook's per-process state, reset (and restored afterwards)."""
    monkeypatch.setattr(_test_delay, "_pid", None)
    monkeypatch.setattr(_test_delay, "_delays", {})
    monkeypatch.setattr(_test_delay, "_lines", {})
    monkeypatch.setattr(_test_delay, "ACTIVE", True)
    return monkeypatch


@pytest.mark.timeout(20)
def test_delayed_pairs_keep_their_order(fresh_hook):
    fresh_hook.setenv("APGAS_TEST_DELAY", "2>1:0.2,2>3:0.05")
    rt = _FakeRuntime(2, {0, 1, 3})
    t0 = time.monotonic()
    for i in range(20):
        rt.send(1, b"a%d" % i)
        rt.send(3, b"b%d" % i)
        rt.send(0, b"c%d" % i)  # no delay: sent at once
    assert [m for d, m, _ in rt.sent] == [b"c%d" % i for i in range(20)]
    with pytest.raises(ValueError):
        rt.send(7, b"x")  # not a place: the real send raises at once
    assert _test_delay.drain(10)
    by_dest: dict[int, list[bytes]] = {}
    for dest, msg, at in rt.sent:
        by_dest.setdefault(dest, []).append(msg)
        if dest == 1:
            assert at - t0 >= 0.2
        if dest == 3:
            assert at - t0 >= 0.05
    assert by_dest[1] == [b"a%d" % i for i in range(20)]
    assert by_dest[3] == [b"b%d" % i for i in range(20)]
    # across pairs the order changed: 3's messages overtook 1's
    order = [d for d, _, _ in rt.sent if d != 0]
    assert order.index(1) > order.index(3)


@pytest.mark.timeout(20)
def test_delay_hook_off_takes_nothing(fresh_hook):
    fresh_hook.delenv("APGAS_TEST_DELAY", raising=False)
    rt = _FakeRuntime(2, {0, 1})
    rt.send(1, b"m")
    assert [m for _, m, _ in rt.sent] == [b"m"]
    assert _test_delay.ACTIVE is False  # later sends skip the hook altogether


@pytest.mark.timeout(20)
def test_failed_delayed_send_is_logged(fresh_hook, caplog):
    fresh_hook.setenv("APGAS_TEST_DELAY", "2>1:0.05")
    logger = logging.getLogger("apgaspy")
    logger.addHandler(caplog.handler)  # the logger may not propagate (configure_logging)
    try:
        rt = _FakeRuntime(2, {0, 1})
        rt.send(1, b"late")
        rt.table.discard(1)  # the destination leaves before the message is due
        assert _test_delay.drain(10)
    finally:
        logger.removeHandler(caplog.handler)
    assert rt.sent == []
    assert any("was lost" in rec.getMessage() for rec in caplog.records)
