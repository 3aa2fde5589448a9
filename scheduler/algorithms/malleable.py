"""The Malleable algorithm, *minAgree* (Finnerty et al. 2024; the Java
ElasticJobScheduler's ``MalleableStrategy``).

One call does, in order:

1. **Start** queued jobs in submission order while the head fits, malleable jobs with their
   *minimum* node count (rigid jobs their count, moldable jobs as many free nodes as allowed).
2. **Shrink for the head.**  If the head does not fit, and running malleable jobs that may be
   ordered (``APGAS-Ready``, cool-down over) can together give up enough nodes above their
   minimums, order shrinks: the job with the largest allotment above its minimum first,
   each giving up to its surplus, until the head's minimum is covered.  The free nodes stay
   for the head, which starts on a later call once the jobs have released their nodes;
   nothing else happens in this call.
3. Otherwise **EASY backfilling** (:mod:`.easy`) behind the head's reservation, with the
   start sizes of step 1.
4. **Grow**: nodes still idle go to running malleable jobs that may be ordered, smallest
   allotment first (ties: earlier start first), each up to its maximum, lowest node names
   first.  As in the Java strategy, this happens also while a head waits whose need shrinks
   cannot cover yet: the grown jobs give the nodes back by a later shrink.

Nodes that shrink orders still in flight will release (``RunningJob.releasing``) count as
free for the head: while they cover its need, the call only starts jobs (step 1).

Where jobs hold cores (:mod:`.cores`), steps 2 and 3 count cores: the head's need is met when
it fits (:func:`.cores.head_fits`) in the free cores plus those that shrinks in flight give
back, a shrink gives back a donor's last nodes with its cores on them, and a donor whose
nodes make no room for the head is not shrunk (:func:`.cores.plan_shrinks`).

Only malleable jobs that announced ``APGAS-Ready`` and whose last order is at least
``cooldown_s`` old are ordered (Java: 60 s).  Unlike the Java strategy, which starts every
job with up to its maximum and grows the largest possible expansion first, this follows
the paper (start at the minimum, grow the smallest allotment first).
"""

from __future__ import annotations

from .base import (
    DEFAULT_COOLDOWN_S,
    Decision,
    FreeNodes,
    Grow,
    RunningJob,
    Shrink,
    View,
    WaitingJob,
    can_order,
    easy_backfill,
    expected_ends_after,
    fcfs_pass,
    releases_of,
    shared_grows,
    size_malleable_at_min,
)
from .cores import coming_cores, counts_cores, head_fits, plan_shrinks
from .easy import backfill_in_cores

__all__ = ["MalleableMinAgree"]


class MalleableMinAgree:
    """minAgree: EASY for the queue, shrink to start the head, grow onto idle nodes.

    Args:
        cooldown_s: minimum time between two orders to one job (seconds; default 60, as the
            Java scheduler).  ``0`` orders a job whenever it is ready.
    """

    name = "malleable"

    #: Start size of a queued job (``(spec, free) -> count | None``, :mod:`.base`): malleable
    #: jobs at their minimum.  A policy built on this one may put another rule here.
    size_of = staticmethod(size_malleable_at_min)

    def __init__(self, cooldown_s: float = DEFAULT_COOLDOWN_S) -> None:
        if cooldown_s < 0:
            raise ValueError(f"cooldown_s must be >= 0 s, got {cooldown_s}")
        self.cooldown_s = float(cooldown_s)

    def decide(self, view: View) -> list[Decision]:
        """Starts, then shrinks for the head or EASY backfilling, then grows (module doc)."""
        now = view.now_s
        pool = FreeNodes(view.free_nodes, view.free_cores, view.shareable_cores)
        decisions, started, head_index = fcfs_pass(view.waiting, pool, self.size_of)
        order_index = {job.job_id: pos for pos, job in enumerate(view.running)}
        orderable = [job for job in view.running if can_order(job, now, self.cooldown_s)]

        if head_index < len(view.waiting) and counts_cores(view, view.waiting):
            head = view.waiting[head_index]
            shrinks = _shrinks_in_cores(view, head, pool, orderable, order_index)
            if shrinks is not None:
                return decisions + shrinks
            if pool.has_room():
                decisions += backfill_in_cores(view, head_index, pool, self.size_of,
                                               decisions, started)
        elif head_index < len(view.waiting):
            head = view.waiting[head_index]
            need = head.spec.lo - len(pool) - sum(job.releasing for job in view.running)
            if need <= 0:
                return decisions  # shrinks in flight make room: the head starts after them
            donors = sorted(
                (job for job in orderable if len(job.nodes) > job.spec.lo),
                key=lambda job: (-(len(job.nodes) - job.spec.lo), order_index[job.job_id]),
            )
            if sum(len(job.nodes) - job.spec.lo for job in donors) >= need:
                for job in donors:
                    count = min(len(job.nodes) - job.spec.lo, need)
                    decisions.append(Shrink(job.job_id, count))
                    need -= count
                    if need <= 0:
                        break
                return decisions
            if len(pool) > 0:
                decisions += easy_backfill(
                    now,
                    head,
                    view.waiting[head_index + 1 :],
                    pool,
                    self.size_of,
                    releases_of(now, view.running, started),
                )

        if len(pool) > 0:
            growable = sorted(
                (job for job in orderable if len(job.nodes) < job.spec.hi),
                key=lambda job: (len(job.nodes), order_index[job.job_id]),
            )
            for job in growable:
                count = min(job.spec.hi - len(job.nodes), len(pool))
                if count <= 0:
                    break
                decisions.append(Grow(job.job_id, pool.take(count)))
        if view.shareable_cores:
            grown = {d.job_id for d in decisions if isinstance(d, Grow)}
            decisions += shared_grows(
                view, (j for j in orderable if j.job_id not in grown), pool)
        return decisions

    def next_change_s(self, view: View) -> float:
        """When the clock alone can change an empty answer (seconds; ``inf`` when never).

        The earliest of: the next expected end of a running job (the EASY reservation, as
        :meth:`EasyBackfilling.next_change_s`) and the end of the cool-down of a malleable
        job that is ready for orders (it becomes a donor or a grow target then).
        """
        now = view.now_s
        wake = expected_ends_after(view)
        for job in view.running:
            if job.malleable_ready and job.last_order_s is not None:
                end = job.last_order_s + self.cooldown_s
                if now < end < wake:
                    wake = end
        return wake


def _shrinks_in_cores(view: View, head: WaitingJob, pool: FreeNodes,
                      orderable: list[RunningJob], order_index: dict[object, int]
                      ) -> list[Decision] | None:
    """Step 2 counted in cores (module docstring): ``[]`` when shrinks in flight already
    make room for the head (it waits for them), the shrinks to order, or ``None`` when the
    donors cannot make room (then EASY backfilling and grows follow)."""
    sizes = dict(view.node_cores)
    room = {n: c for n, c in pool.free_cores().items() if c > 0}
    for node, count in coming_cores(view.running, sizes).items():
        room[node] = room.get(node, 0) + count
    if any(job.releasing for job in view.running) and head_fits(head.spec, room, sizes,
                                                                 list(sizes)):
        return []
    donors = sorted(
        (job for job in orderable if len(job.nodes) > job.spec.lo),
        key=lambda job: (-(len(job.nodes) - job.spec.lo), order_index[job.job_id]),
    )
    planned = plan_shrinks(head.spec, room, [(j, len(j.nodes) - j.spec.lo) for j in donors],
                           sizes, head.spec.lo)
    if not planned:
        return None
    return [Shrink(job.job_id, count) for job, count in planned]
