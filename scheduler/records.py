"""What a run leaves behind: the record of each job and the result of a run.

Both schedulers make these: the simulator (:mod:`scheduler.simulate`) in simulated time and
the real server (:mod:`scheduler.server`) on real processes, each from its jobs' states
(:meth:`scheduler.job_state.JobState.record`), so that one set of metrics
(:mod:`scheduler.metrics`) and one set of charts (:mod:`scheduler.plots`) serve both.  This
module imports nothing of the scheduler: both sides import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JobRecord", "SimResult"]


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job.

    ``allotment`` lists ``(time_s, nodes)`` from the start: the nodes held from that time
    on; the last entry, at ``end_s``, holds no node.  ``required_s`` is the job's required
    time (its time limit; ``None`` when not known).  Times in seconds.

    ``shrinks`` and ``grows`` count the orders the job carried out, ``requests``,
    ``requests_served`` and ``releases`` an evolving job's requests taken, requests
    granted and nodes given back; a grant counts as a served request, not as a grow
    (:mod:`scheduler.job_state`).  The real scheduler and the simulations count them by the
    same transitions, so records of one batch agree field by field.

    ``cores``: ``(node, core indices)`` the job held at its start where it asked for cores
    (:mod:`scheduler.resources`); empty for a job of whole nodes.
    """

    job_id: int
    name: str
    job_class: str
    program: str | None
    size: int | str | None
    min_nodes: int
    max_nodes: int
    submit_s: float
    start_s: float
    end_s: float
    allotment: tuple[tuple[float, tuple[str, ...]], ...]
    shrinks: int
    grows: int
    required_s: float | None = None
    priority: int = 3
    requests: int = 0
    requests_served: int = 0
    releases: int = 0
    cores: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def wait_s(self) -> float:
        """Seconds from submission to start."""
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        """Seconds from start to end."""
        return self.end_s - self.start_s

    @property
    def turnaround_s(self) -> float:
        """Seconds from submission to end."""
        return self.end_s - self.submit_s

    @property
    def node_seconds(self) -> float:
        """Node-seconds held (nodes × seconds, summed over the allotment's steps)."""
        return sum(
            len(nodes) * (t1 - t0)
            for (t0, nodes), (t1, _) in zip(self.allotment, self.allotment[1:], strict=False)
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (allotment as ``[time_s, [nodes]]`` pairs)."""
        return {
            "job_id": self.job_id,
            "name": self.name,
            "job_class": self.job_class,
            "program": self.program,
            "size": self.size,
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "submit_s": self.submit_s,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "shrinks": self.shrinks,
            "grows": self.grows,
            "required_s": self.required_s,
            "priority": self.priority,
            "requests": self.requests,
            "requests_served": self.requests_served,
            "releases": self.releases,
            "allotment": [[t, list(n)] for t, n in self.allotment],
        }


@dataclass(frozen=True)
class SimResult:
    """The outcome of one run, simulated or real (the metrics are defined and computed by
    :func:`scheduler.metrics.result_from_records`)."""

    algorithm: str
    total_nodes: int
    makespan_s: float
    utilisation: float
    mean_wait_s: float
    mean_turnaround_s: float
    mean_bounded_slowdown: float
    shrinks_per_malleable_job: float
    grows_per_malleable_job: float
    jobs: int
    malleable_jobs: int
    refused: tuple[tuple[str, str], ...]
    records: tuple[JobRecord, ...]
    decide_calls: int
    #: co-location (``SimConfig.colocate_bound``): its bound, the beta model's coefficient
    #: and where it comes from, separations and overloads; ``None`` without co-location.
    colocation: Mapping[str, object] | None = None

    def metrics(self) -> dict[str, float | int | str]:
        """The scalar metrics as a dict."""
        return {
            "algorithm": self.algorithm,
            "makespan_s": self.makespan_s,
            "utilisation": self.utilisation,
            "mean_wait_s": self.mean_wait_s,
            "mean_turnaround_s": self.mean_turnaround_s,
            "mean_bounded_slowdown": self.mean_bounded_slowdown,
            "shrinks_per_malleable_job": self.shrinks_per_malleable_job,
            "grows_per_malleable_job": self.grows_per_malleable_job,
            "jobs": self.jobs,
            "malleable_jobs": self.malleable_jobs,
            "refused": len(self.refused),
        }

    def usage_curve(self) -> list[tuple[float, int]]:
        """Busy nodes over time: ``(time_s, nodes held from then on)``, a step function."""
        deltas: dict[float, int] = {}
        for rec in self.records:
            previous = 0
            for t, nodes in rec.allotment:
                deltas[t] = deltas.get(t, 0) + len(nodes) - previous
                previous = len(nodes)
        busy, curve = 0, []
        for t in sorted(deltas):
            busy += deltas[t]
            curve.append((t, busy))
        return curve
