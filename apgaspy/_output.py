"""Forwarding of print output from places other than 0 to place 0, in order.

Without it, a place's output travels through the MPI process manager on its own path and may
show up after place 0 printed what follows it (the hello example would print "Bye" before a
"Hello").  With it, a place's ``sys.stdout``/``sys.stderr`` buffer text and send it to place 0
over the same connection as the task's completion, so it is printed before place 0 learns that
the task ended.  Output written below Python (C libraries writing to file descriptor 1)
still goes the process manager's way.  ``APGAS_FORWARD_OUTPUT=0`` turns forwarding off.

Place 0 writes its own lines and the forwarded ones through :class:`_LineStream`, so that
neither can split the other's line.
"""

from __future__ import annotations

import io
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._runtime_needs import OutputHost

__all__ = ["install_forwarding", "install_line_streams", "uninstall_forwarding"]


class _Stream(io.TextIOBase):
    """A text stream standing in for ``original`` (``sys.stdout`` or ``sys.stderr``)."""

    def __init__(self, original: Any) -> None:
        super().__init__()
        self._original = original
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._original, "encoding", "utf-8")

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._original.fileno()

    @staticmethod
    def _check(text: Any) -> None:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")


class _ForwardingStream(_Stream):
    """A text stream that sends complete lines (and, on flush, everything) to place 0."""

    def __init__(self, rt: OutputHost, number: int, original: Any) -> None:
        super().__init__(original)
        self._rt = rt
        self._number = number
        self._parts: list[str] = []

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        self._check(text)
        with self._lock:
            self._parts.append(text)
            self._rt.output_dirty = True
            if "\n" in text:
                self._send_locked()
        return len(text)

    def flush(self) -> None:
        if self._parts:
            with self._lock:
                self._send_locked()

    def _send_locked(self) -> None:
        if not self._parts:
            return
        data = "".join(self._parts)
        self._parts.clear()
        try:
            self._rt.send_output(self._number, data)
        except Exception:  # noqa: BLE001 - place 0 unreachable: print locally instead
            self._original.write(data)
            self._original.flush()


class _LineStream(_Stream):
    """Place 0's ``sys.stdout``/``sys.stderr``: every thread's text leaves in whole lines.

    ``print`` writes its text and its newline in two calls, so a line that a task of place 0
    prints and a line forwarded from another place (written by the receiver thread) could
    interleave within one line ("Hello from place(0)Hello from place(1)").  This stream keeps
    each thread's unfinished line apart and writes complete lines to the original stream under
    one lock; ``flush`` writes the calling thread's unfinished line too (a progress bar that
    ends its text with ``\r`` and flushes shows at once).
    """

    def __init__(self, original: Any) -> None:
        super().__init__(original)
        self._parts: dict[int, list[str]] = {}  # thread id → its unfinished line

    @property
    def buffer(self) -> Any:
        return self._original.buffer

    def isatty(self) -> bool:
        return bool(self._original.isatty())

    def write(self, text: str) -> int:
        self._check(text)
        me = threading.get_ident()
        cut = text.rfind("\n")
        with self._lock:
            if cut < 0:
                self._parts.setdefault(me, []).append(text)
                return len(text)
            parts = self._parts.pop(me, None)
            head = "".join(parts) + text[:cut + 1] if parts else text[:cut + 1]
            if cut + 1 < len(text):
                self._parts[me] = [text[cut + 1:]]
            self._original.write(head)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            parts = self._parts.pop(threading.get_ident(), None)
            if parts:
                self._original.write("".join(parts))
            self._original.flush()

    def flush_all(self) -> None:
        """Write every thread's unfinished line and flush (when the runtime closes)."""
        with self._lock:
            for parts in self._parts.values():
                self._original.write("".join(parts))
            self._parts.clear()
            self._original.flush()


def install_line_streams() -> list[_LineStream]:
    """Place 0: replace ``sys.stdout`` and ``sys.stderr`` by :class:`_LineStream` s."""
    out, err = _LineStream(sys.stdout), _LineStream(sys.stderr)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    return [out, err]


def install_forwarding(rt: OutputHost) -> list[_ForwardingStream]:
    """Replace ``sys.stdout`` and ``sys.stderr`` by forwarding streams; return them."""
    out = _ForwardingStream(rt, 1, sys.stdout)
    err = _ForwardingStream(rt, 2, sys.stderr)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    return [out, err]


def uninstall_forwarding(streams: list[Any]) -> None:
    """Flush the streams of :func:`install_forwarding` or :func:`install_line_streams` and
    put the original streams back."""
    for s in streams:
        getattr(s, "flush_all", s.flush)()
    # a stream the program put in place meanwhile stays
    if sys.stdout is streams[0]:
        sys.stdout = streams[0]._original
    if sys.stderr is streams[1]:
        sys.stderr = streams[1]._original
