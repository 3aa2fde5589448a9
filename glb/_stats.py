"""What each place did during a GLB computation (:class:`PlaceStats`, in ``GLBResult.log``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PlaceStats", "WorkerStats", "thread_run_delay_s"]

_SCHEDSTAT = "/proc/thread-self/schedstat"


def thread_run_delay_s() -> float | None:
    """Seconds the calling thread has waited for a CPU while runnable since it started: the
    second field of Linux's ``/proc/thread-self/schedstat`` (nanoseconds), or ``None`` where
    that file cannot be read (not Linux, or no ``CONFIG_SCHED_INFO``)."""
    try:
        with open(_SCHEDSTAT, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class WorkerStats:
    """What one worker thread of a place did (a place has ``workers`` of them; worker 0 is the
    place's own task, which also steals and answers thieves).

    Attributes:
        worker: the worker's index at its place, 0..W-1.
        process_calls: as in :class:`PlaceStats`, for this worker's thread alone; so are
            ``processed``, ``busy_s``, ``busy_cpu_s``, ``splittable_busy_s``,
            ``worker_cpu_s`` and ``run_delay_s``.
        loop_s: seconds in the worker's processing loop: its ``process`` calls and the
            bookkeeping between two of them (not its waits for work).
        gil_held_s: the part of ``loop_s`` it held the GIL: all of it but the time in
            compiled kernels called through :func:`glb.nogil_call` (it includes waits for the
            GIL and for a CPU).
        loop_cpu_s, gil_held_cpu_s: the same on the thread's CPU time, which a machine's
            other work does not inflate: ``gil_share`` is their ratio.
        work_units: the work units of its last ``process`` call (W > 1 adjusts them;
            ``glb._gil.adapt_work_units``).
        starts: times the worker was started with work (worker 0: by the place's task).
        first_work_at: when its first ``process`` call began (``time.time()``, seconds since
            the epoch), or ``None``.
    """

    worker: int
    process_calls: int = 0
    processed: int = 0
    busy_s: float = 0.0
    busy_cpu_s: float = 0.0
    splittable_busy_s: float = 0.0
    worker_cpu_s: float = 0.0
    run_delay_s: float | None = 0.0
    loop_s: float = 0.0
    gil_held_s: float = 0.0
    loop_cpu_s: float = 0.0
    gil_held_cpu_s: float = 0.0
    work_units: int = 0
    starts: int = 0
    first_work_at: float | None = None

    @property
    def gil_share(self) -> float | None:
        """The share of its CPU time in the processing loop the worker held the GIL,
        ``gil_held_cpu_s / loop_cpu_s``, or ``None`` before the first ``process`` call."""
        return self.gil_held_cpu_s / self.loop_cpu_s if self.loop_cpu_s > 0 else None

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict (for JSON), ``gil_share`` included."""
        return {**self.__dict__, "gil_share": self.gil_share}


@dataclass
class PlaceStats:
    """What one place did during a computation.

    Attributes:
        place: the place id.
        processed: units of work processed (``n`` per ``process`` call, at most).
        process_calls: calls of ``Bag.process``.
        steals_tried, steals_won: random steal attempts made, and those that brought loot.
        steals_late: loot that answered an attempt the thief had given up on (its victim was
            released meanwhile); it was merged like any other loot.
        lifeline_steals: lifeline registrations sent to buddies.
        lifeline_loot: loot received from lifeline buddies.
        lifeline_answers: loot sent to lifeline thieves.
        random_answers: loot sent to random thieves.
        busy_s: seconds spent in ``process``; idle_s: the rest of the computation's time.
        splittable_busy_s: the part of ``busy_s`` spent in ``process`` calls that started
            while the bag was splittable (``Bag.is_splittable()``: another place could have
            taken some of its work); the evolving monitor's ``task`` load is its share of
            the time.
        busy_cpu_s: CPU seconds of the worker's thread inside ``process`` (``busy_s`` minus
            the time the thread was runnable but had no CPU, taken by other processes).
        worker_cpu_s: CPU seconds of the worker's thread in the worker loop (``process``,
            answering thieves, stealing).
        run_delay_s: seconds the worker's thread waited for a CPU while runnable (Linux's
            per-thread scheduler statistics, ``/proc/thread-self/schedstat``; ``None``
            where they are not available): on a shared machine, the time that other
            processes took from the worker.
        cpu_s: CPU seconds of the whole place process (every thread: the worker, message
            handling, the runtime) from the worker's creation to the end of the computation.
        first_work_s, last_work_s: seconds from the worker's creation to the start of its
            first ``process`` call and to the end of its last one (``None``: it never
            processed).
        workers: worker threads of the place (W).  With W > 1 the figures above are sums
            over its workers (``busy_s``, ``idle_s`` in worker-seconds: ``idle_s`` is W times
            the computation's time less ``busy_s``), and ``per_worker`` has each one's.
        loop_s, gil_held_s, loop_cpu_s, gil_held_cpu_s: seconds (and CPU seconds) the
            workers spent in their processing loops, and the part of it they held the GIL
            (see :class:`WorkerStats`).
        per_worker: each worker's :class:`WorkerStats` as a dict (W > 1; empty for W = 1,
            whose figures are the place's).
        released: true for a place released by a shrink during the computation.
        died: true for a place that died during a resilient computation (its work and
            partial result were recovered; its other figures are lost with it).
    """

    place: int
    processed: int = 0
    process_calls: int = 0
    steals_tried: int = 0
    steals_won: int = 0
    steals_late: int = 0
    lifeline_steals: int = 0
    lifeline_loot: int = 0
    lifeline_answers: int = 0
    random_answers: int = 0
    busy_s: float = 0.0
    idle_s: float = 0.0
    splittable_busy_s: float = 0.0
    busy_cpu_s: float = 0.0
    worker_cpu_s: float = 0.0
    run_delay_s: float | None = 0.0
    cpu_s: float = 0.0
    first_work_s: float | None = None
    last_work_s: float | None = None
    workers: int = 1
    loop_s: float = 0.0
    gil_held_s: float = 0.0
    loop_cpu_s: float = 0.0
    gil_held_cpu_s: float = 0.0
    per_worker: list[dict[str, Any]] = field(default_factory=list)
    released: bool = False
    died: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict (for JSON)."""
        return {k: (list(v) if k == "per_worker" else v) for k, v in self.__dict__.items()}
