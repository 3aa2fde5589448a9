"""Unit tests of the runtime's pure parts, without processes."""

from __future__ import annotations

import pickle
import threading
import time

import pytest

from apgaspy import ConfigurationError, MultipleException, Place, RemoteTraceback
from apgaspy._config import SETTINGS, setting
from apgaspy._finish import RootFinish
from apgaspy._pool import Pool
from apgaspy._serialization import dumps, loads, pack_exception


def test_place_is_a_value():
    assert Place(3) == Place(3) and Place(3) != Place(4)
    assert sorted([Place(5), Place(1)]) == [Place(1), Place(5)]
    assert hash(Place(2)) == hash(Place(2))
    assert pickle.loads(pickle.dumps(Place(7))) == Place(7)
    assert str(Place(1)) == "place(1)"
    with pytest.raises(ValueError):
        Place(-1)
    with pytest.raises(TypeError):
        Place("1")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        Place(1).id = 2  # type: ignore[misc]


def test_setting_order_and_errors(monkeypatch):
    monkeypatch.delenv("APGAS_THREADS", raising=False)
    assert setting("THREADS") == SETTINGS["THREADS"].default
    monkeypatch.setenv("APGAS_THREADS", "3")
    assert setting("THREADS") == 3
    assert setting("THREADS", 5) == 5  # the argument wins
    monkeypatch.setenv("APGAS_THREADS", "many")
    with pytest.raises(ConfigurationError, match="APGAS_THREADS='many'"):
        setting("THREADS")
    monkeypatch.setenv("APGAS_THREADS", "0")
    with pytest.raises(ConfigurationError, match="must be positive"):
        setting("THREADS")
    monkeypatch.setenv("APGAS_FORWARD_OUTPUT", "off")
    assert setting("FORWARD_OUTPUT") is False
    monkeypatch.setenv("APGAS_LOG_LEVEL", "loud")
    with pytest.raises(ConfigurationError):
        setting("LOG_LEVEL")


def test_root_finish_counts_per_place():
    f = RootFinish(here=0)
    assert not f.done
    f.add(1, +1)  # spawn to place 1
    f.add(0, -1)  # the body ends
    assert not f.done and f.waits_on(1)
    # place 1 reports: its task spawned one to place 2 and ended (one message)
    assert not f.apply({1: -1, 2: +1})
    # place 2's report arrives: done
    assert f.apply({2: -1})
    assert f.done and not f.waits_on(1)


def test_root_finish_reports_in_any_order_never_end_early():
    f = RootFinish(here=0)
    f.add(1, +1)
    f.add(0, -1)
    # place 2 reports its task's end before place 1 reports having spawned it
    assert not f.apply({2: -1})
    assert not f.done and f.waits_on(2)
    assert f.apply({1: -1, 2: +1})


def test_pool_compensates_blocked_workers():
    pool = Pool("test", parallelism=1, max_threads=16)
    inner_done = threading.Event()
    outer_done = threading.Event()

    def inner():
        inner_done.set()

    def outer():
        pool.submit(inner)  # queued behind us on our own single worker
        with pool.blocking():
            assert inner_done.wait(5)
        outer_done.set()

    pool.submit(outer)
    assert outer_done.wait(10), "the blocked worker was not compensated"
    pool.close()


def test_pool_logs_and_survives_task_errors(caplog):
    pool = Pool("test", parallelism=1, max_threads=4)
    done = threading.Event()
    pool.submit(lambda: 1 / 0)
    pool.submit(done.set)
    assert done.wait(5)
    pool.close()
    deadline = time.monotonic() + 5  # the failed task logs on its own thread
    while "ZeroDivisionError" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "ZeroDivisionError" in caplog.text


def test_a_pool_takes_queued_tasks_and_counts_its_threads_idle_again():
    """A worker takes a queued task without counting itself idle (one lock per task
    in a burst, not three); after a burst every thread is idle again and nothing pending."""
    pool = Pool("test", parallelism=2, max_threads=4)
    done = []
    finished = threading.Event()
    for i in range(2000):
        pool.submit(done.append, i)
    pool.submit(finished.set)
    assert finished.wait(10)
    deadline = time.monotonic() + 5
    while (pool.pending or pool._idle != pool._threads) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(done) == list(range(2000))
    # a second thread starts only when no thread is idle at a submit: one may keep up alone
    assert pool.pending == 0 and pool._idle == pool._threads and 1 <= pool._threads <= 2
    pool.close()


