"""A place's worker pool: a fixed parallelism, with compensation threads for blocked workers.

A task that waits inside a nested ``finish`` or an ``at`` blocks its worker thread.  If every
worker were blocked and the task they wait for sat in the queue, the place would deadlock.
Like Java's ``ForkJoinPool.managedBlock`` (which APGAS for Java uses), a worker announces that
it is about to block (:meth:`Pool.blocking`); while it is blocked the pool may start another
thread, so that ``parallelism`` threads stay runnable whenever tasks are queued.  Threads beyond
the parallelism retire when they finish a task and the blocked workers have resumed.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Pool", "current_pool"]

log = logging.getLogger("apgaspy")

_Empty = queue.Empty

_local = threading.local()


def current_pool() -> Pool | None:
    """The pool whose worker is the calling thread, or ``None``."""
    return getattr(_local, "pool", None)


class Pool:
    """Worker threads taking callables from one FIFO queue.

    Args:
        name: thread name prefix (for debugging).
        parallelism: threads that run tasks at once when none is blocked (≥ 1).
        max_threads: hard limit on threads, blocked ones included; past it, tasks wait.
    """

    def __init__(self, name: str, parallelism: int, max_threads: int) -> None:
        self.name = name
        self.parallelism = parallelism
        self.max_threads = max(max_threads, parallelism)
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0  # alive worker threads
        self._idle = 0  # threads waiting on the queue
        self._blocked = 0  # threads inside blocking()
        self._serial = 0
        self._closed = False
        self._warned = False
        self.pending = 0  # tasks submitted and not yet finished

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; exceptions escaping ``fn`` are logged, never propagated."""
        with self._lock:
            self.pending += 1
            self._queue.put((fn, args))
            if self._idle == 0 and self._threads - self._blocked < self.parallelism:
                self._start_locked()

    @contextmanager
    def blocking(self) -> Iterator[None]:
        """Wrap a wait of the calling worker thread so the pool compensates for it.

        Outside a worker of this pool it does nothing.
        """
        if getattr(_local, "pool", None) is not self:
            yield
            return
        with self._lock:
            self._blocked += 1
            if (
                self._idle == 0
                and not self._queue.empty()
                and self._threads - self._blocked < self.parallelism
            ):
                self._start_locked()
        try:
            yield
        finally:
            with self._lock:
                self._blocked -= 1

    def close(self) -> None:
        """Stop idle threads; running tasks finish on their own (threads are daemons)."""
        with self._lock:
            self._closed = True
            n = self._threads
        for _ in range(n):
            self._queue.put(None)

    def _start_locked(self) -> None:
        if self._closed:
            return
        if self._threads >= self.max_threads:
            if not self._warned:
                self._warned = True
                log.warning(
                    "pool %s reached APGAS_MAX_THREADS=%d threads; queued tasks wait for a "
                    "blocked task to resume", self.name, self.max_threads)
            return
        self._threads += 1
        self._serial += 1
        t = threading.Thread(target=self._work, name=f"{self.name}-{self._serial}", daemon=True)
        t.start()

    def _work(self) -> None:
        _local.pool = self
        q = self._queue
        get, get_nowait = q.get, q.get_nowait
        lock = self._lock
        while True:
            # A queued task is taken without counting the thread idle: one lock per task in
            # a burst instead of three.
            try:
                item = get_nowait()
            except _Empty:
                with lock:
                    self._idle += 1
                item = get()
                with lock:
                    self._idle -= 1
            if item is None:
                break
            fn, args = item
            try:
                fn(*args)
            except BaseException:  # noqa: BLE001 - a task runner must never kill the worker
                log.exception("uncaught error in a task of pool %s", self.name)
            with lock:
                self.pending -= 1
                if self._threads - self._blocked > self.parallelism:
                    self._threads -= 1
                    return
        with lock:
            self._threads -= 1
