"""Orders to running jobs: a shrink or a grow, each exchanged with the job on its own thread.

As the Java scheduler sends them (:mod:`scheduler.order_transport`), to ``<job address>:<port>``
where the port is the one the job announced (``APGAS-Ready;<port>``) or else the server's,
signed for a job with a key
(:meth:`scheduler.state.ServerJob.signer`): a failed shrink (an ``ERROR``
line, a line later than 20 s, the job unreachable) frees no node and marks the job *not
reachable*: it is treated as rigid from then on.  A refused grow gives its nodes back.
Nodes a shrink reply names go back to the pool when the job holds them (matched by name); a
name the job does not hold is logged as an error.  While a shrink is in flight the job's
``releasing`` counts the nodes it will give back, and the job takes no order until the reply
(or, for a grow, until the job closes the order connection).

With a journal, the job is journaled before the order is sent (a grow's nodes are the job's
from then on) and after its outcome; a scheduler restarted while an order was in flight keeps
every node the job held and treats the job as rigid (:mod:`scheduler.recovery`).

With a resource manager (:class:`scheduler.nodes.ResourceManager`; Slurm), ``acquire``
makes a grow's nodes the job's before the order is sent (a failure gives them back, as a
refused grow), ``release`` takes back the nodes a shrink reply names before they are free (a
failure keeps them with the job, which is treated as rigid from then on) and the nodes of a
grow that failed after ``acquire``.

:func:`order_shrink` and :func:`order_grow` are called with the state's lock held; the
exchange threads take it only to record the outcome.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .order_transport import OrderFailedError, send_grow, send_shrink
from .launch import write_cores_file
from .state import ServerJob, ServerState

__all__ = ["order_grow", "order_shrink"]


def order_shrink(state: ServerState, job: ServerJob, count: int, now: float,
                 hosts: list[str] | None = None) -> None:
    """Order ``job`` to give back ``count`` nodes (the reply names them); ``hosts``: the
    nodes wanted back (a drain, :mod:`scheduler.pool`), named in the order to a job with a
    key (apgaspy), a plain ``shrink <n>`` to a keyless (Java) one."""
    before = job.last_order_s
    job.order_shrink(now, count)
    named = list(hosts or []) if job.key is not None else []
    _send_order(state, job, "shrink", _shrink_exchange, (count, named), before,
                count=count, nodes=list(job.nodes), **({"wanted": hosts} if hosts else {}))


def order_grow(state: ServerState, job: ServerJob, nodes: list[str], now: float) -> bool:
    """Give ``nodes`` (free) to ``job`` now and order it to use them; returns whether the
    order was sent (``False``: the journal refused it, the nodes are free again)."""
    before = job.last_order_s
    per_node = job.spec.cores_per_node
    state.acquire(job, nodes, [per_node] * len(nodes) if per_node else (), now)
    job.order_grow(now, nodes)
    # The cores file names the new hosts before the order goes out: the job reads it as
    # soon as the order comes (written after, a quick job read it truncated or stale).
    _cores_file(state, job)
    if not _send_order(state, job, "grow", _grow_exchange, nodes, before,
                       added=nodes, nodes=list(job.nodes)):
        state.ledger.release(job.job_id, nodes)
        _cores_file(state, job)
        return False
    return True


def _cores_file(state: ServerState, job: ServerJob) -> None:
    """Rewrite the job's cores file after its hosts changed (where nodes have cores)."""
    if state.graph.slots:
        return
    try:
        write_cores_file(state, job)
    except OSError as exc:
        state.event("cores_file_error", job.job_id, error=str(exc))


def _send_order(state: ServerState, job: ServerJob, kind: str,
                exchange: Callable[..., None], arg: Any, before: float | None,
                **event: Any) -> bool:
    """Journal the order just given to ``job`` (:meth:`~scheduler.job_state.JobState.
    order_grow`, :meth:`~scheduler.job_state.JobState.order_shrink`), log ``<kind>_order``
    and run ``exchange(state, job, seq, address, arg)`` on its own thread; return False
    (nothing sent, the order withdrawn, ``last_order_s`` back to ``before``) when the
    journal cannot be written."""
    job.order_seq += 1
    if not state.persist(job):  # before the order: a grow's nodes are the job's from here on
        job.withdraw_order(arg if kind == "grow" else (), before)
        return False
    state.event(f"{kind}_order", job.job_id, **event)
    threading.Thread(target=exchange,
                     args=(state, job, job.order_seq,
                           (job.address, job.order_port or state.port), arg),
                     name=f"{kind}-{job.job_id}", daemon=True).start()
    return True


