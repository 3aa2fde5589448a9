"""The studies run on the simulator: each sweeps workloads and policies and averages runs.

* :mod:`scheduler.studies.paper`: the paper's evaluation (Finnerty et al. 2024);
* :mod:`scheduler.studies.priority`: the priority study (Bhosale et al. 2024);
* :mod:`scheduler.studies.evolving`: the evolving study (Posner et al. 2024);
* :mod:`scheduler.studies.granularity`: the granularity-and-affinity study (Liu & Guitart
  2022), run by ``python -m benchmarks.granularity`` with a fitted contention model.

``python -m scheduler simulate`` runs the first three (docs/guides/simulation.md).  The
engine they run on is :mod:`scheduler.simulate`; none of it depends on a study.
"""

from __future__ import annotations

from .evolving import EVOLVING_RANGES, MIXES, evolving_batch, evolving_study, plot_evolving_study
from .granularity import SCENARIOS, granularity_study
from .paper import (
    DEFAULT_ALGORITHMS,
    DEFAULT_SEEDS,
    DEFAULT_SHARES,
    Evaluation,
    aggregate,
    evaluate_paper,
    evaluate_workloads,
)
from .priority import (
    PAPER_TABLE_NODE_S,
    PRIORITY_POLICIES,
    RESCALE_GAPS_S,
    SUBMISSION_GAPS_S,
    priority_study,
)

__all__ = [
    "DEFAULT_ALGORITHMS",
    "DEFAULT_SEEDS",
    "DEFAULT_SHARES",
    "EVOLVING_RANGES",
    "MIXES",
    "PAPER_TABLE_NODE_S",
    "PRIORITY_POLICIES",
    "RESCALE_GAPS_S",
    "SCENARIOS",
    "SUBMISSION_GAPS_S",
    "Evaluation",
    "aggregate",
    "evaluate_paper",
    "evaluate_workloads",
    "evolving_batch",
    "evolving_study",
    "granularity_study",
    "plot_evolving_study",
    "priority_study",
]
