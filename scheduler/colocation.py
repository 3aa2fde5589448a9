"""Co-location by duty cycle: jobs that idle share cores, and what it costs them.

A job's **duty cycle** is the share of wall time its cores compute rather than wait
(:attr:`scheduler.job_state.JobState.duty_cycle`, from the job's load lines).  A job that
says ``#COLOCATE yes`` may take cores that other such jobs hold, while the duty cycles of the
jobs on each core sum under the bound (``serve --colocate-bound``; Xie 2026, "sparse-domain
multiplexing of MPI-CFD on Kubernetes": N simulations share the cores one would hold idle).
This module is pure (plain data in and out, no process, no clock): the real scheduler and the
simulator ask it the same questions:

::

    CoreLedger (who holds which core; shared cores: several jobs)   scheduler.resources
        │  + Occupant per running job (duty, co-locatable, rigid, time left alone)
        ▼
    shareable(ledger, occupants, bound) ──► View.shareable_cores ──► policy ──► Start
    pick_shared(...)                     ──► which held cores a co-locating Start takes
    overloaded(ledger, occupants, bound) ──► separations(...): per overloaded core, a
                                              move (grow onto free cores, then the named
                                              shrink off the shared node), a named shrink,
                                              or an overload of jobs that cannot move
    newcomer_fits(...)                   ──► may a rigid newcomer start on shared cores
    slowdown(beta, rho_N, rho_1)         ──► how much slower a co-located job runs

**The cost model** (Xie 2026): N jobs sharing the cores of one job run each in
``T_N = T_1 (1 + beta (rho_N - rho_1))``, where ``rho = N R / (M C)`` is the load of the
cores (R the CPU demand of one job: its cores x its duty cycle; M nodes of C cores).  On one
core the load is the sum of the duty cycles of the jobs on it (:func:`core_load`), and a job
alone on its cores has ``rho_1`` = its own duty cycle.  The paper fits ``beta`` = 0.524 +-
0.021 from all its points (0.773 from N=2 alone) and predicts within +-4 %.  The simulator
reads ``beta`` from ``benchmarks/results/colocation.json`` (a measurement on this code base)
when it is there, else uses the paper's (:func:`read_beta`).

**Unmeasured jobs**: a running job that has sent no load line yet counts as the last duty
cycle a job of its name reported (the caller's :attr:`Occupant.duty`), and with none as the
bound minus the others on its cores (optimistic for it, and its cores then have no room
left): nothing joins a job before it is measured, and a newcomer is let in wherever the
others leave room.  A newcomer that turns out busier is separated later
(:func:`separations`): a malleable job on the overloaded core that holds the node as one of
its others (not its first: place 0 stays) is moved, grown onto a node with free cores for
its per-node share and then, once that grow is done, given the named shrink
``shrink 1 <node>`` off the shared node; with no free cores anywhere it is shrunk off it
alone, when it holds more than its minimum (the malleable policy grows such jobs onto shared
cores, :func:`scheduler.algorithms.base.shared_grows`).

**Rigid jobs** are never slowed past their ``#REQUIRED_TIME``: a core with a rigid job on it
is shareable only when the model, at the worst load the bound allows, still ends the job in
time (:func:`rigid_fits`), and a rigid ``#COLOCATE yes`` newcomer starts on shared cores
only when the model, at that worst load, ends it in time too (:func:`newcomer_fits`; else
the policies see it as exclusive: it waits for free cores).  The simulator knows each job's
time alone; the real scheduler estimates it (:data:`ASSUMED_ALONE_SHARE`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .jobs import JobClass
from .resources import CoreLedger

__all__ = [
    "ASSUMED_ALONE_SHARE",
    "DEFAULT_BOUND",
    "PAPER_BETA",
    "Mover",
    "Occupant",
    "Separation",
    "acquire_colocated",
    "core_load",
    "job_factor",
    "load",
    "mover",
    "newcomer_fits",
    "overloaded",
    "pick_shared",
    "grow_targets",
    "read_beta",
    "rigid_fits",
    "rooms",
    "separations",
    "shareable",
    "sharing",
    "slowdown",
    "start_room",
]

#: The paper's beta fitted on all its points (Xie 2026: 0.524 +- 0.021).
PAPER_BETA = 0.524
#: Where the measured beta is written (key ``"beta"``, with ``"beta_source"``).
RESULTS = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "colocation.json"
#: The default bound on the duty cycles of the jobs on one core (docs/guides/colocation.md):
#: a core's demand may reach its capacity, not more.  Past it the jobs queue for the CPU and
#: the slowdown stops being the model's small linear term (the paper's knee, at N=3).
DEFAULT_BOUND = 1.0
#: The real scheduler does not know how long a rigid job would run alone; it assumes half of
#: its ``#REQUIRED_TIME`` (users ask for more than they need; docs/guides/colocation.md).
ASSUMED_ALONE_SHARE = 0.5


def slowdown(beta: float, rho_n: float, rho_1: float) -> float:
    """The factor ``T_N / T_1 = 1 + beta (rho_N - rho_1)`` (Xie 2026).

    Args:
        beta: the model's coefficient (>= 0; 0.524 in the paper).
        rho_n: the load of the cores with the N jobs on them (>= 0; the sum of their duty
            cycles on a core).
        rho_1: the load the job puts on them alone (its duty cycle, 0 <= rho_1 <= rho_n).

    Returns:
        The factor (>= 1) by which the job's time alone grows.

    Raises:
        ValueError: a negative or non-finite beta, a negative load, or ``rho_1 > rho_n``
            (beyond a rounding error).
    """
    if not (math.isfinite(beta) and beta >= 0):
        raise ValueError(f"beta must be a finite number >= 0, got {beta}")
    if rho_1 < 0 or rho_n < 0:
        raise ValueError(f"loads are >= 0, got rho_N={rho_n}, rho_1={rho_1}")
    if rho_1 > rho_n + 1e-9:
        raise ValueError(f"rho_1 ({rho_1}) exceeds rho_N ({rho_n})")
    return 1.0 + beta * max(0.0, rho_n - rho_1)


def load(jobs: int, demand: float, nodes: int, cores_per_node: int) -> float:
    """The paper's load ``rho = N R / (M C)``.

    Args:
        jobs: N, the jobs on the cores (>= 0).
        demand: R, one job's CPU demand in cores (its cores x its duty cycle, >= 0).
        nodes: M (>= 1); cores_per_node: C (>= 1).

    Raises:
        ValueError: a negative count or demand, or ``nodes``/``cores_per_node`` below 1.
    """
    if jobs < 0 or demand < 0:
        raise ValueError(f"jobs and demand are >= 0, got {jobs}, {demand}")
    if nodes < 1 or cores_per_node < 1:
        raise ValueError(f"nodes and cores_per_node are >= 1, got {nodes}, {cores_per_node}")
    return jobs * demand / (nodes * cores_per_node)


def read_beta(path: Path | str | None = None) -> tuple[float, str]:
    """The beta the simulator uses and where it comes from.

    Args:
        path: the results file (default :data:`RESULTS`): a JSON object with ``"beta"`` (a
            number >= 0) and ``"beta_source"`` (text).

    Returns:
        ``(beta, source)``: the file's, its source prefixed with the file name; or
        ``(0.524, "Xie 2026 (all points)")`` when the file is missing or has no valid beta.
    """
    file = Path(path) if path is not None else RESULTS
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        beta = float(data["beta"])
        if math.isfinite(beta) and beta >= 0:
            return beta, f"{file.name}: {data.get('beta_source', 'measured')}"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return PAPER_BETA, "Xie 2026 (all points)"


@dataclass(frozen=True)
class Occupant:
    """A running job as co-location sees it.

    Attributes:
        duty: its last measured duty cycle in [0, 1], or ``None`` (not measured yet).
        colocate: it said ``#COLOCATE yes``.
        rigid: it cannot be resized (never separated by an order: guarded instead).
        required_s: its ``#REQUIRED_TIME`` (s); elapsed_s: how long it has run (s).
        alone_left_s: the time it would still need alone (s), or ``None``: unknown (then
            ``ASSUMED_ALONE_SHARE x required_s - elapsed_s``).
        malleable: it takes orders now (a separation may shrink it).
    """

    duty: float | None
    colocate: bool
    rigid: bool = True
    required_s: float = math.inf
    elapsed_s: float = 0.0
    alone_left_s: float | None = None
    malleable: bool = False


def rigid_fits(required_s: float, elapsed_s: float, alone_left_s: float, factor: float) -> bool:
    """Whether a job that still needs ``alone_left_s`` seconds alone, slowed by ``factor``
    from now on, ends within ``required_s`` of its start (``elapsed_s`` seconds ago)."""
    return elapsed_s + max(0.0, alone_left_s) * factor <= required_s


def _alone_left(occ: Occupant) -> float:
    if occ.alone_left_s is not None:
        return occ.alone_left_s
    return ASSUMED_ALONE_SHARE * occ.required_s - occ.elapsed_s


def core_load(users: Sequence[object], occupants: Mapping[object, Occupant],
              bound: float) -> float:
    """The load of one core: the sum of the duty cycles of ``users`` (an unmeasured job
    counts as the bound minus the others, module docstring)."""
    known = [occupants[u].duty for u in users if u in occupants]
    measured = sum(d for d in known if d is not None)
    if any(d is None for d in known) or len(known) < len(users):
        return max(bound, measured)
    return measured


def _room(ledger: CoreLedger, node: str, core: int, occupants: Mapping[object, Occupant],
          bound: float, beta: float) -> float:
    """The duty cycle a newcomer may still add on ``core`` of ``node`` (0: none)."""
    users = ledger.users(node, core)
    if not users or any(u not in occupants or not occupants[u].colocate for u in users):
        return 0.0
    rho = core_load(users, occupants, bound)
    if rho >= bound:
        return 0.0
    for u in users:
        occ = occupants[u]
        if occ.rigid and not rigid_fits(occ.required_s, occ.elapsed_s, _alone_left(occ),
                                         slowdown(beta, bound, min(occ.duty or 0.0, bound))):
            return 0.0
    return bound - rho


def rooms(ledger: CoreLedger, occupants: Mapping[object, Occupant], bound: float,
          beta: float) -> dict[str, list[float]]:
    """node -> the room (the duty cycle it may still take) of each of its shareable cores
    (module docstring: held by co-locatable jobs only, their loads under ``bound``, no rigid
    job among them that the model would push past its required time), most room first;
    nodes without one, and nodes being drained (``ledger.closed``), are left out."""
    out: dict[str, list[float]] = {}
    for node in ledger.graph.cpus:
        if node in ledger.closed:
            continue
        room = [r for core in range(ledger.graph.size(node))
                if (r := _room(ledger, node, core, occupants, bound, beta)) > 0]
        if room:
            out[node] = sorted(room, reverse=True)
    return out


def shareable(ledger: CoreLedger, occupants: Mapping[object, Occupant], bound: float,
              beta: float) -> dict[str, int]:
    """node -> the held cores a co-locatable newcomer may join (:func:`rooms`)."""
    return {n: len(r) for n, r in rooms(ledger, occupants, bound, beta).items()}


def grow_targets(ledger: CoreLedger, job: object, per_node: int,
                 occupants: Mapping[object, Occupant], bound: float,
                 beta: float) -> set[str]:
    """The nodes a running co-locatable job may grow onto beside their holders: it holds
    none of their cores, ``per_node`` of their shareable cores have room for its measured
    duty cycle (none: no node)."""
    occ = occupants.get(job)
    if occ is None or occ.duty is None:
        return set()
    mine = ledger.cores_of(job)
    return {n for n, r in rooms(ledger, occupants, bound, beta).items()
            if n not in mine and sum(1 for x in r if x >= occ.duty) >= per_node}


def pick_shared(ledger: CoreLedger, node: str, count: int,
                occupants: Mapping[object, Occupant], bound: float,
                beta: float) -> tuple[int, ...]:
    """The ``count`` shareable cores of ``node`` a newcomer takes: the most room first, then
    the lowest index (deterministic: the simulator and the real scheduler agree).

    Raises:
        ValueError: fewer than ``count`` shareable cores on ``node``.
    """
    rooms = [(-_room(ledger, node, c, occupants, bound, beta), c)
             for c in range(ledger.graph.size(node))]
    open_ = sorted(r for r in rooms if r[0] < 0)
    if len(open_) < count:
        raise ValueError(f"{node} has {len(open_)} shareable cores, {count} asked")
    return tuple(sorted(c for _, c in open_[:count]))


def overloaded(ledger: CoreLedger, occupants: Mapping[object, Occupant],
               bound: float) -> list[tuple[str, int, tuple[object, ...], float]]:
    """The shared cores whose duty cycles sum past ``bound``: ``(node, core, jobs on it,
    their sum)``, in node and core order.  A job with no figure at all counts 0 here (its
    unknown load alone never separates)."""
    out = []
    for (node, core), users in sorted(ledger.shared.items(), key=lambda kv: kv[0]):
        total = sum(occupants[u].duty or 0.0 for u in users if u in occupants)
        if total > bound + 1e-9:
            out.append((node, core, tuple(users), total))
    return out


def job_factor(ledger: CoreLedger, job: object, occupants: Mapping[object, Occupant],
               beta: float) -> float:
    """The model's slowdown of ``job`` now: ``slowdown(beta, rho_N, rho_1)`` with rho_N the
    largest load among its cores (their users' duty cycles summed, unmeasured as 1) and
    rho_1 its own duty cycle; 1.0 when it shares no core."""
    mine = ledger.cores_of(job)
    own = occupants[job].duty if job in occupants else None
    own = 1.0 if own is None else own
    worst = own
    for node, cores in mine.items():
        for core in cores:
            users = ledger.shared.get((node, core))
            if users:
                rho = sum(1.0 if (occupants.get(u) is None or occupants[u].duty is None)
                          else occupants[u].duty for u in users)
                worst = max(worst, rho)
    return slowdown(beta, worst, own) if worst > own else 1.0


def acquire_colocated(ledger: CoreLedger, job: object, nodes: Sequence[str],
                      counts: Sequence[int], occupants: Mapping[object, Occupant],
                      bound: float, beta: float) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """A ``#COLOCATE yes`` job takes ``counts[i]`` cores of ``nodes[i]``: its free cores
    first (:meth:`~scheduler.resources.CoreLedger.take`), then shareable ones
    (:func:`pick_shared`, :meth:`~scheduler.resources.CoreLedger.share`).  Returns
    ``(node, core indices)`` as :meth:`~scheduler.resources.CoreLedger.acquire` does.

    Raises:
        ValueError: a node with fewer free and shareable cores than asked (the caller's
            decision check, with :func:`start_room`, comes first).
    """
    out = []
    for node, count in zip(nodes, counts, strict=True):
        free = ledger.free_counts().get(node, 0)
        own = min(count, free)
        shared = (pick_shared(ledger, node, count - own, occupants, bound, beta)
                  if count > own else ())
        taken = ledger.take(job, node, own) if own else ()
        if shared:
            ledger.share(job, node, shared)
        out.append((node, tuple(sorted(taken + shared))))
    return tuple(out)


def start_room(free: Mapping[str, int], shared: Mapping[str, int]) -> dict[str, int]:
    """node -> the cores a ``#COLOCATE yes`` Start may take there: free plus shareable (the
    ``free_cores`` of its decision check)."""
    return {n: free.get(n, 0) + shared.get(n, 0) for n in set(free) | set(shared)}


def sharing(ledger: CoreLedger) -> list[dict[str, object]]:
    """The shared cores for a status: ``{"node", "core", "jobs"}`` a core, in node and core
    order."""
    return [{"node": n, "core": c, "jobs": list(users)}
            for (n, c), users in sorted(ledger.shared.items(), key=lambda kv: kv[0])]


def newcomer_fits(required_s: float, alone_s: float | None, duty: float | None,
                  bound: float, beta: float) -> bool:
    """Whether a rigid ``#COLOCATE yes`` job may start on shared cores: the model, at the
    worst load the bound allows (``slowdown(beta, bound, its duty)``), still ends it within
    ``required_s`` (:func:`rigid_fits` at an elapsed time of 0).

    Args:
        required_s: its ``#REQUIRED_TIME`` (s; ``inf``: none, always fits).
        alone_s: its time alone (s), or ``None``: unknown, then
            :data:`ASSUMED_ALONE_SHARE` x ``required_s`` (the real scheduler).
        duty: its expected duty cycle (the last one a job of its name reported), or
            ``None`` (0: the worst case).
        bound: the bound on a core's load (> 0); beta: the model's coefficient (>= 0).
    """
    alone = ASSUMED_ALONE_SHARE * required_s if alone_s is None else alone_s
    own = min(duty or 0.0, bound)
    return rigid_fits(required_s, 0.0, alone, slowdown(beta, bound, own))


@dataclass(frozen=True)
class Mover:
    """A running job as separation sees it (:func:`mover` reads one from a job's state).

    Attributes:
        nodes: the nodes it holds, its first (place 0's) first.
        lo, hi: its node range.
        per_node: its ``#CORES_PER_NODE`` (``None``: it cannot be grown onto free cores).
        takes_orders: a malleable job that may be ordered now (ready, no order in flight).
        busy: an order to it is in flight, or it is malleable and not ready yet (it may
            move soon: no overload is counted meanwhile).
        named: it carries out a named shrink (apgaspy; a keyless Java job gives back its
            newest node whatever is named, so only its last node can be taken off it).
        may_move: it has not been moved before (a job is moved once: one whose handler
            gave back another node than the named one would otherwise be moved forever).
    """

    nodes: tuple[str, ...]
    lo: int
    hi: int
    per_node: int | None
    takes_orders: bool
    busy: bool = False
    named: bool = True
    may_move: bool = True


def mover(job: object, named: bool = True, may_move: bool = True) -> Mover:
    """The :class:`Mover` of a :class:`~scheduler.job_state.JobState` (any object with its
    ``nodes``, ``spec``, ``takes_orders`` and ``busy``); only a malleable job takes
    separation orders (an evolving one is never shrunk)."""
    spec = job.spec  # type: ignore[attr-defined]
    return Mover(tuple(job.nodes), spec.lo, spec.hi,  # type: ignore[attr-defined]
                 spec.cores_per_node,
                 bool(job.takes_orders  # type: ignore[attr-defined]
                      and spec.job_class is JobClass.MALLEABLE),
                 bool(job.busy or (spec.job_class is JobClass.MALLEABLE  # type: ignore[attr-defined]
                                   and job.elastic and job.reachable  # type: ignore[attr-defined]
                                   and not job.ready)), named, may_move)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Separation:
    """One step of separation (:func:`separations`).

    Attributes:
        action: ``"grow"`` (a move's first step: ``job`` grows onto ``target``),
            ``"shrink"`` (``job`` is given the named shrink off ``node``; ``target``: the
            node it was moved to, or ``None``) or ``"overload"`` (no job on the core can
            move: ``job`` is ``None``).
        node, core: the overloaded shared core (``core`` ``None`` for a move's shrink: the
            node it leaves); users: the jobs on it; duty_sum: their sum.
    """

    action: str
    job: object | None
    node: str
    core: int | None
    users: tuple[object, ...]
    duty_sum: float
    target: str | None = None


def plan_separations(ledger: CoreLedger, occupants: Mapping[object, Occupant], bound: float,
                     jobs: Mapping[object, Mover], moving: dict[object, tuple[str, str]],
                     nodes_of: Mapping[object, Sequence[str]]) -> list[Separation]:
    """:func:`separations`, with the caller's record of the moves under way kept current, as
    the real scheduler and the simulator both keep it: a move whose job ended or no longer
    holds its shared node is forgotten first; after, one whose job takes orders and was
    given no step (it can no longer be shrunk off the node).

    Args:
        ledger, occupants, bound, jobs: as :func:`separations`.
        moving: job -> ``(shared node, target)``; changed in place.
        nodes_of: running job -> the nodes it holds.

    Returns:
        :func:`separations`' steps.
    """
    for job in [j for j, (node, _) in moving.items() if node not in nodes_of.get(j, ())]:
        del moving[job]
    steps = separations(ledger, occupants, bound, jobs, moving)
    stepped = {step.job for step in steps}
    for job in [j for j in moving if jobs[j].takes_orders and j not in stepped]:
        del moving[job]
    return steps


def separations(ledger: CoreLedger, occupants: Mapping[object, Occupant], bound: float,
                jobs: Mapping[object, Mover],
                moving: Mapping[object, tuple[str, str]]) -> list[Separation]:
    """What separation does now (module docstring; docs/guides/colocation.md, Separation):
    the same decisions for the real scheduler and the simulator.

    1. A job being moved (``moving``: job -> ``(shared node, target)``, the caller's record
       of the grows it ordered) whose grow is done gets the named shrink off the shared
       node (when it still holds it and more than its minimum); one with its order in
       flight is waited for; one whose grow failed is treated as in step 2.
    2. Each overloaded core (:func:`overloaded`), unless a job on it has just been given a
       step: its newest job that may move (takes orders, holds the node but not as its
       first) is grown onto the node with free cores for its per-node share that it does
       not hold (the fullest first, then the lowest name: best fit) when it is below its
       maximum and has not been moved before; else shrunk off the node when it holds more
       than its minimum.  With none,
       and no order in flight to a job there, an ``"overload"``.

    Args:
        ledger: the cores held now; occupants: :func:`occupants`' answer; bound: the bound.
        jobs: running job -> its :class:`Mover` (jobs left out never move).
        moving: job -> ``(shared node, target)`` of the moves under way.

    Returns:
        The steps, moves' shrinks first, then in core order; the caller orders them and
        records a ``"grow"`` in ``moving`` until its shrink (:func:`plan_separations` keeps
        ``moving`` current around this call).
    """
    from .algorithms.base import sorted_nodes  # the policies' node order

    out: list[Separation] = []
    acted: set[object] = set()
    for job, (node, target) in moving.items():
        mv = jobs.get(job)
        if mv is None or node not in mv.nodes or not mv.takes_orders:
            if mv is not None and mv.busy:
                acted.add(job)  # its grow is in flight
            continue
        if target not in mv.nodes:
            continue  # the grow failed: forgotten, and the job is not moved again
        if len(mv.nodes) > mv.lo and node != mv.nodes[0]:
            acted.add(job)
            users = dict.fromkeys(u for (n, _c), us in sorted(ledger.shared.items())
                                  if n == node for u in us)
            out.append(Separation("shrink", job, node, None, tuple(users),
                                  core_load(tuple(users), occupants, bound), target))
    free = ledger.free_counts()
    for node, core, users, total in overloaded(ledger, occupants, bound):
        if any(u in acted for u in users):
            continue
        step = None
        for job in reversed(users):
            mv = jobs.get(job)
            if (mv is None or not mv.takes_orders or node not in mv.nodes
                    or node == mv.nodes[0] or (not mv.named and node != mv.nodes[-1])):
                continue
            per = mv.per_node
            fits = ([] if per is None or len(mv.nodes) >= mv.hi or not mv.named
                    or not mv.may_move else
                    [n for n in sorted_nodes(free) if n not in mv.nodes and free[n] >= per])
            if fits:
                target = min(fits, key=lambda n: free[n])  # best fit; ties: lowest name
                free[target] -= per  # type: ignore[operator]
                step = Separation("grow", job, node, core, users, total, target)
            elif len(mv.nodes) > mv.lo:
                step = Separation("shrink", job, node, core, users, total)
            if step is not None:
                acted.add(job)
                break
        if step is None and not any(jobs[u].busy for u in users if u in jobs):
            step = Separation("overload", None, node, core, users, total)
        if step is not None:
            out.append(step)
    return out
