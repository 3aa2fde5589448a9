"""Nodes that come and go: nodes added, drained and removed while jobs run.

After Milroy et al.'s Fluxion/Flux, where the resource pool is a dynamic graph that a
provider (a parent instance, a cloud API) grows and shrinks while jobs run, the real
scheduler's pool changes on request (``python -m scheduler node add|remove|drain``, the
control socket's ``{"op": "node", ...}``, :meth:`scheduler.server.Server.node_add` and
friends):

::

    node add [NAME]   ─► backend.add_node (a new logical node, or an ssh host reached and
                         its nproc read) ─► all_nodes, graph, ledger, free ─► jobs go there
    node drain NAME   ─► draining: out of ``free`` and its free cores closed, no new job
    node remove NAME  ─► draining, then gone
    every turn of the main loop, before the policy runs (:func:`settle`):
        a job holding a draining node
            --force ............................ ended (SIGTERM, SIGKILL after the grace),
                                                 as a job whose place died
            malleable or evolving, taking orders  named shrink of its draining nodes
                                                 (``shrink <n> <host…>``; a keyless Java job:
                                                 ``shrink <n>``), never its first node nor
                                                 below its minimum; a reply naming other
                                                 nodes frees those, and it is ordered again
            otherwise (rigid, at its minimum, on its first node, not reachable) ... waited for
        a draining node no job holds ─► drain: ``drained`` (held out; ``node add NAME``
                                         brings it back)
                                        remove: ``gone`` (leaves all_nodes, the graph and the
                                         backend)

Node states (``status``): ``free``, ``busy`` (a job holds it), ``draining``, ``drained``,
``gone``.  A refused change (an unknown node, one gone already, a removal that leaves no
node or fewer than a queued job's minimum, a host that cannot be reached) raises
:class:`~scheduler._exceptions.PoolError` with one line, and nothing changes.

:class:`~scheduler.pool_book.PoolBook` is the pure state machine (no process, no clock); :func:`change_nodes`,
:func:`settle`, :func:`restore` and :func:`node_states` bind it to the server's state.  With
a journal, the book is kept in its ``meta`` table (key ``pool``, JSON) after every change,
and :func:`restore` puts it back before the jobs are recovered: added nodes are there
again, a drain under way goes on (docs/guides/scheduler.md, "Nodes that come and go").  A
journal without the key (an older one) means no change.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._exceptions import PoolError
from .algorithms.base import node_key
from .launch import end_job
from .orders import order_shrink
from .pool_book import ACTIONS, NODE_STATES, PoolBook
from .resources import with_node, without_node

if TYPE_CHECKING:
    from .state import ServerJob, ServerState

__all__ = ["ACTIONS", "NODE_STATES", "PoolBook", "PoolError", "change_nodes", "node_states",
           "restore", "settle"]

#: The journal's ``meta`` key of the book.
META_KEY = "pool"


# ------------------------------------------------------------------------- on the server


def _save(state: ServerState) -> None:
    """Journal the book (nothing without a journal); an error is logged, not raised."""
    if state.journal is None:
        return
    try:
        state.journal.set_meta(META_KEY, state.pool.to_json())
    except sqlite3.Error as exc:
        state.event("journal_error", None, error=f"{type(exc).__name__}: {exc}", pool=True)


def _join(state: ServerState, name: str, cpus: Sequence[int] | None) -> None:
    """Put node ``name`` (with ``cpus``) into the pool: free, in the graph and ledger."""
    if name not in state.all_nodes:
        state.all_nodes = (*state.all_nodes, name)
    state.graph = with_node(state.graph, name, cpus)
    state.ledger.graph = state.graph
    state.ledger.closed.discard(name)
    if not any(name in j.nodes for j in state.jobs.values() if j.state == "running"):
        state.free.add(name)


def _hold_out(state: ServerState, name: str) -> None:
    state.free.discard(name)
    state.ledger.closed.add(name)


def _leave(state: ServerState, name: str) -> None:
    """Node ``name`` leaves the pool for good (no job holds it)."""
    state.all_nodes = tuple(n for n in state.all_nodes if n != name)
    state.free.discard(name)
    state.ledger.closed.discard(name)
    state.ledger.partial.pop(name, None)
    state.graph = without_node(state.graph, name)
    state.ledger.graph = state.graph
    forget = getattr(state.nodes, "forget_node", None)
    if forget is not None:
        forget(name)


def _needs(state: ServerState) -> dict[str, int]:
    """Queued (waiting or pending) jobs -> their minimum node counts."""
    return {f"job {j.job_id} {j.spec.name!r}": j.spec.lo for j in state.jobs.values()
            if j.state in ("waiting", "pending")}


def change_nodes(state: ServerState, action: str, names: Sequence[str] = (), *,
                 force: bool = False, count: int = 1) -> dict[str, Any]:
    """Carry out ``node add|drain|remove`` (module docstring); returns ``{"action",
    "nodes"}`` (the nodes concerned).

    Args:
        action: one of :data:`ACTIONS`.
        names: the nodes; for ``add`` of logical nodes they may be left out (then ``count``
            new ones, the lowest free addresses).
        force: ``drain``/``remove``: end the jobs on the nodes instead of waiting for them.
        count: ``add`` without names: how many new logical nodes (1-254).

    Raises:
        PoolError: a refusal (module docstring); nothing has changed.
    """
    names = list(dict.fromkeys(n.strip() for n in names if n.strip()))
    if action == "add":
        return _add(state, names, count)
    with state.lock:
        problem = state.pool.refusal(action, names, state.all_nodes, _needs(state),
                                     may_empty=state.capacity is not None, force=force)
        if problem is not None:
            raise PoolError(problem)
        state.pool.mark(action, names, force=force)
        for name in names:
            _hold_out(state, name)
        now = state.now()
        state.pool.record(now, action, names, wall=round(state.wall(now), 3),
                         **({"force": True} if force else {}))
        state.event(f"node_{action}", None, nodes=names, force=force)
        _save(state)
        state.changed()
    return {"action": action, "nodes": names}


def _add(state: ServerState, names: list[str], count: int) -> dict[str, Any]:
    """``node add``: held-out nodes serve again; others are checked by the backend (outside
    the lock: an ssh host may take seconds) and join."""
    add = getattr(state.nodes, "add_node", None)
    with state.lock:
        back = [n for n in names if state.pool.held_out(n)]
        new = [n for n in names if n not in back]
        taken = [n for n in new if n in state.all_nodes]
    if taken:
        raise PoolError(f"{taken[0]} is in the pool already")
    if not names:
        if not 1 <= count <= 254:
            raise PoolError(f"add 1 to 254 nodes at a time, not {count}")
        new = [None] * count  # type: ignore[list-item]
    if new and add is None:
        raise PoolError(f"this node backend ({type(state.nodes).__name__}) cannot add nodes "
                        "while it runs; its nodes are its resource manager's")
    joined: list[tuple[str, Sequence[int] | None]] = []
    for name in new:
        try:
            joined.append(add(name))  # type: ignore[misc]
        except (OSError, ValueError) as exc:
            for done, _ in joined:
                state.nodes.forget_node(done)  # type: ignore[attr-defined]
            raise PoolError(str(exc).splitlines()[0] if str(exc) else repr(exc)) from None
    with state.lock:
        for name, cpus in joined:
            state.pool.added_node(name, cpus)
            _join(state, name, cpus)
        for name in back:
            state.pool.back(name)
            state.ledger.closed.discard(name)
            if not any(name in j.nodes for j in state.jobs.values() if j.state == "running"):
                state.free.add(name)
        nodes = [n for n, _ in joined] + back
        now = state.now()
        state.pool.record(now, "add", nodes, wall=round(state.wall(now), 3))
        state.event("node_add", None, nodes=nodes, cpus={n: c for n, c in joined})
        _save(state)
        state.changed()
    return {"action": "add", "nodes": nodes}


def _drain_job(state: ServerState, job: ServerJob, nodes: list[str], now: float) -> None:
    """Move ``job`` off its draining ``nodes`` (module docstring): end it (``--force``),
    order a named shrink, or wait."""
    if any(n in state.pool.force for n in nodes):
        if not job.ending:
            job.reason = f"node {' '.join(nodes)} removed with --force"
            state.event("drain_end", job.job_id, nodes=nodes)
            end_job(state, job, "node_removed")
        return
    if not job.takes_orders or (job.evolving and job.key is None):
        return  # rigid, busy, not reachable, or a Java evolving job (it refuses shrinks)
    wanted = [n for n in nodes if n != job.nodes[0]][:max(0, len(job.nodes) - job.spec.lo)]
    if wanted:
        state.event("drain_shrink", job.job_id, nodes=wanted)
        order_shrink(state, job, len(wanted), now, wanted)


def settle(state: ServerState, now: float) -> None:
    """One turn of the drains (module docstring), with the state's lock held: draining
    nodes are kept out of ``free``, their jobs moved off or waited for, empty ones leave."""
    book = state.pool
    if not book.draining:
        return
    holders: dict[str, list[str]] = {}
    for job in state.jobs.values():
        if job.state != "running":
            continue
        mine = [n for n in job.nodes if n in book.draining]
        if mine:
            _drain_job(state, job, mine, now)
        for n in mine:
            holders.setdefault(n, []).append(str(job.job_id))
    for name in book.draining:
        _hold_out(state, name)
    left = book.settle(holders)
    for name, how in left:
        if how == "gone":
            _leave(state, name)
        book.record(now, how, [name], wall=round(state.wall(now), 3))
        state.event(f"node_{how}", None, nodes=[name])
    if left:
        _save(state)
        state.changed()


def restore(state: ServerState) -> dict[str, Any]:
    """Put the journal's pool back (before the jobs are recovered): added nodes join again
    (through the backend; one that cannot is logged as ``node_restore_failed``), gone ones
    leave, drains go on.  Returns counts for the ``recovered`` event; nothing without a
    journal or without the journal's ``pool`` key (an older journal)."""
    if state.journal is None:
        return {}
    raw = state.journal.meta(META_KEY)
    if not raw:
        return {}
    try:
        book = PoolBook.from_json(raw)
    except ValueError as exc:
        state.event("journal_error", None, error=f"pool: {exc}")
        return {}
    add = getattr(state.nodes, "add_node", None)
    with state.lock:
        for name, cpus in list(book.added.items()):
            if name not in state.all_nodes and add is not None:
                try:
                    name, cpus = add(name)
                except (OSError, ValueError) as exc:
                    state.event("node_restore_failed", None, node=name, error=str(exc))
                    book.added.pop(name, None)
                    book.draining.pop(name, None)
                    continue
            _join(state, name, cpus)
        for name in book.gone:
            if name in state.all_nodes:
                _leave(state, name)
        for name in [*book.draining, *book.drained]:
            if name in state.all_nodes:
                _hold_out(state, name)
            else:
                book.draining.pop(name, None)
                book.drained.discard(name)
        state.pool = book
    return {"nodes_added": len(book.added), "nodes_draining": len(book.draining)}


def node_states(state: ServerState) -> list[dict[str, Any]]:
    """``status``'s ``nodes``: every node (the gone ones last) with its ``state`` and ``job``
    (the holder's id, or None), and ``cores``/``free_cores`` where nodes have cores.  With
    the state's lock held."""
    owner = {n: j.job_id for j in state.jobs.values() if j.state == "running"
             for n in j.nodes}
    free_cores = state.ledger.free_counts()
    book = state.pool
    out = []
    for n in sorted(state.all_nodes, key=node_key):
        entry: dict[str, Any] = {"name": n, "job": owner.get(n),
                                 "state": book.state_of(n, owner.get(n))}
        if not state.graph.slots:
            entry.update(cores=state.graph.size(n), free_cores=free_cores.get(n, 0))
        out.append(entry)
    out += [{"name": n, "job": None, "state": "gone"} for n in book.gone
            if n not in state.all_nodes]
    return out
