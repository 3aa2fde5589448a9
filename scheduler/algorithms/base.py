"""The interface between scheduling policy and mechanism, and the helpers policies share.

Policy apart from mechanism, as in dask/distributed's ``deploy/adaptive_core.py``: an
algorithm sees a frozen snapshot of the cluster (:class:`View`) and answers with plain
decisions (:class:`Start`, :class:`Shrink`, :class:`Grow`).  It opens no socket, starts no
process and reads no clock: the time is ``View.now_s``, given by whoever calls it.  The same
object therefore runs in real time (a scheduler that applies the decisions to real jobs) and
in simulated time (:mod:`scheduler.simulate`).

::

    mechanism (real or simulated)             policy (this package)
    ------------------------------            ---------------------
    cluster state ──► View(now_s, free_nodes, ─► Algorithm.decide(view)
                          running, waiting)            │
    apply: start job, send "shrink n",   ◄── [Start | Shrink | Grow, ...]
           send "grow n h1 .. hn"

Conventions all algorithms follow:

* Node choice is deterministic: the lowest free node names first, in natural order
  (``n2`` before ``n10``; :func:`node_key`).  A shrink names only a count: the job chooses
  the nodes it releases (it replies with their names).
* A running job may be ordered (shrink or grow) only when it is malleable, has announced
  ``APGAS-Ready`` (``RunningJob.malleable_ready``) and its last order is at least
  ``cooldown_s`` old (the Java scheduler: one order per job every 60 s).  An evolving job
  is grown only on its own request (``RunningJob.requested``) and never shrunk
  (:mod:`.evolving`).
* Decisions of one call are meant to be applied in order; they never use a node twice.
* Cores (:mod:`scheduler.resources`): ``View.free_cores`` gives the free cores of every node
  that has one (whole-free nodes and nodes that jobs asking for cores use part of).  A job
  asking for cores (``spec.asks_cores``) is started with ``Start.cores``, one count a node;
  :func:`start_of` places it (the shared queue passes use it).  A node request takes whole
  nodes (``free_nodes``), as before.  ``View.node_cores`` gives every node's size, from
  which the policies that reserve or shrink count cores (:mod:`.cores`).

A new algorithm is one module defining a class with ``name`` and ``decide``, plus one line
in :data:`scheduler.algorithms.registry`.

Optionally, a class also defines ``next_change_s(view) -> float``: given that
``decide(view)`` returned no decision, the earliest time (seconds, ``>= view.now_s`` or
``inf``) at which ``decide`` could answer otherwise for the same jobs and nodes, only the
clock having moved (a cool-down that ends, a running job that passes its expected end).
An event-driven mechanism (the simulator) then skips the periodic calls before that time;
without the method it calls the algorithm at every period (:func:`next_change_s`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..jobs import JobClass, JobSpec
from ..resources import first_fit_cores, nodes_for_cores

#: Where a ``#CORES`` job's cores go (:class:`FreeNodes`).
PLACEMENTS = ("shares", "first-fit", "first-fit-pack")

__all__ = [
    "DEFAULT_COOLDOWN_S",
    "PLACEMENTS",
    "Algorithm",
    "Decision",
    "FreeNodes",
    "Grow",
    "JobId",
    "RunningJob",
    "Shrink",
    "Start",
    "View",
    "WaitingJob",
    "can_order",
    "expected_ends_after",
    "next_change_s",
    "node_key",
    "sorted_nodes",
    "start_of",
]

#: Minimum time between two orders to the same job (seconds): the Java scheduler's 60 s.
DEFAULT_COOLDOWN_S = 60.0

#: A job's id: the mechanism's choice (the simulator and the Java scheduler use integers).
JobId = int | str


@dataclass(frozen=True)
class RunningJob:
    """A job that holds nodes.

    Attributes:
        job_id: the mechanism's id for the job.
        spec: what the job asked for.
        nodes: the node names it holds now (nodes being released by a shrink in flight are
            still held until the job has replied).
        start_s: when it started (seconds, the view's clock).
        malleable_ready: the job has announced ``APGAS-Ready`` and has no order in flight:
            only then may it be shrunk or grown.  Always ``False`` for a rigid job.
        last_order_s: when it was last ordered to shrink or grow (seconds), ``None`` if never.
        releasing: nodes that a shrink order in flight will give back (still in ``nodes``
            until the job replies); 0 when none.  Lets a policy count them as coming free
            instead of ordering more shrinks meanwhile.
        requested: nodes an evolving job has asked for and not yet received (its pending
            ``Evolving;Request;1`` lines; the Java runtime keeps at most one open, so 0 or
            1); always 0 for the other classes.
        duty: its last measured duty cycle in [0, 1] (docs/guides/colocation.md), or
            ``None``: not measured (or not reported).
    """

    job_id: JobId
    spec: JobSpec
    nodes: tuple[str, ...]
    start_s: float
    malleable_ready: bool = False
    last_order_s: float | None = None
    releasing: int = 0
    requested: int = 0
    duty: float | None = None

    @property
    def expected_end_s(self) -> float:
        """When the job should have ended by its required time: ``start_s + required_time_s``."""
        return self.start_s + self.spec.required_time_s


@dataclass(frozen=True)
class WaitingJob:
    """A job in the queue: its id, spec and submission time (seconds, the view's clock)."""

    job_id: JobId
    spec: JobSpec
    submit_s: float


@dataclass(frozen=True)
class View:
    """A snapshot of the cluster, the whole input of :meth:`Algorithm.decide`.

    Attributes:
        now_s: the current time (seconds; real or simulated clock).
        free_nodes: names of the nodes that no job holds (any order).
        running: the running jobs (start order).
        waiting: the queued jobs, in submission order (the queue the algorithms walk).
        total_nodes: the cluster's size (nodes).
        free_cores: ``(node, free cores)`` for every node with a free core, the scheduler's
            node order; empty from a mechanism that counts no cores (each free node is then
            one core).
        node_cores: ``(node, its cores)`` for every node of the cluster, the scheduler's node
            order; empty from a mechanism that counts no cores.  EASY's reservation counts
            in cores with it (:mod:`.cores`): what a running job gives back at its end.
        shareable_cores: ``(node, cores)``: the held cores a ``#COLOCATE yes`` job may take
            beside the jobs that hold them (:func:`scheduler.colocation.shareable`), the
            scheduler's node order; empty when co-location is off (no
            ``--colocate-bound``) or no core has room.
        shareable_room: ``(node, room)`` for the nodes of ``shareable_cores``: the least
            duty cycle one of its shareable cores may still take (the bound minus its load).
    """

    now_s: float
    free_nodes: tuple[str, ...]
    running: tuple[RunningJob, ...]
    waiting: tuple[WaitingJob, ...]
    total_nodes: int
    free_cores: tuple[tuple[str, int], ...] = ()
    node_cores: tuple[tuple[str, int], ...] = ()
    shareable_cores: tuple[tuple[str, int], ...] = ()
    shareable_room: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Start:
    """Start a waiting job on these nodes (its first node hosts place 0); ``cores``: the
    cores it takes on each node (a job asking for cores), empty for whole nodes."""

    job_id: JobId
    nodes: tuple[str, ...]
    cores: tuple[int, ...] = ()


@dataclass(frozen=True)
class Shrink:
    """Order a running malleable job to release ``count`` nodes of its choice (``shrink n``)."""

    job_id: JobId
    count: int


@dataclass(frozen=True)
class Grow:
    """Order a running malleable job to take these free nodes (``grow n h1 … hn``)."""

    job_id: JobId
    nodes: tuple[str, ...]


Decision = Start | Shrink | Grow


@runtime_checkable
class Algorithm(Protocol):
    """A scheduling policy: plain data in, decisions out.

    ``decide`` must not keep state that changes its answer between calls with equal views
    (a mechanism may call it at any time, as often as it likes) and must not read a clock.
    """

    name: str

    def decide(self, view: View) -> list[Decision]:
        """The decisions for this snapshot, to apply in order (empty: nothing to do)."""
        ...


_DIGITS = re.compile(r"(\d+)")


def node_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Natural sort key of a node name: ``n2`` < ``n10``, ``127.0.1.2`` < ``127.0.1.10``."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in _DIGITS.split(name) if part
    )


#: node name -> its rank in natural order among all the names seen so far (re-ranked when a
#: new name comes; a cluster has few names).
_RANK: dict[str, int] = {}


def sorted_nodes(nodes: Iterable[str]) -> list[str]:
    """Node names in natural order (lowest first, see :func:`node_key`).

    Names already seen are sorted by an integer rank kept in a dictionary, so that sorting
    the free nodes at every ``decide`` call is a C-level sort of integers, not one regex
    split and tuple comparisons per name.
    """
    global _RANK
    nodes = list(nodes)
    rank = _RANK
    try:
        return sorted(nodes, key=rank.__getitem__)
    except KeyError:
        known = set(rank) if len(rank) < 1 << 16 else set()
        known.update(nodes)
        # a new dictionary, swapped in at once: a sort in another thread keeps the old one
        rank = {name: i for i, name in enumerate(sorted(known, key=node_key))}
        _RANK = rank
        return sorted(nodes, key=rank.__getitem__)


def expected_ends_after(view: View) -> float:
    """The earliest expected end (``start_s + required_time_s``, seconds) of a running job that
    is still later than ``view.now_s``; ``inf`` when none.

    Past that time :func:`releases_of` counts the job's nodes as given back *now* instead of
    at its expected end, so an EASY reservation computed from the same state may change.
    """
    now = view.now_s
    ends = [end for job in view.running if (end := job.expected_end_s) > now]
    return min(ends, default=math.inf)


def can_order(job: RunningJob, now_s: float, cooldown_s: float) -> bool:
    """Whether ``job`` may be shrunk or grown at ``now_s`` (seconds).

    True when it is malleable, ``malleable_ready`` and its last order is at least
    ``cooldown_s`` seconds old (or it was never ordered).
    """
    if job.spec.job_class is not JobClass.MALLEABLE or not job.malleable_ready:
        return False
    return job.last_order_s is None or now_s - job.last_order_s >= cooldown_s


def next_change_s(algorithm: Algorithm, view: View) -> float:
    """When ``algorithm`` could first answer ``view`` otherwise, only the clock having moved.

    Args:
        algorithm: the policy, which has just answered ``view`` with no decision.
        view: that snapshot.

    Returns:
        ``algorithm.next_change_s(view)`` (seconds, ``inf`` for never) when the class defines
        it, else ``view.now_s``: no promise, call it again at the next period.
    """
    hook = getattr(algorithm, "next_change_s", None)
    return view.now_s if hook is None else float(hook(view))


# --------------------------------------------------------------------------------------------
# Shared queue passes.  ``size_of(spec, free)`` gives the node count a job would start with
# when ``free`` nodes are free, or None when it cannot start.


SizeFn = Callable[[JobSpec, int], int | None]


def size_up_to_max(spec: JobSpec, free: int) -> int | None:
    """Start size of the paper's FCFS/Backfilling/EASY: as many free nodes as allowed, ≥ min."""
    if free < spec.lo:
        return None
    return min(free, spec.hi)


def size_malleable_at_min(spec: JobSpec, free: int) -> int | None:
    """Start size of the paper's Malleable algorithm: malleable jobs at their minimum.

    Rigid jobs take their count; moldable jobs, which cannot be grown later, take as many
    free nodes as allowed.
    """
    if free < spec.lo:
        return None
    if spec.job_class is JobClass.MALLEABLE:
        return spec.lo
    return min(free, spec.hi)


class FreeNodes:
    """The free nodes during one ``decide`` call, handed out lowest names first.

    Not to be confused with :class:`scheduler.nodes.NodeBackend`, the real machines a server
    launches jobs on: this is a plain list an algorithm takes node names from while it builds
    its decisions, so that one call never hands a node out twice.

    Args:
        nodes: the free node names (any order; sorted here with :func:`node_key`).
        cores: ``(node, free cores)`` (:attr:`View.free_cores`); empty: each free node is
            one core.
        shared: ``(node, cores)`` a ``#COLOCATE yes`` job may also take
            (:attr:`View.shareable_cores`); each is handed out once a call.
        placement: where a ``#CORES`` job's cores go: ``"shares"`` (default: equal shares,
            :func:`~scheduler.resources.nodes_for_cores`), ``"first-fit"`` (core by core
            wherever free, :func:`~scheduler.resources.first_fit_cores`) or
            ``"first-fit-pack"`` (the same, a ``network`` job packed on one node where one
            has room): the granularity study's layouts (docs/benchmarks.md).
    """

    def __init__(self, nodes: Iterable[str], cores: Iterable[tuple[str, int]] = (),
                 shared: Iterable[tuple[str, int]] = (), placement: str = "shares") -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"placement is one of {', '.join(PLACEMENTS)}, got {placement!r}")
        self._placement = placement
        self._nodes = sorted_nodes(nodes)
        self._given = cores
        self._shared = dict(shared)
        self._cores: dict[str, int] | None = None  # built when a job asks for cores
        self._taken: list[str] = []  # whole nodes taken before it was built

    def __len__(self) -> int:
        return len(self._nodes)

    def take(self, count: int) -> tuple[str, ...]:
        """Remove and return the ``count`` lowest-named free nodes."""
        if count > len(self._nodes):
            raise ValueError(f"asked for {count} nodes, {len(self._nodes)} free")
        taken, self._nodes = self._nodes[:count], self._nodes[count:]
        if self._cores is not None:
            for node in taken:
                self._cores.pop(node, None)
        else:
            self._taken += taken
        return tuple(taken)

    def free_cores(self) -> dict[str, int]:
        """node -> its free cores now (each free node one core where the view gave none)."""
        if self._cores is None:
            cores = dict(self._given) or {n: 1 for n in self._nodes}
            for node in self._taken:
                cores.pop(node, None)
            self._cores = cores
        return self._cores

    def whole(self) -> tuple[str, ...]:
        """The wholly free nodes still in the pool, lowest names first."""
        return tuple(self._nodes)

    def shared(self) -> dict[str, int]:
        """node -> the shareable cores not handed out yet in this call."""
        return self._shared

    def take_shared(self, node: str, count: int) -> None:
        """Hand out ``count`` shareable cores of ``node`` (a grow onto them).

        Raises:
            ValueError: fewer are left.
        """
        if self._shared.get(node, 0) < count:
            raise ValueError(f"{node} has {self._shared.get(node, 0)} shareable cores left")
        self._shared[node] -= count

    def take_cores(self, node: str, count: int) -> None:
        """Take ``count`` free cores of ``node`` (kept for a job that starts later); a
        wholly free node leaves :meth:`whole`.

        Raises:
            ValueError: ``node`` has fewer free cores.
        """
        cores = self.free_cores()
        if cores.get(node, 0) < count:
            raise ValueError(f"{node} has {cores.get(node, 0)} free cores, {count} asked")
        cores[node] -= count
        if node in self._nodes:
            self._nodes.remove(node)

    def has_room(self) -> bool:
        """Whether a whole node or a core is still free."""
        return bool(self._nodes) or any(c > 0 for c in self.free_cores().values())

    def placement(self, spec: JobSpec, size_of: SizeFn) -> tuple[tuple[str, int], ...] | None:
        """Where a job would go now, nothing taken: ``((node, cores), …)`` in node order, or
        ``None`` when it does not fit.

        A node request: ``size_of(spec, free nodes)`` whole nodes, lowest names first, each
        with all its cores.  ``#CORES n``: :func:`scheduler.resources.nodes_for_cores` (by
        profile).  ``#CORES_PER_NODE c``: ``size_of(spec, nodes with c free cores)`` nodes
        among them, the fullest first (best fit), then the lowest names.  A ``#COLOCATE yes``
        job may also take the shareable cores (:meth:`shared`), free cores first.
        """
        cores = self.free_cores()
        if not spec.asks_cores:
            size = size_of(spec, len(self._nodes))
            if size is None:
                return None
            return tuple((n, cores.get(n, 1)) for n in self._nodes[:size])
        share = self._shared if spec.colocate else {}
        order = sorted_nodes(set(cores) | set(share))
        room = {n: cores.get(n, 0) + share.get(n, 0) for n in order}
        free = {n: c for n, c in room.items() if c > 0}
        if spec.cores is not None:
            if self._placement == "shares":
                return nodes_for_cores(spec.cores, free, spec.profile, order)
            pack = self._placement == "first-fit-pack" and spec.profile == "network"
            return first_fit_cores(spec.cores, free, order, pack)
        per_node = spec.cores_per_node or 1
        # free cores before shared ones (a co-locating job); then the fullest first
        fit = sorted((n for n in order if free.get(n, 0) >= per_node),
                     key=lambda n: (cores.get(n, 0) < per_node, free[n]))
        size = size_of(spec, len(fit))
        if size is None:
            return None
        chosen = set(fit[:size])
        return tuple((n, per_node) for n in order if n in chosen)

    def _commit(self, spec: JobSpec,
                placed: tuple[tuple[str, int], ...]) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """Take ``placed`` (:meth:`placement`'s answer) out of the pool."""
        if not spec.asks_cores:
            return self.take(len(placed)), ()
        cores = self.free_cores()
        share = self._shared if spec.colocate else {}
        whole = set(self._nodes)
        for node, count in placed:
            own = min(count, cores.get(node, 0))
            if own:
                cores[node] -= own
            if count > own:
                share[node] -= count - own
            if node in whole:
                self._nodes.remove(node)
        return tuple(n for n, _ in placed), tuple(c for _, c in placed)

    def place(self, spec: JobSpec,
              size_of: SizeFn) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
        """Take the cores of a job asking for cores; return ``(nodes, cores a node)``, or
        ``None`` when it does not fit now (nothing taken).  Where: :meth:`placement`."""
        placed = self.placement(spec, size_of)
        return None if placed is None else self._commit(spec, placed)

    def place_within(self, spec: JobSpec, size_of: SizeFn,
                     accept: Callable[[tuple[tuple[str, int], ...]], bool]
                     ) -> tuple[tuple[str, ...], tuple[int, ...]] | None:
        """Take the largest start of a job (whole nodes or cores) whose placement
        ``accept`` approves; ``(nodes, cores a node)`` (cores empty for whole nodes), or
        ``None`` (nothing taken).

        A job with a node range is tried at its :meth:`placement` size, then at fewer
        nodes (a binary search: a smaller start is a prefix of a larger one, so once
        ``accept`` refuses a size it refuses every larger one, as long as ``accept`` only
        asks that enough cores remain).  A ``#CORES`` job is tried once.
        """
        placed = self.placement(spec, size_of)
        if placed is None:
            return None
        if not accept(placed):
            if spec.cores is not None or len(placed) <= spec.lo:
                return None
            lo, hi, best = spec.lo, len(placed) - 1, None
            while lo <= hi:
                mid = (lo + hi) // 2
                capped = self.placement(spec, _capped(size_of, mid))
                if capped is not None and accept(capped):
                    best, lo = capped, mid + 1
                else:
                    hi = mid - 1
            if best is None:
                return None
            placed = best
        return self._commit(spec, placed)


