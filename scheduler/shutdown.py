"""Shutting the real scheduler down: cancel the queue, end every running job, clean up.

:func:`begin_shutdown` (under the lock, at once) cancels pending and waiting jobs and sends
SIGTERM to every running job's process tree; :func:`end_running_jobs` (outside the lock,
after the main loop has stopped) waits up to the grace for them, SIGKILLs what is left,
records their ends, and closes the resource manager.  The server's façade closes its
sockets and the event log afterwards (:meth:`scheduler.server.Server.shutdown`).
"""

from __future__ import annotations

import contextlib
import signal
import time

from .launch import exit_status, finish
from .state import ServerJob, ServerState

__all__ = ["begin_shutdown", "end_running_jobs"]


def begin_shutdown(state: ServerState) -> list[ServerJob] | None:
    """Set ``state.stop``, cancel the queue and SIGTERM the running jobs; return those jobs,
    or None when a shutdown had begun already."""
    with state.lock:
        if state.stop.is_set():
            return None
        state.stop.set()
        state.wake.set()
        now = state.now()
        changed = []
        for job in state.jobs.values():
            if job.state in ("pending", "waiting"):
                job.state = "cancelled"
                job.end_s = now
                job.reason = "the scheduler was shut down"
                changed.append(job)
        state.pending.clear()
        state.queue.clear()
        running = [j for j in state.jobs.values() if j.state == "running"]
        for job in running:
            job.ending = job.ending or "shutdown"
        state.persist(*changed, *running)  # one transaction
        state.event("shutdown", None, ending=[j.job_id for j in running])
        for job in running:
            if job.tree is not None:
                job.tree.signal(signal.SIGTERM)
    return running


def end_running_jobs(state: ServerState, running: list[ServerJob]) -> None:
    """Wait up to ``grace_s`` for ``running`` (and the stragglers) to exit, SIGKILL the rest,
    record their ends, log ``stopped`` with any pid still alive, close the resource manager.
    Blocks up to about ``grace_s`` + 8 seconds."""
    deadline = time.monotonic() + state.grace_s
    trees = [j.tree for j in running if j.tree is not None] + \
        [t for _, t, _ in state.stragglers]
    while time.monotonic() < deadline and any(t.alive() for t in trees):
        time.sleep(0.05)
        for t in trees:
            t.refresh()
    for t in trees:
        if t.alive():
            t.signal(signal.SIGKILL)
    for job in running:
        with contextlib.suppress(Exception):
            job.proc.wait(timeout=5)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and any(t.alive() for t in trees):
        time.sleep(0.05)
    with state.lock:
        now = state.now()
        for job in running:
            if job.state == "running":
                ended, code = exit_status(job)
                if not ended:
                    code = -9
                finish(state, job, code, now)
        left = sorted({p for t in trees for p in t.alive()})
        state.event("stopped", None, left=left)
    if state.rm is not None:
        state.rm.close()
