"""Serving evolving jobs' node requests: Java's rule and ours, alone or with malleable jobs.

An evolving job (:attr:`~scheduler.jobs.JobClass.EVOLVING`) asks for one more node at a time
(``Evolving;Request;1``) and gives nodes back by itself (``Evolving;Release;<host>``).  The
mechanism shows a pending request as ``RunningJob.requested`` (nodes asked for and not yet
given); a release has already freed its node before the policy runs.  A granted request is a
:class:`~.base.Grow` of one node, validated like every decision by
:func:`~.decisions.decision_problem`.  An evolving job is never shrunk by the scheduler.

* :class:`EvolvingEasy` (``evolving-easy``): the Java ElasticJobScheduler's
  ``EvolvingEasyBackfilling`` strategy (v0.2): before the queue, every pending request is
  served with one free node, at most one order per job per cool-down (60 s after its last
  resize), free nodes only; then EASY backfilling (Lifka 1995) for the queue.
* :class:`EvolvingSmallest` (``evolving-smallest``, ours): pending requests first, as Java,
  but the job holding the fewest nodes first and with no cool-down beyond the job's own
  pacing (one open request at a time); evolving jobs start at their **minimum** (the others
  as EASY: up to their maximum); then EASY backfilling for the queue.  Why: growing running
  jobs before starting queued ones finishes work already under way sooner (shortest
  remaining processing first minimises mean flow time for divisible work, Schrage 1968); a
  node added to a job of ``n`` nodes speeds it by ``1/n``, most for the smallest; an
  evolving job started at its minimum leaves nodes to the queue and takes more only while
  it has the parallel work to use them, whereas a start at the maximum holds them through
  its sequential phases.  Measured: lower mean turnaround than Java's rule at every share
  of the study (docs/guides/evolving-scheduling.md).
* :class:`EvolvingReserve` (``evolving-reserve``, ours, kept for comparison): the queue
  first (EASY backfilling), then pending requests from the nodes left, one node each, no
  cool-down beyond the job's own pacing, and only when the grant does not delay the queue
  head's reservation: a granted node counts as held until the job's expected end, like a
  backfilled job; it is granted when the head will not need it at its shadow time (EASY's
  *extra* nodes) or when the job is expected to end before that time.  Measured: shorter
  makespans than Java's rule but a longer mean turnaround
  (docs/guides/evolving-scheduling.md).

For batches of every class (rigid, moldable, malleable, evolving) two policies also resize
malleable jobs:

* :class:`EvolvingEasyMalleable` (``evolving-easy-malleable``): Java's rule for the
  requests, then the Malleable algorithm (minAgree, :mod:`.malleable`) unchanged for the
  queue and the malleable jobs; one 60 s cool-down.  Malleable jobs are never shrunk for a
  request.
* :class:`EvolvingElastic` (``evolving-elastic``, ours): requests fewest nodes first, from a
  free node or else by shrinking a malleable job that holds at least two nodes more than
  the asking job; evolving, malleable and moldable jobs start at their minimum; malleable
  jobs shrunk to start the head (as minAgree) and grown onto idle nodes, with a 10 s gap
  between two orders to one job instead of 60 s.  Measured: lower mean turnaround and
  makespan than ``evolving-easy-malleable`` at every share (docs/guides/evolving-scheduling.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from ..jobs import JobClass, JobSpec
from .base import (
    DEFAULT_COOLDOWN_S,
    Decision,
    FreeNodes,
    Grow,
    RunningJob,
    Shrink,
    SizeFn,
    View,
    can_order,
    easy_backfill,
    expected_ends_after,
    fcfs_pass,
    releases_of,
    reservation,
    size_up_to_max,
)
from .cores import counts_cores
from .easy import backfill_in_cores
from .malleable import MalleableMinAgree

__all__ = ["EvolvingEasy", "EvolvingEasyMalleable", "EvolvingElastic", "EvolvingReserve",
           "EvolvingSmallest", "pending_requests", "size_elastic_at_min", "size_evolving_at_min"]


def pending_requests(view: View) -> list[RunningJob]:
    """The running evolving jobs with a pending request that could be served by size: they
    asked (``requested > 0``), announced ``APGAS-Ready`` (``malleable_ready``) and hold fewer
    nodes than their maximum.  In start order (the order of ``view.running``)."""
    return [
        job
        for job in view.running
        if job.spec.job_class is JobClass.EVOLVING
        and job.requested > 0
        and job.malleable_ready
        and len(job.nodes) < job.spec.hi
    ]


def size_evolving_at_min(spec: JobSpec, free: int) -> int | None:
    """Start size of :class:`EvolvingSmallest`: evolving jobs at their minimum, the others
    as many free nodes as allowed (``None``: fewer than the minimum free)."""
    if free < spec.lo:
        return None
    if spec.job_class is JobClass.EVOLVING:
        return spec.lo
    return min(free, spec.hi)


def size_elastic_at_min(spec: JobSpec, free: int) -> int | None:
    """Start size of :class:`EvolvingElastic`: evolving, malleable and moldable jobs at their
    minimum, rigid ones at their count (``None``: fewer than the minimum free)."""
    return spec.lo if free >= spec.lo else None


def _seconds(name: str, value: float) -> float:
    """``value`` as a float when it is a finite number of seconds ``>= 0``.

    Raises:
        ValueError: naming ``name``, for a negative or non-finite value.
    """
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


def _easy(
    view: View, pool: FreeNodes, running: Sequence[RunningJob], size_of: SizeFn = size_up_to_max
) -> list[Decision]:
    """EASY backfilling of ``view.waiting`` from ``pool``, ``running`` standing for the
    running jobs (with the nodes granted in this call)."""
    decisions, started, head_index = fcfs_pass(view.waiting, pool, size_of)
    if head_index < len(view.waiting) and counts_cores(view, view.waiting) \
            and pool.has_room():
        # counted in cores (:mod:`.cores`), the granted nodes held as the running jobs'
        seen = dataclasses.replace(view, running=tuple(running))
        return decisions + backfill_in_cores(seen, head_index, pool, size_of, decisions,
                                             started)
    if head_index < len(view.waiting) and len(pool) > 0:
        head = view.waiting[head_index]
        releases = releases_of(view.now_s, running, started)
        decisions += easy_backfill(
            view.now_s, head, view.waiting[head_index + 1 :], pool, size_of, releases
        )
    return decisions


def _gap_over(job: RunningJob, now_s: float, gap_s: float) -> bool:
    """Whether ``job``'s last order is at least ``gap_s`` old (or it never had one)."""
    return job.last_order_s is None or now_s - job.last_order_s >= gap_s


