"""The GIL share of a GLB worker: time spent in compiled kernels that release the GIL.

A place with W workers (``workers``) runs W threads of one Python process, which share one
GIL.  A compiled kernel built with ``nogil=True`` (numba) releases it while it runs; the rest
of a worker's loop (Python code in ``Bag.process`` around the kernel, splitting, merging)
holds it.  A bag that calls its kernels through :func:`nogil_call` lets the worker measure
the share of its time that it holds the GIL: the time in ``process`` outside such calls plus
the time between two ``process`` calls.  The share is taken on the thread's CPU time (its
wall-clock time is kept too): on a machine shared with other work a thread also waits for a
CPU, with or without the GIL, which says nothing about the GIL.  With a share ``g`` per
worker, W workers keep the GIL busy ``W·g`` of the time: about ``1/g`` workers fit before
they queue on it.

A bag that does not use :func:`nogil_call` is counted as holding the GIL all the time (true of
pure-Python bags; numpy releases it inside many of its functions, which this does not see).

Granularity: with W > 1 the worker grows the work units of its ``process`` calls while it
holds the GIL more than :data:`GIL_TARGET` of its time (1 %, or ``1/(2W)`` where that is
less: the GIL then stays free for 50 workers or more) and the calls last under a few
milliseconds, judging only by calls that used all their units (a call that emptied its bag
says nothing about them): self-adjusting granularity after Finnerty, Kamada and Ohta,
"Self-adjusting task granularity for global load balancer library on clusters of many-core
processors", PMAM 2020. The Python overhead of a call is then paid once for more kernel work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["nogil_call", "nogil_seconds", "nogil_cpu_seconds", "adapt_work_units",
           "MAX_CALL_S", "MAX_GROWTH", "GIL_TARGET"]

T = TypeVar("T")

MAX_CALL_S = 0.02
"""Seconds a ``process`` call may last: the worker grows its work units only while twice them
stay under it, and past twice this shrinks them back towards the configured ``n``."""

GIL_TARGET = 0.01
"""The share of its CPU time a worker aims to hold the GIL (at most; ``1/(2W)`` if less)."""

MAX_GROWTH = 1024
"""At most this many times the configured ``n`` per ``process`` call."""


class _Seconds(threading.local):
    s = 0.0
    cpu = 0.0


_NOGIL = _Seconds()


def nogil_call(fn: Callable[..., T], *args: Any) -> T:
    """Call ``fn(*args)``, a compiled kernel that releases the GIL, and count its time as
    time without the GIL for the calling thread (its GLB worker's ``gil_held_s``).

    Args:
        fn: the kernel (e.g. a numba function compiled with ``nogil=True``).
        args: its arguments.

    Returns:
        What ``fn`` returns; what it raises propagates (its time is counted all the same).
    """
    t, c = time.perf_counter(), time.thread_time()
    try:
        return fn(*args)
    finally:
        _NOGIL.cpu += time.thread_time() - c
        _NOGIL.s += time.perf_counter() - t


def nogil_seconds() -> float:
    """Seconds the calling thread has spent in :func:`nogil_call` since it started."""
    return _NOGIL.s


def nogil_cpu_seconds() -> float:
    """CPU seconds of the calling thread in :func:`nogil_call` since it started."""
    return _NOGIL.cpu


def adapt_work_units(n: int, base: int, took_s: float, held_s: float, span_s: float,
                     workers: int) -> int:
    """The work units of a worker's next ``process`` call (self-adjusting granularity, see the
    module docstring).

    Args:
        n: the units of the call that just ended; base: the configured ``n`` (the floor).
        took_s: seconds the call lasted; span_s: the worker's CPU seconds since the previous
            call ended (the call and the worker's bookkeeping before it); held_s: CPU seconds
            of ``span_s`` the worker held the GIL.
        workers: workers of the place (W ≥ 1).

    Returns:
        ``2n`` while the worker held the GIL more than :data:`GIL_TARGET` (or ``1/(2W)``,
        if less) of the time, the call lasted
        under half :data:`MAX_CALL_S` (twice the units stay under it) and ``n`` is under
        ``MAX_GROWTH·base``; when the call lasted over twice :data:`MAX_CALL_S`, the units
        that would have lasted :data:`MAX_CALL_S` at its pace (not under ``base``); else
        ``n``.
    """
    if took_s > 2 * MAX_CALL_S and n > base:
        return max(base, int(n * MAX_CALL_S / took_s))
    target = min(GIL_TARGET, 1 / (2 * workers))
    if 2 * took_s < MAX_CALL_S and n < MAX_GROWTH * base and held_s > target * span_s:
        return n * 2
    return n
