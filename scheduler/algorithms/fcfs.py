"""First come, first served (the Java ElasticJobScheduler's ``FCFS``).

The queue is kept in submission order; its head starts while it fits.  Rigid jobs take their
node count; moldable and malleable jobs take as many free nodes as there are, up to their
maximum, and at least their minimum.  The first job that does not fit blocks the queue.
Running jobs are never resized.
"""

from __future__ import annotations

import math

from .base import PLACEMENTS, Decision, FreeNodes, View, fcfs_pass, size_up_to_max

__all__ = ["FCFS"]


class FCFS:
    """First come, first served: start the queue's head while it fits, never skip it.

    Args:
        placement: where a ``#CORES`` job's cores go (:class:`~.base.FreeNodes`):
            ``"shares"`` (default), ``"first-fit"`` or ``"first-fit-pack"``.

    Raises:
        ValueError: an unknown placement.
    """

    name = "fcfs"

    def __init__(self, placement: str = "shares") -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement is one of {', '.join(PLACEMENTS)}, got {placement!r}")
        self.placement = placement

    def decide(self, view: View) -> list[Decision]:
        """Start the longest prefix of ``view.waiting`` that fits, lowest free nodes first."""
        pool = FreeNodes(view.free_nodes, view.free_cores, view.shareable_cores,
                         self.placement)
        decisions, _, _ = fcfs_pass(view.waiting, pool, size_up_to_max)
        return decisions

    def next_change_s(self, view: View) -> float:
        """``inf``: the answer depends on the queue and the free nodes, never on the clock."""
        return math.inf
