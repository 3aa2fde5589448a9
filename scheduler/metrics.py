"""Metrics of a real run, with the simulator's definitions and types.

A real run is described by the same :class:`~scheduler.simulate.JobRecord` objects the
simulator makes (submission, start, end, the nodes held over time, shrinks and grows), so
:class:`~scheduler.simulate.SimResult`, its ``usage_curve`` and the charts of
:mod:`scheduler.plots` serve both.  :func:`scheduler.simulate.result_from_records` computes
the metrics: makespan (last end minus first submission, s), utilisation (node-seconds
held / (nodes × makespan), 0-1), mean wait and turnaround (s), mean bounded slowdown,
shrinks and grows per malleable job.

The priority study (docs/guides/priorities.md) measures a run as Bhosale et al. (2024) do,
with :func:`priority_metrics`: total time from the first start to the last end, utilisation
over that time, and means of response (start - submission) and completion (end -
submission) weighted by the jobs' priorities.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .simulate import JobRecord

__all__ = ["priority_metrics"]


def priority_metrics(records: Sequence[JobRecord], total_nodes: int) -> dict[str, float]:
    """The priority study's metrics of one run (Bhosale et al. 2024).

    Args:
        records: the jobs that ran (``SimResult.records``), each with its ``priority``.
        total_nodes: the cluster's size (nodes, >= 1).

    Returns:
        ``total_time_s`` (last end - first start, s), ``utilisation`` (node-seconds held /
        (``total_nodes`` x total time), 0-1), ``weighted_mean_response_s`` and
        ``weighted_mean_completion_s`` (sum of priority x (start - submit) resp.
        (end - submit), divided by the sum of priorities, s), ``max_wait_priority1_s``
        (longest start - submit of a priority-1 job; 0 when there is none).

    Raises ``ValueError`` when ``records`` is empty or ``total_nodes < 1``.
    """
    if not records:
        raise ValueError("no job ran: nothing to measure")
    if total_nodes < 1:
        raise ValueError(f"total_nodes must be >= 1, got {total_nodes}")
    first = min(r.start_s for r in records)
    total = max(r.end_s for r in records) - first
    weights = sum(r.priority for r in records)
    used = sum(r.node_seconds for r in records)
    return {
        "total_time_s": total,
        "utilisation": used / (total_nodes * total) if total > 0 else 0.0,
        "weighted_mean_response_s": sum(r.priority * r.wait_s for r in records) / weights,
        "weighted_mean_completion_s": sum(r.priority * r.turnaround_s for r in records)
        / weights,
        "max_wait_priority1_s": max((r.wait_s for r in records if r.priority == 1),
                                    default=0.0),
    }
