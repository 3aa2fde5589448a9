"""The paper's evaluation in simulation: seeded batches × malleable shares × algorithms.

Finnerty et al. (2024) run 10 batches of 25 jobs of their mix (Table 2) with 0-100 % of the
jobs malleable under FCFS, Backfilling, EASY and their malleable algorithm on 32 nodes;
:func:`evaluate_paper` runs the same sweep on the simulator (:mod:`scheduler.simulate`),
:func:`evaluate_workloads` any sweep of workloads, and :func:`aggregate` averages each
(algorithm, share)'s runs over the batches.  ``python -m scheduler simulate`` prints it
(docs/guides/simulation.md).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import RuntimeModel
from ..records import SimResult
from ..simulate import SimConfig, Simulator
from ..workload import PAPER_MIX, MixRow, Workload, paper_batch

__all__ = [
    "DEFAULT_ALGORITHMS",
    "DEFAULT_SEEDS",
    "DEFAULT_SHARES",
    "Evaluation",
    "aggregate",
    "evaluate_paper",
    "evaluate_workloads",
]

#: The paper's evaluation: algorithms, malleable shares (%), seeds of the 10 batches.
DEFAULT_ALGORITHMS: tuple[str, ...] = ("fcfs", "backfilling", "easy", "malleable")
DEFAULT_SHARES: tuple[float, ...] = (0, 20, 40, 60, 80, 100)
#: The seeds of the Java experiment configuration (``journalConfig.py``: 43-52).
DEFAULT_SEEDS: tuple[int, ...] = tuple(range(43, 53))


_AVERAGED = (
    "makespan_s",
    "utilisation",
    "mean_wait_s",
    "mean_turnaround_s",
    "mean_bounded_slowdown",
    "shrinks_per_malleable_job",
    "grows_per_malleable_job",
    "jobs",
    "malleable_jobs",
)


@dataclass(frozen=True)
class Evaluation:
    """Results of a sweep: one :class:`SimResult` per (algorithm, share, batch index)."""

    results: dict[tuple[str, float, int], SimResult]

    def rows(self) -> list[dict[str, Any]]:
        """One row per (algorithm, share), metrics averaged over batches (:func:`aggregate`)."""
        return aggregate(self.results)


def aggregate(results: dict[tuple[str, float, int], SimResult]) -> list[dict[str, Any]]:
    """Average each (algorithm, malleable share)'s runs over batches.

    Each row has ``algorithm``, ``malleable_share`` (0-100), ``batches``, the means of the
    :class:`SimResult` metrics, ``makespan_min_s``/``makespan_max_s``/``makespan_std_s``
    (population deviation over batches) and ``refused`` (total).  Rows are ordered by
    algorithm (first appearance), then share.
    """
    groups: dict[tuple[str, float], list[SimResult]] = {}
    for (algorithm, share, _), result in results.items():
        groups.setdefault((algorithm, share), []).append(result)
    algorithms = list(dict.fromkeys(a for a, _ in groups))
    rows = []
    for algorithm in algorithms:
        for share in sorted(s for a, s in groups if a == algorithm):
            runs = groups[(algorithm, share)]
            row: dict[str, Any] = {
                "algorithm": algorithm,
                "malleable_share": int(share) if float(share).is_integer() else share,
                "batches": len(runs),
            }
            for key in _AVERAGED:
                row[key] = statistics.fmean(getattr(r, key) for r in runs)
            spans = [r.makespan_s for r in runs]
            row["makespan_min_s"] = min(spans)
            row["makespan_max_s"] = max(spans)
            row["makespan_std_s"] = statistics.pstdev(spans)
            row["refused"] = sum(len(r.refused) for r in runs)
            rows.append(row)
    return rows


def evaluate_workloads(
    make_workload: Callable[[float, int], Workload],
    *,
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
    shares: Sequence[float] = DEFAULT_SHARES,
    batches: int = 1,
    config: SimConfig | None = None,
    progress: Callable[[], None] | None = None,
    job_progress: Callable[[int], None] | None = None,
) -> Evaluation:
    """Run every algorithm on ``make_workload(share, batch_index)`` for every share and batch.

    ``progress`` is called once after each simulation, ``job_progress`` with counts of jobs
    done within a simulation (:meth:`Simulator.run`), for progress bars.
    """
    config = config or SimConfig()
    results: dict[tuple[str, float, int], SimResult] = {}
    for share in shares:
        for batch in range(batches):
            workload = make_workload(share, batch)
            for name in algorithms:
                results[(name, share, batch)] = Simulator(name, workload, config).run(
                    job_progress
                )
                if progress is not None:
                    progress()
    return Evaluation(results)


def evaluate_paper(
    *,
    algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
    shares: Sequence[float] = DEFAULT_SHARES,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    config: SimConfig | None = None,
    mix: Sequence[MixRow] = PAPER_MIX,
    model: RuntimeModel | None = None,
    progress: Callable[[], None] | None = None,
    **batch_options: Any,
) -> Evaluation:
    """The paper's evaluation (Finnerty et al. 2024): seeded batches × shares × algorithms.

    Defaults: 10 batches (seeds 43-52), shares 0-100 % in steps of 20, the four algorithms,
    32 nodes.  ``batch_options`` go to :func:`scheduler.workload.paper_batch` (``jobs``,
    ``submit_window_s``, ``first_at_zero``, ``required_factor``, ``required_time_s``).
    """
    model = model or RuntimeModel.paper()
    return evaluate_workloads(
        lambda share, batch: paper_batch(
            seeds[batch], share, mix=mix, model=model, **batch_options
        ),
        algorithms=algorithms,
        shares=shares,
        batches=len(seeds),
        config=config,
        progress=progress,
    )
