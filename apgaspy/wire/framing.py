"""Reading the protocol's lines off a TCP connection, with a deadline and a size limit.

Both ends read lines the same way (docs/reference/protocol.md: ASCII lines ending in
``\\n``, one message a connection): the job its order line (:mod:`communicators.socket`),
the scheduler the reply lines of an order and the notification lines
(:mod:`scheduler.order_transport`).  :class:`LineReader` is that one reader; the callers turn its
errors into their own (a refusal, a failed order).  Standard library only.
"""

from __future__ import annotations

import socket
import time

from ._exceptions import LineTimeoutError, LineTooLongError

__all__ = ["LineReader", "LineTimeoutError", "LineTooLongError"]


class LineReader:
    """Reads ``\\n``-terminated lines from a connected socket, keeping what follows a line.

    Args:
        sock: the connection (its timeout is changed while reading).
        max_bytes: the longest line (and unread rest) accepted.

    The line is returned as bytes without its ``\\n`` (nor a ``\\r`` before it); callers
    decode it (the job strictly, the scheduler leniently).
    """

    def __init__(self, sock: socket.socket, max_bytes: int) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.sock = sock
        self.max_bytes = max_bytes
        self._buffer = b""
        self._eof = False

    def line(self, timeout_s: float) -> bytes | None:
        """The next line, waiting at most ``timeout_s`` seconds; ``None`` when the peer
        closed with nothing left.  A last line without ``\\n`` before the close counts.

        Raises:
            LineTimeoutError: no complete line within ``timeout_s`` seconds.
            LineTooLongError: more than ``max_bytes`` without an end of line.
            OSError: the connection failed.
        """
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            if self._eof:
                rest, self._buffer = self._buffer, b""
                return rest.rstrip(b"\r") if rest else None
            left = deadline - time.monotonic()
            if left <= 0:
                raise LineTimeoutError(f"no complete line within {timeout_s:g} s",
                                       self._buffer)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except TimeoutError:
                continue
            if not chunk:
                self._eof = True
            self._buffer += chunk
            if len(self._buffer) > self.max_bytes:
                raise LineTooLongError(f"a line longer than {self.max_bytes} bytes")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.rstrip(b"\r")

