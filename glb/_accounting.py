"""What a place's GLB worker measures of itself: the accounting beside the steal protocol.

The worker (:mod:`glb._worker`) owns one :class:`Accounting` and calls it at three points::

    every Bag.process call       process_accounted(bag, n, result, stats, last)
                                   busy and CPU seconds, the splittable part, the GIL share
    every worker thread's run    account_thread(stats, cpu, delay)
                                   its CPU seconds and its wait for a CPU (schedstat)
    the place's end              Accounting.close(n)     (computation over, or released)
                                   W > 1: fold workers 1..W-1 into the place's figures, once;
                                   idle_s = span × W - busy_s; cpu_s = the process's CPU

The figures are those of :class:`~glb._stats.PlaceStats` and :class:`~glb._stats.WorkerStats`
(``GLBResult.log``); the GIL share follows :mod:`glb._gil`; the evolving monitor's ``task``
load reads ``splittable_busy_s`` (docs/guides/evolving.md).
"""

from __future__ import annotations

import time
from dataclasses import fields

from ._bag import Bag
from ._fold import Fold
from ._gil import nogil_cpu_seconds, nogil_seconds
from ._stats import PlaceStats, WorkerStats, thread_run_delay_s

__all__ = ["Accounting", "account_thread", "process_accounted"]


class Accounting:
    """The statistics of one place's worker: the place's own (worker 0's until the end),
    each worker's (W > 1) and the clocks the place's figures are measured from.

    Args:
        place: the place's id.
        workers: W, the worker threads of the place.

    Attributes:
        stats: the place's :class:`PlaceStats` (worker 0's figures until :meth:`close`).
        worker_stats: one :class:`WorkerStats` per worker (index 0 is unused until the
            close-out, which lists worker 0's figures there).
        started: ``time.perf_counter()`` when the worker was made (``first_work_s`` and
            ``last_work_s`` count from it).
    """

    def __init__(self, place: int, workers: int) -> None:
        self.workers = workers
        self.stats = PlaceStats(place, workers=workers)
        self.worker_stats = [WorkerStats(i) for i in range(workers)]
        self.folded = False  # workers 1..W-1's figures are in the place's (close)
        self.started = time.perf_counter()
        self.started_at = time.time()
        self.cpu_started = time.process_time()

    def units_processed(self) -> int:
        """The units of work the place's workers have processed so far (all of them)."""
        units = self.stats.processed
        if self.workers > 1 and not self.folded:  # folded: the place's figure holds them
            units += sum(ws.processed for ws in self.worker_stats[1:])
        return units

    def gil_counters(self) -> tuple[float, float]:
        """``(gil_held_cpu_s, loop_cpu_s)`` of the place's workers so far (all of them): the
        GIL source of the job's load reports (:func:`apgaspy.elastic.set_gil_source`)."""
        held, loop = self.stats.gil_held_cpu_s, self.stats.loop_cpu_s
        if self.workers > 1 and not self.folded:
            held += sum(ws.gil_held_cpu_s for ws in self.worker_stats[1:])
            loop += sum(ws.loop_cpu_s for ws in self.worker_stats[1:])
        return held, loop

    def close(self, work_units: int) -> PlaceStats:
        """Close the place's statistics (at the end of the computation, or when the place is
        released) and return them: W > 1 sums its workers' figures, each one's in
        ``per_worker``, once; ``idle_s`` is the rest of the W workers' time since the start,
        ``cpu_s`` the process's CPU seconds since then.  Calling it again updates only
        ``idle_s`` and ``cpu_s``.

        Args:
            work_units: the computation's ``n``, worker 0's work units when it never
                adapted them.
        """
        self._fold_workers(work_units)
        self.stats.idle_s = max(0.0, (time.perf_counter() - self.started) * self.workers
                                - self.stats.busy_s)
        self.stats.cpu_s = time.process_time() - self.cpu_started
        return self.stats

    def _fold_workers(self, work_units: int) -> None:
        """Once, W > 1: add workers 1..W-1's figures to the place's, and list each worker's
        (worker 0's are the place's own before the sum; ``work_units``: its ``n`` when it
        never adapted it)."""
        if self.workers == 1 or self.folded:
            return
        self.folded = True
        st = self.stats
        first = WorkerStats(0, **{f.name: getattr(st, f.name) for f in fields(WorkerStats)
                                  if f.name not in ("worker", "work_units", "starts",
                                                    "first_work_at")},
                            work_units=self.worker_stats[0].work_units or work_units,
                            starts=1, first_work_at=None if st.first_work_s is None
                            else self.started_at + st.first_work_s)
        per = [first, *self.worker_stats[1:]]
        for ws in per[1:]:
            st.process_calls += ws.process_calls
            st.processed += ws.processed
            st.busy_s += ws.busy_s
            st.busy_cpu_s += ws.busy_cpu_s
            st.splittable_busy_s += ws.splittable_busy_s
            st.worker_cpu_s += ws.worker_cpu_s
            st.loop_s += ws.loop_s
            st.gil_held_s += ws.gil_held_s
            st.loop_cpu_s += ws.loop_cpu_s
            st.gil_held_cpu_s += ws.gil_held_cpu_s
            if st.run_delay_s is not None:
                st.run_delay_s = None if ws.run_delay_s is None else \
                    st.run_delay_s + ws.run_delay_s
        st.per_worker = [ws.as_dict() for ws in per]


