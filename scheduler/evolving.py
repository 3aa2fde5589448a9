"""Simulated evolving jobs: a demand model, a small simulator and the evolving study.

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

:func:`evolving_batch` builds the Java scheduler's evaluation batches, with the jobs that
are not evolving all rigid or split over rigid, moldable and malleable (:data:`MIXES`);
:func:`evolving_study` runs them under the evolving policies and all-rigid EASY.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .algorithms import EVOLVING_ALGORITHMS, MIXED_ALGORITHMS, Grow, Shrink, Start, View, make
from .job_state import JobState, check_decision
from .jobs import JobClass, JobSpec
from .metrics import result_from_records
from .model import ResizeCostModel

__all__ = [
    "EVOLVING_RANGES",
    "MIXES",
    "EvoTree",
    "EvolvingJob",
    "MonitorConfig",
    "evolving_batch",
    "evolving_study",
    "plot_evolving_study",
    "simulate_evolving",
]

#: Rigid size → the node range of its evolving form (the Java scheduler's evaluation scripts).
EVOLVING_RANGES: dict[int, tuple[int, int]] = {1: (1, 2), 2: (1, 4), 4: (2, 8), 8: (4, 16)}

#: Batch compositions of :func:`evolving_batch`: the jobs that are not evolving are all rigid
#: (the Java scheduler's evaluation scripts), or split evenly over rigid, moldable and
#: malleable (the published mixed batch, Posner et al. 2024).
MIXES: tuple[str, ...] = ("rigid", "mixed")


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
    start_s: float | None = None
    end_s: float | None = None
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


def evolving_batch(seed: int, evolving_share: float, *, jobs: int = 20, g_s: float = 50.0,
                   submit_window_s: float = 600.0, first_at_zero: int = 5,
                   required_factor: float = 1.5, mix: str = "rigid") -> list[EvolvingJob]:
    """The Java scheduler's evolving evaluation batch, seeded.

    ``jobs`` synthetic ``evotree`` jobs of 1, 2, 4 or 8 nodes (drawn uniformly),
    ``first_at_zero`` submitted at 0 and the rest uniformly over ``submit_window_s``;
    ``evolving_share`` % of them (rounded, picked at random) are evolving with the ranges of
    :data:`EVOLVING_RANGES`.  The others, by ``mix``:

    * ``"rigid"``: all rigid, of their drawn size (the Java scheduler's evaluation scripts);
    * ``"mixed"``: split evenly over rigid, moldable and malleable (in random order; with a
      count not divisible by 3 the first classes of a random rotation get one more), the
      moldable and malleable ones with the same ranges as the evolving ones.  This is the
      published mixed batch (Posner et al. 2024: rigid, moldable, malleable and evolving
      jobs), whose proportions the paper does not give: an even split favours no class.

    The sizes, submission times and evolving jobs depend on ``seed`` only, not on ``mix``:
    both mixes (and every share's rigid jobs) run the same programs.  Required time:
    ``required_factor`` × the run time on the job's smallest count.

    Raises:
        ValueError: a share outside 0..100, ``first_at_zero > jobs``, ``jobs < 1`` or an
            unknown ``mix``.
    """
    if not 0 <= evolving_share <= 100:
        raise ValueError(f"evolving_share must lie in 0..100 %, got {evolving_share}")
    if jobs < 1 or not 0 <= first_at_zero <= jobs:
        raise ValueError(f"need jobs >= 1 and 0 <= first_at_zero <= jobs, got {jobs}, "
                         f"{first_at_zero}")
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {', '.join(MIXES)}, got {mix!r}")
    rng = random.Random(seed)
    sizes = [rng.choice(sorted(EVOLVING_RANGES)) for _ in range(jobs)]
    submits = [0.0] * first_at_zero + sorted(
        rng.uniform(0, submit_window_s) for _ in range(jobs - first_at_zero))
    evolving = set(rng.sample(range(jobs), round(jobs * evolving_share / 100)))
    classes = dict.fromkeys(range(jobs), JobClass.RIGID)
    classes.update(dict.fromkeys(evolving, JobClass.EVOLVING))
    if mix == "mixed":
        rest = [i for i in range(jobs) if i not in evolving]
        rng.shuffle(rest)
        kinds = [JobClass.RIGID, JobClass.MOLDABLE, JobClass.MALLEABLE]
        first = rng.randrange(3)
        kinds = kinds[first:] + kinds[:first]
        classes.update({i: kinds[k % 3] for k, i in enumerate(rest)})
    out = []
    for i, (size, submit) in enumerate(zip(sizes, submits, strict=True)):
        tree = EvoTree(size, g_s)
        job_class = classes[i]
        if job_class is JobClass.RIGID:
            spec = JobSpec(name=f"evotree-{i}", nodes=size,
                           required_time_s=required_factor * tree.run_time_s(size))
        else:
            lo, hi = EVOLVING_RANGES[size]
            spec = JobSpec(name=f"evotree-{i}-{job_class.value}", job_class=job_class,
                           min_nodes=lo, max_nodes=hi, nodes=size,
                           required_time_s=required_factor * tree.run_time_s(lo))
        out.append(EvolvingJob(i, spec, tree, round(submit, 3)))
    return out


def evolving_study(*, batches: int = 20, seed: int = 42, shares: Sequence[float] = (
        20, 40, 60, 80, 100), algorithms: Sequence[str] = EVOLVING_ALGORITHMS,
        total_nodes: int = 10, **batch_options: Any) -> list[dict[str, Any]]:
    """The evolving study: every algorithm at every evolving share, and all-rigid.

    For each share and seed ``seed … seed + batches - 1`` the batch of
    :func:`evolving_batch` runs under each algorithm: the policies of
    :data:`~scheduler.algorithms.MIXED_ALGORITHMS` (they resize malleable jobs too) on the
    ``"mixed"`` batch, the others on the ``"rigid"`` one (its other jobs rigid).  The row
    ``all-rigid`` runs the same batches (share 0: every job in its rigid form) under EASY
    backfilling.

    Returns:
        Rows ``{"algorithm", "mix", "evolving_share" (%), "batches", "makespan_s",
        "mean_turnaround_s", "mean_wait_s", "utilisation", "requests", "requests_served",
        "releases", "shrinks", "grows", "makespan_cut", "turnaround_cut"}``: means over the
        batches (``mix``: ``"all-rigid"``, ``"rigid"`` or ``"mixed"``); the cuts are
        ``1 - value / all-rigid value`` of the means (0.23 = 23 % lower).  Rows in the order
        all-rigid, then per share the algorithms in the order given.

    Raises:
        ValueError: ``batches < 1``, an unknown algorithm, a bad share.
    """
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    for name in algorithms:
        make(name)  # an unknown name fails before any simulation
    seeds = range(seed, seed + batches)

    def row(name: str, mix: str, share: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"algorithm": name, "mix": mix, "evolving_share": share,
                               "batches": batches}
        for key in runs[0]:
            out[key] = round(statistics.fmean(r[key] for r in runs), 4)
        return out

    base = row("all-rigid", "all-rigid", 0, [
        simulate_evolving(evolving_batch(s, 0, **batch_options), "easy",
                          total_nodes=total_nodes) for s in seeds])
    rows = [base]
    for share in shares:
        for name in algorithms:
            mix = "mixed" if name in MIXED_ALGORITHMS else "rigid"
            rows.append(row(name, mix, share, [
                simulate_evolving(evolving_batch(s, share, mix=mix, **batch_options), name,
                                  total_nodes=total_nodes) for s in seeds]))
    for r in rows:
        r["makespan_cut"] = round(1 - r["makespan_s"] / base["makespan_s"], 4)
        r["turnaround_cut"] = round(1 - r["mean_turnaround_s"] / base["mean_turnaround_s"], 4)
    return rows


def plot_evolving_study(rows: Sequence[dict[str, Any]], directory: Any) -> list[Any]:
    """Plot the study's cuts against all-rigid: ``evolving_study.png`` in ``directory``.

    Args:
        rows: :func:`evolving_study`'s rows.
        directory: a folder (``str`` or :class:`pathlib.Path`; made if missing).

    Returns:
        The paths written (one PNG: makespan cut and mean turnaround cut, %, against the
        evolving share, one line per algorithm, and the published cuts, 23 % and 29 %, as
        dashed lines).

    Raises:
        ValueError: rows without an algorithm other than ``all-rigid``.
    """
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["algorithm"] for r in rows if r["algorithm"] != "all-rigid"))
    if not names:
        raise ValueError("no algorithm row to plot")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for ax, key, title, published in (
            (axes[0], "makespan_cut", "makespan cut against all-rigid", 23),
            (axes[1], "turnaround_cut", "mean turnaround cut against all-rigid", 29)):
        ax.axhline(published, color="grey", linestyle="--", linewidth=1,
                   label="published, mixed batch (Posner et al. 2024)")
        for name in names:
            mine = [r for r in rows if r["algorithm"] == name]
            ax.plot([r["evolving_share"] for r in mine], [100 * r[key] for r in mine],
                    marker="o", label=f"{name} ({mine[0]['mix']})")
        ax.set_title(title)
        ax.set_xlabel("evolving jobs (%)")
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path = folder / "evolving_study.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
