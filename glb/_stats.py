"""What each place did during a GLB computation (:class:`PlaceStats`, in ``GLBResult.log``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PlaceStats", "thread_run_delay_s"]

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
    released: bool = False
    died: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict (for JSON)."""
        return dict(self.__dict__)
