"""The scheduler's transport for the wire protocol's orders: shrink and grow lines to jobs.

The text of every message is :mod:`apgaspy.wire.protocol`'s (docs/reference/protocol.md);
this module only moves it over TCP, as the Java ElasticJobScheduler does::

    scheduler                                         job (place 0)
    ---------                                         -------------
    send_shrink ── connect <job address>:PORT ──────► "shrink n\\n"
                ◄── n lines, 20 s each at most ─────── released host names (or "ERROR ...")
    send_grow   ── connect <job address>:PORT ──────► "grow n h1 … hn \\n", half-close
                ◄── EOF when the grow is done ──────── (or "ERROR ..." first: refused)

A job with a key (:mod:`apgaspy.wire.auth`) gets its orders signed: the order functions
take a ``sign`` function that turns the Java line into the authenticated one.  The other
direction, the notifications jobs send to the scheduler, is
:mod:`scheduler.notification_listener`.

Order connections are made from the scheduler's own address (``source``), so that a job
that accepts orders from ``SCHEDULER_IP`` only (apgaspy's default) accepts them.

A grow differs from the Java scheduler in one respect: Java closes the connection right
after the line; here the sending side is half-closed and the reply is read until the job
closes, so that apgaspy's refusal (``ERROR <reason>``, a grow onto a host that cannot run a
place) gives the nodes back to the pool instead of leaving them to a job that never uses
them.  A Java job closes at once, which reads as success, as in Java.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Sequence

from apgaspy.wire.framing import LineReader, LineTimeoutError, LineTooLongError
from apgaspy.wire.protocol import SHRINK_LINE_TIMEOUT_S, Order, format_order, is_refusal

from ._exceptions import OrderFailedError

__all__ = ["OrderFailedError", "send_grow", "send_shrink"]

_MAX_REPLY_BYTES = 1 << 20


def _connect(address: tuple[str, int], source: str | None, timeout_s: float) -> socket.socket:
    try:
        return socket.create_connection(address, timeout=timeout_s,
                                        source_address=(source, 0) if source else None)
    except OSError as exc:
        raise OrderFailedError(
            f"cannot reach the job at {address[0]}:{address[1]}: {exc}") from None


class _ReplyReader:
    """Lines of a job's reply, decoded leniently; errors become
    :class:`OrderFailedError`."""

    def __init__(self, sock: socket.socket) -> None:
        self._lines = LineReader(sock, _MAX_REPLY_BYTES)

    def line(self, timeout_s: float) -> str | None:
        """The next line (without its end), None at EOF.

        Raises:
            OrderFailedError: no line within ``timeout_s`` seconds, too long a reply, or a
                failed connection.
        """
        try:
            raw = self._lines.line(timeout_s)
        except LineTimeoutError:
            raise OrderFailedError(f"no reply line within {timeout_s:g} s") from None
        except LineTooLongError:
            raise OrderFailedError("reply too long") from None
        except OSError as exc:
            raise OrderFailedError(f"the connection failed: {exc}") from None
        return None if raw is None else raw.decode("ascii", "replace")


def _order_bytes(order: Order, sign: Callable[[str], str] | None) -> bytes:
    line = format_order(order)
    return (line if sign is None else sign(line) + "\n").encode("ascii")


def send_shrink(address: tuple[str, int], n: int, *, source: str | None = None,
                line_timeout_s: float = SHRINK_LINE_TIMEOUT_S,
                connect_timeout_s: float = 10.0,
                sign: Callable[[str], str] | None = None,
                hosts: Sequence[str] = ()) -> list[str]:
    """Order the job at ``address`` (host, port) to release ``n`` hosts; return their names.
    ``hosts``: the ``n`` hosts wanted back (apgaspy's named shrink, for a drained node), or
    empty (the job chooses).

    Reads ``n`` reply lines, each within ``line_timeout_s`` seconds (Java: 20 s).  ``sign``
    (a keyed job's): turns the Java order line into the authenticated one.

    Raises:
        OrderFailedError: unreachable, a line late, fewer than ``n`` lines, or an ``ERROR`` line.
    """
    with _connect(address, source, connect_timeout_s) as sock:
        try:
            sock.sendall(_order_bytes(Order("shrink", n, tuple(hosts)), sign))
        except OSError as exc:
            raise OrderFailedError(f"cannot send the order: {exc}") from None
        reader = _ReplyReader(sock)
        names: list[str] = []
        for _ in range(n):
            line = reader.line(line_timeout_s)
            if line is None:
                raise OrderFailedError(f"the job closed the connection after {len(names)} of {n} "
                                  f"host names")
            if is_refusal(line):
                raise OrderFailedError(f"the job refused the shrink: {line}", refused=True)
            names.append(line.strip())
        return names


def send_grow(address: tuple[str, int], hosts: Sequence[str], *, source: str | None = None,
              done_timeout_s: float = 120.0, connect_timeout_s: float = 10.0,
              sign: Callable[[str], str] | None = None) -> None:
    """Order the job at ``address`` to add ``hosts``; return when the job closes.

    Sends the line (signed by ``sign``, as :func:`send_shrink`), half-closes, and reads
    until the job closes (at most ``done_timeout_s`` seconds; a job that keeps the
    connection open longer is taken to have grown).

    Raises:
        OrderFailedError: unreachable, or the job answered ``ERROR …`` (``refused``).
    """
    with _connect(address, source, connect_timeout_s) as sock:
        try:
            sock.sendall(_order_bytes(Order("grow", len(hosts), tuple(hosts)), sign))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise OrderFailedError(f"cannot send the order: {exc}") from None
        reader = _ReplyReader(sock)
        deadline = time.monotonic() + done_timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = reader.line(left)
            except OrderFailedError:
                return  # timed out, or the connection was reset after the line: as Java
            if line is None:
                return
            if is_refusal(line):
                raise OrderFailedError(f"the job refused the grow: {line}", refused=True)
