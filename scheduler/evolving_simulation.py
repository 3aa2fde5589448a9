"""Simulated evolving jobs: the evotree demand model, the runtime monitor and their simulation.

An evolving job asks the scheduler for nodes and gives nodes back by itself (Posner et al.
2024, evolving APGAS programs on HPC clusters; docs/guides/evolving-scheduling.md).  Its
demand here follows LifelineGLB's synthetic ``evotree`` program: a task tree that keeps every
worker busy, then a strictly sequential branch that keeps one worker busy, then a second
tree.  The runtime's monitor (APGAS v0.0.4 ``EvolvingMonitor``) turns that demand into lines:

* it decides every ``decide_s`` (1 s), after a standby of ``standby_s`` (3 s) from the start;
* allotment below the demand, and no request open → one request for **one** node (one open
  request at a time, no time-out: it clears when the node arrives);
* allotment above the demand and the extra places idle for ``idle_s`` (10 s: a place
  reports load 0 after 10 s without work) → it releases one node per decision; a release
  also drops the job's pending request.  The demand of a sequential phase is one node,
  below the job's minimum where that is higher: the monitor sees loads, not the job
  script's minimum, and the scheduler takes such releases (the minimum bounds the start).

Work model (``evotree -s s -g g``): a tree is ``s × g`` node-seconds of perfectly divisible
work (it runs ``s × g / n`` seconds on ``n`` nodes); the branch lasts ``2g`` seconds on any
allotment.  The rigid form of the job holds ``s`` nodes for its ``4g`` seconds.  Every class
runs this program: rigid and moldable jobs on the nodes they started with, malleable ones on
the nodes the scheduler's shrink and grow orders leave them, evolving ones as above.

The simulator (:func:`simulate_evolving`) advances in steps of ``decide_s`` seconds: jobs
progress, monitors decide, and the algorithm is called on every change (a submission, an
end, a request, a release, a shrink done, a malleable job's ``APGAS-Ready``) and every
``interval_s`` (5 s, as the Java scheduler); its view of the jobs, the check of its
decisions and the jobs' records are the real server's and the simulator's
(:mod:`scheduler.job_state`), its metrics theirs (:mod:`scheduler.metrics`).  Grants and orders
reach the job at once; a resize (a grant or grow, a shrink, an evolving job's release)
stops the job's progress for apgaspy's measured resize time
(:class:`~scheduler.model.ResizeCostModel`: 0.17 s to grow by one node, 0.005 s to shrink
by one).  A malleable job announces ``APGAS-Ready`` before the next step (apgaspy: 0.76 s).

The evolving study's batches and sweep are :mod:`scheduler.studies.evolving`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .algorithms import Grow, Shrink, Start, View, make
from .job_state import JobState, check_decision
from .jobs import JobClass, JobSpec
from .metrics import result_from_records
from .model import ResizeCostModel

__all__ = ["EvoTree", "EvolvingJob", "MonitorConfig", "simulate_evolving"]


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


#: The classes that announce ``APGAS-Ready`` (within a second of their start, apgaspy's
#: measured 0.76 s: before the simulator's next step) and may then be resized.
_ELASTIC = frozenset({JobClass.MALLEABLE, JobClass.EVOLVING})


@dataclass
class EvolvingJob(JobState):
    """One simulated job: spec, demand, submission time (s) and its run's bookkeeping.

    Any job class runs the same ``evotree`` program: a rigid or moldable job keeps the nodes
    it started with, a malleable one is resized by the scheduler's orders, an evolving one
    asks for nodes and gives them back (module doc).  ``shrinks`` / ``grows`` count the
    scheduler's orders to a malleable job; ``pause_s`` is resize time still to be spent.
    What it takes orders, what the policy sees of it and its record are the other
    schedulers' (:class:`~scheduler.job_state.JobState`).
    """

    job_id: int
    spec: JobSpec
    tree: EvoTree
    submit_s: float
    state: str = "pending"
    ready: bool = False
    busy: bool = False
    allotment: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    phase: int = 0
    left: float = 0.0
    nodes: list[str] = field(default_factory=list)
    start_s: float = math.nan
    end_s: float = math.nan
    last_order_s: float | None = None
    requested: int = 0
    idle_since_s: float | None = None
    requests: int = 0
    requests_served: int = 0
    releases: int = 0
    shrinks: int = 0
    grows: int = 0
    pause_s: float = 0.0

    @property
    def node_seconds(self) -> float:
        """Node-seconds held so far (nodes × seconds over the allotment's steps)."""
        return self.record().node_seconds

    def demand(self) -> int:
        """Nodes the job can keep busy now: its maximum in a tree, one in the sequential
        branch, what it holds in a phase of another kind (a start-up: no monitor yet).

        Not bounded below by the job's minimum: the runtime's monitor (APGAS for Java's and
        apgaspy's) knows the places' loads, not the job script's ``#MIN_NODES``, and gives
        back every idle place but place 0; the scheduler takes those releases (the
        minimum bounds the start only).
        """
        kind = self.tree.phases()[self.phase][0]
        if kind == "tree":
            return self.spec.hi
        return 1 if kind == "branch" else len(self.nodes)


def _pause(job: EvolvingJob, seconds: float) -> None:
    """A resize stops the job's progress for ``seconds`` (from the order on)."""
    job.pause_s += seconds


def _run(jobs: list[EvolvingJob], algorithm: Any, total_nodes: int, interval_s: float,
         monitor: MonitorConfig, costs: ResizeCostModel) -> list[EvolvingJob]:
    names = [f"n{i + 1}" for i in range(total_nodes)]
    free = set(names)
    pending = sorted(jobs, key=lambda j: (j.submit_s, j.job_id))
    waiting: list[EvolvingJob] = []
    running: list[EvolvingJob] = []
    dt = monitor.decide_s
    now = 0.0
    step = 0
    last_call = -math.inf
    ended = False  # a job ended or a shrink freed nodes in the last step: call again
    while pending or waiting or running:
        changed, ended = ended, False
        while pending and pending[0].submit_s <= now + 1e-9:
            waiting.append(pending.pop(0))
            waiting[-1].state = "waiting"
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
                    job.allotment.append((now, tuple(job.nodes)))
                    free.add(node)
                    job.releases += 1
                    job.requested = 0
                    _pause(job, costs.shrink_s(1))
                    changed = True
            else:
                job.idle_since_s = None
        if changed or now - last_call >= interval_s - 1e-9:
            last_call = now
            view = View(
                now_s=now,
                free_nodes=tuple(free),
                running=tuple(j.running_view() for j in running),
                waiting=tuple(j.waiting_view() for j in waiting),
                total_nodes=total_nodes,
            )
            by_id = {j.job_id: j for j in waiting + running}
            for decision in algorithm.decide(view):
                job = check_decision(decision, by_id, free, algorithm.name)
                if isinstance(decision, Shrink):
                    # the most recently added nodes leave first, never the first one
                    gone = job.nodes[-decision.count:]
                    del job.nodes[-decision.count:]
                    job.allotment.append((now, tuple(job.nodes)))
                    free.update(gone)
                    job.last_order_s = now
                    job.shrinks += 1
                    _pause(job, costs.shrink_s(decision.count))
                    ended = True
                    continue
                free.difference_update(decision.nodes)
                job.nodes.extend(decision.nodes)
                job.allotment.append((now, tuple(job.nodes)))
                if isinstance(decision, Start):
                    waiting.remove(job)
                    running.append(job)
                    job.state = "running"
                    # an elastic job announces APGAS-Ready before the next step (apgaspy)
                    job.ready = job.spec.job_class in _ELASTIC
                    job.start_s = now
                    job.left = job.tree.phases()[0][1]
                    # a malleable job's APGAS-Ready (0.76 s measured) is an event: call again
                    ended = ended or job.spec.job_class is JobClass.MALLEABLE
                elif isinstance(decision, Grow):
                    job.last_order_s = now
                    _pause(job, costs.grow_s(len(decision.nodes)))
                    if job.spec.job_class is JobClass.EVOLVING:
                        job.requested = 0
                        job.requests_served += 1
                    else:
                        job.grows += 1
        # progress over [now, now + dt]
        step += 1
        now = step * dt
        for job in list(running):
            kind, _ = job.tree.phases()[job.phase]
            stopped = min(dt, job.pause_s)
            job.pause_s -= stopped
            job.left -= (len(job.nodes) if kind == "tree" else 1) * (dt - stopped)
            while job.left <= 1e-9:
                job.phase += 1
                phases = job.tree.phases()
                if job.phase == len(phases):
                    job.end_s = now
                    job.state = "ended"
                    free.update(job.nodes)
                    job.nodes.clear()
                    job.allotment.append((now, ()))
                    running.remove(job)
                    ended = True
                    break
                job.left += phases[job.phase][1]
                job.idle_since_s = None
        if now > 1e7:
            raise RuntimeError("simulation does not end")
    return jobs


def simulate_evolving(jobs: Sequence[EvolvingJob], algorithm: str, *, total_nodes: int = 10,
                      interval_s: float = 5.0, monitor: MonitorConfig | None = None,
                      costs: ResizeCostModel | None = None, **options: Any) -> dict[str, Any]:
    """Run one batch under one algorithm.

    Args:
        jobs: the batch (fresh :class:`EvolvingJob` objects; they are filled in).
        algorithm: a name of :data:`scheduler.algorithms.registry`.
        total_nodes: cluster size (nodes).
        interval_s: the scheduler's period (seconds), besides its calls on events.
        monitor: the runtime monitor's delays (default :class:`MonitorConfig`).
        costs: how long a resize stops the job (default :class:`~scheduler.model.ResizeCostModel`:
            apgaspy's measured grow and shrink times, under a second): a grant or grow order,
            a shrink order, an evolving job's own release.
        options: passed to :func:`scheduler.algorithms.make`.

    Returns:
        ``{"makespan_s", "mean_turnaround_s", "mean_wait_s", "utilisation", "requests",
        "requests_served", "releases", "shrinks", "grows"}`` (seconds; utilisation in 0..1:
        node-seconds held ÷ ``total_nodes × makespan``; ``shrinks`` / ``grows``: the
        scheduler's orders to malleable jobs).

    Raises:
        ValueError: an unknown algorithm, or a job that needs more nodes than the cluster.
        InvalidDecisionError: the algorithm made a decision the mechanism refuses (the real
            scheduler's check, :func:`scheduler.job_state.check_decision`).
    """
    for job in jobs:
        if problem := job.spec.fits(total_nodes):
            raise ValueError(problem)
    policy = make(algorithm, **options)
    done = _run(list(jobs), policy, total_nodes, interval_s, monitor or MonitorConfig(),
                costs or ResizeCostModel())
    result = result_from_records([j.record() for j in done], algorithm=policy.name,
                                 total_nodes=total_nodes)
    return {
        "makespan_s": result.makespan_s,
        "mean_turnaround_s": result.mean_turnaround_s,
        "mean_wait_s": result.mean_wait_s,
        "utilisation": result.utilisation,
        "requests": sum(j.requests for j in done),
        "requests_served": sum(j.requests_served for j in done),
        "releases": sum(j.releases for j in done),
        "shrinks": sum(j.shrinks for j in done),
        "grows": sum(j.grows for j in done),
    }
