"""Simulated evolving jobs: a demand model, a small simulator and the evolving study.

An evolving job asks the scheduler for nodes and gives nodes back by itself (Posner et al.
2024, evolving APGAS programs on HPC clusters; docs/guides/evolving-scheduling.md).  Its
demand here follows LifelineGLB's synthetic ``evotree`` program: a task tree that keeps every
worker busy, then a strictly sequential branch that keeps one worker busy, then a second
tree.  The runtime's monitor (APGAS v0.0.4 ``EvolvingMonitor``) turns that demand into lines:

* it decides every ``decide_s`` (1 s), after a standby of ``standby_s`` (3 s) from the start;
* allotment below the demand, and no request open → one request for **one** node (one open
  request at a time, no time-out: it clears when the node arrives);
* allotment above the demand (never below the minimum) and the extra places idle for
  ``idle_s`` (10 s: a place reports load 0 after 10 s without work) → it releases one node
  per decision; a release also drops the job's pending request.

Work model (``evotree -s s -g g``): a tree is ``s × g`` node-seconds of perfectly divisible
work (it runs ``s × g / n`` seconds on ``n`` nodes); the branch lasts ``2g`` seconds on any
allotment.  The rigid form of the job holds ``s`` nodes for its ``4g`` seconds.

The simulator (:func:`simulate_evolving`) advances in steps of ``decide_s`` seconds: jobs
progress, monitors decide, and the algorithm is called on every change (a submission, an
end, a request, a release) and every ``interval_s`` (5 s, as the Java scheduler); its
decisions are checked by :func:`~scheduler.algorithms.decision_problem` like the real
server's.  Grants reach the job at once; a granted node works from the next step.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .algorithms import (
    EVOLVING_ALGORITHMS,
    Grow,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    decision_problem,
    make,
)
from .jobs import JobClass, JobSpec

__all__ = [
    "EVOLVING_RANGES",
    "EvoTree",
    "EvolvingJob",
    "MonitorConfig",
    "evolving_batch",
    "evolving_study",
    "simulate_evolving",
]

#: Rigid size → the node range of its evolving form (the Java scheduler's evaluation scripts).
EVOLVING_RANGES: dict[int, tuple[int, int]] = {1: (1, 2), 2: (1, 4), 4: (2, 8), 8: (4, 16)}


@dataclass(frozen=True)
class EvoTree:
    """The demand of one ``evotree`` job: tree, sequential branch, tree.

    Args:
        size: the places the tree is sized for (``-s``; nodes, >= 1): a tree is
            ``size × g_s`` node-seconds of work.
        g_s: the ``-g`` duration (seconds, > 0): a tree takes ``g_s`` on ``size`` nodes, the
            branch ``2 × g_s`` on any number.

    Raises:
        ValueError: ``size < 1`` or ``g_s <= 0``.
    """

    size: int
    g_s: float = 50.0

    def __post_init__(self) -> None:
        if self.size < 1 or not (self.g_s > 0 and math.isfinite(self.g_s)):
            raise ValueError(f"EvoTree needs size >= 1 and g_s > 0, got {self.size}, {self.g_s}")

    def phases(self) -> list[tuple[str, float]]:
        """``[(kind, amount)]``: ``("tree", node-seconds)`` or ``("branch", seconds)``."""
        tree = self.size * self.g_s
        return [("tree", tree), ("branch", 2 * self.g_s), ("tree", tree)]

    def run_time_s(self, nodes: int) -> float:
        """Seconds to run on a fixed ``nodes`` (>= 1): ``2 × size × g / nodes + 2g``."""
        return 2 * self.size * self.g_s / nodes + 2 * self.g_s


@dataclass(frozen=True)
class MonitorConfig:
    """The runtime monitor's delays (APGAS v0.0.4 ``EvolvingMonitor``), seconds.

    ``standby_s`` before the first decision, one decision every ``decide_s``, extra places
    released after ``idle_s`` without work.
    """

    standby_s: float = 3.0
    decide_s: float = 1.0
    idle_s: float = 10.0


@dataclass
class EvolvingJob:
    """One simulated job: spec, demand, submission time (s) and its run's bookkeeping."""

    job_id: int
    spec: JobSpec
    tree: EvoTree
    submit_s: float
    phase: int = 0
    left: float = 0.0
    nodes: list[str] = field(default_factory=list)
    start_s: float | None = None
    end_s: float | None = None
    last_order_s: float | None = None
    requested: int = 0
    idle_since_s: float | None = None
    requests: int = 0
    requests_served: int = 0
    releases: int = 0
    node_seconds: float = 0.0

    def demand(self) -> int:
        """Nodes the job can keep busy now (its phase's parallelism, within its range)."""
        kind = self.tree.phases()[self.phase][0]
        want = self.spec.hi if kind == "tree" else 1
        return max(self.spec.lo, min(self.spec.hi, want))


