"""Metrics of a real run, with the simulator's definitions and types.

A real run is described by the same :class:`~scheduler.simulate.JobRecord` objects the
simulator makes (submission, start, end, the nodes held over time, shrinks and grows), so
:class:`~scheduler.simulate.SimResult`, its ``usage_curve`` and the charts of
:mod:`scheduler.plots` serve both.  :func:`result_from_records` computes the metrics exactly
as ``Simulator`` does (see :mod:`scheduler.simulate` for the definitions): makespan (last end
minus first submission, s), utilisation (node-seconds held / (nodes × makespan), 0-1), mean
wait and turnaround (s), mean bounded slowdown, shrinks and grows per malleable job.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from .jobs import JobClass
from .simulate import JobRecord, SimResult

__all__ = ["result_from_records"]


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