def _shrink_exchange(state: ServerState, job: ServerJob, seq: int, address: tuple[str, int],
                     order: tuple[int, list[str]]) -> None:
    count, named = order
    t0 = time.monotonic()
    try:
        names = send_shrink(address, count, source=state.listen,
                            line_timeout_s=state.shrink_line_timeout_s, sign=job.signer(),
                            hosts=named)
        error = None
    except OrderFailedError as exc:
        names, error = [], str(exc)
    rm_fields: dict[str, Any] = {}
    rm_error = None
    if error is None and state.rm is not None:
        # The job's places on the named nodes are gone: the resource manager takes the
        # nodes back (Slurm: scontrol update … NodeList=<kept>) before they are free.
        with state.lock:
            held = list(job.nodes) if job.order_seq == seq and job.state == "running" \
                else []
        gone = [n for n in dict.fromkeys(names) if n in held]
        if gone:
            try:
                rm_fields = dict(state.rm.release(job.job_id, gone))
            except OSError as exc:
                rm_error = str(exc)
    took = round(time.monotonic() - t0, 3)
    with state.lock:
        if job.order_seq != seq or job.state != "running":
            state.event("shrink_late", job.job_id, names=names, error=error)
            return
        now = state.now()
        if error is not None or rm_error is not None:
            job.shrink_failed()
            if rm_error is not None:
                error = (f"the job released {','.join(names)}, but the resource manager "
                         f"did not take them back: {rm_error}")
            state.event("shrink_failed", job.job_id, count=count, error=error,
                        seconds=took, note="not reachable: treated as rigid from now on")
            state.persist(job)
        else:
            freed, unknown = job.shrink_done(now, names)
            state.ledger.release(job.job_id, freed)
            _cores_file(state, job)
            for name in unknown:
                state.event("shrink_unknown_node", job.job_id, node=name,
                            error=f"the job named {name!r}, which it does not hold",
                            nodes=list(job.nodes))
            job.orders.append(("shrink", freed))
            state.event("shrink_done", job.job_id, released=freed, nodes=list(job.nodes),
                        seconds=took, **rm_fields)
        state.persist(job)
        state.dirty = True
    state.wake.set()


def _grow_exchange(state: ServerState, job: ServerJob, seq: int, address: tuple[str, int],
                   nodes: list[str]) -> None:
    t0 = time.monotonic()
    error: OrderFailedError | None = None
    rm_fields: dict[str, Any] = {}
    stuck: list[str] = []
    if state.rm is not None:
        # The nodes become the job's in the resource manager first (Slurm: expand its
        # allocation), so that the job can start places there.
        try:
            rm_fields = dict(state.rm.acquire(job.job_id, nodes))
        except OSError as exc:
            error = OrderFailedError(f"the resource manager could not add "
                                     f"{','.join(nodes)}: {exc}", refused=True)
    acquired = state.rm is not None and error is None
    if error is None:
        try:
            send_grow(address, nodes, source=state.listen,
                      done_timeout_s=state.grow_timeout_s, sign=job.signer())
        except OrderFailedError as exc:
            error = exc
    if error is not None and acquired and state.rm is not None:
        try:
            rm_fields = dict(state.rm.release(job.job_id, nodes))
        except OSError as exc:  # they stay with the job
            stuck = list(nodes)
            rm_fields = {"rm_error": str(exc)}
    took = round(time.monotonic() - t0, 3)
    with state.lock:
        if job.order_seq != seq or job.state != "running":
            state.event("grow_late", job.job_id, error=str(error) if error else None)
            return
        now = state.now()
        if error is None:
            job.grow_done()
            job.orders.append(("grow", list(nodes)))
            state.event("grow_done", job.job_id, added=nodes, nodes=list(job.nodes),
                        seconds=took, **rm_fields)
            state.persist(job)
        else:
            back = [n for n in nodes if n in job.nodes and n not in stuck]
            job.grow_failed(now, back, reachable=error.refused)
            state.ledger.release(job.job_id, back)
            _cores_file(state, job)
            state.event("grow_failed", job.job_id, added=nodes, error=str(error),
                        seconds=took, returned=back,
                        note=None if error.refused else
                        "not reachable: treated as rigid from now on", **rm_fields)
        state.persist(job)
        state.dirty = True
    state.wake.set()
