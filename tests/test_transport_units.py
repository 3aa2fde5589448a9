"""The transport's framing, MAC and batching, and the task-body encoding, on real ZeroMQ
sockets inside one process (no places started)."""

from __future__ import annotations

import math
import os
import threading
import time
from hashlib import blake2b

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from apgaspy._serialization import dumps_call, loads_call
from apgaspy._transport import _BATCH, Transport, split_endpoint

KEY = os.urandom(32)


class Inbox:
    """Collects what a transport receives."""

    def __init__(self) -> None:
        self.messages: list[bytes] = []
        self.cond = threading.Condition()

    def __call__(self, m: memoryview) -> None:
        with self.cond:
            self.messages.append(bytes(m))
            self.cond.notify_all()

    def wait_for(self, n: int, timeout: float) -> list[bytes]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.messages) >= n, timeout)
            return list(self.messages)


@pytest.fixture
def pair():
    inbox = Inbox()
    rx = Transport(KEY, "127.0.0.1", inbox, lambda p: None)
    tx = Transport(KEY, "127.0.0.1", lambda m: None, lambda p: None)
    rx.start()
    tx.start()
    tx.add_peer(1, rx.endpoint)
    yield tx, rx, inbox
    tx.close(0.5)
    rx.close(0.5)


@pytest.mark.timeout(30)
def test_a_burst_arrives_whole_and_in_order_without_a_flush(pair):
    tx, rx, inbox = pair
    n = 5 * _BATCH + 7  # whole batches and a tail that only the flusher sends
    for i in range(n):
        tx.send_soon(1, i.to_bytes(4, "little"))
    got = inbox.wait_for(n, 10)
    assert [int.from_bytes(m, "little") for m in got] == list(range(n))
    assert rx.dropped == 0


@pytest.mark.timeout(30)
def test_the_tail_of_a_burst_leaves_while_the_sender_computes(pair):
    """The sender never blocks: the flusher sends the tail while the sender's thread computes
    (it gets the interpreter at the next switch interval).  The tail must arrive before the
    computation stops at 5 s; how soon depends on the machine's load, so it is not timed."""
    tx, _, inbox = pair
    for i in range(10):
        tx.send_soon(1, bytes([i]))
    t = time.monotonic()
    while len(inbox.messages) < 10 and time.monotonic() - t < 5:
        math.factorial(2000)  # pure Python, holds the interpreter between switches
    assert len(inbox.messages) == 10


@pytest.mark.timeout(30)
def test_immediate_sends_keep_their_order_with_batched_ones(pair):
    tx, _, inbox = pair
    for i in range(100):
        (tx.send if i % 7 == 0 else tx.send_soon)(1, bytes([i]))
    tx.flush()
    assert [m[0] for m in inbox.wait_for(100, 10)] == list(range(100))


def _signed(body: bytes, salt: bytes, stream: bytes, counter: int, key: bytes = KEY) -> bytes:
    """A frame as the transport seals it: MAC ‖ stream ‖ counter ‖ body."""
    payload = stream + counter.to_bytes(8, "little") + body
    return blake2b(payload, key=key, salt=salt, digest_size=32).digest() + payload


@pytest.mark.timeout(30)
def test_forged_and_truncated_frames_are_dropped_unread(pair):
    _, rx, inbox = pair
    address, salt = split_endpoint(rx.endpoint)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 2000)
    sock.connect(address)
    stream = os.urandom(16)
    body = (5).to_bytes(4, "little") + b"hello"
    good = _signed(body, salt, stream, 1)
    sock.send(_signed(body, salt, stream, 1, key=b"x" * 32))  # wrong key
    sock.send(_signed(body, os.urandom(16), stream, 1))  # meant for another socket
    sock.send(good[:-1])  # truncated: the MAC fails
    sock.send(good[:20])  # shorter than a MAC
    bad_len = (99).to_bytes(4, "little") + b"hello"  # a length past the end, signed
    sock.send(_signed(bad_len, salt, os.urandom(16), 1))
    sock.send(good)
    sock.close()
    ctx.term()
    assert inbox.wait_for(1, 10) == [b"hello"]
    assert rx.dropped == 5


