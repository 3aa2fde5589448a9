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
    "PROFILE_ENV",
    "SHAPES",
    "CoreLedger",
    "ProfileThresholds",
    "ResourceGraph",
    "cores_refusal",
    "local_cpus",
    "first_fit_cores",
    "local_graph",
    "with_node",
    "without_node",
    "machine_sockets",
    "nodes_for_cores",
    "measured_profile",
    "parse_profile",
    "shape",
    "shape_profile",
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


@dataclass(frozen=True)
class ProfileThresholds:
    """Where a job's measured load makes it ``network`` or ``memory`` bound
    (:func:`measured_profile`).

    The defaults come from this project's own jobs (``python -m benchmarks.load_profile``,
    ``benchmarks/results/load_profile.json``, 2 places, smoke sizes; docs/guides/scheduler.md):
    Pi, UTS and BC (GLB: steal requests, lifelines, results) send under 1 kB/s per core once
    running, 0.4 MB/s in their first window (the work handed out); Jacobi on a 1024 x 1024
    grid sends 2.9 MB/s per core (median; its halo rows every batch).  1 MB/s per core
    sits between the two, three times above the busiest GLB window and three times below
    Jacobi.  Every job measured holds 165-200 MB per core (an interpreter with numpy and the
    compiled kernels); 1 GiB per core, five times that, is where a job's data, not the
    runtime, fills a node's memory first.

    Attributes:
        network_bytes_per_s: bytes sent between places per second per core at or above which
            a job is ``network`` (``APGAS_SCHEDULER_NETWORK_BYTES_PER_CORE``).
        memory_bytes: resident bytes per core at or above which a job is ``memory``
            (``APGAS_SCHEDULER_MEMORY_BYTES_PER_CORE``).
    """

    network_bytes_per_s: float = 1_000_000.0
    memory_bytes: float = float(1 << 30)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProfileThresholds:
        """The thresholds of :data:`PROFILE_ENV` (unset or empty: the defaults).

        Raises:
            ValueError: a value is not a number > 0; the message names the variable.
        """
        env = os.environ if environ is None else environ
        values: dict[str, float] = {}
        for name, var in PROFILE_ENV.items():
            text = env.get(var, "").strip()
            if not text:
                continue
            try:
                values[name] = float(text)
            except ValueError:
                raise ValueError(f"{var}={text!r} is not a number") from None
            if not 0 < values[name] < float("inf"):
                raise ValueError(f"{var} must be > 0, got {text!r}")
        return cls(**values)


#: The environment variable of each threshold of :class:`ProfileThresholds`.
PROFILE_ENV = {"network_bytes_per_s": "APGAS_SCHEDULER_NETWORK_BYTES_PER_CORE",
               "memory_bytes": "APGAS_SCHEDULER_MEMORY_BYTES_PER_CORE"}


def measured_profile(load: object, cores: int, thresholds: ProfileThresholds) -> str:
    """A running job's profile from its last load report (Liu & Guitart's classes, measured
    rather than declared): ``network`` if it sends at least
    ``thresholds.network_bytes_per_s`` bytes per second per core between its places, else
    ``memory`` if it holds at least ``thresholds.memory_bytes`` resident bytes per core,
    else ``cpu``.

    Args:
        load: its last report: any object with ``bytes_per_s`` (float) and ``rss_bytes``
            (int or ``None``), a :class:`scheduler.job_state.LoadSample` or an
            :class:`apgaspy.wire.protocol.LoadReport`.
        cores: the cores it holds (< 1 counts as 1).
        thresholds: where the classes begin.
    """
    cores = max(1, cores)
    if load.bytes_per_s / cores >= thresholds.network_bytes_per_s:  # type: ignore[attr-defined]
        return "network"
    rss = load.rss_bytes  # type: ignore[attr-defined]
    if rss is not None and rss / cores >= thresholds.memory_bytes:
        return "memory"
    return "cpu"


def shape_profile(declared: str, profile_declared: bool, measured: str | None) -> str:
    """The profile a job is shaped by: its own (``#PROFILE``) when it declared one, else the
    one measured from its load (``None`` before its first report: the declared default)."""
    if profile_declared or measured is None:
        return declared
    return measured


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


def local_cpus(k: int, cores_per_node: int, cpu_count: int | None = None) -> tuple[int, ...]:
    """The CPUs of logical node ``k`` (0-based: 127.0.1.(k+1)) with ``cores_per_node`` cores:
    core ``j`` is CPU ``(k*C + j) mod cpu_count`` (module docstring); also for a node added
    while the scheduler runs (:mod:`scheduler.pool`)."""
    count = cpu_count or os.cpu_count() or 1
    return tuple((k * cores_per_node + j) % count for j in range(cores_per_node))


def with_node(graph: ResourceGraph, name: str, cpus: Sequence[int] | None) -> ResourceGraph:
    """``graph`` with node ``name`` added (``cpus``: its CPUs, or None: one slot, for a
    slot graph) or, when ``name`` is there already, left as it is.  Sockets of the new node
    come from :func:`machine_sockets` when every CPU is known there."""
    if name in graph.cpus:
        return graph
    own = (0,) if graph.slots or cpus is None else tuple(cpus)
    socks = dict(graph.sockets)
    if not graph.slots:
        socket_of = machine_sockets()
        if own and all(c in socket_of for c in own):
            socks[name] = tuple(socket_of[c] for c in own)
    return ResourceGraph({**graph.cpus, name: own}, socks, graph.slots)