def _grant(pool: FreeNodes, job: RunningJob, running: list[RunningJob]) -> Grow:
    """One node of ``pool`` for ``job``; ``running`` (the call's picture of the running
    jobs) gets the job with that node."""
    node = pool.take(1)
    index = running.index(job)
    running[index] = dataclasses.replace(job, nodes=job.nodes + node)
    return Grow(job.job_id, node)


def _next_change_s(view: View, cooldown_s: float) -> float:
    """The next expected end of a running job, or the end of a pending request's cool-down
    (``cooldown_s`` after the job's last order) while a node is free (seconds; ``inf`` for
    never)."""
    when = expected_ends_after(view)
    if view.free_nodes and cooldown_s > 0:
        for job in pending_requests(view):
            if job.last_order_s is not None:
                when = min(when, max(view.now_s, job.last_order_s + cooldown_s))
    return when


class EvolvingEasy:
    """Java's ``EvolvingEasyBackfilling``: requests first, from free nodes, one node each.

    Args:
        cooldown_s: seconds between two orders to the same job (the Java scheduler's 60 s,
            counted from the job's last resize); ``>= 0``.

    Raises:
        ValueError: a negative or non-finite ``cooldown_s``.
    """

    name = "evolving-easy"

    def __init__(self, *, cooldown_s: float = DEFAULT_COOLDOWN_S) -> None:
        self.cooldown_s = _seconds("cooldown_s", cooldown_s)

    def _serve(self, view: View, pool: FreeNodes) -> tuple[list[Decision], list[RunningJob]]:
        """Java's grants: one free node per pending request whose cool-down is over, in
        start order.  Returns them and the running jobs with the granted nodes."""
        decisions: list[Decision] = []
        running = list(view.running)
        for job in pending_requests(view):
            if len(pool) == 0:
                break
            if _gap_over(job, view.now_s, self.cooldown_s):
                decisions.append(_grant(pool, job, running))
        return decisions, running

    def decide(self, view: View) -> list[Decision]:
        """Grow each pending request by one free node (cool-down allowing), then EASY."""
        pool = FreeNodes(view.free_nodes)
        decisions, running = self._serve(view, pool)
        decisions += _easy(view, pool, tuple(running))
        return decisions

    def next_change_s(self, view: View) -> float:
        """The next expected end of a running job, or the end of the cool-down of a pending
        request while a node is free, whichever comes first (seconds; ``inf`` for never)."""
        return _next_change_s(view, self.cooldown_s)


