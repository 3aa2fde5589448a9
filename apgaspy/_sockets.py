"""The small socket helpers of the transport (:mod:`apgaspy._transport`, whose docstring
describes the message path, the MAC and the bounds): a monitor socket's events, the context's
socket limit, a place's endpoint, a sending connection (``_Outbox``), a receiving socket's
replay state (``_Receiver``), the wake-up pair of a polling thread, a thread's inbox and the
watch on a connection to a place.
"""

from __future__ import annotations

import collections
import os
import struct
import threading
import time

import zmq

__all__ = ["split_endpoint"]

_NONCE = 16  # bytes of a receiving socket's nonce and of a stream id
# pyzmq's constants are enums; plain ints skip the enum arithmetic on every call.
_NOBLOCK = int(zmq.NOBLOCK)
_POLLIN = int(zmq.POLLIN)


def _monitor_event(sock: zmq.Socket) -> int:
    """The next event id of a monitor socket (``zmq.Again`` if none).

    A monitor message is [uint16 event, uint32 value][endpoint] (zmq_socket_monitor(3)); parsed
    here because pyzmq's helper module imports asyncio, a fifth of our start-up time.
    """
    frames = sock.recv_multipart(zmq.NOBLOCK)
    return int(struct.unpack("=hi", frames[0][:6])[0])


def _max_sockets(ctx: zmq.Context) -> int:
    """How many sockets the context may open: as many as file descriptors allow.

    ZeroMQ's default of 1,023 sockets per context would cap place 0, which holds a socket and
    a monitor per place, near 500 places.  The soft limit on open files is first raised to the
    hard one (as a server that expects many connections does; it never lowers anything), then
    the context gets that many sockets, up to libzmq's own limit (``zmq.SOCKET_LIMIT``).
    """
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else 1 << 20
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    except (ImportError, OSError, ValueError):  # not POSIX, or not allowed: keep the default
        return 1023
    limit = ctx.get(zmq.SOCKET_LIMIT)
    if soft == resource.RLIM_INFINITY:
        return int(limit)
    return max(1023, min(int(soft), limit))


def split_endpoint(endpoint: str) -> tuple[str, bytes]:
    """``tcp://ip:port#nonce`` → (``tcp://ip:port``, the receiving socket's 16-byte nonce).

    Raises:
        ValueError: the endpoint has no nonce of 16 bytes (32 hex digits).
    """
    address, _, nonce = endpoint.partition("#")
    try:
        salt = bytes.fromhex(nonce)
    except ValueError:
        salt = b""
    if len(salt) != _NONCE:
        raise ValueError(f"not a place's endpoint (tcp://ip:port#nonce): {endpoint!r}")
    return address, salt


class _Outbox:
    """One sending connection, a stream: its queue, its lock, and what its MAC needs (the
    receiver's nonce, the stream id, the last counter sent)."""

    __slots__ = ("queue", "lock", "socket", "closed", "last", "dirty", "salt", "stream",
                 "counter")

    def __init__(self, sock: zmq.Socket, salt: bytes) -> None:
        self.queue: collections.deque[bytes] = collections.deque()
        self.lock = threading.Lock()
        self.socket = sock
        self.closed = False
        self.last = 0.0  # perf_counter() of the last send_soon
        self.dirty = False  # holds messages that wait for the flusher
        self.salt = salt  # the receiving socket's nonce
        self.stream = os.urandom(_NONCE)
        self.counter = 0  # of the last frame sealed (under lock)


class _Receiver:
    """What a receiving socket checks frames against: its nonce and the last counter of each
    stream it has taken a frame from (used by one thread only: the socket's reader)."""

    __slots__ = ("salt", "seen")

    def __init__(self) -> None:
        self.salt = os.urandom(_NONCE)
        self.seen: dict[bytes, int] = {}


class _Waker:
    """An inproc PAIR pair that wakes a thread polling ``rx`` from any other thread."""

    __slots__ = ("rx", "_tx", "_lock")

    def __init__(self, ctx: zmq.Context, addr: str) -> None:
        self.rx = ctx.socket(zmq.PAIR)
        self.rx.bind(addr)
        self._tx = ctx.socket(zmq.PAIR)
        self._tx.connect(addr)
        self._lock = threading.Lock()  # the sending socket is shared by the waking threads

    def wake(self) -> None:
        """Make ``rx`` readable (once more); nothing after :meth:`close`."""
        with self._lock:
            if not self._tx.closed:
                self._tx.send(b"", _NOBLOCK)

    def close(self) -> None:
        with self._lock:
            self._tx.close(0)
        self.rx.close(0)


class _Inbox:
    """A thread's own PULL socket, on which it waits for the answers of its ``at`` calls.

    ``release`` (the waker a :class:`~apgaspy._finish.RootFinish` calls when it is done)
    wakes the owner through its :class:`_Waker` when another thread completes the finish.
    """

    __slots__ = ("socket", "endpoint", "items", "waker", "owner", "receiver")

    def __init__(self, socket: zmq.Socket, address: str, waker: _Waker) -> None:
        self.socket = socket
        self.receiver = _Receiver()
        self.endpoint = f"{address}#{self.receiver.salt.hex()}"
        self.items: list[tuple[zmq.Socket, int]] = [(socket, _POLLIN), (waker.rx, _POLLIN)]
        self.waker = waker
        self.owner = threading.get_ident()

    def release(self) -> None:
        """Wake the owner's :meth:`Transport.wait_inbox` (no-op on the owner's thread)."""
        if threading.get_ident() != self.owner:
            self.waker.wake()


class _Watch:
    __slots__ = ("place", "monitor", "connected", "ever", "since", "expired")

    def __init__(self, place: int, monitor: zmq.Socket) -> None:
        self.place = place
        self.monitor = monitor
        self.connected = False
        self.ever = False  # connected at least once
        self.since = time.monotonic()  # when it last went down (or was created)
        self.expired = False  # down too long at the last check (the verdict at the next)