def _capped(size_of: SizeFn, most: int) -> SizeFn:
    """``size_of`` with at most ``most`` nodes (``None`` below the job's minimum)."""
    def size(spec: JobSpec, free: int) -> int | None:
        got = size_of(spec, free)
        if got is None or min(got, most) < spec.lo:
            return None
        return min(got, most)
    return size


def shared_grows(view: View, jobs: Iterable[RunningJob], pool: FreeNodes) -> list[Decision]:
    """Grow co-locatable malleable jobs onto shareable cores, a node each (co-location,
    docs/guides/colocation.md), after the free nodes are handed out.

    A job qualifies when it said ``#COLOCATE yes``, asks ``#CORES_PER_NODE c``, has room in
    its range and a measured duty cycle; it takes the first node (in node order) that it
    does not hold, with ``c`` shareable cores whose least room holds that duty cycle.  A
    separation (``scheduler.colocation.overloaded``) shrinks it off that node again, its
    last, when the duty cycles there sum past the bound.  Empty without
    ``view.shareable_cores``.
    """
    room = dict(view.shareable_room)
    out: list[Decision] = []
    for job in jobs:
        spec, per_node = job.spec, job.spec.cores_per_node
        if (not spec.colocate or per_node is None or job.duty is None
                or len(job.nodes) >= spec.hi):
            continue
        for node, count in sorted_pairs(pool.shared()):
            if node not in job.nodes and count >= per_node and room.get(node, 0.0) >= job.duty:
                pool.take_shared(node, per_node)
                out.append(Grow(job.job_id, (node,)))
                break
    return out


