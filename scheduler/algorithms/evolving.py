"""Serving evolving jobs' node requests: Java's rule and one of ours.

An evolving job (:attr:`~scheduler.jobs.JobClass.EVOLVING`) asks for one more node at a time
(``Evolving;Request;1``) and gives nodes back by itself (``Evolving;Release;<host>``).  The
mechanism shows a pending request as ``RunningJob.requested`` (nodes asked for and not yet
given); a release has already freed its node before the policy runs.  A granted request is a
:class:`~.base.Grow` of one node, validated like every decision by
:func:`~.decisions.decision_problem`.  Neither policy ever shrinks a job for a request.

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
    SizeFn,
    View,
    easy_backfill,
    expected_ends_after,
    fcfs_pass,
    releases_of,
    reservation,
    size_up_to_max,
)

__all__ = ["EvolvingEasy", "EvolvingReserve", "EvolvingSmallest", "pending_requests",
           "size_evolving_at_min"]


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


def _easy(
    view: View, pool: FreeNodes, running: Sequence[RunningJob], size_of: SizeFn = size_up_to_max
) -> list[Decision]:
    """EASY backfilling of ``view.waiting`` from ``pool``, ``running`` standing for the
    running jobs (with the nodes granted in this call)."""
    decisions, started, head_index = fcfs_pass(view.waiting, pool, size_of)
    if head_index < len(view.waiting) and len(pool) > 0:
        head = view.waiting[head_index]
        releases = releases_of(view.now_s, running, started)
        decisions += easy_backfill(
            view.now_s, head, view.waiting[head_index + 1 :], pool, size_of, releases
        )
    return decisions



def _next_change_s(view: View, cooldown_s: float) -> float:
    """The next expected end of a running job, or the end of a pending request's cool-down
    (``cooldown_s`` after the job's last order) while a node is free (seconds; ``inf`` for
    never)."""
    when = expected_ends_after(view)
    if view.free_nodes:
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
        if not math.isfinite(cooldown_s) or cooldown_s < 0:
            raise ValueError(f"cooldown_s must be a finite number >= 0, got {cooldown_s}")
        self.cooldown_s = float(cooldown_s)

    def _cooled(self, job: RunningJob, now_s: float) -> bool:
        return job.last_order_s is None or now_s - job.last_order_s >= self.cooldown_s

    def decide(self, view: View) -> list[Decision]:
        """Grow each pending request by one free node (cool-down allowing), then EASY."""
        pool = FreeNodes(view.free_nodes)
        decisions: list[Decision] = []
        running = list(view.running)
        for job in pending_requests(view):
            if len(pool) == 0:
                break
            if not self._cooled(job, view.now_s):
                continue
            node = pool.take(1)
            decisions.append(Grow(job.job_id, node))
            index = running.index(job)
            running[index] = dataclasses.replace(job, nodes=job.nodes + node)
        decisions += _easy(view, pool, tuple(running))
        return decisions

    def next_change_s(self, view: View) -> float:
        """The next expected end of a running job, or the end of the cool-down of a pending
        request while a node is free, whichever comes first (seconds; ``inf`` for never)."""
        return _next_change_s(view, self.cooldown_s)


class EvolvingReserve:
    """Ours: the queue first (EASY), then requests that do not delay the head's reservation.

    Args:
        grant_gap_s: seconds between two grants to the same job (default 0: the job's own
            pacing, one open request at a time, is enough); ``>= 0``.  Not ``cooldown_s``,
            so that the scheduler's general 60 s cool-down option does not reach it.

    Raises:
        ValueError: a negative or non-finite ``grant_gap_s``.
    """

    name = "evolving-reserve"

    def __init__(self, *, grant_gap_s: float = 0.0) -> None:
        if not math.isfinite(grant_gap_s) or grant_gap_s < 0:
            raise ValueError(f"grant_gap_s must be a finite number >= 0, got {grant_gap_s}")
        self.cooldown_s = float(grant_gap_s)

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
            if job.last_order_s is not None and view.now_s - job.last_order_s < self.cooldown_s:
                continue
            if head is not None:
                releases = releases_of(view.now_s, running, [])
                shadow_s, extra = reservation(head.spec.lo, len(pool), releases)
                if extra < 1 and job.expected_end_s > shadow_s:
                    continue
            node = pool.take(1)
            decisions.append(Grow(job.job_id, node))
            index = running.index(job)
            running[index] = dataclasses.replace(job, nodes=job.nodes + node)
        return decisions

    def next_change_s(self, view: View) -> float:
        """The next expected end of a running job, or the end of a pending request's
        cool-down while a node is free (seconds; ``inf`` for never)."""
        return _next_change_s(view, self.cooldown_s) if self.cooldown_s > 0 \
            else expected_ends_after(view)


class EvolvingSmallest:
    """Ours: requests first, fewest nodes first, no cool-down; evolving jobs start at their
    minimum; then EASY backfilling.

    Args:
        grant_gap_s: seconds between two grants to the same job (default 0: the job's own
            pacing, one open request at a time, is enough); ``>= 0``.  Not ``cooldown_s``,
            so that the scheduler's general 60 s cool-down option does not reach it.

    Raises:
        ValueError: a negative or non-finite ``grant_gap_s``.
    """

    name = "evolving-smallest"

    def __init__(self, *, grant_gap_s: float = 0.0) -> None:
        if not math.isfinite(grant_gap_s) or grant_gap_s < 0:
            raise ValueError(f"grant_gap_s must be a finite number >= 0, got {grant_gap_s}")
        self.cooldown_s = float(grant_gap_s)

    def decide(self, view: View) -> list[Decision]:
        """One free node per pending request (fewest nodes first, ties in start order),
        then EASY with evolving jobs started at their minimum."""
        pool = FreeNodes(view.free_nodes)
        decisions: list[Decision] = []
        running = list(view.running)
        for job in sorted(pending_requests(view), key=lambda j: len(j.nodes)):
            if len(pool) == 0:
                break
            if job.last_order_s is not None and view.now_s - job.last_order_s < self.cooldown_s:
                continue
            node = pool.take(1)
            decisions.append(Grow(job.job_id, node))
            index = running.index(job)
            running[index] = dataclasses.replace(job, nodes=job.nodes + node)
        decisions += _easy(view, pool, running, size_evolving_at_min)
        return decisions

    def next_change_s(self, view: View) -> float:
        """The next expected end of a running job, or the end of a pending request's
        grant gap while a node is free (seconds; ``inf`` for never)."""
        return _next_change_s(view, self.cooldown_s) if self.cooldown_s > 0 \
            else expected_ends_after(view)
