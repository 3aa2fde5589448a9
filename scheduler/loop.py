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
decisions the loop separates the shared cores whose measured duty cycles sum past the bound:
a shrink of a malleable job on such a core whose last node it is (``colocation_separate``),
else, once a set of jobs, ``colocation_overload`` (rigid jobs cannot be moved; the guard at
their start is what keeps them in time).
"""

from __future__ import annotations

import math

from .algorithms import Decision, Grow, Shrink, Start, View
from . import colocation
from .algorithms.base import node_key
from .job_state import decision_refusal
from .launch import police, reap, scan, start_job
from .orders import order_grow, order_shrink
from .pool import settle
from .state import ServerState
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
        waiting = tuple(s.jobs[i].waiting_view() for i in s.queue)
        cores = s.ledger.free_counts()
        rooms = s.shareable(now)
        shared = sorted(rooms, key=node_key)
        return View(now, tuple(sorted(s.free, key=node_key)), tuple(running), waiting,
                    len(s.all_nodes),
                    tuple((n, cores[n]) for n in sorted(cores, key=node_key)),
                    () if s.graph.slots else
                    tuple((n, s.graph.size(n)) for n in sorted(s.all_nodes, key=node_key)),
                    tuple((n, len(rooms[n])) for n in shared),
                    tuple((n, min(rooms[n])) for n in shared))

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
        """Separate the shared cores whose measured duty cycles sum past the bound (module
        docstring)."""
        s = self.state
        assert s.colocate_bound is not None
        occupants = s.occupants(now)
        for node, core, users, total in colocation.overloaded(s.ledger, occupants,
                                                              s.colocate_bound):
            jobs = [s.jobs[u] for u in users if u in s.jobs]  # type: ignore[index]
            movable = [j for j in jobs if j.takes_orders and len(j.nodes) > j.spec.lo
                       and j.nodes[-1] == node and j.nodes[0] != node]
            if movable:
                job = movable[-1]
                s.separations += 1
                s.event("colocation_separate", job.job_id, node=node, core=core,
                        jobs=list(users), duty_sum=round(total, 3))
                order_shrink(s, job, 1, now)
            elif not any(j.busy for j in jobs) and users not in s.overloaded:
                s.overloaded.add(users)
                s.overloads += 1
                s.event("colocation_overload", None, node=node, core=core, jobs=list(users),
                        duty_sum=round(total, 3))

    def _apply(self, decision: Decision, now: float) -> str | None:
        """Apply one decision; return why it cannot be applied, or None.

        The check is :func:`scheduler.job_state.decision_refusal`, the simulator's, so the
        simulator cannot accept what the real scheduler refuses.
        """
        s = self.state
        job = s.jobs.get(getattr(decision, "job_id", None))  # type: ignore[arg-type]
        room, free = s.ledger.free_counts(), s.free
        if isinstance(decision, Start) and job is not None and job.spec.colocate:
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
