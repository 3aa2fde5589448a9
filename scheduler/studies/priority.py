"""The priority study of Bhosale et al. (2024) in simulation (docs/guides/priorities.md).

Batches of 16 Jacobi jobs with priorities 1-5 on 64 nodes, under the paper's four policies and
ours, swept over the submission gap and the rescale gap; each run measured by
:func:`scheduler.metrics.priority_metrics` and averaged over the batches.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ..algorithms import make
from ..metrics import priority_metrics
from ..model import jacobi_placeholder
from ..simulate import SimConfig, Simulator
from ..workload import Workload, jacobi_batch

__all__ = ["PAPER_TABLE_NODE_S", "PRIORITY_POLICIES", "RESCALE_GAPS_S", "SUBMISSION_GAPS_S",
           "priority_study"]

#: The policies of the priority study: the paper's four, then ours (docs/guides/priorities.md).
PRIORITY_POLICIES: tuple[str, ...] = (
    "rigid-min", "rigid-max", "moldable", "elastic-priority", "elastic-priority-easy",
)
#: Sweep of the submission gap (s) at a rescale gap of 180 s, and of the rescale gap (s) at a
#: submission gap of 180 s (Bhosale et al. 2024).
SUBMISSION_GAPS_S: tuple[float, ...] = tuple(float(g) for g in range(0, 301, 30))
RESCALE_GAPS_S: tuple[float, ...] = tuple(float(g) for g in range(0, 1201, 120))

_STUDY_METRICS = ("total_time_s", "utilisation", "weighted_mean_response_s",
                  "weighted_mean_completion_s")
#: Node-seconds of the batch of Bhosale et al.'s Table 1, from its simulated rigid-min row:
#: utilisation 60.88 % of 64 slots over a total time of 2,402 s (each job at its minimum).
PAPER_TABLE_NODE_S = 0.6088 * 64 * 2402.0


def priority_study(
    *,
    batches: int = 100,
    seed: int = 1,
    jobs: int = 16,
    total_nodes: int = 64,
    policies: Sequence[str] = PRIORITY_POLICIES,
    submission_gaps_s: Sequence[float] = SUBMISSION_GAPS_S,
    rescale_gaps_s: Sequence[float] = RESCALE_GAPS_S,
    table_point: tuple[float, float] = (90.0, 180.0),
    keep_free: int = 1,
    aging_s: float | None = None,
    model: Any = None,
    loaded_node_s: float | None = PAPER_TABLE_NODE_S,
    progress: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """The priority study of Bhosale et al. (2024) in simulation (docs/guides/priorities.md).

    For each policy and each sweep point, ``batches`` seeded batches
    (:func:`~scheduler.workload.jacobi_batch`, seeds ``seed`` … ``seed + batches - 1``) run
    on ``total_nodes`` nodes and the metrics of
    :func:`~scheduler.metrics.priority_metrics` are averaged over the batches.

    Sweeps: ``"submission_gap"`` (each gap of ``submission_gaps_s`` at a rescale gap of
    180 s), ``"rescale_gap"`` (each of ``rescale_gaps_s`` at a submission gap of 180 s), and
    ``"table"``: the single point ``table_point`` = (submission gap, rescale gap) of the
    paper's Table 1 (90 s, 180 s).  ``"table_loaded"``: the same point, averaged only over
    the batches that ask at least ``loaded_node_s`` node-seconds with every job at its
    minimum (default :data:`PAPER_TABLE_NODE_S`, the paper's batch: Table 1 is one batch,
    more loaded than the mean of ours); its ``batches`` is how many there were, and the row
    is left out when there is none.

    Args:
        batches: batches per point (>= 1).
        seed: seed of the first batch.
        jobs: jobs per batch.
        total_nodes: cluster size (nodes).
        policies: registry names of priority policies.
        submission_gaps_s, rescale_gaps_s: the sweep points (seconds, >= 0).
        table_point: (submission gap, rescale gap) of the table row (seconds).
        keep_free: nodes never handed out (default 1, as the paper keeps one slot for its
            launcher; a job's usable maximum is then 63 of 64 nodes).
        aging_s: aging step of ``elastic-priority-easy`` (seconds; ``None``: its default).
        model: a :class:`~scheduler.model.JacobiModel` (default the placeholder).
        loaded_node_s: node-seconds at the minimum a batch needs for the ``"table_loaded"``
            rows (``None``: no such rows).
        progress: called once per simulation.

    Returns:
        One row per (sweep, point, policy): ``sweep``, ``policy``, ``submission_gap_s``,
        ``rescale_gap_s``, ``batches``, the four means ``total_time_s``, ``utilisation``
        (0-1), ``weighted_mean_response_s``, ``weighted_mean_completion_s``, and
        ``max_wait_priority1_s`` (the longest wait of a priority-1 job over all batches).

    Raises:
        ValueError: ``batches < 1``, an unknown policy, or a bad parameter (a negative
            rescale gap names the value).
    """
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    model = model or jacobi_placeholder()
    config = SimConfig(total_nodes=total_nodes, costs=model.costs, job_costs=model.sim_costs())
    options: dict[str, Any] = {"keep_free": keep_free}
    if aging_s is not None:
        options["aging_s"] = aging_s
    points = (
        [("submission_gap", float(g), 180.0) for g in submission_gaps_s]
        + [("rescale_gap", 180.0, float(r)) for r in rescale_gaps_s]
        + [("table", float(table_point[0]), float(table_point[1]))]
    )
    for name in policies:  # fail before any work on a bad name or value
        make(name, rescale_gap_s=points[0][2] if points else 0.0, **options)
    rows: list[dict[str, Any]] = []
    cache: dict[float, list[Workload]] = {}
    runtime = model.runtime_model()

    def row(sweep: str, name: str, sub_gap: float, rescale_gap: float,
            runs: list[dict[str, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sweep": sweep, "policy": name, "submission_gap_s": sub_gap,
            "rescale_gap_s": rescale_gap, "batches": len(runs),
        }
        for key in _STUDY_METRICS:
            out[key] = statistics.fmean(run[key] for run in runs)
        out["max_wait_priority1_s"] = max(run["max_wait_priority1_s"] for run in runs)
        return out

    for sweep, sub_gap, rescale_gap in points:
        workloads = cache.get(sub_gap)
        if workloads is None:
            workloads = cache[sub_gap] = [
                jacobi_batch(seed + b, jobs=jobs, submission_gap_s=sub_gap, model=model)
                for b in range(batches)
            ]
        loaded = [] if sweep != "table" or loaded_node_s is None else [
            i for i, workload in enumerate(workloads)
            if sum(e.spec.lo * runtime.run_time_s(e.spec.program, e.spec.size, e.spec.lo)
                   for e in workload.entries) >= loaded_node_s
        ]
        later = []
        for name in policies:
            runs = []
            for workload in workloads:
                algorithm = make(name, rescale_gap_s=rescale_gap, **options)
                result = Simulator(algorithm, workload, config).run()
                runs.append(priority_metrics(result.records, total_nodes))
                if progress is not None:
                    progress()
            rows.append(row(sweep, name, sub_gap, rescale_gap, runs))
            if loaded:
                later.append(row("table_loaded", name, sub_gap, rescale_gap,
                                 [runs[i] for i in loaded]))
        rows += later
    return rows
