"""EASY backfilling (Lifka 1995, "The ANL/IBM SP scheduling system").

Jobs start in submission order while the head fits (as FCFS).  The first job that does not
fit, the head, gets a reservation: the earliest time (*shadow time*) at which the free nodes
plus the nodes of running jobs that will have ended by their required times
(``start_s + required_time_s``) are enough for its minimum.  A later job starts now only if
it does not delay that reservation: it ends by the shadow time (``now + required_time_s <=
shadow``), or it uses only nodes the head will not need at the shadow time (the *extra*
nodes).  Start sizes as FCFS: moldable and malleable jobs take up to their maximum.  Running
jobs are never resized.

Where jobs hold cores of nodes (``#CORES``, ``#CORES_PER_NODE``), the reservation and the
extra capacity are counted in cores, node by node (:mod:`.cores`): the shadow time is the
first expected end at which the head's cores (or whole nodes, for a node job) are free, and
a job that runs past it starts only on cores the head will not need there.
"""

from __future__ import annotations

from .base import (
    Decision,
    FreeNodes,
    SizeFn,
    Start,
    View,
    WaitingJob,
    easy_backfill,
    expected_ends_after,
    fcfs_pass,
    releases_of,
    size_up_to_max,
)
from .cores import core_releases, counts_cores, easy_backfill_cores

__all__ = ["EasyBackfilling", "backfill_in_cores"]


class EasyBackfilling:
    """FCFS plus backfilling that never delays the head's reservation."""

    name = "easy"

    def decide(self, view: View) -> list[Decision]:
        """Start the fitting prefix of the queue, then backfill behind the head's reservation."""
        pool = FreeNodes(view.free_nodes, view.free_cores, view.shareable_cores)
        decisions, started, head_index = fcfs_pass(view.waiting, pool, size_up_to_max)
        if head_index < len(view.waiting) and (pool.has_room() or view.shareable_cores):
            head = view.waiting[head_index]
            if counts_cores(view, view.waiting):
                return decisions + backfill_in_cores(view, head_index, pool, size_up_to_max,
                                                     decisions, started)
            releases = releases_of(view.now_s, view.running, started)
            decisions += easy_backfill(
                view.now_s,
                head,
                view.waiting[head_index + 1 :],
                pool,
                size_up_to_max,
                releases,
            )
        return decisions

    def next_change_s(self, view: View) -> float:
        """When the clock alone can change an empty answer: the next expected end of a running
        job (:func:`~.base.expected_ends_after`; ``inf`` when none).

        Until then the head's shadow time and extra nodes stay put and a backfill candidate's
        ``now + required_time_s`` only grows, so a job that could not start cannot start.
        """
        return expected_ends_after(view)


def backfill_in_cores(view: View, head_index: int, pool: FreeNodes, size_of: SizeFn,
                      starts: list[Decision], started: list[tuple[WaitingJob, int]]
                      ) -> list[Decision]:
    """EASY behind ``view.waiting[head_index]`` counted in cores (:mod:`.cores`).

    Args:
        view: the snapshot (``node_cores`` given).
        head_index: the head's index in ``view.waiting``.
        pool: the free nodes and cores left after ``starts``.
        size_of: the start size rule (:mod:`.base`).
        starts: the Starts of this call so far, one for each of ``started`` (same order).
        started: ``(job, nodes)`` of those Starts (:func:`~.base.fcfs_pass`).

    Returns:
        the backfill Starts (``starts`` not included).
    """
    sizes = dict(view.node_cores)
    begun = [(s, job.spec.required_time_s) for s, (job, _) in
             zip((d for d in starts if isinstance(d, Start)), started, strict=True)]
    releases = core_releases(view.now_s, view.running, begun, sizes)
    return easy_backfill_cores(view.now_s, view.waiting[head_index],
                               view.waiting[head_index + 1:], pool, size_of, releases, sizes)
