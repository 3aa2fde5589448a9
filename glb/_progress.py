"""How far a running GLB computation has got: each place's work units processed so far.

:func:`work_done`, at place 0 while a computation runs, asks every place for the counters its
worker keeps anyway (``PlaceStats.processed``, and each worker thread's ``WorkerStats``:
``n`` units per ``Bag.process`` call, at most) and waits up to ``timeout_s`` for the answers::

    place 0 ── gather(_units_here) ──► place p: its workers' processed units
            ◄─────────────────────────┘  (apgaspy.gather: question and answer on the
                                            immediate pools, a busy worker does not delay it)

A poll holds orders off (:func:`apgaspy.elastic.orders_held`), as the evolving monitor's
load samples do (a place must not leave while it is asked); while an order is under way it
does not wait and returns ``None``.  A place that does not answer in time (busy joining, leaving, or gone) is left out; the caller
keeps the last figure of each place it heard from, so that a released place's work still
counts (:class:`benchmarks._live.Progress` does).  One poll costs one short message each way
per place; the benchmarks' command lines poll once a second.
"""

from __future__ import annotations

from apgaspy.elastic import orders_held
from apgaspy.gather import gather

from ._worker import current_worker

__all__ = ["work_done"]


def _units_here() -> int:
    """This place's work units processed so far (every worker thread's), 0 before its worker
    exists."""
    try:
        w = current_worker()
    except KeyError:
        return 0
    return w.accounting.units_processed()


def work_done(timeout_s: float = 0.5) -> dict[int, int] | None:
    """Each place's work units processed so far in the running GLB computation.

    Call it at place 0 (any thread) while :func:`glb.compute_dynamic` or
    :func:`glb.compute_static` runs.  Units are ``PlaceStats.processed``'s: ``n`` per
    ``Bag.process`` call, at most (UTS counts nodes, Pi samples, N-Queens and BC tasks).

    Args:
        timeout_s: seconds to wait for the other places' answers (> 0).

    Returns:
        Place id → units; places that did not answer within ``timeout_s`` are left out
        (place 0 always answers).  ``None`` while a shrink or a grow is under way (the poll
        would have to wait for it).

    Raises:
        ApgasError: the runtime is not running.
    """
    with orders_held() as held:  # no place leaves while it is asked
        return gather(_units_here, timeout_s=timeout_s) if held else None