def test_forwarded_output_is_flushed_at_a_tasks_end_only_when_written():
    """``Runtime.output_dirty`` says a task's end must flush (checking it costs
    less than calling the streams' flush for every task)."""
    import io
    import os

    from apgaspy._output import _ForwardingStream
    from apgaspy._runtime import Runtime

    rt = Runtime(1, os.urandom(32), "127.0.0.1")
    try:
        sent = []
        rt.send_output = lambda number, text: sent.append((number, text))
        rt._streams = [_ForwardingStream(rt, 1, io.StringIO()),
                       _ForwardingStream(rt, 2, io.StringIO())]
        assert not rt.output_dirty
        rt._streams[1].write("partial")
        assert rt.output_dirty and sent == []
        rt.flush_output()
        assert sent == [(2, "partial")] and not rt.output_dirty
        rt._streams[0].write("a line\n")  # sent at once; the flag stays until the next flush
        assert sent[-1] == (1, "a line\n") and rt.output_dirty
    finally:
        rt._streams = []
        rt.close()


def test_an_inbox_update_waits_until_the_output_sent_before_it_is_written(capsys):
    """An UPDATE to an ``at``'s inbox names the output its place sent before it; place 0
    handles it once the receiver wrote that output, and stops waiting for a dead place."""
    import os

    from apgaspy._messages import Output
    from apgaspy._runtime import Runtime

    rt = Runtime(0, os.urandom(32), "127.0.0.1")
    try:
        waited = threading.Event()
        waiter = threading.Thread(target=lambda: (rt.wait_output(1, 2), waited.set()))
        waiter.start()
        rt._on_message(Output.encode(1, "first\n", 1, 1))
        assert not waited.wait(0.3)
        rt._on_message(Output.encode(1, "second\n", 1, 2))
        assert waited.wait(5)
        waiter.join(5)
        assert capsys.readouterr().out == "first\nsecond\n"
        rt.wait_output(1, 1)  # already written: returns at once
        rt.membership.dead.add(2)
        t = time.monotonic()
        rt.wait_output(2, 1)  # nothing will come from a dead place
        assert time.monotonic() - t < 1
    finally:
        rt.close()


def test_exceptions_travel_with_traceback_and_place():
    try:
        raise KeyError("lost")
    except KeyError as exc:
        packed = pack_exception(exc, place=3)
    back = loads(dumps(packed)).unpack()
    assert isinstance(back, KeyError) and back.args == ("lost",)
    assert isinstance(back.__cause__, RemoteTraceback)
    assert "Traceback at place(3)" in str(back.__cause__)
    assert "raised at place(3)" in back.__notes__[0]


def test_multiple_exception_is_an_exception_group():
    group = MultipleException("two", [ValueError("a"), KeyError("b")])
    assert isinstance(group, ExceptionGroup)
    match, rest = group.split(ValueError)
    assert isinstance(match, MultipleException) and len(match.exceptions) == 1
    assert isinstance(rest, MultipleException)


def test_lambdas_travel_by_value():
    k = 41
    fn = loads(dumps(lambda: k + 1))
    assert fn() == 42


def test_a_death_reaches_every_room_of_the_runtime():
    """The rooms share the runtime's one lock, and ``Membership.place_died`` fails, in one
    step, the finishes (finish room) and the acknowledgements (control room) waiting on the
    dead place; an UPDATE that arrives later for the failed finish is late news."""
    import os

    from apgaspy import DeadPlaceError
    from apgaspy._membership import PlaceInfo
    from apgaspy._messages import UPDATE, Ack, Dead, Update
    from apgaspy._runtime import Runtime

    rt = Runtime(0, os.urandom(32), "127.0.0.1")
    try:
        assert rt.finishes.state_lock is rt.state_lock is rt.membership.state_lock \
            is rt.requests.state_lock
        for pid in (0, 1, 2):
            rt.membership.table[pid] = PlaceInfo(pid, f"tcp://127.0.0.1:{9 + pid}", "h", pid,
                                                 "spawned")
        assert rt.table is rt.membership.table
        assert rt.ctrl_handlers[Ack] == rt.requests.ctrl_ack
        assert rt.ctrl_handlers[Dead] == rt.membership.ctrl_dead
        fin = RootFinish(0)
        fin.fid = (0, 1)
        fin.add(1, 1)
        rt.finishes.roots[1] = fin
        other = RootFinish(0)
        other.fid = (0, 2)
        other.add(2, 1)
        rt.finishes.roots[2] = other
        waiting, event = {1}, threading.Event()
        rt.requests._pending_acks[7] = (waiting, event)
        rt.membership.place_died(1)
        assert 1 not in rt.table and 1 in rt.membership.dead
        assert fin.failed and fin.done and isinstance(fin.exceptions[0], DeadPlaceError)
        assert list(rt.finishes.roots) == [2] and not other.failed
        assert event.is_set() and not waiting
        assert isinstance(rt.membership.bad_place(1), DeadPlaceError)
        rt.finishes.on_update(Update(UPDATE, (0, 1), 1, {1: -1}, [], None, None, 0))  # late
        assert fin.exceptions == [fin.exceptions[0]]
        assert not other.add(0, -1)  # its body ended; its task at place 2 has not
        rt.finishes.on_update(Update(UPDATE, (0, 2), 2, {2: -1}, [], None, None, 0))
        assert other.done and not rt.finishes.roots
    finally:
        rt.close()


