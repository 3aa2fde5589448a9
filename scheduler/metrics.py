"""The metrics of a run, simulated or real: one definition for both schedulers.

A run is described by :class:`~scheduler.records.JobRecord` objects (submission, start, end,
the nodes held over time, shrinks and grows), whether the simulator made them
(:mod:`scheduler.simulate`) or the real server (:meth:`scheduler.server.Server.records`), and
:func:`result_from_records` turns them into a :class:`~scheduler.records.SimResult`:

* ``makespan_s``: last end minus first submission (seconds).
* ``utilisation``: node-seconds held by jobs / (total nodes × makespan), 0-1; nodes count
  as held while a resize is in flight.
* ``mean_wait_s`` (start − submit), ``mean_turnaround_s`` (end − submit).
* ``mean_bounded_slowdown``: mean of ``max(1, turnaround / max(run, 10 s))`` (Feitelson's
  bounded slowdown, threshold ``bsld_threshold_s``), run = end − start.
* ``shrinks_per_malleable_job``, ``grows_per_malleable_job``: orders / malleable jobs.

The priority study (docs/guides/priorities.md) measures a run as Bhosale et al. (2024) do,
with :func:`priority_metrics`: total time from the first start to the last end, utilisation
over that time, and means of response (start - submission) and completion (end -
submission) weighted by the jobs' priorities.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from .jobs import JobClass
from .records import JobRecord, SimResult

__all__ = ["priority_metrics", "result_from_records"]


def _mean(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.fmean(data) if data else 0.0


def result_from_records(
    records: Sequence[JobRecord],
    *,
    algorithm: str,
    total_nodes: int,
    refused: Sequence[tuple[str, str]] = (),
    bsld_threshold_s: float = 10.0,
    decide_calls: int = 0,
) -> SimResult:
    """A :class:`SimResult` for jobs that have run (started and ended).

    Args:
        records: one record a job that started and ended (others are left out by the caller).
        algorithm: the algorithm's name.
        total_nodes: the cluster's size (nodes).
        refused: ``(job name, reason)`` of jobs refused at submission.
        bsld_threshold_s: bounded-slowdown threshold (seconds).
        decide_calls: how many times the algorithm was asked.
    """
    records = tuple(sorted(records, key=lambda r: r.job_id))
    if records:
        makespan = max(r.end_s for r in records) - min(r.submit_s for r in records)
    else:
        makespan = 0.0
    used = sum(r.node_seconds for r in records)
    malleable = [r for r in records if r.job_class == JobClass.MALLEABLE.value]
    tau = bsld_threshold_s
    return SimResult(
        algorithm=algorithm,
        total_nodes=total_nodes,
        makespan_s=makespan,
        utilisation=used / (total_nodes * makespan) if makespan > 0 else 0.0,
        mean_wait_s=_mean(r.wait_s for r in records),
        mean_turnaround_s=_mean(r.turnaround_s for r in records),
        mean_bounded_slowdown=_mean(
            max(1.0, r.turnaround_s / max(r.run_s, tau)) for r in records
        ),
        shrinks_per_malleable_job=(
            sum(r.shrinks for r in malleable) / len(malleable) if malleable else 0.0
        ),
        grows_per_malleable_job=(
            sum(r.grows for r in malleable) / len(malleable) if malleable else 0.0
        ),
        jobs=len(records),
        malleable_jobs=len(malleable),
        refused=tuple(refused),
        records=records,
        decide_calls=decide_calls,
    )


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
