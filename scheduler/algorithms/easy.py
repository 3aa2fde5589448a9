"""EASY backfilling (Lifka 1995, "The ANL/IBM SP scheduling system").

Jobs start in submission order while the head fits (as FCFS).  The first job that does not
fit, the head, gets a reservation: the earliest time (*shadow time*) at which the free nodes
plus the nodes of running jobs that will have ended by their required times
(``start_s + required_time_s``) are enough for its minimum.  A later job starts now only if
it does not delay that reservation: it ends by the shadow time (``now + required_time_s <=
shadow``), or it uses only nodes the head will not need at the shadow time (the *extra*
nodes).  Start sizes as FCFS: moldable and malleable jobs take up to their maximum.  Running
jobs are never resized.
"""

from __future__ import annotations

from .base import (
    Decision,
    FreeNodes,
    View,
    easy_backfill,
    expected_ends_after,
    fcfs_pass,
    releases_of,
    size_up_to_max,
)

__all__ = ["EasyBackfilling"]


class EasyBackfilling:
    """FCFS plus backfilling that never delays the head's reservation."""

    name = "easy"

    def decide(self, view: View) -> list[Decision]:
        """Start the fitting prefix of the queue, then backfill behind the head's reservation."""
        pool = FreeNodes(view.free_nodes, view.free_cores, view.shareable_cores)
        decisions, started, head_index = fcfs_pass(view.waiting, pool, size_up_to_max)
        if head_index < len(view.waiting) and (len(pool) > 0 or view.shareable_cores):
            head = view.waiting[head_index]
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
