"""The wire protocol's errors, in one place (the standard library only, as the whole leaf).

Each is a :class:`WireError` and also the built-in kind a caller that does not know this
package would catch: a line that does not parse or authenticate is a ``ValueError``, a line
that does not arrive in time a ``TimeoutError``.  Both ends turn them into their own answers
(the job a refusal ``ERROR <reason>``, the scheduler a failed order or a dropped line)::

    WireError
    ├── OrderError ......... ValueError    (protocol.parse_order)
    ├── LineAuthError ...... ValueError    (auth.verify_line)
    ├── LineTooLongError ... ValueError    (framing.LineReader.line)
    └── LineTimeoutError ... TimeoutError  (framing.LineReader.line)

The modules that raise them re-export them (``apgaspy.wire.protocol.OrderError`` and the like
are these classes).
"""

from __future__ import annotations

__all__ = ["LineAuthError", "LineTimeoutError", "LineTooLongError", "OrderError", "WireError"]


class WireError(Exception):
    """The base of the wire protocol's errors (never raised itself)."""


class OrderError(WireError, ValueError):
    """An order line that does not follow the protocol.

    Raised by :func:`apgaspy.wire.protocol.parse_order` for anything but ``shrink <n>`` or
    ``grow <n> <n host names>``, or text that is not printable ASCII; the message quotes the
    line.
    """


class LineAuthError(WireError, ValueError):
    """A line that fails authentication: no MAC, a malformed one, a wrong one, or a counter
    already seen (a replay).  The message says which, never the key.

    Raised by :func:`apgaspy.wire.auth.verify_line` (both ends, on every line of a job with
    a key).
    """


class LineTimeoutError(WireError, TimeoutError):
    """No complete line arrived in time.  ``partial`` holds what did arrive (bytes).

    Raised by :meth:`apgaspy.wire.framing.LineReader.line` when its deadline passes.

    Args:
        message: what timed out, in words.
        partial: the bytes received without an end of line.
    """

    def __init__(self, message: str, partial: bytes) -> None:
        super().__init__(message)
        self.partial = partial


class LineTooLongError(WireError, ValueError):
    """More than the reader's ``max_bytes`` arrived without an end of line.

    Raised by :meth:`apgaspy.wire.framing.LineReader.line`.
    """