def test_a_home_applies_each_place_s_updates_in_the_order_it_sent_them():
    """A place whose route to a home changes (a grow gives its host slot an aggregator) sends
    update 1 directly and update 2 through the aggregator; if 2 came first and were applied,
    the count would reach zero early.  The home holds an update that comes ahead of a gap
    and applies it once the gap is filled; one that comes again counts once."""
    import os

    from apgaspy._finish import RootFinish
    from apgaspy._membership import PlaceInfo
    from apgaspy._messages import UPDATE, FinBatch, Update
    from apgaspy._runtime import Runtime

    rt = Runtime(0, os.urandom(32), "127.0.0.1")
    try:
        for pid in (0, 1, 2, 3):
            rt.membership.table[pid] = PlaceInfo(pid, f"tcp://127.0.0.1:{9 + pid}", "h", pid,
                                                 "spawned")
        fin = RootFinish(0)
        fin.fid = (0, 1)
        fin.add(1, 1)  # task A spawned to place 1
        assert not fin.add(0, -1)  # the body ended
        rt.finishes.roots[1] = fin
        # place 1: A spawned B to place 2 and ended (update 1, direct); B spawned E to place
        # 1 and ended (place 2's update 1); E ended (place 1's update 2, aggregated by 3)
        u1 = Update(UPDATE, (0, 1), 1, {1: -1, 2: 1}, [], None, None, 0, 1)
        u2 = (1, 2, (0, 1), {1: -1}, [], None, None)
        b1 = Update(UPDATE, (0, 1), 2, {2: -1, 1: 1}, [], None, None, 0, 1)
        rt.finishes.ctrl_fin_batch(3, FinBatch([u2], False))  # overtook u1
        assert not fin.done and fin.counts == {1: 1}  # held: applied alone it would end F
        rt.finishes.ctrl_fin_batch(3, FinBatch([u2], False))  # again: still held once
        rt.finishes.on_update(u1)  # fills the gap: u1, then u2
        assert not fin.done and fin.counts == {1: -1, 2: 1}
        rt.finishes.on_update(u1)  # sent again: applied already
        assert fin.counts == {1: -1, 2: 1}
        rt.finishes.on_update(b1)
        assert fin.done and not rt.finishes.roots
    finally:
        rt.close()


def test_place_0_lines_never_interleave():
    """print() writes text and newline in two calls; another thread's line must not land
    between them (it did: "Hello from place(0)Hello from place(1)")."""
    import io

    from apgaspy._output import _LineStream

    original = io.StringIO()
    stream = _LineStream(original)
    started, go = threading.Event(), threading.Event()

    def a():
        stream.write("Hello from place(0)")
        started.set()
        go.wait(5)
        stream.write("\n")
        stream.write("tail")

    t = threading.Thread(target=a)
    t.start()
    started.wait(5)
    stream.write("Hello from place(1)\n")  # the receiver thread's forwarded line
    go.set()
    t.join(5)
    assert original.getvalue() == "Hello from place(1)\nHello from place(0)\n"
    stream.flush_all()  # a thread's unfinished line is written when the runtime closes
    assert original.getvalue().endswith("\ntail")