def _run(jobs: list[EvolvingJob], algorithm: Any, total_nodes: int, interval_s: float,
         monitor: MonitorConfig) -> list[EvolvingJob]:
    names = [f"n{i + 1}" for i in range(total_nodes)]
    free = set(names)
    pending = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
    waiting: list[EvolvingJob] = []
    running: list[EvolvingJob] = []
    dt = monitor.decide_s
    now = 0.0
    step = 0
    last_call = -math.inf
    while pending or waiting or running:
        changed = False
        while pending and pending[0].submit_s <= now + 1e-9:
            waiting.append(pending.pop(0))
            changed = True
        # the monitors: requests and releases
        for job in running:
            if job.spec.job_class is not JobClass.EVOLVING or now - job.start_s < monitor.standby_s:
                continue
            want, have = job.demand(), len(job.nodes)
            if have < want:
                job.idle_since_s = None
                if job.requested == 0:
                    job.requested = 1
                    job.requests += 1
                    changed = True
            elif have > want:
                if job.idle_since_s is None:
                    job.idle_since_s = now
                if now - job.idle_since_s >= monitor.idle_s:
                    node = job.nodes.pop()
                    free.add(node)
                    job.releases += 1
                    job.requested = 0
                    changed = True
            else:
                job.idle_since_s = None
        if changed or now - last_call >= interval_s - 1e-9:
            last_call = now
            view = View(
                now_s=now,
                free_nodes=tuple(free),
                running=tuple(
                    RunningJob(j.job_id, j.spec, tuple(j.nodes), j.start_s,
                               malleable_ready=True, last_order_s=j.last_order_s,
                               requested=j.requested)
                    for j in running),
                waiting=tuple(WaitingJob(j.job_id, j.spec, j.submit_s) for j in waiting),
                total_nodes=total_nodes,
            )
            by_id = {j.job_id: j for j in waiting + running}
            for decision in algorithm.decide(view):
                job = by_id[decision.job_id]
                state = "running" if job in running else "waiting"
                problem = decision_problem(decision, spec=job.spec, state=state,
                                           held=len(job.nodes), takes_orders=True, free=free)
                if problem or isinstance(decision, Shrink):
                    raise RuntimeError(f"{algorithm.name} decided {decision}: {problem}")
                free.difference_update(decision.nodes)
                job.nodes.extend(decision.nodes)
                if isinstance(decision, Start):
                    waiting.remove(job)
                    running.append(job)
                    job.start_s = now
                    job.left = job.tree.phases()[0][1]
                elif isinstance(decision, Grow):
                    job.last_order_s = now
                    job.requested = 0
                    job.requests_served += 1
        # progress over [now, now + dt]
        step += 1
        now = step * dt
        for job in list(running):
            kind, _ = job.tree.phases()[job.phase]
            job.node_seconds += len(job.nodes) * dt
            job.left -= (len(job.nodes) if kind == "tree" else 1) * dt
            while job.left <= 1e-9:
                job.phase += 1
                phases = job.tree.phases()
                if job.phase == len(phases):
                    job.end_s = now
                    free.update(job.nodes)
                    job.nodes.clear()
                    running.remove(job)
                    break
                job.left += phases[job.phase][1]
                job.idle_since_s = None
        if now > 1e7:
            raise RuntimeError("simulation does not end")
    return jobs


def simulate_evolving(jobs: Sequence[EvolvingJob], algorithm: str, *, total_nodes: int = 10,
                      interval_s: float = 5.0, monitor: MonitorConfig | None = None,
                      **options: Any) -> dict[str, Any]:
    """Run one batch under one algorithm.

    Args:
        jobs: the batch (fresh :class:`EvolvingJob` objects; they are filled in).
        algorithm: a name of :data:`scheduler.algorithms.registry`.
        total_nodes: cluster size (nodes).
        interval_s: the scheduler's period (seconds), besides its calls on events.
        monitor: the runtime monitor's delays (default :class:`MonitorConfig`).
        options: passed to :func:`scheduler.algorithms.make`.

    Returns:
        ``{"makespan_s", "mean_turnaround_s", "mean_wait_s", "utilisation", "requests",
        "requests_served", "releases"}`` (seconds; utilisation in 0..1: node-seconds held ÷
        ``total_nodes × makespan``).

    Raises:
        ValueError: an unknown algorithm, or a job that needs more nodes than the cluster.
        RuntimeError: the algorithm made a decision the mechanism refuses.
    """
    for job in jobs:
        if problem := job.spec.fits(total_nodes):
            raise ValueError(problem)
    done = _run(list(jobs), make(algorithm, **options), total_nodes, interval_s,
                monitor or MonitorConfig())
    start = min(j.submit_s for j in done)
    makespan = max(j.end_s for j in done) - start
    return {
        "makespan_s": makespan,
        "mean_turnaround_s": statistics.fmean(j.end_s - j.submit_s for j in done),
        "mean_wait_s": statistics.fmean(j.start_s - j.submit_s for j in done),
        "utilisation": sum(j.node_seconds for j in done) / (total_nodes * makespan),
        "requests": sum(j.requests for j in done),
        "requests_served": sum(j.requests_served for j in done),
        "releases": sum(j.releases for j in done),
    }