@pytest.mark.timeout(30)
def test_a_frame_sent_again_is_dropped_anywhere(pair):
    """Every frame a sender sealed, captured and sent again unchanged, to the same socket, to
    another transport with the same key, or with its counter rewritten, delivers nothing."""
    tx, rx, inbox = pair
    address, salt = split_endpoint(rx.endpoint)
    captured = []
    box = tx._outboxes[1]

    class Tap:  # records the frames the sender puts on the wire
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            return getattr(self.real, name)

        def send(self, frame, *args):
            captured.append(bytes(frame))
            return self.real.send(frame, *args)

    box.socket = Tap(box.socket)
    for i in range(3):
        tx.send(1, bytes([i]))
    assert inbox.wait_for(3, 10) == [b"\x00", b"\x01", b"\x02"]
    assert len(captured) == 3
    other_inbox = Inbox()
    other = Transport(KEY, "127.0.0.1", other_inbox, lambda p: None)
    other.start()
    ctx = zmq.Context()
    try:
        for target in (address, split_endpoint(other.endpoint)[0]):
            sock = ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.connect(target)
            for frame in captured:
                sock.send(frame)
            # the newest frame with a counter far ahead: the MAC covers the counter
            forged = bytearray(captured[-1])
            forged[32 + 16:32 + 24] = (1 << 40).to_bytes(8, "little")
            sock.send(bytes(forged))
            sock.close()
        tx.send(1, b"after")  # the real stream goes on
        assert inbox.wait_for(4, 10)[3:] == [b"after"]
        deadline = time.monotonic() + 10
        while (rx.dropped < 4 or other.dropped < 4) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert inbox.messages == [b"\x00", b"\x01", b"\x02", b"after"]
        assert rx.drops == {"replayed": 3, "bad MAC or framing": 1}
        assert other.drops == {"bad MAC or framing": 4} and other_inbox.messages == []
    finally:
        ctx.term()
        other.close(0.5)


@pytest.mark.timeout(60)
def test_a_frame_over_the_size_limit_is_refused_before_it_is_read():
    """A 300 MiB frame announced to a place's socket closes the connection before it is
    read: the receiver's memory grows by less than 20 MB, and later frames still arrive."""
    psutil = pytest.importorskip("psutil")
    inbox = Inbox()
    rx = Transport(KEY, "127.0.0.1", inbox, lambda p: None, max_message_bytes=1 << 20)
    rx.start()
    tx = Transport(KEY, "127.0.0.1", lambda m: None, lambda p: None, max_message_bytes=1 << 20)
    tx.start()
    try:
        tx.add_peer(1, rx.endpoint)
        with pytest.raises(ValueError, match="APGAS_MAX_MESSAGE_BYTES"):
            tx.send(1, b"x" * (1 << 20))
        # many messages that fit one by one leave in batches below the limit
        for _ in range(5):
            tx.send_soon(1, b"y" * (300 << 10))
        tx.flush()
        assert len(inbox.wait_for(5, 10)) == 5
        me = psutil.Process()
        before = me.memory_info().rss
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDTIMEO, 5000)
        # the receiver closes the connection on reading the frame's size: wait for that
        monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        sock.connect(split_endpoint(rx.endpoint)[0])
        huge = bytearray(300 << 20)
        sock.send(huge, copy=False)
        assert monitor.poll(10_000), "the receiver did not close the connection"
        assert recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED
        sock.disable_monitor()
        monitor.close()
        del huge
        sock.close()
        ctx.term()
        grew = me.memory_info().rss - before
        assert grew < 20e6, f"the receiver grew by {grew / 1e6:.0f} MB"
        tx.send(1, b"still")
        assert inbox.wait_for(6, 10)[-1] == b"still"
    finally:
        tx.close(0.5)
        rx.close(0.5)


def _plain(a, b=0):
    return a + b


def test_task_bodies_round_trip():
    # a module-level function by reference, with plain, empty and rich arguments
    for args, kwargs in [((), {}), ((1, 2.5), {"b": "x"}), (([1, 2], {3}), {})]:
        body = dumps_call(_plain, args, kwargs)
        assert body[:1] == b"\x00"
        assert loads_call(body) == (_plain, args, kwargs)
    # a lambda and a bound method travel by value as one pickle
    fn, args, kwargs = loads_call(dumps_call(lambda x: x * 3, (2,), {}))
    assert fn(*args) == 6
    data = [1]
    assert loads_call(dumps_call(data.copy, (), {}))[0]() == [1]
    data.append(2)  # a bound method's pickle holds its object: never reused
    body = dumps_call(data.copy, (), {})
    assert body[:1] == b"\x80" and loads_call(body)[0]() == [1, 2]
    # built-in functions go by reference
    assert loads_call(dumps_call(len, ("four",), {}))[0] is len