class _GrantGap:
    """Our policies' option: ``grant_gap_s``, seconds between two grants to the same job
    (default 0: the job's own pacing, one open request at a time, is enough); ``>= 0``.  Not
    ``cooldown_s``, so that the scheduler's general 60 s cool-down option does not reach it.

    Raises:
        ValueError: a negative or non-finite ``grant_gap_s``.
    """

    def __init__(self, *, grant_gap_s: float = 0.0) -> None:
        self.cooldown_s = _seconds("grant_gap_s", grant_gap_s)

    def next_change_s(self, view: View) -> float:
        """The next expected end of a running job, or the end of a pending request's grant
        gap while a node is free (seconds; ``inf`` for never)."""
        return _next_change_s(view, self.cooldown_s)


class EvolvingReserve(_GrantGap):
    """Ours: the queue first (EASY), then requests that do not delay the head's reservation.

    Args:
        grant_gap_s: as :class:`_GrantGap` (seconds, default 0).

    Raises:
        ValueError: a negative or non-finite ``grant_gap_s``.
    """

    name = "evolving-reserve"

    def decide(self, view: View) -> list[Decision]:
        """EASY for the queue; then one node per pending request when the queue's head (if
        any is left waiting) is not delayed by it."""
        pool = FreeNodes(view.free_nodes)
        decisions = _easy(view, pool, view.running)
        started = {d.job_id for d in decisions}
        left = [job for job in view.waiting if job.job_id not in started]
        head = left[0] if left else None
        running = list(view.running)
        for job in pending_requests(view):
            if len(pool) == 0:
                break
            if not _gap_over(job, view.now_s, self.cooldown_s):
                continue
            if head is not None:
                releases = releases_of(view.now_s, running, [])
                shadow_s, extra = reservation(head.spec.lo, len(pool), releases)
                if extra < 1 and job.expected_end_s > shadow_s:
                    continue
            decisions.append(_grant(pool, job, running))
        return decisions


class EvolvingSmallest(_GrantGap):
    """Ours: requests first, fewest nodes first, no cool-down; evolving jobs start at their
    minimum; then EASY backfilling.

    Args:
        grant_gap_s: as :class:`_GrantGap` (seconds, default 0).

    Raises:
        ValueError: a negative or non-finite ``grant_gap_s``.
    """

    name = "evolving-smallest"

    def decide(self, view: View) -> list[Decision]:
        """One free node per pending request (fewest nodes first, ties in start order),
        then EASY with evolving jobs started at their minimum."""
        pool = FreeNodes(view.free_nodes)
        decisions: list[Decision] = []
        running = list(view.running)
        for job in sorted(pending_requests(view), key=lambda j: len(j.nodes)):
            if len(pool) == 0:
                break
            if _gap_over(job, view.now_s, self.cooldown_s):
                decisions.append(_grant(pool, job, running))
        decisions += _easy(view, pool, running, size_evolving_at_min)
        return decisions


def _after(view: View, pool: FreeNodes, running: Sequence[RunningJob]) -> View:
    """``view`` as left by this call's grants: the nodes still in ``pool`` free, ``running``
    (with the granted nodes) running."""
    left = set(view.free_nodes).difference(*(job.nodes for job in running))
    return dataclasses.replace(view, free_nodes=tuple(left), running=tuple(running))


class EvolvingEasyMalleable(EvolvingEasy):
    """Java's rule for a batch of every class: evolving requests as :class:`EvolvingEasy`,
    then the Malleable algorithm (minAgree, :class:`~.malleable.MalleableMinAgree`: queue,
    shrinks for the head, grows onto idle nodes) for the rest, one cool-down for both.

    The Java scheduler has no strategy that does both (``EvolvingEasyBackfilling`` runs
    malleable jobs as rigid); this one joins its evolving rule to the project's malleable
    algorithm unchanged, so that a mixed batch has Java's evolving rule and a malleable
    policy.  Running malleable jobs are never shrunk for a request (as Java).

    Args:
        cooldown_s: seconds between two orders to the same job, grants and resizes alike
            (default 60, the Java scheduler's); ``>= 0``.

    Raises:
        ValueError: a negative or non-finite ``cooldown_s``.
    """

    name = "evolving-easy-malleable"

    def __init__(self, *, cooldown_s: float = DEFAULT_COOLDOWN_S) -> None:
        super().__init__(cooldown_s=cooldown_s)
        self._malleable = MalleableMinAgree(cooldown_s=self.cooldown_s)

    def decide(self, view: View) -> list[Decision]:
        """Grants as Java's rule, then minAgree on the nodes left."""
        pool = FreeNodes(view.free_nodes)
        decisions, running = self._serve(view, pool)
        return decisions + self._malleable.decide(_after(view, pool, running))

    def next_change_s(self, view: View) -> float:
        """The earlier of the evolving rule's and minAgree's next change (seconds)."""
        return min(_next_change_s(view, self.cooldown_s), self._malleable.next_change_s(view))


