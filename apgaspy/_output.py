"""Forwarding of print output from places other than 0 to place 0, in order.

Without it, a place's output travels through the MPI process manager on its own path and may
show up after place 0 printed what follows it (the hello example would print "Bye" before a
"Hello").  With it, a place's ``sys.stdout``/``sys.stderr`` buffer text and send it to place 0
over the same connection as the task's completion, so it is printed before place 0 learns that
the task ended.  Output written below Python (C libraries writing to file descriptor 1)
still goes the process manager's way.  ``APGAS_FORWARD_OUTPUT=0`` turns forwarding off.
"""

from __future__ import annotations

import io
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["install_forwarding", "uninstall_forwarding"]


class _ForwardingStream(io.TextIOBase):
    """A text stream that sends complete lines (and, on flush, everything) to place 0."""

    def __init__(self, rt: Runtime, number: int, original: Any) -> None:
        super().__init__()
        self._rt = rt
        self._number = number
        self._original = original
        self._parts: list[str] = []
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._original, "encoding", "utf-8")

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._original.fileno()

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        with self._lock:
            self._parts.append(text)
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


def install_forwarding(rt: Runtime) -> list[_ForwardingStream]:
    """Replace ``sys.stdout`` and ``sys.stderr`` by forwarding streams; return them."""
    out = _ForwardingStream(rt, 1, sys.stdout)
    err = _ForwardingStream(rt, 2, sys.stderr)
    sys.stdout, sys.stderr = out, err  # type: ignore[assignment]
    return [out, err]


def uninstall_forwarding(streams: list[_ForwardingStream]) -> None:
    """Flush the forwarding streams and put the original streams back."""
    for s in streams:
        s.flush()
    sys.stdout = streams[0]._original
    sys.stderr = streams[1]._original