def account_thread(st: PlaceStats | WorkerStats, cpu: float, delay: float | None) -> None:
    """Add the calling thread's CPU seconds and wait for a CPU since ``cpu``
    (``time.thread_time()``) and ``delay`` (:func:`thread_run_delay_s`) to ``st``."""
    st.worker_cpu_s += time.thread_time() - cpu
    after = thread_run_delay_s()
    if delay is None or after is None or st.run_delay_s is None:
        st.run_delay_s = None
    else:
        st.run_delay_s += after - delay


def process_accounted(bag: Bag, n: int, result: Fold, st: PlaceStats | WorkerStats,
             last: tuple[float, float] | None
             ) -> tuple[float, float, float, float, tuple[float, float]]:
    """One ``bag.process(n, result)`` call of a worker, accounted in ``st`` (its busy time
    and CPU, the splittable part, and the GIL share of the loop since ``last``, the previous
    call's end as ``(perf_counter, thread_time)``, or ``None`` for the first of a run).

    Returns:
        ``(start, took_s, held_cpu_s, span_cpu_s, end)``: when the call began
        (``perf_counter``), how long it took, the CPU seconds since ``last`` that the worker
        held the GIL and all of them, and ``end`` for the next call.
    """
    splittable = bag.is_splittable()  # could another place take some of it?
    t, c = time.perf_counter(), time.thread_time()
    k, kc = nogil_seconds(), nogil_cpu_seconds()
    try:
        bag.process(n, result)
    except Exception as exc:
        # names the bag in what the user sees: apgaspy's short form of an uncaught failure
        # shows a note "raised by <what>" beside the place (docs/getting-started.md)
        exc.add_note(f"raised by bag {type(bag).__qualname__}")
        raise
    end, end_c = time.perf_counter(), time.thread_time()
    took = end - t
    st.busy_cpu_s += end_c - c
    st.busy_s += took
    if splittable:
        st.splittable_busy_s += took
    st.process_calls += 1
    st.processed += n
    span = end - (t if last is None else last[0])
    st.loop_s += span
    st.gil_held_s += span - (nogil_seconds() - k)
    span_c = end_c - (c if last is None else last[1])
    held_c = span_c - (nogil_cpu_seconds() - kc)
    st.loop_cpu_s += span_c
    st.gil_held_cpu_s += held_c
    return t, took, held_c, span_c, (end, end_c)
