"""A discrete-event simulator that runs the scheduling algorithms in simulated time.

The simulator is the mechanism around a policy: it keeps the cluster state, builds a
:class:`~scheduler.algorithms.base.View` at each decision point, calls the *same* algorithm
object a real scheduler would call, checks and applies the decisions, and advances a
simulated clock.  No process, socket or real clock is involved.

::

    event heap (submit, ready, resize done, end) ──┐
    periodic tick every interval_s (5 s), skipped  │
      while the last answer cannot change ─────────┤
                                                   ▼
                       handle every event due at now_s (jobs queue, end, become ready…)
                                                   ▼
                       View(now_s, free, running, waiting) ─► algorithm.decide(view)
                                                   ▼
                       apply Start / Shrink / Grow ─► new events (end, ready, resize done)

Model of a job (see :mod:`scheduler.model` for the numbers):

* A job on ``n`` nodes progresses at ``1 / t(n)`` of its work a second, ``t`` its
  :class:`~scheduler.model.ScalingCurve`; it ends when its remaining work reaches 0.
* A malleable job announces ``APGAS-Ready`` ``ready_s`` (0.4 s) after its start; rigid and
  moldable jobs never do.  While an order is in flight the job is not ready.
* A resize order at ``tau`` stops progress until ``tau + cost`` (:class:`ResizeCostModel`);
  then the job goes on at its new rate.  Grown nodes belong to the job from ``tau``; shrunk
  nodes stay with it until ``tau + cost`` (the job's reply), then are free.  The job releases
  its most recently added nodes first and never its first node (place 0's host).
* The algorithm is called as the Java scheduler calls it: at every tick (``k * interval_s``,
  5 s) while jobs wait or run, and at every other event time (submission, end, readiness,
  resize done), once per distinct time after all events of that time are handled.
* Event-driven: the loop jumps from one event time to the next and skips the ticks whose
  call cannot change anything: no event has changed the state since the last call, that call
  answered no decision, and the tick comes before the algorithm's ``next_change_s`` (the
  first time its answer could change with the clock alone: a cool-down that ends, a running
  job passing its expected end; :func:`~scheduler.algorithms.base.next_change_s`).  Ticks
  are kept where they change an outcome (the first tick after a change, a cool-down's end),
  so the calls that remain happen at the same times, with the same answers, as with a call
  at every tick: schedules are identical, only ``decide_calls`` is smaller.  Idle stretches
  and long runs of unchanging queues cost nothing.
* A job that can never fit the cluster (:meth:`JobSpec.fits`,
  :func:`scheduler.resources.cores_refusal`) is refused at submission and counted in
  ``refused``.  Jobs are not killed at their required time.
* Cores (``cores_per_node``): the nodes' cores are counted by the real scheduler's
  :class:`~scheduler.resources.CoreLedger`, the policy sees them in ``View.free_cores`` and a
  job asking for cores takes the same cores as it would there.  A ``#CORES n`` job runs at
  its curve's one-node time wherever it is placed (an SWF job's run time is that of its
  processors); a ``#CORES_PER_NODE`` job scales with its node count.
* Co-location (``colocate_bound``; :mod:`scheduler.colocation`): a ``#COLOCATE yes`` job may
  take cores co-locatable jobs hold (``View.shareable_cores``); each job's duty cycle is its
  program's (``duty``, known from its start); a job on shared cores runs slower by the beta
  model, ``T_N = T_1 (1 + beta (rho_N - rho_1))``, re-evaluated whenever the jobs on its
  cores change; a shared core whose duty cycles sum past the bound is separated as the real
  scheduler does (:func:`scheduler.colocation.separations`): a malleable job on it is moved
  (grown onto free cores, then given the named shrink off the shared node) or shrunk off it;
  rigid ones are guarded at their start instead (a rigid newcomer the model says sharing
  would make late is shown to the policy as exclusive).  The result's ``colocation`` says
  which beta (value and source) and counts separations and moves.  Without the bound none
  of this runs and every figure is what it was.
* Contention (``contention``, off by default): a core job's time is multiplied by a factor
  fixed at its start from its layout: its shape (``shape``), whether it is pinned (``pin``),
  spread over nodes, on one socket a node (``task_groups``, ``sockets_per_node``) and how
  many memory-bound cores share its socket (:mod:`scheduler.contention`).  A grow or shrink
  keeps the factor of the start.

A decision, a resize done and an end change a job only through the transitions of
:class:`~scheduler.job_state.JobState` (``start``, ``order_grow`` and ``grant``,
``order_shrink``, ``grow_done`` / ``shrink_done`` at the resize-done event, ``end``), the
ones the real scheduler calls, so both count shrinks, grows and grants alike.  The result of
a run (:class:`~scheduler.records.SimResult`) is computed from the jobs' records by
:func:`scheduler.metrics.result_from_records`, as for a real run.

Evolving jobs are simulated by this engine in its evolving mode
(:class:`scheduler.evolving_simulation.EvolvingSimulator`, a subclass that changes the job
model only: ``evotree`` jobs, a monitor event per evolving job every second, the period
counted from the last call; its hooks here are :meth:`Simulator._submit_time`,
:meth:`Simulator._next_tick`, :meth:`Simulator._handle` and :meth:`Simulator._apply`).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ._exceptions import SimulationError
from .algorithms import make
from .algorithms.base import (
    DEFAULT_COOLDOWN_S,
    Algorithm,
    Decision,
    Grow,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    next_change_s,
    sorted_nodes,
)
from .contention import ContentionModel, layout_of
from .job_state import JobState, LoadSample, check_decision
from .jobs import BatchEntry, JobClass, JobSpec
from .metrics import result_from_records
from .model import ResizeCostModel, RuntimeModel, ScalingCurve
from .records import JobRecord, SimResult
from . import colocation as co
from .resources import CoreLedger, ResourceGraph, cores_refusal, start_counts
from .workload import Workload

__all__ = [
    "JobRecord",
    "SimConfig",
    "SimResult",
    "Simulator",
    "result_from_records",
    "simulate",
]

@dataclass(frozen=True)
class SimConfig:
    """Simulation parameters.

    Attributes:
        total_nodes: cluster size (nodes), named ``n1`` … ``nN`` unless ``node_names``.
        interval_s: period of the algorithm's runs (seconds; the Java scheduler's 5 s).
        ready_s: delay from a malleable job's start to its ``APGAS-Ready`` (seconds).
        cooldown_s: per-job order cool-down given to algorithms that take one (seconds).
        costs: resize durations (seconds the job makes no progress), for every job not in
            ``job_costs``.
        job_costs: resize durations of particular programs: ``(program, size)`` (the
            labels of :attr:`~scheduler.jobs.JobSpec.program` and ``size``) -> costs; a
            rescale that moves a large grid costs more than one that moves a small grid
            (Bhosale et al. 2024 model rescale overhead from their jobs' measurements, like
            their run times).
        bsld_threshold_s: bounded-slowdown threshold (seconds).
        run_on_events: also run the algorithm on events, not only on ticks.
        node_names: explicit node names (length ``total_nodes``).
        algorithm_options: extra keyword options for an algorithm given by name
            (e.g. ``{"rescale_gap_s": 180, "keep_free": 1}``), dropped by classes that do not
            take them (:func:`scheduler.algorithms.make`).
        cores_per_node: cores of each node (``simulate --cores-per-node``), or ``None``:
            each node one slot (:mod:`scheduler.resources`).
        colocate_bound: the most the duty cycles of the jobs on one core may sum to
            (:mod:`scheduler.colocation`), or ``None``: no co-location (needs
            ``cores_per_node``).
        duty: program label -> the duty cycle of its jobs in [0, 1] (1.0 when not given:
            CPU-bound).
        beta: the beta model's coefficient, or ``None``: :func:`scheduler.colocation.read_beta`.
        sockets_per_node: sockets of each node (its cores split evenly among them, core
            ``j`` on socket ``j // (cores_per_node / sockets)``); used by ``task_groups``
            and ``contention``.
        task_groups: each node's share of a ``#CORES`` job taken on one socket where one
            has room (:meth:`~scheduler.resources.CoreLedger.take`); default off.
        shape: the shape policy jobs are laid by (:func:`scheduler.resources.shape`),
            read by ``contention`` only.
        pin: whether jobs' places are bound to their cores (``serve --no-pin`` is
            ``False``), read by ``contention`` only.
        contention: a :class:`~scheduler.contention.ContentionModel`: each ``#CORES`` or
            ``#CORES_PER_NODE`` job runs its factor times its curve's time, fixed at its
            start; ``None`` (default): every job at its curve's speed.
    """

    total_nodes: int = 32
    interval_s: float = 5.0
    ready_s: float = 0.4
    cooldown_s: float = DEFAULT_COOLDOWN_S
    costs: ResizeCostModel = field(default_factory=ResizeCostModel)
    job_costs: Mapping[tuple[str | None, int | str | None], ResizeCostModel] = field(
        default_factory=dict)
    bsld_threshold_s: float = 10.0
    run_on_events: bool = True
    node_names: tuple[str, ...] | None = None
    algorithm_options: Mapping[str, Any] = field(default_factory=dict)
    cores_per_node: int | None = None
    colocate_bound: float | None = None
    duty: Mapping[str, float] = field(default_factory=dict)
    beta: float | None = None

    sockets_per_node: int = 1
    task_groups: bool = False
    shape: str = "scale"
    pin: bool = True
    contention: ContentionModel | None = None

    def __post_init__(self) -> None:
        if self.colocate_bound is not None and not self.colocate_bound > 0:
            raise ValueError(f"colocate_bound must be > 0, got {self.colocate_bound}")
        if self.sockets_per_node < 1 or (self.cores_per_node is not None
                                         and self.cores_per_node % self.sockets_per_node):
            raise ValueError(f"sockets_per_node must be >= 1 and divide cores_per_node, got "
                             f"{self.sockets_per_node}")
        if self.cores_per_node is not None and self.cores_per_node < 1:
            raise ValueError(f"cores_per_node must be >= 1, got {self.cores_per_node}")
        if self.total_nodes < 1:
            raise ValueError(f"total_nodes must be >= 1, got {self.total_nodes}")
        if not self.interval_s > 0:
            raise ValueError(f"interval_s must be > 0 s, got {self.interval_s}")
        if self.ready_s < 0 or self.cooldown_s < 0 or self.bsld_threshold_s <= 0:
            raise ValueError("ready_s and cooldown_s must be >= 0 s, bsld_threshold_s > 0 s")
        if self.node_names is not None and len(set(self.node_names)) != self.total_nodes:
            raise ValueError("node_names must be total_nodes distinct names")

    def nodes(self) -> tuple[str, ...]:
        """The node names."""
        return self.node_names or tuple(f"n{i}" for i in range(1, self.total_nodes + 1))

    def graph(self) -> ResourceGraph:
        """The nodes and their cores."""
        if self.cores_per_node is None:
            return ResourceGraph.whole_nodes(self.nodes())
        graph = ResourceGraph.counted({n: self.cores_per_node for n in self.nodes()})
        if self.sockets_per_node == 1:
            return graph
        per = self.cores_per_node // self.sockets_per_node
        socket = tuple(j // per for j in range(self.cores_per_node))
        return ResourceGraph(graph.cpus, {n: socket for n in self.nodes()})

    def costs_of(self, spec: JobSpec) -> ResizeCostModel:
        """The resize costs of a job: ``job_costs`` for its ``(program, size)``, else
        ``costs``."""
        return self.job_costs.get((spec.program, spec.size), self.costs)


def _first_tick(tick: int, time_s: float, interval_s: float) -> int:
    """The first period index ``k >= tick`` with ``k * interval_s >= time_s`` (-1 for inf).

    Computed as the tick-by-tick loop would find it (same float products), without the loop.
    """
    if time_s == math.inf:
        return -1
    k = max(tick, int(time_s // interval_s))
    while k * interval_s < time_s:
        k += 1
    while k > tick and (k - 1) * interval_s >= time_s:
        k -= 1
    return k


class _Versioned(Protocol):
    """A job whose events the heap holds: its id and the version of its end events."""

    job_id: int
    version: int


# Event kinds, in the order they are handled at one time.
_SUBMIT, _RESIZE_DONE, _READY, _END = 0, 1, 2, 3

#: The classes a simulated job may be resized in (once ready; ``JobState.elastic``).
_ELASTIC = frozenset({JobClass.MALLEABLE, JobClass.EVOLVING})


@dataclass(eq=False)
class _Job(JobState):
    """A job in simulated time: the shared state and transitions
    (:class:`~scheduler.job_state.JobState`) and its progress (the fraction of its work
    left, counted from ``progress_from``; ``pending_release``: the nodes a shrink in flight
    gives back; ``version`` voids the end events of an allotment that changed since;
    ``slow``: its contention factor, 1 without a model)."""

    job_id: int
    spec: JobSpec
    submit_s: float
    curve: ScalingCurve
    work_left: float = 1.0
    progress_from: float = 0.0
    pending_release: tuple[str, ...] = ()
    version: int = 0
    factor: float = 1.0  # the beta model's slowdown while it shares cores
    slow: float = 1.0  # the contention model's factor, fixed at its start


class Simulator:
    """Runs one algorithm on one workload in simulated time (module docstring).

    Args:
        algorithm: an :class:`~scheduler.algorithms.base.Algorithm` object, or its registry
            name (built with ``config.cooldown_s``).
        workload: the jobs and run-time model; or a sequence of :class:`BatchEntry` with
            ``model`` given.
        config: simulation parameters.
        model: run-time model when ``workload`` is a plain sequence of entries.

    Raises ``KeyError`` at construction when a job's ``(program, size)`` is not in the model.
    """

    def __init__(
        self,
        algorithm: Algorithm | str,
        workload: Workload | Sequence[BatchEntry],
        config: SimConfig | None = None,
        *,
        model: RuntimeModel | None = None,
    ) -> None:
        self.config = config or SimConfig()
        if isinstance(algorithm, str):
            algorithm = make(algorithm, **{"cooldown_s": self.config.cooldown_s,
                                           **self.config.algorithm_options})
        self.algorithm = algorithm
        if isinstance(workload, Workload):
            entries, model = workload.entries, workload.model
        else:
            entries = tuple(workload)
            if model is None:
                raise ValueError("give model= with a plain sequence of batch entries")
        ordered = sorted(entries, key=lambda e: e.submit_s)
        self._jobs = [
            _Job(i, e.spec, float(e.submit_s), model.curve(e.spec.program, e.spec.size))
            for i, e in enumerate(ordered, start=1)
        ]
        #: job name -> its contention factor (``config.contention`` set; filled by run).
        self.factors: dict[str, float] = {}

    # ---------------------------------------------------------------------------- run

    #: Private: call the algorithm at every period while jobs wait or run, as the first
    #: version of this simulator did (the regression check compares both loops).
    _every_tick: bool = False

    def run(self, progress: Callable[[int], None] | None = None) -> SimResult:
        """Simulate until every job has ended; return the metrics and the job records.

        The loop jumps from one event time to the next (module docstring).  A periodic call
        is skipped when it cannot change anything: no event has changed the state since the
        last call, that call answered no decision, and the algorithm's
        ``next_change_s`` (:func:`~scheduler.algorithms.base.next_change_s`) says its answer
        stays empty until later.  The calls that are made happen at the same times as with a
        call at every period, so schedules are identical; only ``decide_calls`` is smaller.

        Args:
            progress: called with a count of jobs newly done (ended or refused), every few
                hundred jobs and once at the end (for a progress bar); the counts add up to
                the number of jobs.

        Raises:
            InvalidDecisionError: the algorithm returned a decision the state forbids
                (:func:`~scheduler.algorithms.decisions.decision_problem`).
            SimulationError: jobs wait, nothing runs or is due, and nothing starts.
        """
        cfg = self.config
        self._free: set[str] = set(cfg.nodes())
        self._ledger = CoreLedger(cfg.graph(), self._free)
        self._bound = cfg.colocate_bound if cfg.cores_per_node is not None else None
        if self._bound is not None:
            self._beta, self._beta_source = ((cfg.beta, "given") if cfg.beta is not None
                                             else co.read_beta())
        self._separations = self._overloads = self._moves = 0
        self._overloaded: set[tuple[object, ...]] = set()
        self._moving: dict[object, tuple[str, str]] = {}  # job -> (shared node, target)
        self._moved: set[object] = set()  # a job is moved once
        self._sizes = self._ledger.graph.sizes()
        self._free_view: tuple[str, ...] | None = None
        self._cores_view: tuple[tuple[str, int], ...] = ()
        self._sizes_view: tuple[tuple[str, int], ...] = () if cfg.cores_per_node is None \
            else tuple((n, self._sizes[n]) for n in sorted_nodes(self._sizes))
        self._waiting: dict[int, WaitingJob] = {}
        self._running: dict[int, _Job] = {}
        self._running_view: dict[int, RunningJob] = {}
        self._refused: list[tuple[str, str]] = []
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = itertools.count()
        by_id = self._by_id = {job.job_id: job for job in self._jobs}
        for job in sorted(self._jobs, key=lambda j: (j.submit_s, j.job_id)):
            self._push(self._submit_time(job), _SUBMIT, job)
        skip = not self._every_tick and self._bound is None  # the guard moves with time
        tick = 0  # index of the next period not yet passed: its time is tick * interval
        now = 0.0
        calls = 0
        last_run = -math.inf
        quiet = False  # the last call answered nothing and no event has changed the state since
        wake = -math.inf  # while quiet: calls before this time would answer nothing
        self._progress = progress
        self._done = 0
        while self._heap or self._running or self._waiting:
            t_event = self._heap[0][0] if self._heap else math.inf
            if self._running or self._waiting:
                t_tick, next_tick, tick = self._next_tick(tick, now, last_run,
                                                          wake if skip and quiet else None)
            else:
                t_tick, next_tick = math.inf, -1
            now = min(t_event, t_tick)
            if now == math.inf:
                raise SimulationError(f"{self.algorithm.name}: jobs wait and nothing is due")
            handled = False
            heap = self._heap
            while heap and heap[0][0] <= now:
                _, _, kind, job_id, version = heapq.heappop(heap)
                handled |= self._handle(kind, by_id[job_id], version, now)
            if handled:
                quiet = False
            is_tick = now == t_tick
            if is_tick:
                tick = next_tick + 1
            if not ((is_tick and now != last_run) or (handled and cfg.run_on_events)):
                continue
            view = self._view(now)
            decisions = self.algorithm.decide(view)
            calls += 1
            last_run = now
            for decision in decisions:
                self._apply(decision, now)
            if self._bound is not None:
                decisions = decisions + self._separate(now)
            if decisions:
                quiet = False
                continue
            if skip:
                quiet = True
                wake = next_change_s(self.algorithm, view)
                wake -= 1e-9 * max(1.0, abs(wake)) if wake != math.inf else 0.0
            if (
                self._waiting
                and not self._running
                and len(self._free) == cfg.total_nodes
                and not any(kind != _SUBMIT for _, _, kind, _, _ in self._heap)
            ):
                names = ", ".join(job.spec.name for job in list(self._waiting.values())[:5])
                raise SimulationError(
                    f"{self.algorithm.name}: at {now:.1f} s the cluster is idle, jobs wait "
                    f"({names}) and the algorithm starts nothing"
                )
        if progress is not None and self._done:
            progress(self._done)
        return self._result(calls)

    def _next_tick(self, tick: int, now: float, last_run: float,
                   wake: float | None) -> tuple[float, int, int]:
        """The next periodic call: ``(time s, its period index, the first period not yet
        passed)``, the time ``inf`` when there is none.

        Periods are ``k * interval_s``; ``tick`` is the first one not yet passed, ``now`` the
        time of the last event handled, ``last_run`` that of the last call, and ``wake`` the
        time before which calls would answer nothing (``None``: no call may be skipped).
        """
        interval = self.config.interval_s
        if tick * interval < now:
            tick = _first_tick(tick, now, interval)
        next_tick = tick
        if wake is not None and wake > tick * interval:
            next_tick = _first_tick(tick, wake, interval)
        return (next_tick * interval if next_tick >= 0 else math.inf), next_tick, tick

    # ------------------------------------------------------------------------- events

    def _submit_time(self, job: JobState) -> float:
        """When the job's submission is handled (seconds): its submission time."""
        return job.submit_s

    def _push(self, time_s: float, kind: int, job: _Job | _Versioned) -> None:
        heapq.heappush(self._heap, (time_s, next(self._seq), kind, job.job_id, job.version))

    def _free_changed(self) -> None:
        self._free_view = None

    def _refresh(self, job: _Job) -> None:
        """Rebuild the running job's snapshot after its state changed."""
        self._running_view[job.job_id] = job.running_view()

    def _count_done(self) -> None:
        self._done += 1
        if self._done >= 256 and self._progress is not None:
            self._progress(self._done)
            self._done = 0

    def _handle(self, kind: int, job: _Job, version: int, now: float) -> bool:
        if kind == _SUBMIT:
            reason = (job.spec.fits(self.config.total_nodes)
                      or cores_refusal(job.spec, self._sizes))
            if reason is not None:
                self._refused.append((job.spec.name, reason))
                job.state = "refused"
                self._count_done()
                return False
            job.state = "waiting"
            self._waiting[job.job_id] = self._waiting_view(job)
            return True
        if job.job_id not in self._running:
            return False
        if kind == _END:
            if version != job.version:
                return False  # superseded by a resize
            del self._running[job.job_id]
            del self._running_view[job.job_id]
            self._ledger.release(job.job_id, job.end(now, "ended"))
            self._free_changed()
            self._count_done()
            self._recolocate(now)
            return True
        if kind == _READY:
            job.ready = True
            self._refresh(job)
            return True
        if kind == _RESIZE_DONE:
            if job.pending_release:
                freed, _ = job.shrink_done(now, job.pending_release)
                self._ledger.release(job.job_id, freed)
                self._free_changed()
                job.pending_release = ()
                self._recolocate(now)
            else:
                job.grow_done()
            self._refresh(job)
            return True
        raise AssertionError(kind)

    def _view(self, now: float) -> View:
        if self._free_view is None:
            self._free_view = tuple(sorted_nodes(self._free))
            if self.config.cores_per_node is not None:
                cores = self._ledger.free_counts()
                self._cores_view = tuple((n, cores[n]) for n in sorted_nodes(cores))
        return View(
            now,
            self._free_view,
            tuple(self._running_view.values()),
            tuple(self._waiting.values()),
            self.config.total_nodes,
            self._cores_view,
            self._sizes_view,
            *self._shareable_view(now),
        )

    # ------------------------------------------------------------------ co-location

    def _occupants(self, now: float) -> dict[object, co.Occupant]:
        """The running jobs as :mod:`scheduler.colocation` sees them (duty known from the
        start; the time left alone from the work left)."""
        out: dict[object, co.Occupant] = {}
        for job in self._running.values():
            width = self._width(job, len(job.nodes))
            left = job.work_left
            if now > job.progress_from:
                left -= (now - job.progress_from) / (job.curve(width) * job.factor * job.slow)
            out[job.job_id] = co.Occupant(
                duty=job.duty_cycle,
                colocate=job.spec.colocate, rigid=not job.elastic,
                required_s=job.spec.required_time_s, elapsed_s=now - job.start_s,
                alone_left_s=max(left, 0.0) * job.curve(width) * job.slow)
        return out

    def _shareable_view(self, now: float) -> tuple[tuple[tuple[str, int], ...],
                                                   tuple[tuple[str, float], ...]]:
        """``View.shareable_cores`` and ``View.shareable_room`` (empty without the bound)."""
        if self._bound is None:
            return (), ()
        rooms = co.rooms(self._ledger, self._occupants(now), self._bound, self._beta)
        order = sorted_nodes(rooms)
        return (tuple((n, len(rooms[n])) for n in order),
                tuple((n, min(rooms[n])) for n in order))

    def _recolocate(self, now: float) -> None:
        """Re-evaluate the beta model's slowdown of every running job (the jobs on some
        cores changed): a job whose factor changes goes on at its new rate from ``now``."""
        if self._bound is None:
            return
        occupants = self._occupants(now)
        for job in self._running.values():
            factor = co.job_factor(self._ledger, job.job_id, occupants, self._beta)
            if factor != job.factor:
                self._advance(job, now)
                job.factor = factor
                self._schedule_end(job, len(job.nodes) - len(job.pending_release))

    def _waiting_view(self, job: _Job) -> WaitingJob:
        """A queued job as the policy sees it: a rigid ``#COLOCATE yes`` job that the model
        says sharing would push past its required time (:func:`scheduler.colocation.
        newcomer_fits`, its time alone known here) is shown as exclusive."""
        view = job.waiting_view()
        if (self._bound is None or not job.spec.colocate or job.spec.job_class in _ELASTIC
                or co.newcomer_fits(job.spec.required_time_s,
                                    job.curve(self._width(job, job.spec.lo)) * job.work_left,
                                    self.config.duty.get(job.spec.program or "", 1.0),
                                    self._bound, self._beta)):
            return view
        return replace(view, spec=replace(job.spec, colocate=False))

    def _separate(self, now: float) -> list[Decision]:
        """Separate the shared cores whose duty cycles sum past the bound, as the real
        scheduler does (:func:`scheduler.colocation.separations`): a move's grow onto free
        cores, a named shrink off the shared node (its node leaves at the resize done), or
        an overload of rigid jobs, counted once."""
        out: list[Decision] = []
        running = self._running
        movers = {i: co.mover(j, may_move=i not in self._moved) for i, j in running.items()}
        steps = co.plan_separations(self._ledger, self._occupants(now), self._bound, movers,
                                    self._moving, {i: j.nodes for i, j in running.items()})
        for step in steps:
            if step.action == "overload":
                if step.users not in self._overloaded:
                    self._overloaded.add(step.users)
                    self._overloads += 1
                continue
            decision: Decision
            if step.action == "grow":
                assert step.target is not None
                decision = Grow(step.job, (step.target,))  # type: ignore[arg-type]
                self._apply(decision, now, also=step.target)
                self._moves += 1
                self._moved.add(step.job)
                self._moving[step.job] = (step.node, step.target)
            else:
                decision = Shrink(step.job, 1)  # type: ignore[arg-type]
                self._moving.pop(step.job, None)
                self._apply(decision, now, named=step.node)
                self._separations += 1
            out.append(decision)
        return out

    def _width(self, job: _Job, nodes: int) -> int:
        """The node count a job's curve is read at: 1 for a ``#CORES`` job (module
        docstring), else its nodes."""
        return 1 if job.spec.cores is not None else nodes

    # ---------------------------------------------------------------------- decisions

    def _advance(self, job: _Job, now: float) -> None:
        if now > job.progress_from:
            job.work_left -= ((now - job.progress_from)
                              / (job.curve(self._width(job, len(job.nodes))) * job.factor
                                 * job.slow))
            job.work_left = max(job.work_left, 0.0)
            job.progress_from = now

    def _schedule_end(self, job: _Job, nodes_after: int) -> None:
        job.version += 1
        end = (job.progress_from
               + job.work_left * job.curve(self._width(job, nodes_after)) * job.factor
               * job.slow)
        self._push(end, _END, job)

    def _apply(self, decision: Decision, now: float, *, also: str | None = None,
               named: str | None = None) -> None:
        """Apply ``decision`` at ``now`` (s); a separation's grow may take ``also`` (a node
        with free cores, not wholly free), its shrink gives back ``named``."""
        cfg = self.config
        room = None
        if job_asks_cores(decision, self._by_id):
            room = self._ledger.free_counts()
            spec = self._by_id[decision.job_id].spec  # type: ignore[union-attr]
            if self._bound is not None and spec.colocate:
                room = co.start_room(room, dict(self._shareable_view(now)[0]))
        free: set[str] = self._free
        if self._bound is not None and isinstance(decision, Grow):
            target = self._by_id.get(decision.job_id)
            per_node = target.spec.cores_per_node if target is not None else None
            if target is not None and target.spec.colocate and per_node is not None:
                free = free | co.grow_targets(self._ledger, target.job_id, per_node,
                                              self._occupants(now), self._bound, self._beta)
            if also is not None:
                free = free | {also}
        job = check_decision(decision, self._by_id, free, self.algorithm.name, room)
        if isinstance(decision, Start):
            nodes = tuple(decision.nodes)
            del self._waiting[job.job_id]
            counts, _ = start_counts(job.spec, nodes, decision.cores)
            if counts and job.spec.colocate and self._bound is not None:
                job.start_cores = co.acquire_colocated(
                    self._ledger, job.job_id, nodes, counts, self._occupants(now), self._bound,
                    self._beta)
            else:
                job.start_cores = self._ledger.acquire(job.job_id, nodes, counts,
                                                          cfg.task_groups)
            self._free_changed()
            if cfg.contention is not None and job.start_cores:
                job.slow = self._contention(job)
            job.start(now, nodes, elastic=job.spec.job_class in _ELASTIC)
            job.progress_from = now
            if self._bound is not None:  # measured from its start (module docstring)
                job.load = LoadSample(self.config.duty.get(job.spec.program or "", 1.0), 0.0,
                                      None, None, now)
            self._running[job.job_id] = job
            self._refresh(job)
            self._schedule_end(job, len(nodes))
            if job.spec.is_malleable:
                self._push(now + cfg.ready_s, _READY, job)
            self._recolocate(now)
        elif isinstance(decision, Shrink):
            count = decision.count
            self._advance(job, now)
            cost = cfg.costs_of(job.spec).shrink_s(count)
            job.progress_from = now + cost
            # the job keeps the nodes until its reply (the resize done)
            job.pending_release = job.order_shrink(now, count)
            if named is not None:  # a named shrink (separation): that node, not the newest
                job.pending_release = (named,)
            self._refresh(job)
            self._schedule_end(job, len(job.nodes) - count)
            self._push(now + cost, _RESIZE_DONE, job)
        else:  # Grow: decision_problem accepts nothing else
            nodes = tuple(decision.nodes)
            self._advance(job, now)
            cost = cfg.costs_of(job.spec).grow_s(len(nodes))
            job.progress_from = now + cost
            per_node = job.spec.cores_per_node
            counts = [per_node] * len(nodes) if per_node else []
            if counts and job.spec.colocate and self._bound is not None:
                co.acquire_colocated(self._ledger, job.job_id, nodes, counts,
                                     self._occupants(now), self._bound, self._beta)
            else:
                self._ledger.acquire(job.job_id, nodes, counts)
            self._free_changed()
            job.order_grow(now, nodes)
            job.grant(nodes)
            self._refresh(job)
            self._schedule_end(job, len(job.nodes))
            self._push(now + cost, _RESIZE_DONE, job)
            self._recolocate(now)

    def _contention(self, job: _Job) -> float:
        """The contention factor of a core job that has just taken its cores (module
        docstring of :mod:`scheduler.contention`); kept in :attr:`factors` by name."""
        cfg, model = self.config, self.config.contention
        assert model is not None
        others = {jid: (model.is_memory(other.spec), self._ledger.cores_of(jid))
                  for jid, other in self._running.items() if jid != job.job_id}
        layout = layout_of(job.spec, dict(job.start_cores), others,
                           self._ledger.graph.sockets, cfg.shape, cfg.pin,
                           model.is_memory(job.spec))
        factor = model.factor(model.kind_of(job.spec), layout)
        self.factors[job.spec.name] = factor
        return factor

    # ------------------------------------------------------------------------ results

    def _result(self, calls: int) -> SimResult:
        cfg = self.config
        records = tuple(job.record() for job in self._jobs if not math.isnan(job.end_s))
        result = result_from_records(records, algorithm=self.algorithm.name,
                                     total_nodes=cfg.total_nodes, refused=self._refused,
                                     bsld_threshold_s=cfg.bsld_threshold_s, decide_calls=calls)
        if self._bound is None:
            return result
        return replace(result, colocation={
            "bound": self._bound, "beta": self._beta, "beta_source": self._beta_source,
            "separations": self._separations, "moves": self._moves,
            "overloads": self._overloads})


def job_asks_cores(decision: object, jobs: Mapping[int, JobState]) -> bool:
    """Whether ``decision`` names a job asking for cores (its check then needs the free
    cores; a node job's check needs the free nodes only)."""
    job = jobs.get(getattr(decision, "job_id", None))  # type: ignore[arg-type]
    return job is not None and job.spec.asks_cores


def simulate(
    algorithm: Algorithm | str,
    workload: Workload,
    config: SimConfig | None = None,
) -> SimResult:
    """Run one simulation: ``Simulator(algorithm, workload, config).run()``."""
    return Simulator(algorithm, workload, config).run()

