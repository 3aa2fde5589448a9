"""The one check of a scheduling decision, shared by the simulator and the real server.

An algorithm answers a :class:`~.base.View` with :class:`~.base.Start`,
:class:`~.base.Shrink` and :class:`~.base.Grow` decisions (:mod:`.base`).  Whoever applies
them, :mod:`scheduler.simulate` in simulated time or :mod:`scheduler.server` on real
machines, first asks :func:`decision_problem` whether the state allows it, so that the
simulator cannot accept a decision the real scheduler would refuse (or the other way round).

The rules:

* ``Start``: the job is waiting; its nodes are distinct, all free, and their count is within
  the job's ``[min, max]`` range (:attr:`~scheduler.jobs.JobSpec.lo` / ``hi``).  For a job
  asking for cores, "free" is per core: each node has the cores the Start takes there
  (``free_cores``), and the counts are the job's (:func:`scheduler.resources.start_counts`).
* ``Shrink``: the job is running, malleable and takes orders now (it has announced
  ``APGAS-Ready`` and has no order in flight); ``1 <= count`` and it keeps at least its
  minimum.
* ``Grow``: as ``Shrink`` for the job, or the job is evolving (it asked for the nodes; it
  too must take orders); at least one node, all distinct and free, and the job ends up with
  at most its maximum.  An evolving job is never shrunk: it gives nodes back by itself.

The cool-down between two orders is the algorithm's policy (:func:`~.base.can_order`), not a
rule of the mechanism: it is not checked here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from ..jobs import JobClass, JobSpec
from ..resources import start_counts
from .base import Grow, Shrink, Start

__all__ = ["decision_problem"]


def _nodes_problem(nodes: Sequence[str], free: Collection[str]) -> str | None:
    if len(set(nodes)) != len(nodes):
        return f"names a node twice: {list(nodes)}"
    busy = [n for n in nodes if n not in free]
    if busy:
        return f"nodes not free: {busy}"
    return None


def _cores_problem(nodes: Sequence[str], counts: Sequence[int], free: Collection[str],
                   free_cores: Mapping[str, int] | None) -> str | None:
    if len(set(nodes)) != len(nodes):
        return f"names a node twice: {list(nodes)}"
    have = free_cores if free_cores is not None else {n: 1 for n in free}
    short = [f"{n} ({have.get(n, 0)} free, {c} asked)" for n, c in zip(nodes, counts, strict=True)
             if have.get(n, 0) < c]
    if short:
        return f"cores not free: {', '.join(short)}"
    return None


def decision_problem(
    decision: object,
    *,
    spec: JobSpec | None,
    state: str | None,
    held: int = 0,
    takes_orders: bool = False,
    free: Collection[str] = (),
    free_cores: Mapping[str, int] | None = None,
) -> str | None:
    """Why ``decision`` cannot be applied to the current state, or ``None`` when it can.

    Args:
        decision: a :class:`~.base.Start`, :class:`~.base.Shrink` or :class:`~.base.Grow`
            (anything else is refused).
        spec: the spec of the job the decision names; ``None`` when no such job exists.
        state: that job's state: ``"waiting"`` (queued), ``"running"`` (holds nodes), or
            anything else / ``None`` (ended, failed, unknown).
        held: nodes the job holds now (running jobs; nodes a shrink in flight will release
            still count).
        takes_orders: the running job has announced ``APGAS-Ready`` and has no order in
            flight (the real server also requires its control connection to be up).
        free: the names of the free nodes (a set, for fast membership).
        free_cores: node -> its free cores (a mechanism that counts cores); ``None``: each
            free node is one core.

    Returns:
        A one-line reason (``"no such waiting job"``, ``"nodes not free: [...]"``,
        ``"names a node twice: [...]"``, ``"3 nodes outside 4-8"``, ``"no such running job"``,
        ``"the job is not malleable"``, ``"the job is not ready for orders (...)"``,
        ``"cannot shrink ..."``, ``"cannot grow ..."``, ``"not a decision: ..."``), or ``None``.
        Never raises for a bad decision: the caller decides whether that is an error
        (the simulator) or an event to log (the server).
    """
    if isinstance(decision, Start):
        if spec is None or state != "waiting":
            return "no such waiting job"
        nodes = tuple(decision.nodes)
        counts, problem = start_counts(spec, nodes, getattr(decision, "cores", ()))
        if problem:
            return problem
        if counts:
            problem = _cores_problem(nodes, counts, free, free_cores)
        else:
            problem = _nodes_problem(nodes, free)
        if problem:
            return problem
        if not spec.lo <= len(nodes) <= spec.hi:
            return f"{len(nodes)} nodes outside {spec.lo}-{spec.hi}"
        return None
    if isinstance(decision, (Shrink, Grow)):
        if spec is None or state != "running":
            return "no such running job"
        evolving_grow = isinstance(decision, Grow) and spec.job_class is JobClass.EVOLVING
        if spec.job_class is not JobClass.MALLEABLE and not evolving_grow:
            return "the job is not malleable"
        if not takes_orders:
            return "the job is not ready for orders (no APGAS-Ready yet, or an order in flight)"
        if isinstance(decision, Shrink):
            count = decision.count
            if count < 1 or held - count < spec.lo:
                return f"cannot shrink {held} nodes by {count} (minimum {spec.lo})"
            return None
        nodes = tuple(decision.nodes)
        if not nodes:
            return "cannot grow by no node"
        problem = _nodes_problem(nodes, free)
        if problem:
            return problem
        if held + len(nodes) > spec.hi:
            return f"cannot grow {held} nodes by {len(nodes)} (maximum {spec.hi})"
        return None
    return f"not a decision: {decision!r}"
