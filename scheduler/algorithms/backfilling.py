"""Backfilling without reservation (the Java ElasticJobScheduler's ``Backfilling``).

Like FCFS, but a job that does not fit does not block the queue: every queued job that fits
now starts, in submission order.  Nothing is reserved for the head, so a large job at the
head can be overtaken (and delayed) for ever by smaller jobs behind it.
"""

from __future__ import annotations

import math

from .base import Decision, FreeNodes, View, size_up_to_max, start_of

__all__ = ["Backfilling"]


class Backfilling:
    """Start every queued job that fits now, in submission order, without reservation."""

    name = "backfilling"

    def decide(self, view: View) -> list[Decision]:
        """Walk the queue once; start each job that fits in the nodes still free."""
        pool = FreeNodes(view.free_nodes, view.free_cores, view.shareable_cores)
        decisions: list[Decision] = []
        for job in view.waiting:
            fit = start_of(job, pool, size_up_to_max)
            if fit is not None:
                decisions.append(fit[0])
        return decisions

    def next_change_s(self, view: View) -> float:
        """``inf``: the answer depends on the queue and the free nodes, never on the clock."""
        return math.inf
