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

The simulation is the event-driven :class:`~scheduler.simulate.Simulator` in its evolving
mode (:class:`EvolvingSimulator`, which :func:`simulate_evolving` runs): one event heap, in
which each running evolving job's monitor is an event every ``decide_s`` (1 s) and every
event falls on such a step; the algorithm is called on every change (a submission, an end,
a request, a release, a shrink done, a malleable job's ``APGAS-Ready``) and ``interval_s``
(5 s, as the Java scheduler) after its last call.  Its view of the jobs, the check of its
decisions and the jobs' records are the real server's and the simulator's
(:mod:`scheduler.job_state`), its metrics theirs (:mod:`scheduler.metrics`).  A job's progress
is counted per step, as the monitor sees it; grants and orders reach the job at once; a
resize (a grant or grow, a shrink, an evolving job's release) stops the job's progress for
apgaspy's measured resize time (:class:`~scheduler.model.ResizeCostModel`: 0.17 s to grow by
one node, 0.005 s to shrink by one).  A malleable job announces ``APGAS-Ready`` before the
next step (apgaspy: 0.76 s).

The evolving study's batches and sweep are :mod:`scheduler.studies.evolving`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .algorithms import Decision, Shrink, Start, make
from .job_state import JobState, check_decision
from .jobs import JobClass, JobSpec
from .model import ResizeCostModel
from .simulate import _ELASTIC, _END, _READY, SimConfig, Simulator

__all__ = ["EvoTree", "EvolvingJob", "EvolvingSimulator", "MonitorConfig", "simulate_evolving"]


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
class EvolvingJob(JobState):
    """One simulated job: spec, demand, submission time (s) and its run's bookkeeping.

    Any job class runs the same ``evotree`` program: a rigid or moldable job keeps the nodes
    it started with, a malleable one is resized by the scheduler's orders, an evolving one
    asks for nodes and gives them back (module doc).  Its state, its transitions, what it
    takes orders, what the policy sees of it and its record are the other schedulers'
    (:class:`~scheduler.job_state.JobState`): ``shrinks`` / ``grows`` count the scheduler's
    orders to a malleable job, ``requests``, ``requests_served`` (grants) and ``releases``
    an evolving job's own.  Kept here only: ``phase``, ``left`` (work left in it) and
    ``pause_s`` (resize time still to be spent) as of the step ``step``; ``idle_since_s``,
    when the monitor first saw extra places idle; ``version`` voids the end events of an
    allotment that changed since.
    """

    job_id: int
    spec: JobSpec
    tree: EvoTree
    submit_s: float
    phase: int = 0
    left: float = 0.0
    idle_since_s: float | None = None
    pause_s: float = 0.0
    step: int = 0
    version: int = 0

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


def _progress(job: EvolvingJob, steps: int | None,
              dt: float) -> tuple[int, float, float, int, bool]:
    """The job's program after ``steps`` more steps of ``dt`` seconds on its nodes (``None``:
    until it ends), without changing the job: ``(phase, work left in it, pause left, steps
    taken, a phase has changed)``; ``phase`` is the number of phases once the program has
    ended (then at the last step taken).

    One step (the model of the module docstring): the pause still to be spent stops the job
    for up to ``dt``; for the rest of the step a tree phase gets one node-second a second
    from every node held, any other phase one second a second; a phase that ends within the
    step hands the work the step did beyond it to the next phase.  Whole steps within a
    phase are taken at once when their work is a whole number (``dt = 1`` s): the work left
    and each step's work are then exact in floating point, so the jump gives the same floats,
    and so the same step of every phase change, as taking the steps one by one.
    """
    phases = job.tree.phases()
    phase, left, pause = job.phase, job.left, job.pause_s
    held = len(job.nodes)
    taken, changed = 0, False
    while steps is None or taken < steps:
        rate = held if phases[phase][0] == "tree" else 1
        if pause == 0.0:
            work = rate * dt
            if work.is_integer() and 1e-9 < left < 2.0**52:
                # the whole steps before the one that ends the phase: left - j * work > 1e-9
                skip = int((left - 1e-9) // work)
                while skip > 0 and not left - skip * work > 1e-9:
                    skip -= 1
                while left - (skip + 1) * work > 1e-9:
                    skip += 1
                if steps is not None:
                    skip = min(skip, steps - taken)
                if skip:
                    left -= skip * work
                    taken += skip
                    continue
        stopped = min(dt, pause)
        pause -= stopped
        left -= rate * (dt - stopped)
        taken += 1
        while left <= 1e-9:
            phase += 1
            if phase == len(phases):
                return phase, left, pause, taken, changed
            left += phases[phase][1]
            changed = True
    return phase, left, pause, taken, changed


# Events of the evolving mode besides the simulator's (handled in the order they were pushed
# at one time: they commute).
_MONITOR, _CALL = 10, 11


class EvolvingSimulator(Simulator):
    """The :class:`~scheduler.simulate.Simulator` in evolving mode: jobs run the ``evotree``
    program, evolving ones under the runtime's monitor (module docstring).

    The engine is the simulator's: one event heap, the same policy calls, the same check of
    a decision (:class:`~scheduler._exceptions.InvalidDecisionError` for a refused one), the
    same records and metrics (:meth:`~scheduler.simulate.Simulator.run` returns a
    :class:`~scheduler.records.SimResult`).  What the mode changes:

    * time moves in steps of ``monitor.decide_s`` (1 s): every event falls on a step, a
      submission on the first step at or after it;
    * a **monitor event** per running evolving job every step from ``monitor.standby_s``
      after its start: it asks for one node or releases one (module docstring); a request or
      a release is an event that calls the policy at once;
    * a job's progress is counted per step (:func:`_progress`); its end is an event at the
      step its last phase ends, computed at its start and again at every resize;
    * the policy is called at every event and ``config.interval_s`` (5 s) after its last
      call, never skipped; a shrink's nodes are free at once and the policy is called again
      at the next step (the job's reply), as it is after a malleable job's start (its
      ``APGAS-Ready``, on the next step); an evolving job takes grants from its start;
    * a resize (a grant or grow, a shrink, a release) stops the job's progress for its
      cost; an order is given and carried out at once (the transitions of
      :class:`~scheduler.job_state.JobState`, one after the other), so none is ever in
      flight, and the monitor's requests and releases are the real scheduler's
      transitions too (``take_request``, ``release``).

    Args:
        jobs: the batch (fresh :class:`EvolvingJob` objects, distinct ``job_id``; they are
            filled in).
        algorithm: the policy object (:func:`scheduler.algorithms.make`).
        config: cluster size, the policy's period and the bounded-slowdown threshold (the
            other fields of :class:`~scheduler.simulate.SimConfig` are not used).
        monitor: the runtime monitor's delays.
        costs: resize durations.

    Raises:
        ValueError: two jobs with one ``job_id``, or ``monitor.decide_s <= 0``.
    """

    _every_tick = True  # the period restarts at every call: no call may be skipped

    def __init__(self, jobs: Sequence[EvolvingJob], algorithm: Any, config: SimConfig,
                 monitor: MonitorConfig, costs: ResizeCostModel) -> None:
        if len({job.job_id for job in jobs}) != len(jobs):
            raise ValueError("the jobs' job_id must be distinct")
        if not monitor.decide_s > 0:
            raise ValueError(f"monitor.decide_s must be > 0 s, got {monitor.decide_s}")
        self.config = config
        self.algorithm = algorithm
        self.monitor = monitor
        self.costs = costs
        self._jobs = list(jobs)  # type: ignore[arg-type]

    # the clock: steps of decide_s, the period counted from the last call

    def _step(self, time_s: float) -> int:
        """The step index of a time that falls on a step."""
        return round(time_s / self.monitor.decide_s)

    def _submit_time(self, job: JobState) -> float:
        """The first step at or after the job's submission (within 1 ns)."""
        dt = self.monitor.decide_s
        k = max(0, math.ceil(job.submit_s / dt))
        while k > 0 and job.submit_s <= (k - 1) * dt + 1e-9:
            k -= 1
        while not job.submit_s <= k * dt + 1e-9:
            k += 1
        return k * dt

    def _next_tick(self, tick: int, now: float, last_run: float,
                   wake: float | None) -> tuple[float, int, int]:
        """The first step ``interval_s`` (within 1 ns) or more after the last call."""
        dt, period = self.monitor.decide_s, self.config.interval_s
        k = self._step(now)
        if last_run > -math.inf:
            k = max(k, self._step(last_run) + 1)
        while not k * dt - last_run >= period - 1e-9:
            k += 1
        return k * dt, -1, tick

    # the jobs' progress

    def _sync(self, job: EvolvingJob, step: int) -> None:
        """Bring the job's program to ``step`` (a phase change clears its idle time)."""
        if step > job.step:
            job.phase, job.left, job.pause_s, _, changed = _progress(
                job, step - job.step, self.monitor.decide_s)
            job.step = step
            if changed:
                job.idle_since_s = None

    def _reschedule_end(self, job: EvolvingJob) -> None:
        """Push the job's end event for its nodes and pause now (the older one is void)."""
        _, _, _, taken, _ = _progress(job, None, self.monitor.decide_s)
        job.version += 1
        self._push((job.step + taken) * self.monitor.decide_s, _END, job)

    # events

    def _handle(self, kind: int, job: EvolvingJob, version: int,  # type: ignore[override]
                now: float) -> bool:
        if kind == _CALL:
            return True
        if kind == _MONITOR:
            return job.job_id in self._running and self._sample(job, now)
        return super()._handle(kind, job, version, now)  # type: ignore[arg-type]

    def _sample(self, job: EvolvingJob, now: float) -> bool:
        """The monitor's decision at ``now``; ``True`` when it asked for or released a node."""
        step = self._step(now)
        self._sync(job, step)
        if job.phase == len(job.tree.phases()):
            return False  # the program ended at this step: its end event is due now
        self._push((step + 1) * self.monitor.decide_s, _MONITOR, job)
        want, have = job.demand(), len(job.nodes)
        if have < want:
            job.idle_since_s = None
            if job.requested == 0 and job.take_request() is None:
                self._refresh(job)  # type: ignore[arg-type]
                return True
            return False
        if have == want:
            job.idle_since_s = None
            return False
        if job.idle_since_s is None:
            job.idle_since_s = now
        if now - job.idle_since_s < self.monitor.idle_s:
            return False
        host = job.nodes[-1]
        job.release(now, host)
        self._free.add(host)
        self._free_changed()
        _pause(job, self.costs.shrink_s(1))
        self._refresh(job)  # type: ignore[arg-type]
        self._reschedule_end(job)
        return True

    # decisions

    def _apply(self, decision: Decision, now: float) -> None:
        job = check_decision(decision, self._by_id, self._free,  # type: ignore[type-var]
                             self.algorithm.name)
        assert isinstance(job, EvolvingJob)
        dt, step = self.monitor.decide_s, self._step(now)
        if isinstance(decision, Start):
            del self._waiting[job.job_id]
            self._free.difference_update(decision.nodes)
            self._free_changed()
            job.start(now, decision.nodes, elastic=job.spec.job_class in _ELASTIC)
            job.step, job.phase, job.left = step, 0, job.tree.phases()[0][1]
            self._running[job.job_id] = job  # type: ignore[assignment]
            if job.spec.job_class is JobClass.EVOLVING:
                job.ready = True
                first = step + 1  # the monitors of a step sample before its policy call
                while first * dt - job.start_s < self.monitor.standby_s:
                    first += 1
                self._push(first * dt, _MONITOR, job)
            elif job.spec.job_class is JobClass.MALLEABLE:
                self._push((step + 1) * dt, _READY, job)
            self._refresh(job)  # type: ignore[arg-type]
            self._reschedule_end(job)
            return
        self._sync(job, step)
        # an order reaches the job at once: it is given and carried out at ``now``
        if isinstance(decision, Shrink):
            gone, _ = job.shrink_done(now, job.order_shrink(now, decision.count))
            self._free.update(gone)
            self._free_changed()
            _pause(job, self.costs.shrink_s(decision.count))
            self._push((step + 1) * dt, _CALL, job)
        else:  # Grow: check_decision accepts nothing else
            self._free.difference_update(decision.nodes)
            self._free_changed()
            job.order_grow(now, decision.nodes)
            job.grant(decision.nodes)
            job.grow_done()
            _pause(job, self.costs.grow_s(len(decision.nodes)))
        self._refresh(job)  # type: ignore[arg-type]
        self._reschedule_end(job)


def simulate_evolving(jobs: Sequence[EvolvingJob], algorithm: str, *, total_nodes: int = 10,
                      interval_s: float = 5.0, monitor: MonitorConfig | None = None,
                      costs: ResizeCostModel | None = None, **options: Any) -> dict[str, Any]:
    """Run one batch under one algorithm, in the simulator's evolving mode
    (:class:`EvolvingSimulator`).

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
        SimulationError: jobs wait on an idle cluster and the algorithm starts nothing.
    """
    for job in jobs:
        if problem := job.spec.fits(total_nodes):
            raise ValueError(problem)
    done = list(jobs)
    result = EvolvingSimulator(done, make(algorithm, **options),
                               SimConfig(total_nodes=total_nodes, interval_s=interval_s),
                               monitor or MonitorConfig(), costs or ResizeCostModel()).run()
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