def evolving_batch(seed: int, evolving_share: float, *, jobs: int = 20, g_s: float = 50.0,
                   submit_window_s: float = 600.0, first_at_zero: int = 5,
                   required_factor: float = 1.5) -> list[EvolvingJob]:
    """The Java scheduler's evolving evaluation batch, seeded.

    ``jobs`` synthetic ``evotree`` jobs of 1, 2, 4 or 8 nodes (drawn uniformly),
    ``first_at_zero`` submitted at 0 and the rest uniformly over ``submit_window_s``;
    ``evolving_share`` % of them (rounded, picked at random) are evolving with the ranges of
    :data:`EVOLVING_RANGES`, the others rigid.  Required time: ``required_factor`` × the run
    time on the job's smallest count.

    Raises:
        ValueError: a share outside 0..100, ``first_at_zero > jobs`` or ``jobs < 1``.
    """
    if not 0 <= evolving_share <= 100:
        raise ValueError(f"evolving_share must lie in 0..100 %, got {evolving_share}")
    if jobs < 1 or not 0 <= first_at_zero <= jobs:
        raise ValueError(f"need jobs >= 1 and 0 <= first_at_zero <= jobs, got {jobs}, "
                         f"{first_at_zero}")
    rng = random.Random(seed)
    sizes = [rng.choice(sorted(EVOLVING_RANGES)) for _ in range(jobs)]
    submits = [0.0] * first_at_zero + sorted(
        rng.uniform(0, submit_window_s) for _ in range(jobs - first_at_zero))
    evolving = set(rng.sample(range(jobs), round(jobs * evolving_share / 100)))
    out = []
    for i, (size, submit) in enumerate(zip(sizes, submits, strict=True)):
        tree = EvoTree(size, g_s)
        if i in evolving:
            lo, hi = EVOLVING_RANGES[size]
            spec = JobSpec(name=f"evotree-{i}-evolving", job_class=JobClass.EVOLVING,
                           min_nodes=lo, max_nodes=hi, nodes=size,
                           required_time_s=required_factor * tree.run_time_s(lo))
        else:
            spec = JobSpec(name=f"evotree-{i}", nodes=size,
                           required_time_s=required_factor * tree.run_time_s(size))
        out.append(EvolvingJob(i, spec, tree, round(submit, 3)))
    return out


def evolving_study(*, batches: int = 20, seed: int = 42, shares: Sequence[float] = (
        20, 40, 60, 80, 100), algorithms: Sequence[str] = EVOLVING_ALGORITHMS,
        total_nodes: int = 10, **batch_options: Any) -> list[dict[str, Any]]:
    """The evolving study: every algorithm at every evolving share, and all-rigid.

    For each share and seed ``seed … seed + batches - 1`` the batch of
    :func:`evolving_batch` runs under each algorithm; the row ``all-rigid`` runs the same
    batches (share 0: every job in its rigid form) under EASY backfilling.

    Returns:
        Rows ``{"algorithm", "evolving_share" (%), "batches", "makespan_s",
        "mean_turnaround_s", "mean_wait_s", "utilisation", "requests", "requests_served",
        "releases", "makespan_cut", "turnaround_cut"}``: means over the batches; the cuts are
        ``1 - value / all-rigid value`` of the means (0.23 = 23 % lower).

    Raises:
        ValueError: ``batches < 1``, an unknown algorithm, a bad share.
    """
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    seeds = range(seed, seed + batches)

    def row(name: str, share: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"algorithm": name, "evolving_share": share, "batches": batches}
        for key in runs[0]:
            out[key] = round(statistics.fmean(r[key] for r in runs), 4)
        return out

    base = row("all-rigid", 0, [
        simulate_evolving(evolving_batch(s, 0, **batch_options), "easy",
                          total_nodes=total_nodes) for s in seeds])
    rows = [base]
    for share in shares:
        for name in algorithms:
            rows.append(row(name, share, [
                simulate_evolving(evolving_batch(s, share, **batch_options), name,
                                  total_nodes=total_nodes) for s in seeds]))
    for r in rows:
        r["makespan_cut"] = round(1 - r["makespan_s"] / base["makespan_s"], 4)
        r["turnaround_cut"] = round(1 - r["mean_turnaround_s"] / base["mean_turnaround_s"], 4)
    return rows