class EvolvingElastic(_GrantGap):
    """Ours for a batch of every class: requests and malleable jobs weighed together.

    One call:

    1. **Requests**, the job holding the fewest nodes first: one free node each.  With no
       free node left, a node that a shrink in flight will free (``RunningJob.releasing``)
       is counted for the request; failing that, a running malleable job that holds at
       least two nodes more than the asking job (and more than its minimum) is shrunk by
       one node, and the request is served from it on a later call.
    2. **Queue**: FCFS starts, evolving, malleable and moldable jobs at their minimum
       (:func:`size_elastic_at_min`); a head that does not fit is started by shrinking
       malleable jobs (largest surplus first), as minAgree; otherwise EASY backfilling.
    3. **Grow**: nodes still idle go to malleable jobs, fewest nodes first, up to their
       maximum.

    Why: as :class:`EvolvingSmallest` for the requests and starts; a request proves that
    its job has parallel work for the node now, a malleable job's allotment does not, and a
    node moved from a job of ``m`` nodes to one of ``n < m - 1`` speeds the receiver by
    ``1/n`` and slows the donor by less (``1/m``); an ``evotree`` job on ``n`` nodes holds
    ``n - 1`` of them idle through its sequential branch, so a moldable job started at its
    minimum wastes the least; apgaspy's resizes take under a second
    (:class:`scheduler.model.ResizeCostModel`), so the malleable jobs need no 60 s
    cool-down: their ``rescale_gap_s`` is short.

    Args:
        grant_gap_s: as :class:`_GrantGap` (seconds, default 0).
        rescale_gap_s: seconds between two orders to the same malleable job (default 10);
            ``>= 0``.

    Raises:
        ValueError: a negative or non-finite ``grant_gap_s`` or ``rescale_gap_s``.
    """

    name = "evolving-elastic"

    def __init__(self, *, grant_gap_s: float = 0.0, rescale_gap_s: float = 10.0) -> None:
        super().__init__(grant_gap_s=grant_gap_s)
        self.rescale_gap_s = _seconds("rescale_gap_s", rescale_gap_s)
        self._malleable = _MinAgreeAtMin(cooldown_s=self.rescale_gap_s)

    def decide(self, view: View) -> list[Decision]:
        """Requests, then minAgree (with every flexible job started at its minimum) on the
        nodes left, a malleable job shrunk for a request counting as one with an order in
        flight (class doc)."""
        now = view.now_s
        pool = FreeNodes(view.free_nodes)
        decisions: list[Decision] = []
        running = list(view.running)
        donors = [job for job in view.running
                  if can_order(job, now, self.rescale_gap_s) and len(job.nodes) > job.spec.lo]
        coming = sum(job.releasing for job in view.running)
        for job in sorted(pending_requests(view), key=lambda j: len(j.nodes)):
            if not _gap_over(job, now, self.cooldown_s):
                continue
            if len(pool) > 0:
                decisions.append(_grant(pool, job, running))
                continue
            if coming > 0:  # a shrink in flight frees a node for it
                coming -= 1
                continue
            fit = [d for d in donors if len(d.nodes) >= len(job.nodes) + 2]
            if fit:
                donor = max(fit, key=lambda d: len(d.nodes) - d.spec.lo)
                decisions.append(Shrink(donor.job_id, 1))
                donors.remove(donor)
                index = running.index(donor)
                running[index] = dataclasses.replace(donor, malleable_ready=False)
        return decisions + self._malleable.decide(_after(view, pool, running))

    def next_change_s(self, view: View) -> float:
        """The earlier of a pending request's grant gap and minAgree's next change (an
        expected end, a malleable job's rescale gap ending; seconds, ``inf`` for never)."""
        return min(_next_change_s(view, self.cooldown_s), self._malleable.next_change_s(view))


class _MinAgreeAtMin(MalleableMinAgree):
    """minAgree with evolving, malleable and moldable jobs started at their minimum
    (:func:`size_elastic_at_min`), for :class:`EvolvingElastic`."""

    size_of = staticmethod(size_elastic_at_min)