def sorted_pairs(counts: dict[str, int]) -> list[tuple[str, int]]:
    """``(node, count)`` of ``counts`` with a count above 0, in natural node order."""
    return [(n, counts[n]) for n in sorted_nodes(counts) if counts[n] > 0]


def start_of(job: WaitingJob, pool: FreeNodes, size_of: SizeFn) -> tuple[Start, int] | None:
    """The Start of a waiting job if it fits in ``pool`` now (taken from it), with the node
    count it starts on; ``None`` when it does not fit.

    A node request takes ``size_of(spec, free nodes)`` whole nodes, lowest names first; a
    job asking for cores is placed by :meth:`FreeNodes.place`.
    """
    if job.spec.asks_cores:
        placed = pool.place(job.spec, size_of)
        if placed is None:
            return None
        return Start(job.job_id, placed[0], placed[1]), len(placed[0])
    size = size_of(job.spec, len(pool))
    if size is None:
        return None
    return Start(job.job_id, pool.take(size)), size


def fcfs_pass(
    waiting: Sequence[WaitingJob], pool: FreeNodes, size_of: SizeFn
) -> tuple[list[Decision], list[tuple[WaitingJob, int]], int]:
    """Start queue heads while they fit (FCFS).

    Returns the decisions, the started jobs with their sizes, and the index in ``waiting`` of
    the first job that did not fit (``len(waiting)`` when all started).
    """
    decisions: list[Decision] = []
    started: list[tuple[WaitingJob, int]] = []
    for index, job in enumerate(waiting):
        fit = start_of(job, pool, size_of)
        if fit is None:
            return decisions, started, index
        decisions.append(fit[0])
        started.append((job, fit[1]))
    return decisions, started, len(waiting)


