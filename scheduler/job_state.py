"""The state of a job as every scheduler keeps it, and the one check of a decision against it.

The real scheduler (:class:`scheduler.state.ServerJob`), the simulator
(:class:`scheduler.simulate.Simulator`) and the evolving simulation
(:class:`scheduler.evolving_simulation.EvolvingJob`) each keep more about a job than the others (a
process tree, a scaling curve, a task tree), but they answer three questions the same way,
here, once:

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

:class:`JobState` is a mix-in: a class that keeps a job inherits it and has the attributes
it reads (``job_id``, ``spec``, ``state``, ``submit_s``, ``nodes``, ``start_s``, ``end_s``,
``allotment``, ``shrinks``, ``grows``, ``ready``, ``busy``, ``last_order_s``); the
others have defaults here that a class overrides where it keeps them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TypeVar

from ._exceptions import InvalidDecisionError
from .algorithms.base import Grow, RunningJob, Shrink, Start, WaitingJob
from .algorithms.decisions import decision_problem
from .jobs import JobSpec
from .records import JobRecord

__all__ = ["JobState", "check_decision", "decision_refusal"]


class JobState:
    """What every scheduler knows of a job, and what follows from it (module docstring).

    Attributes read here (a subclass keeps them; the class-level values are the defaults of
    a scheduler that does not track them):
        job_id, spec, submit_s (s): the job.
        state: ``"waiting"`` (queued), ``"running"`` (holds nodes), or anything else
            (pending, ended, failed, refused).
        nodes: the nodes it holds, its first node first; start_s, end_s (s).
        allotment: ``(time s, nodes held from then on)`` from its start; shrinks, grows.
        elastic: the scheduler may resize it (default ``True``: ``ready`` alone decides).
        ready: it has announced ``APGAS-Ready``; busy: an order to it is in flight.
        reachable: no order to it has failed (default ``True``).
        ending: why the scheduler is ending it, or ``""`` (default).
        releasing: nodes a shrink in flight will give back (default 0).
        requested: nodes an evolving job asked for and has not received (default 0).
        last_order_s: when it was last ordered (s), or ``None``.
    """

    job_id: int
    spec: JobSpec
    submit_s: float
    state: str
    nodes: list[str]
    start_s: float
    end_s: float
    allotment: list[tuple[float, tuple[str, ...]]]
    shrinks: int
    grows: int
    ready: bool
    busy: bool
    last_order_s: float | None
    elastic: bool = True
    reachable: bool = True
    ending: str = ""
    releasing: int = 0
    requested: int = 0

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
            requested=self.requested)

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
            required_s=spec.required_time_s, priority=spec.priority)


J = TypeVar("J", bound=JobState)


def decision_refusal(decision: object, job: JobState | None, free: Collection[str]) -> str | None:
    """Why ``decision`` cannot be applied to ``job`` with the nodes ``free`` now, or ``None``.

    Args:
        decision: what a policy answered (a ``Start``, ``Shrink`` or ``Grow``; anything else
            is refused).
        job: the job it names, or ``None`` when there is no such job.
        free: the names of the free nodes (a set, for fast membership).

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
    )


def check_decision(decision: object, jobs: Mapping[int, J], free: Collection[str],
                   who: str) -> J:
    """The job ``decision`` names, once :func:`decision_refusal` accepts the decision.

    Args:
        decision: what the policy ``who`` answered.
        jobs: job id → job, every job the scheduler knows.
        free: the names of the free nodes.
        who: the policy's name, for the message.

    Raises:
        InvalidDecisionError: the decision cannot be applied; the message is
            ``"<who>: <decision>: <reason>"`` (``"<who>: <reason>"`` for what is no decision).
    """
    job = jobs.get(getattr(decision, "job_id", None))  # type: ignore[arg-type]
    problem = decision_refusal(decision, job, free)
    if problem is not None:
        if not isinstance(decision, (Start, Shrink, Grow)):
            raise InvalidDecisionError(f"{who}: {problem}")
        raise InvalidDecisionError(f"{who}: {decision}: {problem}")
    assert job is not None
    return job