def test_every_message_kind_decodes_to_its_named_tuple():
    import pickle

    from apgaspy._messages import (
        CONTROL_TYPES,
        Ctrl,
        Dead,
        Immediate,
        Output,
        Task,
        Uncounted,
        UnknownMessageError,
        Update,
        control_message,
        decode,
    )

    task = decode(Task.encode((0, 7), 1, b"body"))
    assert type(task) is Task and (task.fid, task.flags, task.body) == ((0, 7), 1, b"body")
    assert decode(Uncounted.encode(b"u")).body == b"u"
    assert type(decode(Immediate.encode(b"i"))) is Immediate
    update = decode(Update.encode((0, 7), 2, {2: -1}, [], b"r", None, 5))
    assert type(update) is Update
    assert (update.src, update.deltas, update.result, update.output_seq) == (2, {2: -1}, b"r", 5)
    ctrl = decode(Ctrl.encode(3, Dead(place=5)))
    assert type(ctrl) is Ctrl and ctrl.src == 3
    assert control_message(ctrl) == Dead(place=5) and type(control_message(ctrl)) is Dead
    out = decode(Output.encode(2, "text", 4, 9))
    assert (out.stream, out.text, out.src, out.seq) == (2, "text", 4, 9)
    # on the wire a message is a plain tuple: no class name travels
    assert pickle.loads(Ctrl.encode(3, Dead(5))) == (ctrl.kind, 3, CONTROL_TYPES.index(Dead),
                                                     (5,))
    for bad in [(99, "x"), ("TASK",), ()]:
        with pytest.raises(UnknownMessageError):
            decode(pickle.dumps(bad))


def test_control_messages_are_typed_records_checked_at_the_sender():
    """Each control message is a record with named fields: a wrong field or field count, or
    something that is no control message, fails where it is built or encoded; a frame of an
    unknown type or with the wrong fields is refused at the receiver by one clear error."""
    import pickle

    from apgaspy._messages import (
        CONTROL_TYPES,
        CTRL,
        Ack,
        AddPlaces,
        Ctrl,
        Fin,
        RemovePlaces,
        Shutdown,
        UnknownMessageError,
        control_message,
        decode,
    )

    for cls in CONTROL_TYPES:  # every type survives the wire, fields by name
        fields = {name: [1, 2] if name in ("infos", "removed") else 7 for name in cls._fields}
        message = cls(**fields)
        assert control_message(decode(Ctrl.encode(0, message))) == message
    assert RemovePlaces(removed=[2, 3]).op == 0  # request_all numbers it
    assert AddPlaces([1])._replace(op=4) == AddPlaces(infos=[1], op=4)
    with pytest.raises(TypeError):
        Shutdown()  # type: ignore[call-arg]  # its code is missing
    with pytest.raises(TypeError):
        Fin(3)  # type: ignore[call-arg]  # no fields
    with pytest.raises(TypeError):
        Ack(op=1, place=2)  # type: ignore[call-arg]  # no such field
    with pytest.raises(TypeError, match="not a control message"):
        Ctrl.encode(0, ("ack", 1))  # type: ignore[arg-type]  # the old string form
    for code, fields in [(len(CONTROL_TYPES), ()), (CONTROL_TYPES.index(Ack), ()),
                         (CONTROL_TYPES.index(Fin), (1,)), ("ack", (1,))]:
        with pytest.raises(UnknownMessageError):
            control_message(decode(pickle.dumps((CTRL, 1, code, fields))))


def test_the_runtime_dispatches_every_control_message_by_type():
    """The runtime's table has one handler per control message type, and a frame it cannot
    read is logged and dropped, the runtime running on."""
    import os
    import pickle

    from apgaspy._membership import PlaceInfo
    from apgaspy._messages import CONTROL_TYPES, CTRL, Ctrl, Dead
    from apgaspy._runtime import Runtime

    rt = Runtime(1, os.urandom(32), "127.0.0.1")
    try:
        assert set(rt.ctrl_handlers) == set(CONTROL_TYPES)
        for pid in (0, 1, 2):
            rt.membership.table[pid] = PlaceInfo(pid, f"tcp://127.0.0.1:{9 + pid}", "h", pid,
                                                 "spawned")
        rt._on_message(pickle.dumps((CTRL, 0, 99, (2,))))  # no such type: dropped
        assert 2 in rt.table
        rt._on_message(Ctrl.encode(0, Dead(place=2)))
        assert 2 not in rt.table and rt.membership.dead == {2}
    finally:
        rt.close()