def reservation(
    need: int, free: int, releases: Iterable[tuple[float, int]]
) -> tuple[float, int]:
    """EASY's reservation for a job needing ``need`` nodes (Lifka 1995).

    Args:
        need: nodes the head of the queue needs to start.
        free: nodes free now.
        releases: ``(time_s, count)``: nodes that running jobs give back at their expected
            end (``start_s + required_time_s``, never before now).

    Returns:
        ``(shadow_s, extra)``: the earliest time the head is sure to have its nodes, and the
        nodes free at that time that the head will not need.  ``(inf, 0)`` when running jobs
        never give back enough (a job larger than the cluster).
    """
    available = free
    for time_s, count in sorted(releases):
        available += count
        if available >= need:
            return time_s, available - need
    return math.inf, 0


def easy_backfill(
    now_s: float,
    head: WaitingJob,
    rest: Sequence[WaitingJob],
    pool: FreeNodes,
    size_of: SizeFn,
    releases: list[tuple[float, int]],
) -> list[Decision]:
    """EASY backfilling behind a head that cannot start (Lifka 1995).

    The head gets a reservation at the shadow time computed by :func:`reservation` from
    ``releases``.  A later job starts now when it fits and does not delay the reservation:
    it ends (``now_s + required_time_s``) no later than the shadow time, or it uses only
    the extra nodes the head will not need (a moldable/malleable job then starts with no more
    than the extra nodes).
    """
    shadow_s, extra = reservation(head.spec.lo, len(pool), releases)
    decisions: list[Decision] = []
    for job in rest:
        if job.spec.asks_cores:
            # placed only when it ends by the shadow time: its cores never count as extra
            if now_s + job.spec.required_time_s <= shadow_s:
                fit = start_of(job, pool, size_of)
                if fit is not None:
                    decisions.append(fit[0])
            continue
        size = size_of(job.spec, len(pool))
        if size is None:
            continue
        if now_s + job.spec.required_time_s <= shadow_s:
            decisions.append(Start(job.job_id, pool.take(size)))
            continue
        size = min(size, extra)
        if size >= job.spec.lo:
            decisions.append(Start(job.job_id, pool.take(size)))
            extra -= size
    return decisions


def releases_of(
    now_s: float, running: Iterable[RunningJob], started: Iterable[tuple[WaitingJob, int]]
) -> list[tuple[float, int]]:
    """``(time_s, count)`` pairs for :func:`reservation`: running jobs give back their nodes
    at their expected end (not before ``now_s``) and nodes of a shrink in flight now; jobs
    started in this call give theirs back at ``now_s + required_time_s``."""
    out = []
    for job in running:
        if job.releasing:
            out.append((now_s, job.releasing))
        out.append((max(now_s, job.expected_end_s), len(job.nodes) - job.releasing))
    out += [(now_s + job.spec.required_time_s, size) for job, size in started]
    return out
