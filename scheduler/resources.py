"""The resource graph: nodes with their cores, who holds which, and the shape of a job.

The scheduler hands out whole nodes, as the Java ElasticJobScheduler does, and, since
``--cores-per-node``, cores of nodes: a job may ask for ``#CORES n`` (on any nodes) or
``#CORES_PER_NODE c`` with its node count.  This module is pure (plain data in and out, no
process, no clock), and the real scheduler and the simulator use it alike:

::

    ResourceGraph  node -> its CPUs (and their sockets)      what the cluster has
        │
    CoreLedger     node -> free CPUs; job -> {node: CPUs}    who holds what, now
        │              (the whole-free nodes are the scheduler's ``free`` set itself)
        ▼
    View.free_cores (node, free cores) ──► policy ──► Start(job, nodes, cores=(counts…))
        │                                                 │
    place_cores / nodes_for_cores (placement by profile)  ▼
    shape(profile, cores a node, policy) ──► APGAS_PLACES_PER_HOST x GLB_WORKERS, APGAS_CORES

**Logical nodes** (``serve --nodes N --cores-per-node C``) map onto this machine's CPUs: core
``j`` of node ``k`` (counted from 0) is CPU ``(k*C + j) mod os.cpu_count()``; when ``N*C``
exceeds the CPUs, nodes share CPUs (oversubscribed, said once at start).  Without
``--cores-per-node`` each node is **one slot**: a node request means what it always meant,
a job is given no shape, and ``#CORES n`` takes ``n`` nodes.  ssh hosts and Slurm nodes
report their own counts (``nproc`` over ssh, Slurm's ``CPUTot``): their cores are numbered
0…C-1 on each host.

**Placement** (Liu & Guitart, "fine-grained scheduling of containerized HPC on Kubernetes"):
a ``#CORES n`` job of profile ``network`` is packed on as few nodes as possible; a ``cpu``
or ``memory`` job is spread on as many nodes as there are (at most ``n``).  Either way
every node gets the same share (``n/k`` cores on ``k`` nodes, ``k`` dividing ``n``), so
that every host of a job has the same shape.  Among the nodes with room, those with the
fewest free cores are used first (best fit, whole nodes kept for node requests), then the
lowest names.

**Shape** (:func:`shape`): policy ``scale`` (default, "node-as-one-place"): one place a
node with a GLB worker a core; ``granularity``: one place a core with one worker; a
``network`` job is one place a node under both (its workers share memory, not the network).
``core``: one place a core for every profile (the layout without an application layer, the
granularity study's baseline: docs/benchmarks.md, "Granularity and affinity").

**First fit and task groups** (the granularity study's switches; the scheduler's default is
neither): :func:`first_fit_cores` takes a job's cores core by core on the nodes in order,
wherever free (uneven shares); :meth:`CoreLedger.take` with ``group=True`` takes a node's
share on one socket where one socket has that many free cores, the one with the most free
(Liu & Guitart's task groups: a group together, groups spread apart).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "PROFILES",
    "SHAPES",
    "CoreLedger",
    "ResourceGraph",
    "cores_refusal",
    "first_fit_cores",
    "local_graph",
    "machine_sockets",
    "nodes_for_cores",
    "parse_profile",
    "shape",
    "start_counts",
]

#: A job's profile (``#PROFILE``): what limits it (Liu & Guitart's classes).
PROFILES = ("cpu", "memory", "network")
#: The shape policies (``serve --shape``).
SHAPES = ("scale", "granularity", "core")


def parse_profile(text: str) -> str:
    """Check a profile word (case-insensitive): ``network``, ``cpu`` or ``memory``.

    Raises:
        ValueError: another word; the message suggests the nearest
            (:func:`difflib.get_close_matches`).
    """
    word = str(text).strip().lower()
    if word in PROFILES:
        return word
    close = difflib.get_close_matches(word, PROFILES, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}?" if close else "use network, cpu or memory"
    raise ValueError(f"unknown profile {text!r} ({hint})")


def machine_sockets(root: str = "/sys/devices/system/cpu") -> dict[int, int]:
    """CPU number -> its socket (``cpuN/topology/physical_package_id``), for the CPUs whose
    topology this machine shows; ``{}`` where it shows none (a container without sysfs)."""
    out: dict[int, int] = {}
    base = Path(root)
    try:
        entries = list(base.glob("cpu[0-9]*/topology/physical_package_id"))
    except OSError:
        return out
    for path in entries:
        try:
            out[int(path.parent.parent.name[3:])] = int(path.read_text().strip())
        except (OSError, ValueError):
            continue
    return out


@dataclass(frozen=True)
class ResourceGraph:
    """The cluster's nodes and their cores.

    Attributes:
        cpus: node -> the CPU numbers of its cores on the machine that runs it, in node
            order (the scheduler's node order).
        sockets: node -> the socket of each of its cores (same order as ``cpus``); empty
            for a node whose sockets are unknown.
        slots: ``True`` when no core count was given: each node is one slot (today's
            whole-node behaviour; jobs are given no shape).
    """

    cpus: Mapping[str, tuple[int, ...]]
    sockets: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    slots: bool = False

    @classmethod
    def whole_nodes(cls, names: Iterable[str]) -> ResourceGraph:
        """Each node one slot (no ``--cores-per-node``)."""
        return cls({n: (0,) for n in names}, {}, slots=True)

    @classmethod
    def counted(cls, counts: Mapping[str, int]) -> ResourceGraph:
        """Nodes that report their own core counts (ssh hosts, Slurm): cores 0…C-1.

        Raises:
            ValueError: a count below 1.
        """
        for name, count in counts.items():
            if count < 1:
                raise ValueError(f"node {name!r} has {count} cores; at least 1")
        return cls({n: tuple(range(c)) for n, c in counts.items()})

    def size(self, node: str) -> int:
        """The number of cores of ``node``."""
        return len(self.cpus[node])

    def sizes(self) -> dict[str, int]:
        """node -> its number of cores."""
        return {n: len(c) for n, c in self.cpus.items()}

    @property
    def total_cores(self) -> int:
        """The cores of all nodes together."""
        return sum(len(c) for c in self.cpus.values())


def local_graph(names: Sequence[str], cores_per_node: int | None,
                cpu_count: int | None = None,
                sockets: Mapping[int, int] | None = None) -> tuple[ResourceGraph, str | None]:
    """The graph of logical nodes ``names`` with ``cores_per_node`` cores each (module
    docstring: core ``j`` of node ``k`` is CPU ``(k*C + j) mod cpu_count``).

    Args:
        names: the logical nodes, in order.
        cores_per_node: C (≥ 1), or ``None``: each node one slot.
        cpu_count: this machine's CPUs (default ``os.cpu_count()``).
        sockets: CPU -> socket (default :func:`machine_sockets`).

    Returns:
        ``(graph, note)``: ``note`` is the one line to say at start when the nodes share
        CPUs (``N*C`` > CPUs), else ``None``.

    Raises:
        ValueError: ``cores_per_node`` below 1.
    """
    if cores_per_node is None:
        return ResourceGraph.whole_nodes(names), None
    if cores_per_node < 1:
        raise ValueError(f"--cores-per-node is at least 1, got {cores_per_node}")
    count = cpu_count or os.cpu_count() or 1
    socket_of = machine_sockets() if sockets is None else sockets
    cpus = {name: tuple((k * cores_per_node + j) % count for j in range(cores_per_node))
            for k, name in enumerate(names)}
    socks = {name: tuple(socket_of[c] for c in cs) for name, cs in cpus.items()
             if all(c in socket_of for c in cs)}
    wanted = len(names) * cores_per_node
    note = None
    if wanted > count:
        note = (f"{len(names)} nodes x {cores_per_node} cores = {wanted} cores on "
                f"{count} CPUs: oversubscribed, core j of node k is CPU (k*{cores_per_node}+j) "
                f"mod {count}")
    return ResourceGraph(cpus, socks), note


# ----------------------------------------------------------------------------- requests


def cores_refusal(spec: object, sizes: Mapping[str, int]) -> str | None:
    """Why a job asking for cores can never run on nodes of ``sizes`` cores, or ``None``.

    Args:
        spec: a :class:`~scheduler.jobs.JobSpec` (its ``cores`` and ``cores_per_node``).
        sizes: node -> its cores.

    Returns:
        One line (``"job 'x' asks for 6 cores a node; the largest node has 4"``), or
        ``None`` (also for a job that asks for nodes only).
    """
    name = getattr(spec, "name", "job")
    cores, per_node = getattr(spec, "cores", None), getattr(spec, "cores_per_node", None)
    if per_node is not None:
        largest = max(sizes.values(), default=0)
        if per_node > largest:
            return f"job {name!r} asks for {per_node} cores a node; the largest node has {largest}"
        room = sum(1 for s in sizes.values() if s >= per_node)
        lo = getattr(spec, "lo", 1)
        if room < lo:
            return (f"job {name!r} needs {lo} nodes of {per_node} cores; the cluster has {room}")
    if cores is not None:
        total = sum(sizes.values())
        if cores > total:
            return f"job {name!r} asks for {cores} cores; the cluster has {total}"
        if nodes_for_cores(cores, sizes, "cpu") is None:
            return (f"job {name!r} asks for {cores} cores, which no equal share of the nodes "
                    f"holds (k nodes of {cores}/k cores each); ask for another count")
    return None


def _best_fit(free: Mapping[str, int], need: int, order: Sequence[str]) -> list[str]:
    """The nodes with at least ``need`` free cores, fewest free first, then in ``order``."""
    rank = {n: i for i, n in enumerate(order)}
    fit = [n for n in order if free.get(n, 0) >= need]
    return sorted(fit, key=lambda n: (free[n], rank[n]))


def nodes_for_cores(cores: int, free: Mapping[str, int], profile: str,
                    order: Sequence[str] | None = None) -> tuple[tuple[str, int], ...] | None:
    """Where a ``#CORES n`` job goes (module docstring: packed for ``network``, spread for
    ``cpu``/``memory``, an equal share on each node).

    Args:
        cores: n, the cores asked for (≥ 1).
        free: node -> its free cores (nodes with none may be left out).
        profile: one of :data:`PROFILES`.
        order: the nodes in the scheduler's order (default: ``free``'s order).

    Returns:
        ``((node, share), …)`` in node order, or ``None`` when no equal share fits now.
    """
    order = list(order if order is not None else free)
    with_room = sum(1 for n in order if free.get(n, 0) > 0)
    counts = [k for k in range(1, min(cores, with_room) + 1) if cores % k == 0]
    if profile != "network":
        counts.reverse()
    for k in counts:
        share = cores // k
        fit = _best_fit(free, share, order)
        if len(fit) >= k:
            chosen = set(fit[:k])
            return tuple((n, share) for n in order if n in chosen)
    return None


def first_fit_cores(cores: int, free: Mapping[str, int], order: Sequence[str] | None = None,
                    pack: bool = False) -> tuple[tuple[str, int], ...] | None:
    """Where a ``#CORES n`` job goes without task groups (module docstring): core by core on
    the nodes in ``order``, as many as each has free, so the shares may be uneven.

    Args:
        cores: n (≥ 1).
        free: node -> its free cores.
        order: the nodes in the scheduler's order (default: ``free``'s order).
        pack: take the first node that holds all ``n`` when there is one (a ``network``
            job under an application-layer policy), else first fit.

    Returns:
        ``((node, count), …)`` in node order, or ``None`` when fewer than ``n`` cores are
        free.
    """
    order = list(order if order is not None else free)
    if pack:
        for node in order:
            if free.get(node, 0) >= cores:
                return ((node, cores),)
    out, left = [], cores
    for node in order:
        take = min(free.get(node, 0), left)
        if take > 0:
            out.append((node, take))
            left -= take
        if not left:
            return tuple(out)
    return None


def start_counts(spec: object, nodes: Sequence[str],
                 counts: Sequence[int]) -> tuple[tuple[int, ...], str | None]:
    """The cores a Start takes on each of its nodes, and why they do not match the job.

    Args:
        spec: the job's :class:`~scheduler.jobs.JobSpec`.
        nodes: the Start's nodes.
        counts: the Start's ``cores`` (one count a node), or empty: the job takes whole
            nodes (a node request), ``cores_per_node`` on each (a ``#CORES_PER_NODE`` job
            started by a policy that names nodes only), or an equal share of ``#CORES``.

    Returns:
        ``(counts, problem)``: ``counts`` empty for whole nodes; ``problem`` a one-line
        reason or ``None``.
    """
    cores, per_node = getattr(spec, "cores", None), getattr(spec, "cores_per_node", None)
    if not counts:
        if per_node is not None:
            return tuple(per_node for _ in nodes), None
        if cores is not None:
            if not nodes or cores % len(nodes):
                return (), f"{cores} cores do not share equally on {len(nodes)} nodes"
            return tuple(cores // len(nodes) for _ in nodes), None
        return (), None
    if len(counts) != len(nodes):
        return (), f"{len(counts)} core counts for {len(nodes)} nodes"
    if any(c < 1 for c in counts):
        return (), f"a core count below 1: {list(counts)}"
    if per_node is not None and any(c != per_node for c in counts):
        return (), f"cores {list(counts)}: the job asks for {per_node} a node"
    if cores is not None and sum(counts) != cores:
        return (), f"cores {list(counts)}: the job asks for {cores}"
    if cores is None and per_node is None:
        return (), "the job asks for whole nodes, not cores"
    return tuple(counts), None


def shape(profile: str, cores: int, policy: str = "scale") -> tuple[int, int]:
    """The shape of a job on a host where it holds ``cores`` cores (module docstring).

    Args:
        profile: one of :data:`PROFILES`.
        cores: the cores granted on the host (≥ 1).
        policy: one of :data:`SHAPES`.

    Returns:
        ``(places per host, GLB workers a place)``: ``(1, cores)`` for ``scale`` and for a
        ``network`` job, ``(cores, 1)`` for ``granularity``; ``(cores, 1)`` for every
        profile under ``core``.

    Raises:
        ValueError: an unknown profile or policy, or ``cores`` below 1.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: use {', '.join(PROFILES)}")
    if policy not in SHAPES:
        raise ValueError(f"unknown shape policy {policy!r}: use {' or '.join(SHAPES)}")
    if cores < 1:
        raise ValueError(f"a host holds at least 1 core, got {cores}")
    if policy == "core":
        return cores, 1
    if profile == "network" or policy == "scale":
        return 1, cores
    return cores, 1


