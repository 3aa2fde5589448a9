"""A contention model for the simulator: how a job's layout on its cores stretches its run time.

The simulator otherwise runs every job at its curve's speed whatever its shape; with a
:class:`ContentionModel` in :attr:`scheduler.simulate.SimConfig.contention`, a job that
starts runs ``factor`` times its base time, the factor fixed at its start from its layout
(Liu & Guitart, "Fine-grained scheduling for containerized HPC workloads in Kubernetes
clusters", 2022: the effects their granularity, task-group and affinity policies act on).
Pure: plain data in and out, no clock, no process.

::

    the job's cores {node: core indices} ─┐   the other running jobs' cores and kinds
    shape policy, pinned or not ──────────┤            │
                                          ▼            ▼
                       Layout(workers a place, nodes, pinned, shared, straddles,
                              memory-bound cores on its busiest socket)
                                          │
              KindFactors of its kind ────┤
                                          ▼
    factor = grow(shape2, workers a place)          one place of W workers (GIL, fewer places)
           x unpinned          if not pinned and a node of it holds another job's cores
           x grow(spread2, nodes)                   spread over hosts (network-bound)
           x straddle          if a node's cores of it lie on two sockets
           x max(1, m / socket_saturation)          memory-bound: m memory-bound cores share
                                                    its busiest socket

The base time (factor 1) is the job alone, one place a core, pinned, each node's cores on one
socket.  ``shape2``, ``unpinned`` and ``spread2`` are measured on a real machine
(``python -m benchmarks.granularity --fit``, docs/benchmarks.md "Granularity and affinity");
``straddle`` and ``socket_saturation`` cannot be measured on a one-socket machine and are
assumed, with their source in :attr:`ContentionModel.sources`.

A ratio ``r`` measured at 2 (workers a place, hosts) is extrapolated to ``n`` by
:func:`grow`: a cost (``r ≥ 1``) grows by Amdahl's law, ``1 + (n-1)(r-1)`` (the share
``r - 1`` of a worker's time that the GIL, or the network, serialises is paid once for every
worker or host more), at most ``n`` (all serial); a saving (``r < 1``) stays ``r`` (the
messages between two places are gone once they are one place; more workers save no more).
Both rules are assumptions, stated in docs/benchmarks.md.

The factor is fixed at the job's start: neighbours that start or end later do not change it,
and a malleable job keeps it when it is grown or shrunk.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .resources import shape

__all__ = ["ContentionModel", "KindFactors", "Layout", "grow", "layout_of"]


def grow(ratio: float, n: int) -> float:
    """A ratio measured at 2 extrapolated to ``n`` (≥ 1; module docstring): 1 at ``n = 1``;
    ``min(n, 1 + (n-1)(ratio-1))`` for ``ratio ≥ 1``; ``ratio`` for ``ratio < 1``."""
    if n <= 1:
        return 1.0
    if ratio >= 1.0:
        return min(float(n), 1.0 + (n - 1) * (ratio - 1.0))
    return ratio


@dataclass(frozen=True)
class KindFactors:
    """The factors of one kind of job (each a ratio of run times, ≥ 0; 1 = no effect).

    Attributes:
        shape2: time of one place of 2 workers over that of 2 places of 1 worker (pinned,
            alone): above 1 where the GIL serialises a place's workers, below where fewer
            places mean fewer messages.
        unpinned: time unpinned over pinned, with another job on the same cores.
        spread2: time on 2 hosts over 1 host (the same places).
        straddle: time with a node's places on two sockets over one socket.
        memory: whether the kind is memory-bound (shares its socket's bandwidth).
    """

    shape2: float = 1.0
    unpinned: float = 1.0
    spread2: float = 1.0
    straddle: float = 1.0
    memory: bool = False

    def __post_init__(self) -> None:
        for name in ("shape2", "unpinned", "spread2", "straddle"):
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite ratio > 0, got {value!r}")


@dataclass(frozen=True)
class Layout:
    """How a job lies on its cores at its start (:func:`layout_of`).

    Attributes:
        workers: GLB workers of its largest place (1 = one place a core).
        nodes: nodes it holds cores on.
        pinned: whether its places are bound to their cores.
        shared: whether a node of it holds cores of another running job.
        straddles: whether its cores on some node lie on more than one socket.
        memory_cores: memory-bound cores (its own included where it is memory-bound) on the
            socket of its that has the most.
    """

    workers: int
    nodes: int
    pinned: bool
    shared: bool
    straddles: bool
    memory_cores: int


@dataclass(frozen=True)
class ContentionModel:
    """Run-time factors by kind of job (module docstring).

    Attributes:
        kinds: kind -> its factors; a job's kind is its ``program`` label where that is a key,
            else its ``profile`` (``cpu``, ``memory``, ``network``), else it has no factor.
        socket_saturation: memory-bound cores a socket serves at full bandwidth (≥ 1).
        sources: factor name -> where its value comes from (measured or assumed, and why).
    """

    kinds: Mapping[str, KindFactors] = field(default_factory=dict)
    socket_saturation: int = 8
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.socket_saturation < 1:
            raise ValueError(f"socket_saturation must be >= 1, got {self.socket_saturation}")

    def kind_of(self, spec: object) -> str | None:
        """The kind of a job spec (its ``program`` if known, else its ``profile``)."""
        program = getattr(spec, "program", None)
        if program in self.kinds:
            return str(program)
        profile = getattr(spec, "profile", None)
        return str(profile) if profile in self.kinds else None

    def is_memory(self, spec: object) -> bool:
        """Whether a job spec is of a memory-bound kind."""
        kind = self.kind_of(spec)
        return kind is not None and self.kinds[kind].memory

    def factor(self, kind: str | None, layout: Layout) -> float:
        """The run-time factor of a job of ``kind`` laid as ``layout`` (module docstring);
        1.0 for a kind the model does not know."""
        if kind is None or kind not in self.kinds:
            return 1.0
        k = self.kinds[kind]
        out = grow(k.shape2, layout.workers)
        if not layout.pinned and layout.shared:
            out *= k.unpinned
        out *= grow(k.spread2, layout.nodes)
        if layout.straddles:
            out *= k.straddle
        if k.memory:
            out *= max(1.0, layout.memory_cores / self.socket_saturation)
        return out


def layout_of(spec: object, cores: Mapping[str, Sequence[int]],
              others: Mapping[object, tuple[bool, Mapping[str, Sequence[int]]]],
              sockets: Mapping[str, Sequence[int]], policy: str, pinned: bool,
              memory: bool) -> Layout:
    """The layout of a job that starts on ``cores``.

    Args:
        spec: its :class:`~scheduler.jobs.JobSpec` (its ``profile``).
        cores: node -> the core indices it holds there.
        others: every other running job -> ``(memory-bound, {node: core indices})``.
        sockets: node -> the socket of each core index (missing or empty: one socket).
        policy: the shape policy (:func:`scheduler.resources.shape`).
        pinned: whether its places are bound.
        memory: whether it is memory-bound.

    Returns:
        Its :class:`Layout`.

    Raises:
        ValueError: an unknown profile or policy (:func:`scheduler.resources.shape`).
    """
    profile = getattr(spec, "profile", "cpu")
    workers = max((shape(profile, len(c), policy)[1] for c in cores.values() if c), default=1)

    def socket(node: str, core: int) -> int:
        of = sockets.get(node, ())
        return of[core] if core < len(of) else 0

    mine = {(n, socket(n, c)) for n, cs in cores.items() for c in cs}
    straddles = any(len({s for n2, s in mine if n2 == n}) > 1 for n in cores)
    shared = False
    load: dict[tuple[str, int], int] = {}
    if memory:
        for n, cs in cores.items():
            for c in cs:
                load[(n, socket(n, c))] = load.get((n, socket(n, c)), 0) + 1
    for is_memory, held in others.values():
        for n, cs in held.items():
            if n in cores and cs:
                shared = True
            if is_memory:
                for c in cs:
                    key = (n, socket(n, c))
                    if key in mine:
                        load[key] = load.get(key, 0) + 1
    return Layout(workers=workers, nodes=sum(1 for c in cores.values() if c), pinned=pinned,
                  shared=shared, straddles=straddles,
                  memory_cores=max(load.values(), default=0))
