"""Scheduling algorithms: pure policies behind one interface (:mod:`.base`).

``registry`` maps a name to an algorithm class; a new algorithm is one module plus one line
here.  Every class is constructed with keyword arguments only; :func:`make` passes
``cooldown_s`` to those that take it.
"""

from __future__ import annotations

import inspect
from typing import Any

from .backfilling import Backfilling
from .base import (
    DEFAULT_COOLDOWN_S,
    Algorithm,
    Decision,
    FreeNodes,
    Grow,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    can_order,
    next_change_s,
    node_key,
    sorted_nodes,
)
from .decisions import decision_problem
from .easy import EasyBackfilling
from .evolving_requests import (
    EvolvingEasy,
    EvolvingEasyMalleable,
    EvolvingElastic,
    EvolvingReserve,
    EvolvingSmallest,
)
from .fcfs import FCFS
from .malleable import MalleableMinAgree
from .priority import ElasticPriority, ElasticPriorityEasy, Moldable, RigidMax, RigidMin

__all__ = [
    "DEFAULT_COOLDOWN_S",
    "FCFS",
    "Algorithm",
    "Backfilling",
    "Decision",
    "EasyBackfilling",
    "ElasticPriority",
    "ElasticPriorityEasy",
    "EVOLVING_ALGORITHMS",
    "EvolvingEasy",
    "EvolvingEasyMalleable",
    "EvolvingElastic",
    "EvolvingReserve",
    "EvolvingSmallest",
    "FreeNodes",
    "Grow",
    "MIXED_ALGORITHMS",
    "MalleableMinAgree",
    "Moldable",
    "PRIORITY_ALGORITHMS",
    "RESIZING_ALGORITHMS",
    "RigidMax",
    "RigidMin",
    "RunningJob",
    "Shrink",
    "Start",
    "View",
    "WaitingJob",
    "can_order",
    "decision_problem",
    "make",
    "next_change_s",
    "node_key",
    "registry",
    "sorted_nodes",
]

#: Algorithm name → class: the four of Finnerty et al.'s evaluation
#: (docs/guides/simulation.md), the priority policies (docs/guides/priorities.md), then the
#: evolving policies (docs/guides/evolving-scheduling.md).
registry: dict[str, type[Any]] = {
    "fcfs": FCFS,
    "backfilling": Backfilling,
    "easy": EasyBackfilling,
    "malleable": MalleableMinAgree,
    "rigid-min": RigidMin,
    "rigid-max": RigidMax,
    "moldable": Moldable,
    "elastic-priority": ElasticPriority,
    "elastic-priority-easy": ElasticPriorityEasy,
    "evolving-easy": EvolvingEasy,
    "evolving-smallest": EvolvingSmallest,
    "evolving-reserve": EvolvingReserve,
    "evolving-easy-malleable": EvolvingEasyMalleable,
    "evolving-elastic": EvolvingElastic,
}

#: The policies that serve evolving jobs' node requests (docs/guides/evolving-scheduling.md);
#: their evolving jobs get ``ELASTIC=evolving``.
EVOLVING_ALGORITHMS: tuple[str, ...] = (
    "evolving-easy", "evolving-smallest", "evolving-reserve", "evolving-easy-malleable",
    "evolving-elastic",
)

#: The evolving policies that also resize malleable jobs (for batches of every class).
MIXED_ALGORITHMS: tuple[str, ...] = ("evolving-easy-malleable", "evolving-elastic")

#: The priority policies (they read ``JobSpec.priority`` and take ``rescale_gap_s``,
#: ``keep_free``; the EASY variant also ``aging_s``).
PRIORITY_ALGORITHMS: tuple[str, ...] = (
    "rigid-min", "rigid-max", "moldable", "elastic-priority", "elastic-priority-easy",
)

#: Algorithms that shrink and grow running jobs (their malleable jobs get ``ELASTIC=malleable``).
RESIZING_ALGORITHMS: frozenset[str] = frozenset(
    {"malleable", "elastic-priority", "elastic-priority-easy", *MIXED_ALGORITHMS}
)


def make(name: str, **options: Any) -> Algorithm:
    """Build the algorithm called ``name`` with the options its class accepts.

    Options a class does not take (e.g. ``cooldown_s`` for FCFS, ``rescale_gap_s`` for
    minAgree) are dropped, so one set of options serves every algorithm.  Raises
    ``ValueError`` for an unknown name, and the class's ``ValueError`` for a bad option value
    (a negative rescale gap names the value).
    """
    try:
        cls = registry[name]
    except KeyError:
        raise ValueError(
            f"unknown algorithm {name!r}; known: {', '.join(sorted(registry))}"
        ) from None
    accepted = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in options.items() if k in accepted})
