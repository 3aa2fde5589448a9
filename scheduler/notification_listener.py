"""The scheduler's notification port: one thread, one selector, every connection bounded.

Jobs send each notification on a connection of its own (``<message>:<job address>\\n``,
docs/reference/protocol.md); the listener reads the lines and hands each on with the TCP
peer's address, for the checks of :mod:`scheduler.notifications`.  It serves every connection
from a single thread with :mod:`selectors` (the reactor pattern: one event loop reads
whichever socket is ready), so that a crowd of slow or idle connections costs file
descriptors and a few KiB of buffer each, never a thread::

    listening socket ── readable ──► accept every pending connection:
                                         over --max-connections in total, or over
                                         --max-connections-per-peer from its address
                                         ─► closed at once (refused_connections)
    connection ──────── readable ──► recv ≤ 4 KiB ─► split lines ─► on_line(line, peer)
                                         a line longer than --max-line-bytes, more than
                                         --max-lines-per-connection lines, or no complete
                                         line for --connection-idle seconds
                                         ─► closed (cut_connections)
    every 0.25 s ───────────────────► close the connections past their deadline

The limits (:class:`ListenerLimits`) are what the scheduler spends on whoever can reach its
port; docs/reference/security.md ("Denial of service") says what they stop and what not.
The apgaspy and Java senders send one line a connection, of a few hundred bytes at most; the
defaults leave a wide margin.  A connection refused or cut is closed with a reset
(``SO_LINGER`` 0), so that it leaves no ``TIME_WAIT`` state behind.
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

__all__ = ["LIMIT_ENV", "ListenerLimits", "NotificationListener"]

log = logging.getLogger("scheduler.notification_listener")

_RECV_BYTES = 4096  # one read of a connection
_ACCEPT_BURST = 64  # connections accepted per turn of the loop, at most
_SWEEP_S = 0.25  # how often deadlines are checked
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close with RST


@dataclass(frozen=True)
class ListenerLimits:
    """What one notification listener accepts (docs/reference/settings.md).

    Attributes:
        max_connections: connections open at once, in total (≥ 1).
        max_connections_per_peer: connections open at once from one TCP peer address (≥ 1).
        idle_s: seconds a connection may go without completing a line, counted from its
            accept and from each line (> 0).
        max_lines: lines one connection may send (≥ 1); the protocol sends one.
        max_line_bytes: the longest line, its end excluded (≥ 1).

    Raises:
        ValueError: a limit out of its range (the message names it).
    """

    max_connections: int = 256
    max_connections_per_peer: int = 32
    idle_s: float = 10.0
    max_lines: int = 16
    max_line_bytes: int = 4096

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value > 0:
                raise ValueError(f"{f.name} must be > 0, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ListenerLimits:
        """The limits :data:`LIMIT_ENV`'s variables set; the defaults for the others.

        Raises:
            ValueError: a variable that is not a number, or out of its range (the message
                names the variable).
        """
        env = os.environ if environ is None else environ
        values: dict[str, float | int] = {}
        for f in fields(cls):
            text = env.get(LIMIT_ENV[f.name], "").strip()
            if not text:
                continue
            kind = float if f.name == "idle_s" else int
            try:
                values[f.name] = kind(text)
            except ValueError:
                raise ValueError(f"{LIMIT_ENV[f.name]}={text!r} is not a "
                                 f"{'number' if kind is float else 'whole number'}") from None
            if not values[f.name] > 0:
                raise ValueError(f"{LIMIT_ENV[f.name]} must be > 0, got {text!r}")
        return cls(**values)  # type: ignore[arg-type]


#: The environment variable of each limit (``serve``'s options override them).
LIMIT_ENV: dict[str, str] = {
    "max_connections": "APGAS_SCHEDULER_MAX_CONNECTIONS",
    "max_connections_per_peer": "APGAS_SCHEDULER_MAX_CONNECTIONS_PER_PEER",
    "idle_s": "APGAS_SCHEDULER_CONNECTION_IDLE",
    "max_lines": "APGAS_SCHEDULER_MAX_LINES_PER_CONNECTION",
    "max_line_bytes": "APGAS_SCHEDULER_MAX_LINE_BYTES",
}


class _Conn:
    """One open notification connection: its peer, unread bytes, lines, deadline."""

    __slots__ = ("buffer", "deadline", "fd", "lines", "peer", "sock")

    def __init__(self, sock: socket.socket, peer: str, deadline: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.buffer = bytearray()
        self.lines = 0
        self.deadline = deadline


class NotificationListener:
    """Accepts notification connections on one address and port, on one thread.

    Args:
        address: the address to bind (one address only, never all: logical nodes of this
            machine listen on the same port of their own addresses).
        port: the port (``SCHEDULER_PORT``; 0: a free one).
        on_line: called with each non-blank line (without its end, decoded as ASCII with
            undecodable bytes replaced, stripped) and the TCP peer's address, from the
            listener's thread; an exception it raises is logged and the listener goes on.
        limits: the bounds on connections and lines (:class:`ListenerLimits`).
        clock: monotonic seconds (deadlines).

    Attributes:
        refused_connections: connections closed at accept, over a cap (count).
        cut_connections: connections closed for a line too long, too many lines or
            the idle deadline (count).

    Raises:
        OSError: the address and port cannot be bound (the message says which).
    """

    def __init__(self, address: str, port: int, on_line: Callable[[str, str], None], *,
                 limits: ListenerLimits | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        self._server = socket.socket(family, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._server.bind((address, port))
        except OSError as exc:
            self._server.close()
            raise OSError(exc.errno, f"cannot listen for notifications on {address}:{port}: "
                                     f"{exc.strerror or exc}") from None
        self._server.listen(128)
        self._server.setblocking(False)
        self.address = address
        self.port = int(self._server.getsockname()[1])
        self.limits = limits or ListenerLimits()
        self.refused_connections = 0
        self.cut_connections = 0
        self._on_line = on_line
        self._clock = clock
        self._conns: dict[int, _Conn] = {}  # by file descriptor
        self._per_peer: Counter[str] = Counter()
        self._stop = threading.Event()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._server, selectors.EVENT_READ)
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name="scheduler-notify", daemon=True)
        self._thread.start()

    @property
    def open_connections(self) -> int:
        """Connections open now."""
        return len(self._conns)

    # ---------------------------------------------------------------------------- the loop

    def _run(self) -> None:
        next_sweep = self._clock() + _SWEEP_S
        try:
            while not self._stop.is_set():
                for key, _ in self._sel.select(timeout=_SWEEP_S):
                    if key.fileobj is self._server:
                        self._accept()
                    elif key.fileobj is self._wake_r:
                        continue
                    else:
                        self._read(key.data)
                now = self._clock()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + _SWEEP_S
        except Exception:  # noqa: BLE001 - logged; the port then stays closed
            log.exception("the notification listener stopped")
        finally:
            for conn in list(self._conns.values()):
                self._close(conn, reset=True)
            self._sel.close()

    def _accept(self) -> None:
        limits = self.limits
        for _ in range(_ACCEPT_BURST):
            try:
                sock, addr = self._server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: try again at the next turn
                log.warning("cannot accept a notification connection: %s", exc)
                return
            peer = str(addr[0])
            if (len(self._conns) >= limits.max_connections
                    or self._per_peer[peer] >= limits.max_connections_per_peer):
                self.refused_connections += 1
                _reset_close(sock)
                continue
            sock.setblocking(False)
            conn = _Conn(sock, peer, self._clock() + limits.idle_s)
            self._conns[conn.fd] = conn
            self._per_peer[peer] += 1
            self._sel.register(sock, selectors.EVENT_READ, conn)

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn, reset=True)
            return
        limits = self.limits
        if not chunk:  # EOF: a last line without an end counts
            rest = bytes(conn.buffer)
            if rest.strip() and len(rest) <= limits.max_line_bytes and \
                    conn.lines < limits.max_lines:
                self._deliver(rest, conn.peer)
            self._close(conn, reset=False)
            return
        conn.buffer += chunk
        while (end := conn.buffer.find(b"\n")) >= 0:
            raw = bytes(conn.buffer[:end])
            del conn.buffer[:end + 1]
            conn.lines += 1
            if len(raw) > limits.max_line_bytes or conn.lines > limits.max_lines:
                self._cut(conn)
                return
            conn.deadline = self._clock() + limits.idle_s
            self._deliver(raw, conn.peer)
        if len(conn.buffer) > limits.max_line_bytes:
            self._cut(conn)

    def _deliver(self, raw: bytes, peer: str) -> None:
        line = raw.decode("ascii", "replace").strip()
        if not line:
            return
        try:
            self._on_line(line, peer)
        except Exception:  # noqa: BLE001 - one bad line must not close the port
            log.exception("a notification line from %s could not be handled", peer)

    def _sweep(self, now: float) -> None:
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            self._cut(conn)

    def _cut(self, conn: _Conn) -> None:
        self.cut_connections += 1
        self._close(conn, reset=True)

    def _close(self, conn: _Conn, *, reset: bool) -> None:
        if self._conns.pop(conn.fd, None) is None:
            return
        self._sel.unregister(conn.sock)
        self._per_peer[conn.peer] -= 1
        if self._per_peer[conn.peer] <= 0:
            del self._per_peer[conn.peer]
        if reset:
            _reset_close(conn.sock)
        else:
            conn.sock.close()

    def close(self) -> None:
        """Stop the loop (it closes every connection as it ends) and close the listening
        socket.  Idempotent."""
        self._stop.set()
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)  # the loop closes the connections and the selector
        for sock in (self._server, self._wake_r, self._wake_w):
            sock.close()


def _reset_close(sock: socket.socket) -> None:
    """Close ``sock`` with a reset (no ``TIME_WAIT``)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
    except OSError:
        pass
    sock.close()
