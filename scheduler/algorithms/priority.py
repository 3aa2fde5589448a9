"""Priority policies: the four of Bhosale et al. (2024) and an EASY/aging variant of ours.

Source: A. Bhosale et al., "Elastic scheduling of Charm++ jobs on Kubernetes" (2024); the
policies in words, the parameters and the study are in docs/guides/priorities.md.

Every job has a priority, 1 (lowest) to 5 (highest) (:attr:`~scheduler.jobs.JobSpec.priority`);
the queue is walked in decreasing priority, equal priorities in submission order
(:func:`priority_order`).  Node counts are taken from the job's range ``[min, max]``; a job's
usable maximum is ``min(max, total_nodes - keep_free)``.

* ``rigid-min``: a queued job starts with exactly its minimum when that many nodes are free.
* ``rigid-max``: a queued job starts with exactly its (usable) maximum.
* ``moldable``: a queued job starts with ``min(free, max)`` nodes when that is at least its
  minimum; never resized (the paper emulates it by an infinite rescale gap).
* ``elastic-priority`` (the paper's elastic policy): as ``moldable`` for a job that fits;
  for one that does not, running jobs of the same or lower priority that are outside their
  rescale gap are shrunk (lowest priority first, each at most to its minimum) when that
  frees enough for its minimum, aiming at its maximum; nodes left free after the queue
  grow running jobs, highest priority first.
* ``elastic-priority-easy`` (ours): running and waiting jobs ranked together by priority
  per remaining node-second (a preemptive Smith rule, for the weighted completion time),
  *aging* (a waiting job's rank grows by one every ``aging_s`` seconds), an EASY
  reservation for the first job that cannot start, and shrinks of running jobs ranked far
  below it (:class:`ElasticPriorityEasy`).

In none of them does a job that does not fit block the jobs behind it (the paper's policies
start every job that fits, in priority order); only the EASY variant protects the blocked
head with a reservation.

The rescale gap (``rescale_gap_s``, the paper's ``T_rescale_gap``) is the least time between
two scheduling events (start, shrink, grow) of one job: a job whose last event is more
recent is neither shrunk nor grown.  It replaces the per-order cool-down of the other
algorithms.  ``keep_free`` nodes are never handed out (the paper keeps one slot for its
launcher).

Stateless calls (:class:`~.base.Algorithm`): the paper's policy acts on a submission (start
the new job, shrinking others if needed) and on a completion (offer the freed nodes in
priority order to running and queued jobs).  A call here sees only a snapshot, so it walks
the whole queue each time as if each waiting job had just been submitted, and offers the
nodes left free to running jobs afterwards.  Two consequences, both documented in
docs/guides/priorities.md: nodes freed by a shrink made for a queued job reach that job
(they are counted as coming, ``RunningJob.releasing``, and kept for it) instead of a
higher-priority running job; and a job whose rescale gap ends while nodes are free grows
then, not only at the next completion (``next_change_s`` reports the gap's end).

Cores (:mod:`.cores`): where the view counts cores (``View.node_cores``) and a job asks for
cores, a core job's start size is taken from the nodes with room for its share, shared
nodes included (``#CORES n`` is placed by its cores alone), and no placement takes more
whole nodes than may be handed out (``keep_free``).  Shrinks for a job that does not fit
are planned core by core (:func:`.cores.plan_shrinks`): each donor gives back its last
nodes with its cores there, in the order above and down to its minimum node count, until
the job fits at its usable maximum; a donor whose nodes made no room is spared.  The cores
that shrinks in flight give back, and the free cores where the waiting job will go, are
kept for it; the EASY variant's reservation is counted in cores too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..jobs import JobClass, JobSpec
from .base import (
    Decision,
    FreeNodes,
    SizeFn,
    Grow,
    JobId,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    expected_ends_after,
    releases_of,
    reservation,
)
from .cores import (
    coming_cores,
    core_releases,
    core_reservation,
    counts_cores,
    head_fits,
    held_cores,
    plan_shrinks,
)

__all__ = [
    "DEFAULT_AGING_S",
    "DEFAULT_KEEP_FREE",
    "DEFAULT_RESCALE_GAP_S",
    "DEFAULT_SHRINK_MARGIN",
    "ElasticPriority",
    "ElasticPriorityEasy",
    "Moldable",
    "RigidMax",
    "RigidMin",
    "last_event_s",
    "priority_order",
]

#: The paper's ``T_rescale_gap`` in its Table 1 run (seconds).
DEFAULT_RESCALE_GAP_S = 180.0
#: Nodes never handed out.  The paper keeps one slot for its launcher; our scheduler runs
#: off the compute nodes, so none by default.
DEFAULT_KEEP_FREE = 0
#: Waiting time that raises a waiting job's rank by one step (seconds;
#: :class:`ElasticPriorityEasy`).
DEFAULT_AGING_S = 600.0
#: Rank steps by which a waiting job must outrank a running one to have it shrunk
#: (:class:`ElasticPriorityEasy`): a factor of 4 in priority per remaining node-second.
DEFAULT_SHRINK_MARGIN = 2.0


def _number(name: str, value: float, what: str, *, positive: bool = False) -> float:
    """``value`` as a float when it is a number >= 0 (> 0 with ``positive``); otherwise
    ``ValueError`` naming ``name``, ``what`` it counts and the value."""
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) \
            or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be a number of {what} {bound}, got {value!r}")
    return float(value)


def _check_parameters(rescale_gap_s: float, keep_free: int) -> tuple[float, int]:
    rescale_gap_s = _number("rescale_gap_s", rescale_gap_s, "seconds")
    if isinstance(keep_free, bool) or not isinstance(keep_free, int) or keep_free < 0:
        raise ValueError(f"keep_free must be a whole number of nodes >= 0, got {keep_free!r}")
    return float(rescale_gap_s), keep_free


def priority_order(
    waiting: Sequence[WaitingJob], key: dict[object, float] | None = None
) -> list[WaitingJob]:
    """The queue in decreasing priority; equal priorities by submission time, then by
    position in ``waiting`` (the mechanism's submission order).

    Args:
        waiting: the queued jobs (``View.waiting``).
        key: job id -> effective priority, when it differs from ``spec.priority`` (aging).
    """
    rank = {id(job): i for i, job in enumerate(waiting)}

    def sort_key(job: WaitingJob) -> tuple[float, float, int]:
        prio = key[job.job_id] if key is not None else job.spec.priority
        return (-prio, job.submit_s, rank[id(job)])

    return sorted(waiting, key=sort_key)


def last_event_s(job: RunningJob) -> float:
    """The time (s) of the job's last scheduling event: its start or its last resize order."""
    return job.start_s if job.last_order_s is None else max(job.start_s, job.last_order_s)


@dataclass
class _Plan:
    """One call's bookkeeping: free nodes, nodes coming from shrinks in flight, jobs used;
    where jobs hold cores (:mod:`.cores`), the nodes' sizes and the cores coming."""

    pool: FreeNodes
    avail: int  # free nodes that may be handed out (keep_free excluded)
    coming: int  # nodes that shrinks in flight will free and no queued job has claimed yet
    used: set[object]  # running jobs already given a decision in this call
    sizes: dict[str, int] | None = None  # node -> its cores, when counted in cores
    coming_cores: dict[str, int] | None = None  # node -> cores shrinks in flight will free

    def merged(self) -> dict[str, int]:
        """node -> its free cores now plus those coming (counted in cores only)."""
        out = {n: c for n, c in self.pool.free_cores().items() if c > 0}
        for node, count in (self.coming_cores or {}).items():
            out[node] = out.get(node, 0) + count
        return out


def _last_cores(job: RunningJob, count: int, sizes: dict[str, int]) -> list[tuple[str, int]]:
    """``(node, cores)`` of the ``count`` nodes a shrink of ``job`` gives back: its most
    recently added (the runtime's rule)."""
    return held_cores(job, sizes)[-count:] if count > 0 else []


def _sized(most: int) -> SizeFn:
    """A start size rule: ``min(free, most)`` nodes when that reaches the job's minimum."""
    def size(spec: JobSpec, free: int) -> int | None:
        got = min(free, most)
        return got if got >= spec.lo else None
    return size


class _PriorityBase:
    """Shared walk of the four paper policies (module docstring)."""

    name = "?"
    resizes = False

    def __init__(self, rescale_gap_s: float = DEFAULT_RESCALE_GAP_S,
                 keep_free: int = DEFAULT_KEEP_FREE) -> None:
        self.rescale_gap_s, self.keep_free = _check_parameters(rescale_gap_s, keep_free)

    # -- sizes
    def _cap(self, spec: JobSpec, total: int) -> int:
        return max(1, min(spec.hi, total - self.keep_free))

    def start_size(self, spec: JobSpec, avail: int, total: int) -> int | None:
        """Nodes the job starts with when ``avail`` nodes may be handed out, or ``None``."""
        size = min(avail, self._cap(spec, total))
        return size if size >= spec.lo else None

    # -- the gap
    def outside_gap(self, job: RunningJob, now_s: float) -> bool:
        """Whether ``job`` may be shrunk or grown at ``now_s``: malleable, ready for orders,
        and its last scheduling event at least ``rescale_gap_s`` old."""
        if job.spec.job_class is not JobClass.MALLEABLE or not job.malleable_ready:
            return False
        return now_s - last_event_s(job) >= self.rescale_gap_s

    def _plan(self, view: View) -> _Plan:
        pool = FreeNodes(view.free_nodes, view.free_cores, view.shareable_cores)
        plan = _Plan(pool, max(0, len(pool) - self.keep_free),
                     sum(job.releasing for job in view.running), set())
        if counts_cores(view, view.waiting):
            plan.sizes = dict(view.node_cores)
            plan.coming_cores = coming_cores(view.running, plan.sizes)
        return plan

    def _room(self, plan: _Plan, spec: JobSpec) -> int:
        """The node count a job's start size is taken from: the free nodes that may be
        handed out; for ``#CORES_PER_NODE c`` the nodes with ``c`` free cores, for
        ``#CORES`` its node range's top (its cores decide where it goes)."""
        if spec.cores is not None:
            return spec.hi
        if spec.cores_per_node is not None:
            return sum(1 for c in plan.pool.free_cores().values() if c >= spec.cores_per_node)
        return plan.avail

    def _start(self, plan: _Plan, job: WaitingJob, size: int,
               accept: Callable[[tuple[tuple[str, int], ...]], bool] | None = None
               ) -> Start | None:
        """The job's Start on ``size`` nodes; a job asking for cores is placed on at most
        ``size`` nodes by its cores (:meth:`~.base.FreeNodes.place_within`), taking no more
        whole nodes than may be handed out; ``accept`` (the EASY head's check) may refuse
        a placement.  ``None`` when nothing acceptable is free now."""
        if job.spec.asks_cores or accept is not None:
            whole = set(plan.pool.whole())
            avail = plan.avail

            def ok(placed: tuple[tuple[str, int], ...]) -> bool:
                if sum(1 for n, _ in placed if n in whole) > avail:
                    return False
                return accept is None or accept(placed)

            taken = plan.pool.place_within(job.spec, _sized(size), ok)
            if taken is None:
                return None
            plan.avail -= sum(1 for n in taken[0] if n in whole)
            return Start(job.job_id, *taken)
        plan.avail -= size
        return Start(job.job_id, plan.pool.take(size))

    def _keep(self, plan: _Plan, spec: JobSpec, total: int) -> bool:
        """Counted in cores: keep for a job that waits the free and coming cores where it
        will go (its placement on them, aiming at its usable maximum); ``False`` (nothing
        kept) when it does not fit in them."""
        assert plan.sizes is not None and plan.coming_cores is not None
        merged = plan.merged()
        whole = [n for n, c in merged.items() if c >= plan.sizes.get(n, 1)]
        placed = FreeNodes(whole, merged.items()).placement(spec, _sized(self._cap(spec, total)))
        if placed is None:
            return False
        here = plan.pool.free_cores()
        for node, count in placed:
            coming = min(count, plan.coming_cores.get(node, 0))
            if coming:
                plan.coming_cores[node] -= coming
            rest = min(count - coming, here.get(node, 0))
            if rest:
                was_whole = node in plan.pool.whole()
                plan.pool.take_cores(node, rest)
                plan.avail -= 1 if was_whole and plan.avail > 0 else 0
        return True

    def _wait_for_coming(self, plan: _Plan, job: WaitingJob, total: int) -> bool:
        """The job waits for nodes that shrinks in flight will free: keep them for it."""
        if plan.coming_cores is not None:
            return any(plan.coming_cores.values()) and self._keep(plan, job.spec, total)
        if plan.coming <= 0 or plan.avail + plan.coming < job.spec.lo:
            return False
        want = self._cap(job.spec, total)
        from_coming = min(plan.coming, want)
        plan.coming -= from_coming
        plan.avail -= min(plan.avail, max(0, want - from_coming))
        return True

    def _shrink_for(self, view: View, plan: _Plan, job: WaitingJob, priority: float
                    ) -> list[Decision] | None:
        """The paper's shrinks to start ``job``: running jobs of priority <= ``priority``,
        outside their gap, lowest priority (then latest start) first, each at most to its
        minimum; ``None`` when they cannot free enough for the job's minimum."""
        if not self.resizes:
            return None
        now = view.now_s
        donors = [r for r in view.running
                  if r.job_id not in plan.used and r.spec.priority <= priority
                  and len(r.nodes) > r.spec.lo and self.outside_gap(r, now)]
        donors.sort(key=lambda r: (r.spec.priority, -r.start_s))
        surplus = sum(len(r.nodes) - r.spec.lo for r in donors)
        if plan.sizes is None and plan.avail + surplus < job.spec.lo:
            return None
        return self._shrinks(view, plan, job, donors)

    def _shrinks_in_cores(self, view: View, plan: _Plan, job: WaitingJob,
                          donors: list[RunningJob]) -> list[Decision] | None:
        """:meth:`_shrinks` counted in cores (:func:`.cores.plan_shrinks`): the donors give
        back their last nodes, one at a time, until the job fits at its usable maximum;
        the free and coming cores where it will go are kept for it."""
        assert plan.sizes is not None and plan.coming_cores is not None
        if not donors:
            return None  # the job did not fit, and nothing can be shrunk for it
        coming = plan.coming_cores
        total = view.total_nodes
        planned = plan_shrinks(job.spec, plan.merged(),
                               [(r, len(r.nodes) - r.spec.lo) for r in donors], plan.sizes,
                               self._cap(job.spec, total))
        if planned is None:
            return None
        decisions: list[Decision] = []
        for r, count in planned:
            decisions.append(Shrink(r.job_id, count))
            plan.used.add(r.job_id)
            for node, cores in _last_cores(r, count, plan.sizes):
                coming[node] = coming.get(node, 0) + cores
        self._keep(plan, job.spec, total)
        plan.avail = 0
        return decisions

    def _shrinks(self, view: View, plan: _Plan, job: WaitingJob,
                 donors: list[RunningJob]) -> list[Decision] | None:
        """Shrink ``donors`` in their order, each at most to its minimum, until the nodes free
        now and those released reach ``job``'s usable maximum; what is free now is kept for
        ``job`` too (``plan.avail`` becomes 0).  Counted in cores where jobs hold cores
        (:meth:`_shrinks_in_cores`; ``None`` when the donors cannot make room)."""
        if plan.sizes is not None:
            return self._shrinks_in_cores(view, plan, job, donors)
        need = self._cap(job.spec, view.total_nodes) - plan.avail
        decisions: list[Decision] = []
        for r in donors:
            if need <= 0:
                break
            count = min(len(r.nodes) - r.spec.lo, need)
            decisions.append(Shrink(r.job_id, count))
            plan.used.add(r.job_id)
            need -= count
        plan.avail = 0
        return decisions

    def _grows(self, view: View, plan: _Plan) -> list[Decision]:
        """Nodes still free go to running jobs, highest priority first (then earliest
        start), each up to its usable maximum."""
        if not self.resizes or plan.avail <= 0:
            return []
        now = view.now_s
        growable = [r for r in view.running
                    if r.job_id not in plan.used and self.outside_gap(r, now)
                    and len(r.nodes) < self._cap(r.spec, view.total_nodes)]
        growable.sort(key=lambda r: (-r.spec.priority, r.start_s))
        decisions: list[Decision] = []
        for r in growable:
            count = min(self._cap(r.spec, view.total_nodes) - len(r.nodes), plan.avail)
            if count <= 0:
                break
            plan.avail -= count
            plan.used.add(r.job_id)
            decisions.append(Grow(r.job_id, plan.pool.take(count)))
        return decisions

    def decide(self, view: View) -> list[Decision]:
        """Walk the queue in priority order: start what fits, shrink for what does not (when
        the policy resizes), then grow running jobs with the nodes left (module docstring)."""
        plan = self._plan(view)
        decisions: list[Decision] = []
        for job in priority_order(view.waiting):
            size = self.start_size(job.spec, self._room(plan, job.spec), view.total_nodes)
            start = None if size is None else self._start(plan, job, size)
            if start is not None:
                decisions.append(start)
                continue
            if self._wait_for_coming(plan, job, view.total_nodes):
                continue
            shrinks = self._shrink_for(view, plan, job, job.spec.priority)
            if shrinks is not None:
                decisions += shrinks
        return decisions + self._grows(view, plan)

    def next_change_s(self, view: View) -> float:
        """When the clock alone can change an empty answer (seconds; ``inf`` when never): the
        end of a running job's rescale gap, when that job could then be grown (nodes may be
        handed out and it is below its maximum) or shrunk (jobs wait and it is above its
        minimum).  Policies that never resize: ``inf``."""
        if not self.resizes:
            return math.inf
        now = view.now_s
        free = len(view.free_nodes) - self.keep_free > 0
        wake = math.inf
        for job in view.running:
            if job.spec.job_class is not JobClass.MALLEABLE or not job.malleable_ready:
                continue
            end = last_event_s(job) + self.rescale_gap_s
            if not now < end < wake:
                continue
            if (free and len(job.nodes) < self._cap(job.spec, view.total_nodes)) or \
                    (view.waiting and len(job.nodes) > job.spec.lo):
                wake = end
        return wake


class RigidMin(_PriorityBase):
    """Rigid at the minimum: each job starts with exactly its minimum, in priority order.

    Args:
        rescale_gap_s: accepted for a uniform interface; unused (no resize).
        keep_free: nodes never handed out (>= 0).

    Raises ``ValueError`` for a negative or non-numeric parameter (the message names it).
    """

    name = "rigid-min"

    def start_size(self, spec: JobSpec, avail: int, total: int) -> int | None:
        """Exactly ``min`` nodes, or ``None`` when fewer may be handed out."""
        return spec.lo if avail >= spec.lo else None


class RigidMax(_PriorityBase):
    """Rigid at the maximum: each job starts with exactly its usable maximum
    (``min(max, total_nodes - keep_free)``), in priority order.  Parameters as
    :class:`RigidMin`."""

    name = "rigid-max"

    def start_size(self, spec: JobSpec, avail: int, total: int) -> int | None:
        """Exactly the usable maximum, or ``None`` when fewer may be handed out."""
        size = self._cap(spec, total)
        return size if avail >= size and size >= spec.lo else None


class Moldable(_PriorityBase):
    """Moldable: start with ``min(free, max)`` nodes (at least the minimum), never resize.
    Parameters as :class:`RigidMin`."""

    name = "moldable"


class ElasticPriority(_PriorityBase):
    """The paper's priority-based elastic policy (module docstring).

    Args:
        rescale_gap_s: ``T_rescale_gap``, least seconds between two scheduling events of one
            job (>= 0; default 180).
        keep_free: nodes never handed out (>= 0; default 0).

    Raises ``ValueError`` for a negative or non-numeric parameter (the message names it).
    """

    name = "elastic-priority"
    resizes = True


class ElasticPriorityEasy(_PriorityBase):
    """Ours: running and waiting jobs ranked together for weighted completion (a
    preemptive Smith rule), aging, an EASY reservation for the blocked head, and shrinks of
    much lower-ranked running jobs for it.

    **Rank.**  With ``order="smith"`` (default) a waiting job's base rank is
    ``log2(priority / (required_time_s * min_nodes))``, its priority per node-second asked,
    and a running job's is ``log2(priority / remaining)``, ``remaining`` the node-seconds
    asked less those used so far (``(now - start) * nodes held``; at least 5 % of those
    asked).  Serving jobs in decreasing priority per remaining work minimises a
    priority-weighted sum of completion times on one machine (Smith's rule, W. E. Smith
    1956, "Various optimizers for single-stage production"; with preemption, the weighted
    shortest remaining processing time first); a cluster of jobs that scale well is close
    to one machine.  A small job of low priority may therefore pass a large job of high
    priority.  With ``order="priority"`` every rank is the job's priority (the paper's
    order).  A waiting job's rank grows by one every ``aging_s`` seconds of waiting
    (*aging*, the cure for starvation the paper names).

    **Walk.**  Waiting jobs and the running jobs that may grow (malleable, outside their
    rescale gap, below their maximum) in decreasing rank; a running job takes free nodes up
    to its maximum, a waiting job that fits starts with ``min(free, max)`` nodes.  The first
    waiting job that does not fit, the *head*, waits for nodes that shrinks in flight free,
    or (``shrink``) has running jobs outside their gap whose rank is more than
    ``shrink_margin`` below its own shrunk (lowest rank first, each at most to its minimum,
    aiming at its maximum, as ``elastic-priority`` does), or else gets an EASY reservation
    (Lifka 1995): the earliest time the running jobs' expected ends give it its minimum.
    Behind the head no running job grows, and a waiting job starts only when it ends by the
    reservation or uses only nodes the head will not need.  With ``grow_first`` the running
    jobs are offered free nodes before any waiting job, earliest started first (the earlier
    variant of this policy; it excludes ``shrink``).

    **Bound on waiting.**  A waiting job of base rank ``b`` outranks every job submitted
    more than ``aging_s * (b_max - b)`` seconds after it (``b_max`` the largest base rank
    in the workload); after that only the finitely many jobs submitted earlier can start
    ahead of it, and as the head its reservation holds (running jobs that outrank it are
    not grown past it), so no job waits without bound.  docs/guides/priorities.md reports
    the longest measured wait of a priority-1 job.

    Args:
        rescale_gap_s: as :class:`ElasticPriority`.
        keep_free: as :class:`ElasticPriority`.
        aging_s: seconds of waiting per rank step gained (> 0; default 600).
        order: ``"smith"`` or ``"priority"`` (the rank, above).
        grow_first: grow running jobs before starting waiting ones (default ``False``).
        shrink: shrink much lower-ranked running jobs for the head (default ``True``).
        shrink_margin: rank steps by which the head must outrank a running job to shrink it
            (>= 0; default 2, a factor of 4).

    Raises ``ValueError`` for a negative or non-numeric parameter, an unknown order, or
    ``grow_first`` with ``shrink`` (the message names the value).
    """

    name = "elastic-priority-easy"
    resizes = True

    def __init__(self, rescale_gap_s: float = DEFAULT_RESCALE_GAP_S,
                 keep_free: int = DEFAULT_KEEP_FREE, aging_s: float = DEFAULT_AGING_S,
                 order: str = "smith", grow_first: bool = False, shrink: bool = True,
                 shrink_margin: float = DEFAULT_SHRINK_MARGIN) -> None:
        super().__init__(rescale_gap_s, keep_free)
        self.aging_s = _number("aging_s", aging_s, "seconds", positive=True)
        self.shrink_margin = _number("shrink_margin", shrink_margin, "rank steps")
        if order not in ("smith", "priority"):
            raise ValueError(f"order must be 'smith' or 'priority', got {order!r}")
        self.order = order
        self.grow_first = bool(grow_first)
        self.shrink = bool(shrink)
        if self.grow_first and self.shrink:
            raise ValueError("grow_first=True and shrink=True exclude each other: a job shrunk "
                             "for the head would be grown back first; choose one")

    def base_rank(self, spec: JobSpec) -> float:
        """The rank of a job that has neither waited nor run (class docstring)."""
        if self.order == "priority":
            return float(spec.priority)
        return math.log2(spec.priority / (spec.required_time_s * spec.lo))

    def effective_priority(self, job: WaitingJob, now_s: float) -> float:
        """A waiting job's rank at ``now_s``: ``base_rank + wait / aging_s``."""
        return self.base_rank(job.spec) + max(0.0, now_s - job.submit_s) / self.aging_s

    def running_rank(self, job: RunningJob, now_s: float) -> float:
        """A running job's rank at ``now_s``: its priority per remaining node-second
        (``order="smith"``) or its priority (class docstring)."""
        if self.order == "priority":
            return float(job.spec.priority)
        asked = job.spec.required_time_s * job.spec.lo
        used = max(0.0, now_s - job.start_s) * len(job.nodes)
        return math.log2(job.spec.priority / max(asked - used, 0.05 * asked))

    def _growable(self, view: View) -> list[RunningJob]:
        total = view.total_nodes
        return [r for r in view.running
                if self.outside_gap(r, view.now_s) and len(r.nodes) < self._cap(r.spec, total)]

    def decide(self, view: View) -> list[Decision]:
        """One walk over waiting and growable running jobs in decreasing rank (class doc)."""
        now, total = view.now_s, view.total_nodes
        plan = self._plan(view)
        rank = {job.job_id: self.effective_priority(job, now) for job in view.waiting}
        held = {r.job_id: self.running_rank(r, now) for r in view.running}
        walk: list[tuple[float, int, float, int, WaitingJob | RunningJob]] = [
            (-rank[job.job_id], 0, job.submit_s, i, job) for i, job in enumerate(view.waiting)
        ]
        walk += [(-math.inf if self.grow_first else -held[r.job_id], 1, r.start_s, i, r)
                 for i, r in enumerate(self._growable(view))]
        walk.sort(key=lambda item: item[:4])
        decisions: list[Decision] = []
        started: list[tuple[WaitingJob, int]] = []
        begun: list[tuple[Start, float]] = []
        shadow_s, extra = math.inf, 0
        at_shadow: dict[str, int] = {}  # counted in cores: node -> cores free at the shadow
        head: WaitingJob | None = None
        head_found = False

        def keeps_head(placed: tuple[tuple[str, int], ...]) -> bool:
            assert head is not None and plan.sizes is not None
            left = dict(at_shadow)
            for node, count in placed:
                left[node] = left.get(node, 0) - count
            return head_fits(head.spec, left, plan.sizes, list(plan.sizes))

        for _, kind, _, _, job in walk:
            if kind == 1:
                assert isinstance(job, RunningJob)
                if head_found or plan.avail <= 0 or job.job_id in plan.used:
                    continue
                count = min(self._cap(job.spec, total) - len(job.nodes), plan.avail)
                plan.avail -= count
                plan.used.add(job.job_id)
                decisions.append(Grow(job.job_id, plan.pool.take(count)))
                continue
            assert isinstance(job, WaitingJob)
            size = self.start_size(job.spec, self._room(plan, job.spec), total)
            if size is not None:
                accept = None
                if head_found and now + job.spec.required_time_s > shadow_s:
                    if plan.sizes is not None:
                        accept = keeps_head  # backfill only on cores the head won't need
                    else:
                        size = min(size, extra)  # backfill only on nodes the head won't need
                        if size < job.spec.lo:
                            continue
                        extra -= size
                start = self._start(plan, job, size, accept)
                if start is not None:
                    decisions.append(start)
                    started.append((job, len(start.nodes)))
                    begun.append((start, job.spec.required_time_s))
                    if accept is not None:
                        assert plan.sizes is not None
                        for node, count in zip(start.nodes, start.cores or [
                                plan.sizes.get(n, 1) for n in start.nodes], strict=True):
                            at_shadow[node] = at_shadow.get(node, 0) - count
                    continue
            if head_found:
                continue
            head_found = True
            head = job
            if self._wait_for_coming(plan, job, total):
                shadow_s, extra = now, 0
                continue
            shrinks = self._shrink_for_rank(view, plan, job, rank[job.job_id], held)
            if shrinks is not None:
                decisions += shrinks
                shadow_s, extra = now, 0
                continue
            if plan.sizes is not None:
                shadow_s, at_shadow = core_reservation(
                    job.spec, plan.pool.free_cores(),
                    core_releases(now, view.running, begun, plan.sizes), plan.sizes)
                continue
            releases = releases_of(now, view.running, started)
            shadow_s, extra = reservation(job.spec.lo, plan.avail, releases)
        return decisions

    def _shrink_for_rank(self, view: View, plan: _Plan, job: WaitingJob, rank: float,
                         held: dict[JobId, float]) -> list[Decision] | None:
        """:meth:`_shrink_for` with running jobs compared by rank: those more than
        ``shrink_margin`` below ``rank``, lowest first."""
        if not self.shrink:
            return None
        now = view.now_s
        donors = [r for r in view.running
                  if r.job_id not in plan.used and held[r.job_id] < rank - self.shrink_margin
                  and len(r.nodes) > r.spec.lo and self.outside_gap(r, now)]
        donors.sort(key=lambda r: (held[r.job_id], -r.start_s))
        if plan.sizes is None and \
                plan.avail + sum(len(r.nodes) - r.spec.lo for r in donors) < job.spec.lo:
            return None
        return self._shrinks(view, plan, job, donors)

    def next_change_s(self, view: View) -> float:
        """The earliest of: a rescale gap's end that matters (:class:`ElasticPriority`), the
        next expected end of a running job (the reservation) and, while jobs wait, the next
        call (``now``) when ranks move with the clock and may reorder a waiting and a running
        job (Smith order: a running job's rank rises as it uses its node-seconds, a waiting
        job's as it waits); with ``order="priority"`` the first time a waiting job's rank
        passes a running job's (plus the shrink margin, when shrinking)."""
        wake = super().next_change_s(view)
        if not view.waiting:
            return wake
        now = view.now_s
        wake = min(wake, expected_ends_after(view))
        if self.order == "smith" and view.running:
            return now
        margin = self.shrink_margin if self.shrink else 0.0
        bases = {float(r.spec.priority) + d for r in view.running for d in {0.0, margin}}
        for job in view.waiting:
            mine = self.base_rank(job.spec)
            for other in bases:
                when = job.submit_s + (other - mine) * self.aging_s
                if now <= when < wake:  # at now: a tie that breaks next
                    wake = when
        return wake