# ----------------------------------------------------------------------------- the ledger


class CoreLedger:
    """Who holds which cores now (mutable; the caller's lock guards it).

    The whole-free nodes are the set ``whole`` the scheduler already keeps (``free``): node
    jobs take and give whole nodes through it as before, and this ledger sees them there.
    A job asking for cores takes cores through :meth:`take` and gives them back through
    :meth:`give`; a node that a core job uses part of leaves ``whole`` and comes back when
    its last core is free.  Cores are counted by their index on the node (core ``j``, 0…C-1);
    :meth:`cpus_of` maps them to the CPUs of the graph (two cores of an oversubscribed node
    may be one CPU).

    Args:
        graph: the cluster.
        whole: the scheduler's set of free nodes (shared, not copied).
    """

    def __init__(self, graph: ResourceGraph, whole: set[str]) -> None:
        self.graph = graph
        self.whole = whole
        #: node -> its free core indices, for the nodes core jobs use part of.
        self.partial: dict[str, list[int]] = {}
        #: job id -> node -> the core indices it holds there (core jobs only).
        self.held: dict[object, dict[str, tuple[int, ...]]] = {}

    def free_counts(self) -> dict[str, int]:
        """node -> its free cores (whole-free and partly used nodes with a free core)."""
        out = {n: self.graph.size(n) for n in self.whole}
        out.update({n: len(c) for n, c in self.partial.items() if c})
        return out

    def take(self, job: object, node: str, count: int, group: bool = False) -> tuple[int, ...]:
        """Give ``job`` ``count`` free cores of ``node``, its lowest free ones (deterministic:
        the simulator and the real scheduler hand out the same cores); returns their
        indices.

        With ``group`` (a task group, module docstring) and the node's sockets known
        (``graph.sockets``), the cores come from one socket where one has ``count`` free:
        the one with the most free (task groups spread apart, Liu & Guitart 2022), then the
        lowest; else the lowest free cores as without.

        Raises:
            ValueError: ``node`` has fewer than ``count`` free cores.
        """
        have = self.graph.size(node) if node in self.whole else len(self.partial.get(node, []))
        if count > have:
            raise ValueError(f"{node} has {have} free cores, {count} asked")
        if node in self.whole:
            self.whole.discard(node)
            self.partial[node] = list(range(self.graph.size(node)))
        free = self.partial[node]
        chosen = tuple(sorted(free)[:count])
        sockets = self.graph.sockets.get(node, ()) if group else ()
        if sockets:
            by_socket: dict[int, list[int]] = {}
            for core in sorted(free):
                by_socket.setdefault(sockets[core], []).append(core)
            fits = sorted((-len(c), s) for s, c in by_socket.items() if len(c) >= count)
            if fits:
                chosen = tuple(by_socket[fits[0][1]][:count])
        for core in chosen:
            free.remove(core)
        mine = self.held.setdefault(job, {})
        mine[node] = tuple(sorted(mine.get(node, ()) + chosen))
        return chosen

    def give(self, job: object, node: str) -> bool:
        """``job`` gives back its cores of ``node``; returns whether ``node`` is now wholly
        free (it is then in ``whole``).  A node the job holds no core of: ``False``."""
        mine = self.held.get(job, {})
        cores = mine.pop(node, None)
        if not mine:
            self.held.pop(job, None)
        if cores is None:
            return False
        free = self.partial.setdefault(node, [])
        free.extend(cores)
        if len(free) >= self.graph.size(node):
            del self.partial[node]
            self.whole.add(node)
            return True
        return False

    def acquire(self, job: object, nodes: Sequence[str], counts: Sequence[int] = (),
                group: bool = False) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``job`` takes ``nodes``: whole (``counts`` empty; they leave ``whole``) or
        ``counts[i]`` cores of ``nodes[i]`` (on one socket each with ``group``,
        :meth:`take`).  Returns ``(node, core indices)`` taken (empty for whole nodes).

        Raises:
            ValueError: a node with fewer free cores than asked (checked by the caller's
                decision check first).
        """
        if not counts:
            self.whole.difference_update(nodes)
            return ()
        return tuple((n, self.take(job, n, c, group))
                     for n, c in zip(nodes, counts, strict=True))

    def release(self, job: object, nodes: Iterable[str]) -> list[str]:
        """``job`` gives back ``nodes`` (whole nodes, or its cores there); returns those now
        wholly free, which are back in ``whole``."""
        mine = self.held.get(job, {})
        out = []
        for node in list(nodes):
            if node in mine:
                if self.give(job, node):
                    out.append(node)
            else:
                self.whole.add(node)
                out.append(node)
        return out

    def give_all(self, job: object) -> list[str]:
        """``job`` gives back every core it holds; returns the nodes now wholly free."""
        return [n for n in list(self.held.get(job, {})) if self.give(job, n)]

    def cores_of(self, job: object) -> dict[str, tuple[int, ...]]:
        """node -> the core indices ``job`` holds there (core jobs; empty for a node job)."""
        return dict(self.held.get(job, {}))

    def cpus_of(self, job: object, nodes: Sequence[str]) -> dict[str, list[int]]:
        """node -> the CPUs of the job on each of ``nodes`` (in that order): the CPUs of its
        cores there, or all the node's CPUs where it holds the whole node."""
        mine = self.held.get(job, {})
        out = {}
        for node in nodes:
            cpus = self.graph.cpus[node]
            cores = mine.get(node, range(len(cpus)))
            out[node] = sorted({cpus[j] for j in cores})
        return out
