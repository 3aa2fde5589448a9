"""The real scheduler's main loop: admit, watch, police, decide, apply.

::

    every 0.1 s at most (sooner when woken):
        admit due submissions; refresh the process trees (every 0.5 s); reap ended jobs;
        end overrunning ones, SIGKILL after the grace; move jobs off draining nodes and let
        empty ones go (:func:`scheduler.pool.settle`);
        every ``interval_s`` and after any change:
            View(now_s, free, running, waiting) ─► algorithm.decide(view) ─► apply:
                Start  → :func:`scheduler.launch.start_job`
                Shrink → :func:`scheduler.orders.order_shrink`
                Grow   → :func:`scheduler.orders.order_grow` (for an evolving job:
                         its pending request is served, ``evolving_grant``: a grant,
                         not a grow; :meth:`scheduler.job_state.JobState.grant`)

The algorithm objects are the simulator's (:mod:`scheduler.algorithms`), and so are the
transitions that apply a decision to a job (:class:`scheduler.job_state.JobState`); a
decision the state does not allow is logged as ``invalid_decision`` and skipped, and an
algorithm that raises is logged as ``algorithm_error``: neither stops the scheduler.

Co-location (``serve --colocate-bound``; :mod:`scheduler.colocation`): the view also gives
``shareable_cores``, a ``#COLOCATE yes`` Start may take them, and after the algorithm's
decisions the loop separates the shared cores whose measured duty cycles sum past the bound
(:func:`scheduler.colocation.separations`): a malleable job on such a core (not its first
node) is moved, grown onto free cores elsewhere (``colocation_move``) and, once that grow is
done, given the named shrink ``shrink 1 <node>`` off the shared node
(``colocation_separate``); with no free cores it is shrunk off it alone; else, once a set of
jobs, ``colocation_overload`` (rigid jobs cannot be moved; the guard at their start is what
keeps them in time: a rigid ``#COLOCATE yes`` job the model says sharing would push past its
required time is shown to the policy as exclusive, ``colocation_guard``).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .algorithms import Decision, Grow, Shrink, Start, View, WaitingJob
from . import colocation
from .algorithms.base import node_key
from .job_state import decision_refusal
from .launch import police, reap, scan, start_job
from .orders import order_grow, order_shrink
from .pool import settle
from .state import ServerJob, ServerState
from .submission import admit_due

__all__ = ["MainLoop"]

_SCAN_PERIOD_S = 0.5  # how often the process trees are refreshed
_LOOP_PERIOD_S = 0.1  # longest sleep of the main loop


class MainLoop:
    """Runs the loop (module docstring) on the calling thread until ``state.stop`` is set.

    Args:
        state: the server's state.
    """

    def __init__(self, state: ServerState) -> None:
        self.state = state

    def run(self) -> None:
        """The loop; returns once shutdown has begun."""
        s = self.state
        next_tick = s.now()
        last_scan = -math.inf
        while not s.stop.is_set():
            with s.lock:
                now = s.now()
                admit_due(s, now)
                if now - last_scan >= _SCAN_PERIOD_S:
                    scan(s)
                    last_scan = now
                reap(s, now)
                police(s, now)
                settle(s, now)  # drains: before the policy sees the free nodes
                if s.dirty or now >= next_tick:
                    s.dirty = False
                    if now >= next_tick:
                        next_tick = now + s.interval_s
                    self._schedule(now)
                wait = min(_LOOP_PERIOD_S, max(0.0, next_tick - now))
                if s.pending:
                    wait = min(wait, max(0.0, s.pending[0][0] - now))
            s.wake.wait(wait)
            s.wake.clear()

    def view(self, now: float) -> View:
        """What the algorithm sees at ``now`` (s): free nodes, running and waiting jobs."""
        s = self.state
        running = [job.running_view() for job in s.jobs.values() if job.state == "running"]
        running.sort(key=lambda r: (r.start_s, r.job_id))
        cores = s.ledger.free_counts()
        rooms = s.shareable(now)
        waiting = tuple(self._waiting_view(s.jobs[i], rooms) for i in s.queue)
        shared = sorted(rooms, key=node_key)
        return View(now, tuple(sorted(s.free, key=node_key)), tuple(running), waiting,
                    len(s.all_nodes),
                    tuple((n, cores[n]) for n in sorted(cores, key=node_key)),
                    () if s.graph.slots else
                    tuple((n, s.graph.size(n)) for n in sorted(s.all_nodes, key=node_key)),
                    tuple((n, len(rooms[n])) for n in shared),
                    tuple((n, min(rooms[n])) for n in shared))

    def _waiting_view(self, job: ServerJob, rooms: dict[str, list[float]]) -> WaitingJob:
        """A waiting job as the policy sees it: a ``#COLOCATE yes`` job that may not share
        (:meth:`scheduler.state.ServerState.may_share`, the rigid guard) is shown as
        exclusive, and logged once as ``colocation_guard`` when shared cores were there."""
        s = self.state
        view = job.waiting_view()
        if not job.spec.colocate or s.colocate_bound is None or s.may_share(job):
            return view
        if rooms and job.job_id not in s.guarded:
            s.guarded.add(job.job_id)
            alone = colocation.ASSUMED_ALONE_SHARE * job.spec.required_time_s
            s.event("colocation_guard", job.job_id, required_s=job.spec.required_time_s,
                    alone_s=alone, beta=s.beta, factor=round(colocation.slowdown(
                        s.beta, s.colocate_bound,
                        min(s.duty_by_name.get(job.spec.name) or 0.0, s.colocate_bound)), 3))
        return replace(view, spec=replace(job.spec, colocate=False))

    def _schedule(self, now: float) -> None:
        s = self.state
        if s.stop.is_set():
            return
        view = self.view(now)
        try:
            decisions = s.algorithm.decide(view)
        except Exception as exc:  # noqa: BLE001 - a policy bug must not stop the scheduler
            s.event("algorithm_error", None, error=f"{type(exc).__name__}: {exc}")
            return
        s.decide_calls += 1
        for decision in decisions:
            problem = self._apply(decision, now)
            if problem:
                s.event("invalid_decision", getattr(decision, "job_id", None),
                        decision=repr(decision), error=problem)
        if s.colocate_bound is not None:
            self._separate(now)

    def _separate(self, now: float) -> None:
        """Separate the shared cores whose measured duty cycles sum past the bound
        (:func:`scheduler.colocation.separations`, the simulator's decisions): a move's grow
        (``colocation_move``), a named shrink off the shared node (``colocation_separate``)
        or, once a set of jobs, ``colocation_overload``."""
        s = self.state
        assert s.colocate_bound is not None
        running = {j.job_id: j for j in s.jobs.values() if j.state == "running"}
        movers = {i: colocation.mover(j, named=j.key is not None, may_move=i not in s.moved)
                  for i, j in running.items()}
        steps = colocation.plan_separations(s.ledger, s.occupants(now), s.colocate_bound,
                                            movers, s.moving,
                                            {i: j.nodes for i, j in running.items()})
        for step in steps:
            where = {"node": step.node, "core": step.core, "jobs": list(step.users),
                     "duty_sum": round(step.duty_sum, 3)}
            job = running.get(step.job)  # type: ignore[arg-type]
            if step.action == "overload":
                if step.users not in s.overloaded:
                    s.overloaded.add(step.users)
                    s.overloads += 1
                    s.event("colocation_overload", None, **where)
            elif step.action == "grow" and job is not None and step.target is not None:
                problem = decision_refusal(Grow(job.job_id, (step.target,)), job,
                                           s.free | {step.target}, s.ledger.free_counts())
                if problem is None and order_grow(s, job, [step.target], now):
                    s.moves += 1
                    s.moved.add(job.job_id)
                    s.moving[job.job_id] = (step.node, step.target)
                    s.event("colocation_move", job.job_id, to=step.target, **where)
            elif job is not None:
                s.moving.pop(job.job_id, None)
                s.separations += 1
                s.event("colocation_separate", job.job_id, moved_to=step.target, **where)
                order_shrink(s, job, 1, now, [step.node])

    def _apply(self, decision: Decision, now: float) -> str | None:
        """Apply one decision; return why it cannot be applied, or None.

        The check is :func:`scheduler.job_state.decision_refusal`, the simulator's, so the
        simulator cannot accept what the real scheduler refuses.
        """
        s = self.state
        job = s.jobs.get(getattr(decision, "job_id", None))  # type: ignore[arg-type]
        room, free = s.ledger.free_counts(), s.free
        if isinstance(decision, Start) and job is not None and s.may_share(job):
            shared = {n: len(r) for n, r in s.shareable(now).items()}
            room = colocation.start_room(room, shared)
        elif isinstance(decision, Grow) and job is not None:
            free = s.free | s.grow_targets(job, now)  # co-location: beside their holders
        problem = decision_refusal(decision, job, free, room)
        if problem is not None:
            return problem
        assert job is not None
        if isinstance(decision, Start):
            start_job(s, job, list(decision.nodes), now, decision.cores)
        elif isinstance(decision, Shrink):
            order_shrink(s, job, decision.count, now)
        elif order_grow(s, job, list(decision.nodes), now) and job.grant(decision.nodes):
            s.persist(job)
            s.event("evolving_grant", job.job_id, nodes=list(decision.nodes))
        return None