def test_a_function_by_reference_is_looked_up_once_and_its_arguments_are_fresh():
    """The receiving side keeps the function a name resolved to (a look-up costs 1.1 µs a
    task); the arguments are unpickled for each task, so one task's changes never reach
    another."""
    import sys

    from apgaspy import _serialization

    body = dumps_call(_plain, (), {})
    fn, args, kwargs = loads_call(body)
    assert fn is _plain and args == () and kwargs == {}
    n = int.from_bytes(body[1:5], "little")
    assert _serialization._FN_LOADED[body[5:5 + n]] is _plain
    kwargs["b"] = 5  # a task that changes its keyword dictionary
    assert loads_call(body)[2] == {}
    with_args = dumps_call(_plain, ([1],), {"b": [2]})
    first, second = loads_call(with_args), loads_call(with_args)
    assert first == second == (_plain, ([1],), {"b": [2]})
    assert first[1][0] is not second[1][0] and first[2]["b"] is not second[2]["b"]
    # a name that does not resolve raises each time and is not remembered
    module = type(sys)("apgaspy_test_vanishing")
    module._plain = _plain
    _plain.__module__, saved = "apgaspy_test_vanishing", _plain.__module__
    sys.modules["apgaspy_test_vanishing"] = module
    _serialization._FN_CACHE.pop(_plain, None)  # the sending side's cache of its pickle
    try:
        body = dumps_call(_plain, (), {})
        assert body[:1] == b"\x00"  # by reference
    finally:
        _plain.__module__ = saved
        del sys.modules["apgaspy_test_vanishing"]
        _serialization._FN_CACHE.pop(_plain, None)
    for _ in range(2):
        with pytest.raises(ModuleNotFoundError):
            loads_call(body)
    n = int.from_bytes(body[1:5], "little")
    assert body[5:5 + n] not in _serialization._FN_LOADED


def test_the_context_may_open_as_many_sockets_as_file_descriptors(pair):
    import resource

    tx, _, _ = pair
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert soft == hard  # raised to the hard limit when the transport started
    expected = min(soft, tx._ctx.get(zmq.SOCKET_LIMIT)) if soft != resource.RLIM_INFINITY \
        else tx._ctx.get(zmq.SOCKET_LIMIT)
    assert tx._ctx.get(zmq.MAX_SOCKETS) == max(1023, expected)


@pytest.mark.timeout(30)
def test_a_callers_inbox_receives_on_the_calling_thread_in_order(pair):
    """A thread's inbox (the ``at`` path): messages sent to ``(place, endpoint)``
    arrive on the inbox, not on the receiver thread, and are handled by the thread that waits,
    in the order they were sent."""
    tx, rx, inbox = pair
    seen: list[tuple[int, int]] = []
    rx._on_message = lambda m: seen.append((int.from_bytes(m, "little"),
                                            threading.get_ident()))
    box = rx.inbox()
    assert box is not None and rx.inbox() is box  # one per thread, made once
    tx.add_peer((1, box.endpoint), box.endpoint)
    for i in range(50):
        tx.send((1, box.endpoint), i.to_bytes(4, "little"))
    rx.wait_inbox(box, lambda: len(seen) == 50)
    assert [v for v, _ in seen] == list(range(50))
    assert {t for _, t in seen} == {threading.get_ident()}
    assert inbox.messages == []  # nothing came through the receiver thread
    # another thread gets an inbox of its own
    other: list = []
    t = threading.Thread(target=lambda: other.append(rx.inbox()))
    t.start()
    t.join()
    assert other[0] is not None and other[0] is not box and other[0].endpoint != box.endpoint


