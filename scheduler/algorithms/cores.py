"""EASY's reservation counted in cores, for clusters whose jobs share nodes.

EASY (Lifka 1995) reserves the earliest time at which the blocked head of the queue is sure
to start, its *shadow time*, and lets a later job start now only if it does not delay that
reservation.  Counted in whole nodes (:func:`.base.reservation`) this is wrong as soon as a
job holds cores of a node (``#CORES``, ``#CORES_PER_NODE``; :mod:`scheduler.resources`):

* a core job's end gives back its cores, not a node (another job may still hold the rest),
  so a node head's shadow time comes out too early, and backfill candidates that would not
  have delayed it are refused;
* a ``#CORES n`` head has the node range ``1…n``: a count of nodes says nothing of the
  cores it needs, so a node job may be backfilled onto cores the head needed (it is
  delayed);
* a core candidate that runs past the shadow time may still use cores the head will not
  need.

Here the cluster is followed core by core instead:

::

    free cores now (node -> count) ──► + cores given back at each expected end, in time order
                                            │  (a running job: its cores on each node at
                                            │   start_s + required_time_s; a shrink in flight:
                                            │   its last nodes now; a job started in this call:
                                            ▼   at now + required_time_s)
    shadow time = the first of those times at which the head fits (head_fits: whole free
                  nodes for a node job, FreeNodes.place's rule for a core job)
    cores at the shadow time ──► a candidate that ends later starts only if the head still
                                 fits in what it leaves there (FreeNodes.place_within)

A candidate that ends by the shadow time starts whenever it fits now.  Which nodes a shrink
in flight gives back is the job's choice; they are assumed to be its most recently added
ones (the runtime's rule, :meth:`scheduler.job_state.JobState.order_shrink`).  Every
policy that reserves (EASY, the malleable policy's backfilling, the EASY priority variant)
takes this path as soon as the mechanism counts cores (``View.node_cores``) and a job in
the view asks for cores; with node jobs only the whole-node path is the same and cheaper.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from ..jobs import JobSpec
from ..resources import nodes_for_cores, start_counts
from .base import (
    Decision,
    FreeNodes,
    RunningJob,
    SizeFn,
    Start,
    View,
    WaitingJob,
    sorted_nodes,
    start_of,
)

__all__ = ["coming_cores", "core_releases", "core_reservation", "counts_cores",
           "easy_backfill_cores", "head_fits", "held_cores", "plan_shrinks"]

#: ``(time_s, ((node, cores), …))``: cores given back at a time.
Release = tuple[float, tuple[tuple[str, int], ...]]


def counts_cores(view: View, jobs: Iterable[WaitingJob] = ()) -> bool:
    """Whether the reservation must be counted in cores: the mechanism counts cores
    (``view.node_cores``) and a running job or one of ``jobs`` (the queue, with the jobs
    started in this call) asks for cores."""
    if not view.node_cores:
        return False
    return (any(j.spec.asks_cores for j in jobs)
            or any(r.spec.asks_cores for r in view.running))


def held_cores(job: RunningJob, sizes: Mapping[str, int]) -> list[tuple[str, int]]:
    """``(node, cores)`` the running job holds, in its node order: its share of each node
    (:func:`scheduler.resources.start_counts`) for a job asking for cores, every core of the
    node for a node job."""
    if job.spec.asks_cores:
        counts, problem = start_counts(job.spec, job.nodes, ())
        if problem is None and counts:
            return list(zip(job.nodes, counts, strict=True))
    return [(n, sizes.get(n, 1)) for n in job.nodes]


def core_releases(now_s: float, running: Iterable[RunningJob],
                  started: Iterable[tuple[Start, float]],
                  sizes: Mapping[str, int]) -> list[Release]:
    """The cores running jobs give back, for :func:`core_reservation`.

    Args:
        now_s: the view's clock (s).
        running: the running jobs: their cores at their expected end (not before now);
            a shrink in flight gives back the job's last ``releasing`` nodes now.
        started: jobs started in this call, each ``(its Start, required_time_s)``: their
            cores at ``now_s + required_time_s``.
        sizes: node -> its cores (``View.node_cores``).
    """
    out: list[Release] = []
    for job in running:
        held = held_cores(job, sizes)
        cut = len(held) - job.releasing if 0 < job.releasing < len(held) else len(held)
        if cut < len(held):
            out.append((now_s, tuple(held[cut:])))
        out.append((max(now_s, job.expected_end_s), tuple(held[:cut])))
    for start, required_s in started:
        counts = start.cores or tuple(sizes.get(n, 1) for n in start.nodes)
        out.append((now_s + required_s, tuple(zip(start.nodes, counts, strict=True))))
    return out


def head_fits(spec: JobSpec, free: Mapping[str, int], sizes: Mapping[str, int],
              order: Sequence[str], count: int | None = None) -> bool:
    """Whether a job of ``spec`` could start on ``count`` nodes (default: its minimum) on
    the free cores ``free`` (node -> count): ``count`` wholly free nodes for a node request,
    an equal share (:func:`scheduler.resources.nodes_for_cores`) for ``#CORES n`` (any
    node count), ``count`` nodes with ``c`` free cores for ``#CORES_PER_NODE c`` (the rule
    of :meth:`.base.FreeNodes.place`)."""
    need = spec.lo if count is None else count
    if spec.cores is not None:
        room = {n: c for n, c in free.items() if c > 0}
        return nodes_for_cores(spec.cores, room, spec.profile, order) is not None
    if spec.cores_per_node is not None:
        per_node = spec.cores_per_node
        return sum(1 for c in free.values() if c >= per_node) >= need
    return sum(1 for n, c in free.items() if c >= sizes.get(n, 1)) >= need


def coming_cores(running: Iterable[RunningJob], sizes: Mapping[str, int]) -> dict[str, int]:
    """node -> the cores that shrinks in flight will give back (each job's last
    ``releasing`` nodes, module docstring)."""
    out: dict[str, int] = {}
    for job in running:
        if job.releasing:
            for node, count in held_cores(job, sizes)[-job.releasing:]:
                out[node] = out.get(node, 0) + count
    return out


def plan_shrinks(spec: JobSpec, free: Mapping[str, int],
                 donors: Sequence[tuple[RunningJob, int]], sizes: Mapping[str, int],
                 aim: int) -> list[tuple[RunningJob, int]] | None:
    """The shrinks that make room for a job of ``spec``, counted in cores.

    Each donor gives back its nodes from its most recently added (the runtime's rule), one
    node at a time, at most its given count, donors in their order, until the job fits at
    ``aim`` nodes (:func:`head_fits`) or the donors are spent.  Then a donor whose shrink
    turned out not to be needed (its nodes' other cores are held by another job, so they
    made no room) is spared, the last shrunk first: no job is preempted for nothing.

    Args:
        spec: the job to make room for.
        free: node -> its free cores now (with the cores coming from shrinks in flight).
        donors: ``(running job, nodes it may give back)``, in the order they are shrunk.
        sizes: node -> its cores.
        aim: the node count to aim at (the job's usable maximum).

    Returns:
        ``(donor, count)`` for the donors shrunk (count > 0), or ``None`` when even every
        donor shrunk to its minimum leaves no room for the job's minimum.
    """
    order = sorted_nodes(sizes)
    avail = dict(free)
    steps: list[tuple[int, list[tuple[str, int]]]] = []
    for i, (job, most) in enumerate(donors):
        held = held_cores(job, sizes)
        steps += [(i, [pair]) for pair in reversed(held[len(held) - most:])] if most else []
    for _, given in steps:
        for node, count in given:
            avail[node] = avail.get(node, 0) + count
    if not head_fits(spec, avail, sizes, order):
        return None
    counts = [0] * len(donors)

    def room(taken: Sequence[int]) -> dict[str, int]:
        out = dict(free)
        for i, (job, _) in enumerate(donors):
            if taken[i]:
                held = held_cores(job, sizes)
                for node, count in held[len(held) - taken[i]:]:
                    out[node] = out.get(node, 0) + count
        return out

    for i, _ in steps:
        avail = room(counts)
        if head_fits(spec, avail, sizes, order, aim) and head_fits(spec, avail, sizes, order):
            break
        counts[i] += 1
    # a donor whose nodes did not help (another job holds the rest of them) is spared,
    # the last shrunk (highest ranked) first
    enough = head_fits(spec, room(counts), sizes, order, aim)
    for i in reversed(range(len(donors))):
        if counts[i]:
            trial = counts[:i] + [0] + counts[i + 1:]
            avail = room(trial)
            if head_fits(spec, avail, sizes, order) and (
                    not enough or head_fits(spec, avail, sizes, order, aim)):
                counts = trial
    return [(job, c) for (job, _), c in zip(donors, counts, strict=True) if c > 0]


def core_reservation(spec: JobSpec, free: Mapping[str, int], releases: Iterable[Release],
                     sizes: Mapping[str, int]) -> tuple[float, dict[str, int]]:
    """EASY's reservation (Lifka 1995) counted in cores (module docstring).

    Args:
        spec: the head of the queue.
        free: node -> its free cores now.
        releases: :func:`core_releases`.
        sizes: node -> its cores.

    Returns:
        ``(shadow_s, at_shadow)``: the first release time at which the head fits
        (:func:`head_fits`), and node -> the cores free then (the head's included).
        ``(inf, {})`` when it never fits (a job larger than the cluster).
    """
    order = sorted_nodes(sizes)
    avail = {n: free.get(n, 0) for n in order}
    by_time: dict[float, list[tuple[str, int]]] = {}
    for time_s, given in releases:
        by_time.setdefault(time_s, []).extend(given)
    for time_s in sorted(by_time):
        for node, count in by_time[time_s]:
            avail[node] = min(sizes.get(node, count), avail.get(node, 0) + count)
        if head_fits(spec, avail, sizes, order):
            return time_s, avail
    return math.inf, {}


def easy_backfill_cores(now_s: float, head: WaitingJob, rest: Sequence[WaitingJob],
                        pool: FreeNodes, size_of: SizeFn, releases: Iterable[Release],
                        sizes: Mapping[str, int]) -> list[Decision]:
    """EASY backfilling behind ``head`` with the reservation in cores (module docstring).

    A later job starts now (taken from ``pool``) when it fits and ends by the shadow time
    (``now_s + required_time_s <= shadow``), or when the head still fits at the shadow time
    in the cores it leaves (a job with a node range then starts with as many nodes as keep
    it so); the cores it keeps past the shadow time are then counted as taken.
    """
    shadow_s, at_shadow = core_reservation(head.spec, pool.free_cores(), releases, sizes)
    order = sorted_nodes(sizes)
    decisions: list[Decision] = []

    def keeps_head(placed: tuple[tuple[str, int], ...]) -> bool:
        left = dict(at_shadow)
        for node, count in placed:
            left[node] = left.get(node, 0) - count
        return head_fits(head.spec, left, sizes, order)

    left = sum(pool.free_cores().values())
    for job in rest:
        spec = job.spec
        if left <= 0:
            break
        if (spec.cores or (spec.cores_per_node or 0) * spec.lo) > left \
                or (not spec.asks_cores and len(pool) < spec.lo):
            continue  # too large for what is free: no placement to try
        if now_s + job.spec.required_time_s <= shadow_s:
            fit = start_of(job, pool, size_of)
            if fit is not None:
                decisions.append(fit[0])
                left = sum(pool.free_cores().values())
            continue
        taken = pool.place_within(job.spec, size_of, keeps_head)
        if taken is None:
            continue
        nodes, counts = taken
        decisions.append(Start(job.job_id, nodes, counts))
        for node, count in zip(nodes, counts or [sizes.get(n, 1) for n in nodes], strict=True):
            at_shadow[node] = at_shadow.get(node, 0) - count
            left -= count
    return decisions