def without_node(graph: ResourceGraph, name: str) -> ResourceGraph:
    """``graph`` without node ``name`` (a node that left the pool)."""
    return ResourceGraph({n: c for n, c in graph.cpus.items() if n != name},
                         {n: s for n, s in graph.sockets.items() if n != name}, graph.slots)


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
    cpus = {name: local_cpus(k, cores_per_node, count) for k, name in enumerate(names)}
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
        #: job id -> node -> the core indices it holds there (core jobs only), a shared
        #: core held by each job on it.
        self.held: dict[object, dict[str, tuple[int, ...]]] = {}
        #: Nodes being drained (:mod:`scheduler.pool`): their free cores are not offered.
        self.closed: set[str] = set()
        #: (node, core index) -> the jobs on it, in the order they came, for the cores more
        #: than one job holds (co-location, :meth:`share`); empty without co-location.
        self.shared: dict[tuple[str, int], list[object]] = {}

    def free_counts(self) -> dict[str, int]:
        """node -> its free cores (whole-free and partly used nodes with a free core), the
        ``closed`` ones left out."""
        out = {n: self.graph.size(n) for n in self.whole if n not in self.closed}
        out.update({n: len(c) for n, c in self.partial.items() if c and n not in self.closed})
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

    def adopt(self, job: object, held: Mapping[str, Sequence[int]], *,
              shared: bool = False) -> None:
        """``job`` takes exactly the cores ``held`` (node -> core indices), as a restarted
        scheduler re-adopts a running job from its journal (:mod:`scheduler.recovery`).
        ``shared``: the job co-locates (``#COLOCATE yes``), so a core that a job adopted
        before it holds is taken beside that job (:meth:`share`), as it was before the
        restart.

        Raises:
            ValueError: a core is not free (another job holds it and ``shared`` is false,
                or no job holds it and it is not free, or the node has no such core);
                nothing is taken then.
        """
        beside: dict[str, list[int]] = {}
        for node, cores in held.items():
            size = self.graph.size(node)
            free = range(size) if node in self.whole else self.partial.get(node, [])
            busy = [c for c in cores if c not in free]
            if shared:
                beside[node] = [c for c in busy if 0 <= c < size and self.users(node, c)]
                busy = [c for c in busy if c not in beside[node]]
            if busy or len(set(cores)) != len(cores):
                raise ValueError(f"cores {list(cores)} of {node} are not free "
                                 f"(taken: {busy or 'twice'})")
        for node, cores in held.items():
            if beside.get(node):
                self.share(job, node, beside[node])
            own = [c for c in cores if c not in beside.get(node, ())]
            if not own:
                continue
            if node in self.whole:
                self.whole.discard(node)
                self.partial[node] = list(range(self.graph.size(node)))
            free_list = self.partial[node]
            for core in own:
                free_list.remove(core)
            mine = self.held.setdefault(job, {})
            mine[node] = tuple(sorted(mine.get(node, ()) + tuple(own)))

    def give(self, job: object, node: str) -> bool:
        """``job`` gives back its cores of ``node``; returns whether ``node`` is now wholly
        free (it is then in ``whole``).  A node the job holds no core of: ``False``."""
        mine = self.held.get(job, {})
        cores = mine.pop(node, None)
        if not mine:
            self.held.pop(job, None)
        if cores is None:
            return False
        if self.shared:
            cores = tuple(c for c in cores if not self._leave_shared(job, node, c))
            if not cores:
                return False
        free = self.partial.setdefault(node, [])
        free.extend(cores)
        if len(free) >= self.graph.size(node):
            del self.partial[node]
            self.whole.add(node)
            return True
        return False

    def _leave_shared(self, job: object, node: str, core: int) -> bool:
        """``job`` leaves ``core`` of ``node``; returns whether another job still holds it
        (it is then not freed)."""
        users = self.shared.get((node, core))
        if users is None:
            return False
        if job in users:
            users.remove(job)
        if len(users) <= 1:
            del self.shared[(node, core)]
        return bool(users)

    def users(self, node: str, core: int) -> list[object]:
        """The jobs holding ``core`` of ``node``, in the order they came (empty: free, or
        held whole by a node job)."""
        if (node, core) in self.shared:
            return list(self.shared[(node, core)])
        return [j for j, mine in self.held.items() if core in mine.get(node, ())]

    def share(self, job: object, node: str, cores: Sequence[int]) -> tuple[int, ...]:
        """``job`` takes ``cores`` of ``node`` that other jobs hold, beside them (co-location:
        the caller checked that they may be shared, :mod:`scheduler.colocation`); returns
        their indices.  Giving them back frees a core only once its last job has left it.

        Raises:
            ValueError: a core no job holds, or one ``job`` already holds.
        """
        chosen = tuple(sorted(cores))
        for core in chosen:
            users = self.users(node, core)
            if not users or job in users:
                raise ValueError(f"core {core} of {node} cannot be shared by {job!r}: "
                                 f"held by {users}")
            self.shared[(node, core)] = [*users, job]
        mine = self.held.setdefault(job, {})
        mine[node] = tuple(sorted(mine.get(node, ()) + chosen))
        return chosen

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
