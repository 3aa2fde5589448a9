"""A library's figure at this place: one callable it registers, that a sampler reads.

Some of what the elastic modules sample only a library running at the place knows: GLB's
busy share on splittable work (the evolving monitor's ``task`` mode,
:func:`~apgaspy.elastic.set_load_source`) and its workers' GIL counters (the job's load
reports, :func:`~apgaspy.elastic.set_gil_source`).  Each is a :class:`Source`::

    library (any thread)                              sampler (a runtime thread)
      set(fn) ──► Source: fn or None, under a lock ──► read(convert)
      ◄── the callable set before                        fn() ─► convert ─► the value
                                                         none set, or either raised
                                                         (logged) ─► None

A hook that fails must not stop the sampler: its exception is logged and the read is None,
as if nothing were registered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Source"]

log = logging.getLogger("apgaspy")

T = TypeVar("T")
R = TypeVar("R")


class Source(Generic[T]):
    """One registered callable without arguments that returns a ``T`` (or none), shared
    between the thread that registers it and the thread that samples it.

    Args:
        what: its name in messages (``"load source"``, ``"GIL source"``).
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self._lock = threading.Lock()
        self._fn: Callable[[], T] | None = None

    def set(self, fn: Callable[[], T] | None) -> Callable[[], T] | None:
        """Register ``fn`` (``None``: remove the one registered).

        Returns:
            The callable registered before (``None`` if none), so that a caller can put it
            back.

        Raises:
            TypeError: ``fn`` is neither callable nor ``None``.
        """
        if fn is not None and not callable(fn):
            raise TypeError(f"a {self.what} is a callable or None, got {fn!r}")
        with self._lock:
            before, self._fn = self._fn, fn
        return before

    def read(self, convert: Callable[[T], R]) -> R | None:
        """Call the registered callable and pass what it returns through ``convert`` (say
        ``float``); ``None`` when none is registered, or when either raised (logged with
        its traceback).  Never raises (but for ``BaseException``: an interrupt)."""
        with self._lock:
            fn = self._fn
        if fn is None:
            return None
        try:
            return convert(fn())
        except Exception:  # noqa: BLE001 - a library's hook must not stop the sampler
            log.exception("the registered %s failed", self.what)
            return None