@pytest.mark.timeout(30)
def test_a_release_from_another_thread_wakes_the_inbox(pair, monkeypatch):
    """A finish completed by another thread (a local task, a death) wakes the waiting thread
    at once: with a one-minute poll timeout, a lost wake-up would hang this test.  The release
    comes once the waiter has looked at its condition (and found it false), so it lands while
    the waiter polls or is about to."""
    _, rx, _ = pair
    monkeypatch.setattr("apgaspy._transport._POLL_MS", 60_000)
    box = rx.inbox()
    done = threading.Event()
    looked = threading.Event()

    def finished() -> bool:
        looked.set()
        return done.is_set()

    def complete() -> None:
        assert looked.wait(10)
        done.set()
        box.release()

    threading.Thread(target=complete).start()
    t0 = time.monotonic()
    rx.wait_inbox(box, finished)
    assert done.is_set() and time.monotonic() - t0 < 20
    box.release()  # on the owner's own thread: nothing to wake, nothing queued
    assert rx._inboxes == [box]


def test_removing_a_place_closes_its_inbox_connections(pair):
    tx, rx, _ = pair
    box = rx.inbox()
    tx.add_peer((1, box.endpoint), box.endpoint)
    tx.add_peer((2, box.endpoint), box.endpoint)
    tx.remove_peer(1, linger_s=0)
    assert not tx.has_peer(1) and not tx.has_peer((1, box.endpoint))
    assert tx.has_peer((2, box.endpoint))  # another place's inbox connection stays


@pytest.mark.timeout(30)
def test_a_message_waiting_when_a_place_is_declared_lost_is_handled_first():
    """A place says goodbye and its connection closes; the receiver of the place that watches
    it does not run for longer than the dead-place timeout right after it saw the connection
    go down (a loaded machine; here its ``on_peer_down`` sleeps, and the goodbye lands
    meanwhile).  When the verdict is due, the goodbye is waiting: it is handled first, then
    the place is lost (a goodbye handled after the verdict made a clean shutdown report a
    death)."""
    events: list[tuple[str, object]] = []
    gone = threading.Event()
    peer = Transport(KEY, "127.0.0.1", lambda m: None, lambda p: None)
    watched = zmq.Context.instance().socket(zmq.PULL)  # the place's receiving socket
    port = watched.bind_to_random_port("tcp://127.0.0.1")

    def down(place: int) -> None:
        events.append(("down", place))
        peer.send(0, b"bye")
        time.sleep(0.6)  # the receiver does not run for 3 dead-place timeouts

    def lost(place: int) -> None:
        events.append(("lost", place))
        gone.set()

    watcher = Transport(KEY, "127.0.0.1", lambda m: events.append(("message", bytes(m))),
                        lost, dead_timeout=0.2, on_peer_down=down)
    try:
        watcher.start()
        peer.start()
        peer.add_peer(0, watcher.endpoint)
        watcher.add_peer(1, f"tcp://127.0.0.1:{port}#{'00' * 16}", watch=True)
        deadline = time.monotonic() + 10
        while not (1 in watcher._watches and watcher._watches[1].connected):
            assert time.monotonic() < deadline, "the watched connection never came up"
            time.sleep(0.01)
        watched.close(0)
        assert gone.wait(10)
        assert events == [("down", 1), ("message", b"bye"), ("lost", 1)]
    finally:
        watched.close(0)
        watcher.close(0.5)
        peer.close(0.5)


@pytest.mark.timeout(30)
def test_a_message_left_for_the_lock_holder_leaves_at_close():
    """The race that lost goodbyes: a worker thread is sending to place 0 (it holds the
    connection's lock) when the receiver thread sends the goodbye, which it leaves queued for
    the holder; the place's main thread then closes the transport and takes the lock as soon
    as the worker lets go, before the worker looks at the queue again.  The queued goodbye
    leaves anyway, within the linger."""
    inbox = Inbox()
    rx = Transport(KEY, "127.0.0.1", inbox, lambda p: None)
    tx = Transport(KEY, "127.0.0.1", lambda m: None, lambda p: None)
    try:
        rx.start()
        tx.start()
        tx.add_peer(1, rx.endpoint)
        box = tx._outboxes[1]
        box.lock.acquire()  # the worker, in the middle of its send
        tx.send(1, b"bye")  # the receiver thread: the lock is taken, the message waits
        closer = threading.Thread(target=tx.close, args=(2.0,))
        closer.start()  # the main thread: close waits for the lock
        time.sleep(0.05)
        box.lock.release()  # the worker lets go; close takes the lock before it looks again
        closer.join(10)
        assert inbox.wait_for(1, 10) == [b"bye"]
    finally:
        rx.close(0.5)
