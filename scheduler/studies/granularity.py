"""The granularity-and-affinity study of Liu & Guitart (2022) in simulation, in apgaspy terms.

Liu & Guitart, "Fine-grained scheduling for containerized HPC workloads in Kubernetes
clusters" (2022), run 16-process MPI jobs on 4 nodes of 32 cores (2 sockets of 16) under an
application layer (policy ``scale``: a container a node; ``granularity``: a process a
container, network-bound jobs packed on one node) and an infrastructure layer (task groups:
a node's containers together on one socket; affinity: each bound to its cores).  In apgaspy
a container is a place and the processes of a container are the GLB workers of that place
(docs/benchmarks.md, "Granularity and affinity").

::

    workload (experiment 1 or 2) ─► for each scenario:
        FCFS(placement) ─► Simulator(SimConfig(4 nodes x 32 cores, 2 sockets,
                                     shape, pin, task_groups, contention=model))
        ─► mean turnaround ("overall response time"), makespan

The six scenarios (:data:`SCENARIOS`):

===================  ==================  ===========  ======  ============================
scenario             placement           shape        pinned  cores of a node
===================  ==================  ===========  ======  ============================
none                 first fit           core         no      lowest free (may straddle)
affinity             first fit           core         yes     lowest free
scale                first fit, network  scale        yes     lowest free
                     packed
granularity          first fit, network  granularity  yes     lowest free
                     packed
scale+groups         equal shares        scale        yes     one socket where it fits
granularity+groups   equal shares        granularity  yes     one socket where it fits
===================  ==================  ===========  ======  ============================

First fit takes a job's cores core by core on the nodes in order, wherever free, so its
shares are uneven (:func:`scheduler.resources.first_fit_cores`); "network packed" takes the
first node with all its cores free where there is one.  Equal shares is the scheduler's own
placement (:func:`scheduler.resources.nodes_for_cores`: ``cpu``/``memory`` spread over as
many nodes as have room, ``network`` packed).  The run-time factors come from a
:class:`~scheduler.contention.ContentionModel` (fitted by ``python -m benchmarks.granularity``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..algorithms import make
from ..contention import ContentionModel
from ..jobs import BatchEntry, JobSpec
from ..model import RuntimeModel, ScalingCurve
from ..simulate import SimConfig, Simulator

__all__ = ["BASE_S", "KINDS", "PAPER", "SCENARIOS", "Scenario", "experiment1", "experiment2",
           "granularity_study", "run_scenario"]


@dataclass(frozen=True)
class Scenario:
    """One layout of the study (module docstring).

    Attributes:
        placement: FCFS's placement (:data:`scheduler.algorithms.base.PLACEMENTS`).
        shape: the shape policy (:func:`scheduler.resources.shape`).
        pin: whether places are bound to their cores.
        task_groups: a node's share on one socket where it fits.
    """

    placement: str
    shape: str
    pin: bool
    task_groups: bool


#: The six scenarios, in the order of the tables.
SCENARIOS: dict[str, Scenario] = {
    "none": Scenario("first-fit", "core", False, False),
    "affinity": Scenario("first-fit", "core", True, False),
    "scale": Scenario("first-fit-pack", "scale", True, False),
    "granularity": Scenario("first-fit-pack", "granularity", True, False),
    "scale+groups": Scenario("shares", "scale", True, True),
    "granularity+groups": Scenario("shares", "granularity", True, True),
}

#: The paper's job kinds -> (apgaspy kind, profile): EP-DGEMM is CPU-bound (UTS), EP-STREAM
#: memory-bound (BC), G-FFT and RandomRing network-bound (Pi with tiny tasks), MiniFE
#: memory and CPU (Jacobi 2D, a stencil with halo exchanges).
KINDS: dict[str, tuple[str, str]] = {
    "ep-dgemm": ("cpu", "cpu"),
    "ep-stream": ("memory", "memory"),
    "g-fft": ("network", "network"),
    "randomring": ("network", "network"),
    "minife": ("jacobi", "memory"),
}

#: Base run time of every kind in the simulated experiments (seconds, the job alone, one
#: place a core, pinned, on one socket a node): assumed equal for all kinds, of the order of
#: the paper's jobs (minutes), so that the kinds differ by their factors only.
BASE_S = 300.0

#: The paper's reported changes (Liu & Guitart 2022, section 5): granularity with task groups
#: and affinity against the default without affinity ("none") and with it ("affinity").
PAPER: dict[str, dict[str, float]] = {
    "experiment2_vs_none": {"response": -0.35, "makespan": -0.34},
    "experiment2_vs_affinity": {"response": -0.19, "makespan": -0.11},
    "experiment1_vs_none": {"response": -0.34},
    "experiment1_vs_affinity": {"response": -0.15},
}


def _entry(i: int, kind: str, submit_s: float, cores: int) -> BatchEntry:
    apgas_kind, profile = KINDS[kind]
    spec = JobSpec(name=f"{kind}-{i}", cores=cores, profile=profile, program=apgas_kind,
                   size=cores, required_time_s=3600.0)
    return BatchEntry(spec, float(submit_s))


def experiment1(*, jobs: int = 10, gap_s: float = 60.0, cores: int = 16) -> list[BatchEntry]:
    """Experiment 1: ``jobs`` EP-DGEMM (CPU-bound) jobs of ``cores`` cores, ``gap_s`` apart."""
    return [_entry(i, "ep-dgemm", i * gap_s, cores) for i in range(jobs)]


def experiment2(seed: int = 1, *, jobs: int = 20, window_s: float = 1200.0,
                cores: int = 16) -> list[BatchEntry]:
    """Experiment 2: ``jobs`` jobs, as many of each of the five kinds of :data:`KINDS` (in
    turn), each submitted at a time drawn uniformly in ``[0, window_s)`` from
    ``random.Random(seed)``; sorted by time."""
    rng = random.Random(seed)
    kinds = list(KINDS)
    times = [rng.uniform(0.0, window_s) for _ in range(jobs)]
    entries = [_entry(i, kinds[i % len(kinds)], t, cores) for i, t in enumerate(times)]
    return sorted(entries, key=lambda e: e.submit_s)


def _runtime(entries: Sequence[BatchEntry], base_s: Mapping[tuple[str, int], float] | float
             ) -> RuntimeModel:
    model = RuntimeModel()
    for e in entries:
        key = (str(e.spec.program), int(e.spec.size))
        t = base_s if isinstance(base_s, float) else base_s[key]
        model.add(key[0], key[1], ScalingCurve({1: float(t)}, floor_s=0.01))
    return model


def run_scenario(entries: Sequence[BatchEntry], scenario: Scenario,
                 model: ContentionModel | None, *, nodes: int = 4, cores_per_node: int = 32,
                 sockets_per_node: int = 2,
                 base_s: Mapping[tuple[str, int], float] | float = BASE_S) -> dict[str, Any]:
    """Simulate ``entries`` under ``scenario`` with FCFS.

    Args:
        entries: the batch (``#CORES`` jobs whose ``program`` is their kind).
        scenario: the layout.
        model: the contention model (``None``: every job at its base time).
        nodes, cores_per_node, sockets_per_node: the cluster (≥ 1; the sockets divide the
            cores).
        base_s: base run time of every job (seconds), or ``(kind, cores) -> seconds``.

    Returns:
        ``{"mean_turnaround_s", "makespan_s", "mean_wait_s", "jobs": [{name, submit_s,
        start_s, end_s, factor}]}`` (seconds).

    Raises:
        ValueError: a bad cluster or scenario value; ``KeyError``: a job without a base time.
    """
    config = SimConfig(total_nodes=nodes, cores_per_node=cores_per_node,
                       sockets_per_node=sockets_per_node, task_groups=scenario.task_groups,
                       shape=scenario.shape, pin=scenario.pin, contention=model,
                       interval_s=1.0)
    sim = Simulator(make("fcfs", placement=scenario.placement), list(entries), config,
                    model=_runtime(entries, base_s))
    result = sim.run()
    return {"mean_turnaround_s": result.mean_turnaround_s, "makespan_s": result.makespan_s,
            "mean_wait_s": result.mean_wait_s,
            "jobs": [{"name": r.name, "submit_s": round(r.submit_s, 3),
                      "start_s": round(r.start_s, 3), "end_s": round(r.end_s, 3),
                      "factor": round(sim.factors.get(r.name, 1.0), 4)}
                     for r in result.records]}


def _change(value: float, against: float) -> float:
    return value / against - 1.0 if against else 0.0


def granularity_study(model: ContentionModel, *, seed: int = 1) -> dict[str, Any]:
    """Experiments 1 and 2 under the six scenarios with ``model``.

    Returns:
        ``{"experiment1": rows, "experiment2": rows}``, a row per scenario:
        ``{"scenario", "mean_turnaround_s", "makespan_s", "mean_wait_s",
        "response_vs_none", "makespan_vs_none", "response_vs_affinity",
        "makespan_vs_affinity" (relative changes, -0.2 = 20 % less), "jobs"}``.
    """
    out: dict[str, Any] = {}
    for name, entries in (("experiment1", experiment1()), ("experiment2", experiment2(seed))):
        runs = {s: run_scenario(entries, sc, model) for s, sc in SCENARIOS.items()}
        rows = []
        for s, r in runs.items():
            row: dict[str, Any] = {"scenario": s}
            for key in ("mean_turnaround_s", "makespan_s", "mean_wait_s"):
                row[key] = round(r[key], 3)
            for ref in ("none", "affinity"):
                row[f"response_vs_{ref}"] = round(
                    _change(r["mean_turnaround_s"], runs[ref]["mean_turnaround_s"]), 4)
                row[f"makespan_vs_{ref}"] = round(
                    _change(r["makespan_s"], runs[ref]["makespan_s"]), 4)
            row["jobs"] = r["jobs"]
            rows.append(row)
        out[name] = rows
    return out
