"""The state of a job as every scheduler keeps it, its transitions, and the one check of a
decision against it.

The real scheduler (:class:`scheduler.state.ServerJob`), the simulator
(:class:`scheduler.simulate.Simulator`) and the evolving simulation
(:class:`scheduler.evolving_simulation.EvolvingJob`) each keep more about a job than the others (a
process tree, a scaling curve, a task tree), but the state a decision changes is declared
once, here (:class:`JobState`, a dataclass they extend), and changed only by its transitions,
which all three call:

::

    pending/waiting ──start──► running ──end──► ended (done, failed, killed, cancelled …)
                                │   ▲
        order_grow (nodes are   │   │ grow_done (counts a grow, not for a grant)
        the job's at once;      ├───┤ grow_failed (the nodes it did not take go back)
        grant: an evolving      │   │
        job's request served)   │   │ shrink_done (the named nodes leave; counts a shrink)
        order_shrink ───────────┴───┤ shrink_failed (nothing leaves; not reachable)
                                    │ withdraw_order (never sent: the journal refused it)
        an evolving job's own lines, at any time it runs:
            take_request (one pending request for one node)
            release (a node it gives back; drops its pending request)

The real scheduler sends an order and hears its outcome later, on another thread
(:mod:`scheduler.orders`); the simulator hears it after the modelled resize time
(:mod:`scheduler.model`); the evolving simulation at once.  Each calls the same transitions in
the same order, so a :class:`~scheduler.records.JobRecord` counts the same things whoever made
it.  What a transition counts:

* ``grows``: grow orders the scheduler chose itself that the job carried out (``grow_done``
  of a malleable job);
* ``shrinks``: shrink orders the job carried out (``shrink_done``);
* ``requests``: an evolving job's requests taken (``take_request``); ``requests_served``:
  those granted, counted when the grant's grow order is given (``grant``); ``releases``:
  nodes it gave back by itself (``release``).  A grant is a served request and not a grow:
  the scheduler did not choose to resize the job, it answered the job
  (docs/design/scheduler-structure.md).

The state answers three more questions the same way for all three, once:

* **does it take orders now** (:attr:`JobState.takes_orders`): it may be resized
  (``elastic``), it has announced ``APGAS-Ready`` (``ready``), no order to it has failed
  (``reachable``), none is in flight (``busy``) and the scheduler is not ending it
  (``ending``);
* **what does the policy see** (:meth:`JobState.running_view`,
  :meth:`JobState.waiting_view`): the :class:`~scheduler.algorithms.base.RunningJob` and
  :class:`~scheduler.algorithms.base.WaitingJob` of a
  :class:`~scheduler.algorithms.base.View`;
* **may this decision be applied** (:func:`check_decision`, around
  :func:`~scheduler.algorithms.decisions.decision_problem`): the real scheduler logs a
  refused decision and goes on, a simulation raises
  :class:`~scheduler._exceptions.InvalidDecisionError`, for the same reason in the same
  words.

And one more, at the end: **what happened to it** (:meth:`JobState.record`, the only place a
:class:`~scheduler.records.JobRecord` is made from a job).

The clock is always given (``now``, seconds on the caller's clock): the same transitions run
in real and in simulated time.  No transition touches the pool of free nodes, the event log or
the journal: those are the caller's.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from ._exceptions import InvalidDecisionError
from .algorithms.base import Grow, RunningJob, Shrink, Start, WaitingJob
from .algorithms.decisions import decision_problem
from .jobs import JobClass, JobSpec
from .records import JobRecord

__all__ = ["JobState", "LoadSample", "check_decision", "decision_refusal"]


@dataclass(frozen=True)
class LoadSample:
    """One load sample a running job reported (its ``APGAS-Load`` line,
    docs/reference/protocol.md), as the scheduler keeps it (the last one only).

    Attributes:
        duty: the job's duty cycle over the window, in [0, 1]: CPU seconds of all its places
            / (window wall seconds x cores it holds), the share of wall time its cores
            compute rather than wait (Xie 2026, sparse-domain multiplexing).
        bytes_per_s: bytes sent between its places per second over the window (>= 0).
        gil: the GIL share GLB measured over its workers, in [0, 1], or ``None`` (no GLB).
        rss_bytes: resident memory of all its places (bytes), or ``None`` (not measured).
        at: when the scheduler received it (s on the scheduler's clock).
    """

    duty: float
    bytes_per_s: float
    gil: float | None
    rss_bytes: int | None
    at: float


@dataclass(eq=False, kw_only=True)
class JobState:
    """What every scheduler knows of a job, its transitions, and what follows (module
    docstring).

    A subclass declares the job's identity first, in the order its constructor takes it:
    ``job_id``, ``spec`` (:class:`~scheduler.jobs.JobSpec`) and ``submit_s`` (s), with what
    else it keeps; the fields here are keyword-only.

    Attributes:
        state: ``"pending"`` (not yet queued), ``"waiting"`` (queued), ``"running"`` (holds
            nodes), or an ended state (``"ended"`` in simulation; the real scheduler's
            ``done``, ``failed``, ``killed``, ``cancelled``; ``refused``).
        elastic: the scheduler may resize it (set by :meth:`start`).
        nodes: the nodes it holds, its first node first; start_s, end_s (s, NaN until then).
        allotment: ``(time s, nodes held from then on)`` from its start.
        ready: it has announced ``APGAS-Ready``; busy: an order to it is in flight.
        reachable: no order to it has failed (else it is treated as rigid).
        releasing: nodes a shrink in flight will give back.
        last_order_s: when it was last ordered (s), or ``None``.
        ending: why the scheduler is ending it, or ``""``.
        shrinks, grows: orders carried out (module docstring).
        requested: nodes an evolving job asked for and has not received (0 or 1);
            requests, requests_served, releases: its counts (module docstring).
        granted: the nodes of its last grant (a release of one of them waits until that
            grow has ended).
        start_cores: ``(node, core indices)`` it took at its start, a job asking for cores
            (set by the caller from its :class:`~scheduler.resources.CoreLedger`).
        load: the last :class:`LoadSample` the running job reported, or ``None`` (none
            yet, or the job does not measure its load).
    """

    if TYPE_CHECKING:  # declared by each subclass, in its constructor's order
        job_id: int
        spec: JobSpec
        submit_s: float

    state: str = "pending"
    elastic: bool = False
    nodes: list[str] = field(default_factory=list)
    start_s: float = math.nan
    end_s: float = math.nan
    allotment: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    ready: bool = False
    busy: bool = False
    reachable: bool = True
    releasing: int = 0
    last_order_s: float | None = None
    ending: str = ""
    shrinks: int = 0
    grows: int = 0
    requested: int = 0
    requests: int = 0
    requests_served: int = 0
    releases: int = 0
    granted: tuple[str, ...] = ()
    start_cores: tuple[tuple[str, tuple[int, ...]], ...] = ()
    load: LoadSample | None = None

    # ------------------------------------------------------------------ what it answers

    @property
    def evolving(self) -> bool:
        """The job is evolving (it asks for nodes and gives them back by itself)."""
        return self.spec.job_class is JobClass.EVOLVING

    @property
    def duty_cycle(self) -> float | None:
        """The job's last reported duty cycle in [0, 1] (:attr:`LoadSample.duty`), or
        ``None`` while it has reported none."""
        return self.load.duty if self.load is not None else None

    @property
    def takes_orders(self) -> bool:
        """The job may be sent a shrink or a grow now (module docstring)."""
        return (self.elastic and self.ready and self.reachable and not self.busy
                and not self.ending)

    def running_view(self) -> RunningJob:
        """The running job as a policy sees it."""
        return RunningJob(
            job_id=self.job_id, spec=self.spec, nodes=tuple(self.nodes),
            start_s=self.start_s, malleable_ready=self.takes_orders,
            last_order_s=self.last_order_s, releasing=self.releasing,
            requested=self.requested, duty=self.duty_cycle)

    def waiting_view(self) -> WaitingJob:
        """The waiting job as a policy sees it."""
        return WaitingJob(self.job_id, self.spec, self.submit_s)

    def record(self) -> JobRecord:
        """What happened to the job (it has started and ended; times in seconds)."""
        spec = self.spec
        return JobRecord(
            job_id=self.job_id, name=spec.name, job_class=spec.job_class.value,
            program=spec.program, size=spec.size, min_nodes=spec.lo, max_nodes=spec.hi,
            submit_s=self.submit_s, start_s=self.start_s, end_s=self.end_s,
            allotment=tuple(self.allotment), shrinks=self.shrinks, grows=self.grows,
            required_s=spec.required_time_s, priority=spec.priority,
            requests=self.requests, requests_served=self.requests_served,
            releases=self.releases, cores=self.start_cores)

    # ------------------------------------------------------------- start and end

    def _held(self, now: float) -> None:
        self.allotment.append((now, tuple(self.nodes)))

    def start(self, now: float, nodes: Sequence[str], *, elastic: bool) -> None:
        """The job starts at ``now`` (s) on ``nodes`` (its first node first, free, taken by
        the caller); ``elastic``: the scheduler may resize it."""
        self.state = "running"
        self.elastic = elastic
        self.nodes = list(nodes)
        self.start_s = now
        self._held(now)

    def end(self, now: float, final_state: str) -> list[str]:
        """The running job has ended at ``now`` (s), in ``final_state``; returns the nodes it
        held (the caller frees them).  An order in flight is void."""
        held = self.nodes
        self.state = final_state
        self.end_s = now
        self.nodes = []
        self._held(now)
        self.busy = False
        self.releasing = 0
        self.ready = False
        return held

    # ------------------------------------------------------------------ orders

    def order_grow(self, now: float, nodes: Sequence[str]) -> None:
        """A grow order adds ``nodes`` (free, taken by the caller) at ``now`` (s): they are
        the job's from the order on; it takes no other order until :meth:`grow_done` or
        :meth:`grow_failed`."""
        self.nodes.extend(nodes)
        self._held(now)
        self.busy = True
        self.last_order_s = now

    def grant(self, nodes: Sequence[str]) -> bool:
        """The grow order just given (:meth:`order_grow`) serves an evolving job's request;
        returns whether it did (``False``, nothing changed, for any other job)."""
        if not self.evolving:
            return False
        self.requested = 0
        self.requests_served += 1
        self.granted = tuple(nodes)
        return True

    def grow_done(self) -> None:
        """The job has taken the nodes of its grow order: it counts as a grow unless it was
        a grant (module docstring)."""
        self.busy = False
        if not self.evolving:
            self.grows += 1

    def grow_failed(self, now: float, returned: Sequence[str], *, reachable: bool) -> None:
        """The grow order failed at ``now`` (s): ``returned`` (nodes of the order) leave the
        job again (the caller frees them); ``reachable=False``: the job is treated as rigid
        from now on."""
        self.busy = False
        for node in returned:
            self.nodes.remove(node)
        self._held(now)
        if not reachable:
            self.reachable = False

    def order_shrink(self, now: float, count: int) -> tuple[str, ...]:
        """A shrink order asks for ``count`` nodes back at ``now`` (s); the job keeps them
        until :meth:`shrink_done`.  Returns the nodes a job gives back by the runtime's rule
        (its most recently added first, never its first node), which the simulations
        use; a real job names its own."""
        self.busy = True
        self.releasing = count
        self.last_order_s = now
        return tuple(self.nodes[-count:])

    def shrink_done(self, now: float, names: Sequence[str]) -> tuple[list[str], list[str]]:
        """The job has given back the nodes ``names`` at ``now`` (s): returns ``(freed,
        unknown)``: the names it held, which leave it (the caller frees them), and those it
        did not hold (a repeated name the second time)."""
        freed, unknown = [], []
        for name in names:
            if name in self.nodes:
                self.nodes.remove(name)
                freed.append(name)
            else:
                unknown.append(name)
        self.busy = False
        self.releasing = 0
        self.shrinks += 1
        self._held(now)
        return freed, unknown

    def shrink_failed(self) -> None:
        """The shrink order failed: no node leaves, and the job is treated as rigid from
        now on."""
        self.busy = False
        self.releasing = 0
        self.reachable = False

    def withdraw_order(self, added: Sequence[str] = (),
                       last_order_s: float | None = None) -> None:
        """Undo an order that was never sent: the job takes orders again, the nodes
        ``added`` by a grow leave it (the caller frees them) with their allotment step, and
        ``last_order_s`` is what it was before the order."""
        if added:
            del self.nodes[-len(added):]
            self.allotment.pop()
        self.busy = False
        self.releasing = 0
        self.last_order_s = last_order_s

    # --------------------------------------------------- an evolving job's own lines

    def take_request(self) -> str | None:
        """An evolving job asks for one more node: it becomes its pending request (one at a
        time, within its maximum).  Returns why it cannot (nothing changed), or ``None``."""
        if self.requested:
            return "a request of this job is already pending"
        if len(self.nodes) >= self.spec.hi:
            return f"the job holds {len(self.nodes)} nodes, its maximum"
        self.requested = 1
        self.requests += 1
        return None

    def release_refusal(self, host: str) -> str | None:
        """Why the job cannot give back ``host`` now, or ``None``: it must hold it, it may
        not be its first node (place 0's), nor a node whose grant is still in flight."""
        if host not in self.nodes:
            return f"the job does not hold {host!r}"
        if host == self.nodes[0]:
            return f"{host!r} is the job's first node (its place 0)"
        if self.busy and host in self.granted:
            return f"the grow that gives {host!r} to the job is in flight"
        return None

    def release(self, now: float, host: str) -> None:
        """The job gives back ``host`` at ``now`` (s) (the caller frees it); its pending
        request is dropped.

        Raises:
            ValueError: :meth:`release_refusal` refuses it; nothing changed.
        """
        problem = self.release_refusal(host)
        if problem is not None:
            raise ValueError(problem)
        self.nodes.remove(host)
        self._held(now)
        self.requested = 0
        self.releases += 1


J = TypeVar("J", bound=JobState)


def decision_refusal(decision: object, job: JobState | None, free: Collection[str],
                     free_cores: Mapping[str, int] | None = None) -> str | None:
    """Why ``decision`` cannot be applied to ``job`` with the nodes ``free`` now, or ``None``.

    Args:
        decision: what a policy answered (a ``Start``, ``Shrink`` or ``Grow``; anything else
            is refused).
        job: the job it names, or ``None`` when there is no such job.
        free: the names of the free nodes (a set, for fast membership).
        free_cores: node -> its free cores (:meth:`~scheduler.resources.CoreLedger.free_counts`),
            or ``None``: each free node is one core.

    Returns:
        The one-line reason of :func:`~scheduler.algorithms.decisions.decision_problem`, or
        ``None``.
    """
    running = job is not None and job.state == "running"
    return decision_problem(
        decision,
        spec=job.spec if job is not None else None,
        state=job.state if job is not None else None,
        held=len(job.nodes) if running else 0,  # type: ignore[union-attr]
        takes_orders=running and job.takes_orders,  # type: ignore[union-attr]
        free=free,
        free_cores=free_cores,
    )


def check_decision(decision: object, jobs: Mapping[int, J], free: Collection[str],
                   who: str, free_cores: Mapping[str, int] | None = None) -> J:
    """The job ``decision`` names, once :func:`decision_refusal` accepts the decision.

    Args:
        decision: what the policy ``who`` answered.
        jobs: job id → job, every job the scheduler knows.
        free: the names of the free nodes.
        who: the policy's name, for the message.
        free_cores: as :func:`decision_refusal`.

    Raises:
        InvalidDecisionError: the decision cannot be applied; the message is
            ``"<who>: <decision>: <reason>"`` (``"<who>: <reason>"`` for what is no decision).
    """
    job = jobs.get(getattr(decision, "job_id", None))  # type: ignore[arg-type]
    problem = decision_refusal(decision, job, free, free_cores)
    if problem is not None:
        if not isinstance(decision, (Start, Shrink, Grow)):
            raise InvalidDecisionError(f"{who}: {problem}")
        raise InvalidDecisionError(f"{who}: {decision}: {problem}")
    assert job is not None
    return job
