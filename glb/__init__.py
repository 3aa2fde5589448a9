"""Lifeline-based global load balancing (GLB) on apgaspy.

A user writes a :class:`Bag` (the work: process, split, merge) and picks a result type
(:class:`LongSum`, :class:`ArraySum`, or any :class:`Fold`); :func:`compute_dynamic` and
:func:`compute_static` spread the work over all places by lifeline-based work stealing
(Saraswat et al., PPoPP 2011) and return the folded result.  Computations are malleable with
no change to the bag: a scheduler may shrink or grow the program while they run.
:func:`process_all` is the sequential baseline.  A place may run several worker threads
(``workers``), which pays off with kernels that release the GIL (:func:`nogil_call`).
:func:`work_done` tells, at place 0 while a computation runs, how much work each place has
processed so far (the benchmarks' progress display).  GLB's own errors
(:class:`GLBError`, :class:`PlaceZeroOnlyError`) are apgaspy's :class:`~apgaspy.ApgasError`.
"""

from ._bag import Bag, process_all
from ._config import workers_per_place
from ._compute import GLBResult, compute_dynamic, compute_static
from ._exceptions import GLBError, PlaceZeroOnlyError
from ._fold import ArraySum, Fold, LongSum
from ._gil import nogil_call
from ._progress import work_done
from ._stats import PlaceStats, WorkerStats
from ._stats import thread_run_delay_s  # a Linux helper of the benchmarks, not GLB's API

__all__ = ["Bag", "Fold", "LongSum", "ArraySum", "process_all", "compute_dynamic",
           "compute_static", "GLBResult", "PlaceStats", "WorkerStats", "nogil_call",
           "work_done", "workers_per_place", "GLBError", "PlaceZeroOnlyError"]
