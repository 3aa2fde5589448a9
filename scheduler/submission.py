"""Submission and cancellation: how jobs enter and leave the real scheduler's queue.

A job is refused at submission when it can never fit the cluster (``JobSpec.fits``), has no
command, or its script does not parse; a refusal is logged with its reason.  A job submitted
with a delay is ``pending`` until it is due (the main loop admits it), then ``waiting``.

With a journal, a job is written there before its id is returned, and again when it is
queued or cancelled (:meth:`scheduler.state.ServerState.persist`).  A cancel names the
requesting user: a user may cancel only their own jobs; root, the scheduler's owner, and
callers of the Python API (``user=None``) any.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ._exceptions import SubmissionError
from .jobs import BatchEntry, JobSpec, load_batch, load_job_script, parse_job_script
from .launch import end_job
from .resources import cores_refusal
from .private import write_private
from .state import ENDED_STATES, ServerJob, ServerState

__all__ = ["admit", "admit_due", "cancel", "command_of", "may_cancel", "submit",
           "submit_batch", "submit_script", "submit_text"]


def _script_argv(path: str) -> tuple[str, ...]:
    """How a job script is run: directly when executable, else with bash."""
    return (path,) if os.access(path, os.X_OK) else ("bash", path)


def command_of(spec: JobSpec, cwd: str) -> tuple[str, ...]:
    """The command line of a job: its script (relative to ``cwd``; run directly when
    executable, else with bash) or its argument list.

    Raises:
        SubmissionError: the job has no command, or an empty one.
    """
    if spec.command is None:
        raise SubmissionError(f"job {spec.name!r} has no command")
    if isinstance(spec.command, str):
        path = spec.command
        if not os.path.isabs(path):
            path = os.path.join(cwd, path)
        return _script_argv(path)
    if not spec.command:
        raise SubmissionError(f"job {spec.name!r} has an empty command")
    return tuple(str(a) for a in spec.command)


_NOT_JOURNALED = "the scheduler's journal cannot be written (see its log): job not accepted"


def _spec_fields(spec: JobSpec) -> dict[str, Any]:
    return {"class": spec.job_class.value, "min_nodes": spec.lo, "max_nodes": spec.hi,
            "required_time_s": spec.required_time_s}


def submit(state: ServerState, spec: JobSpec, *, delay_s: float = 0.0,
           user: int | None = None) -> int:
    """Queue a job now, or ``delay_s`` seconds from now; return its id.

    Args:
        user: the submitter's uid (recorded with the job), or None.

    Raises:
        SubmissionError: the job can never fit, has no command, or ``delay_s`` is not a
            finite number ≥ 0.
    """
    with state.lock:
        lasting = [n for n in state.all_nodes if not state.pool.held_out(n)]
        total = (spec.lo if state.parent else state.capacity if state.capacity is not None
                 else len(lasting))
        reason = (spec.fits(total) or (None if state.parent or state.capacity is not None
                                       else cores_refusal(spec, state.graph.sizes())))
        argv: tuple[str, ...] = ()
        if reason is None:
            try:
                argv = command_of(spec, state.cwd)
            except SubmissionError as exc:
                reason = str(exc)
        if reason is not None:
            state.refused.append((spec.name, reason))
            state.event("refuse", None, name=spec.name, reason=reason)
            raise SubmissionError(f"refused: {reason}")
        if not math.isfinite(delay_s) or delay_s < 0:
            raise SubmissionError(f"delay_s must be a finite number >= 0, got {delay_s}")
        job_id = state.next_id
        state.next_id += 1
        now = state.now()
        job = ServerJob(job_id, spec, argv, now + delay_s,
                        state="pending" if delay_s > 0 else "waiting", user=user)
        if delay_s > 0:
            job.due_s = now + delay_s
            if not state.persist(job):
                raise SubmissionError(_NOT_JOURNALED)
            state.jobs[job_id] = job
            state.pending.append((now + delay_s, job_id))
            state.pending.sort()
            state.event("submit", job_id, name=spec.name, due_s=round(now + delay_s, 3),
                        **_spec_fields(spec))
        else:
            state.jobs[job_id] = job
            if not admit(state, job):  # the journal could not take it: no job
                del state.jobs[job_id]
                state.queue.remove(job_id)
                raise SubmissionError(_NOT_JOURNALED)
        return job_id


def admit(state: ServerState, job: ServerJob) -> bool:
    """Put a job (new, or pending and due) at the end of the queue, journaled first; return
    whether the journal took it (it is queued in memory either way).  Caller holds the
    lock."""
    job.state = "waiting"
    state.queue_seq += 1
    job.queue_seq = state.queue_seq
    ok = state.persist(job)
    state.queue.append(job.job_id)
    state.event("queue", job.job_id, name=job.spec.name, **_spec_fields(job.spec),
                command=list(job.argv))
    state.changed()
    return ok


def admit_due(state: ServerState, now: float) -> None:
    """Admit the pending jobs due at ``now`` (seconds).  Caller holds the lock."""
    while state.pending and state.pending[0][0] <= now:
        _, job_id = state.pending.pop(0)
        job = state.jobs[job_id]
        if job.state == "pending":
            admit(state, job)


def submit_script(state: ServerState, path: str | os.PathLike[str], *,
                  delay_s: float = 0.0, user: int | None = None,
                  priority: int | None = None) -> int:
    """Submit a job script file (headers as in :mod:`scheduler.jobs`); return its id.
    ``priority`` (1-5), when given, replaces the script's ``#PRIORITY``.

    Raises:
        SubmissionError: the script cannot be read, its headers do not parse, or the job
            is refused.
    """
    p = Path(path)
    if not p.is_absolute():
        p = Path(state.cwd) / p
    try:
        spec = load_job_script(p)
    except OSError as exc:
        raise SubmissionError(f"cannot read the job script {p}: {exc.strerror or exc}") \
            from None
    except ValueError as exc:  # JobScriptError: the message names the file and line
        raise SubmissionError(f"the job script does not parse: {exc}") from None
    return submit(state, _with_priority(spec, priority), delay_s=delay_s, user=user)


def _with_priority(spec: JobSpec, priority: int | None) -> JobSpec:
    """``spec`` with ``priority`` (1-5) when given; ``SubmissionError`` names a bad one."""
    if priority is None:
        return spec
    try:
        return spec.replace(priority=priority)
    except ValueError as exc:
        raise SubmissionError(str(exc)) from None


def submit_text(state: ServerState, text: str, *, name: str | None = None,
                delay_s: float = 0.0, user: int | None = None,
                priority: int | None = None) -> int:
    """Submit an inline job script (written to the run directory); return its id.
    ``priority`` (1-5), when given, replaces the script's ``#PRIORITY``.

    Raises:
        SubmissionError: its headers do not parse, or the job is refused.
    """
    try:
        spec = parse_job_script(text, name=name or "job")
    except ValueError as exc:
        raise SubmissionError(f"the script does not parse: {exc}") from None
    spec = _with_priority(spec, priority)
    with state.lock:
        path = state.run_dir / f"script-{state.next_id}-{int(time.time() * 1000)}.sh"
        write_private(path, text)  # mode 0600: run with bash, by its owner
        return submit(state, spec.replace(command=str(path)), delay_s=delay_s, user=user)


def submit_batch(state: ServerState, entries: Iterable[BatchEntry] | str | os.PathLike[str],
                 *, user: int | None = None) -> tuple[list[int], list[tuple[str, str]]]:
    """Submit a batch (entries, or a batch file path): each job ``submit_s`` seconds
    from now.  Returns the ids of the accepted jobs and ``(name, reason)`` of refused ones.

    Raises:
        SubmissionError: the batch file cannot be read (no job is submitted then).
    """
    if isinstance(entries, (str, os.PathLike)):
        p = Path(entries)
        if not p.is_absolute():
            p = Path(state.cwd) / p
        try:
            entries = load_batch(p)
        except (OSError, ValueError) as exc:
            raise SubmissionError(f"cannot submit the batch {p}: {exc}") from None
    ids, refused = [], []
    for entry in entries:
        try:
            ids.append(submit(state, entry.spec, delay_s=entry.submit_s, user=user))
        except SubmissionError as exc:
            refused.append((entry.spec.name, str(exc)))
    return ids, refused


def may_cancel(job: ServerJob, user: int | None) -> bool:
    """Whether ``user`` (a uid, or None for the Python API) may cancel ``job``: its
    submitter, root, the scheduler's owner, and the API may."""
    return user is None or user in (0, os.getuid()) or job.user is None or job.user == user


def cancel(state: ServerState, job_id: int, *, user: int | None = None) -> str:
    """Cancel a pending, waiting or running job; return its state before.

    A running job is ended (SIGTERM to its process tree, SIGKILL after the grace).

    Args:
        user: the requesting uid (None: the Python API, which may cancel any job).

    Raises:
        SubmissionError: no such job, it has ended already, or ``user`` may not cancel it
            (:func:`may_cancel`).
    """
    with state.lock:
        job = state.jobs.get(job_id)
        if job is None:
            raise SubmissionError(f"no job {job_id}")
        if not may_cancel(job, user):
            raise SubmissionError(f"job {job_id} is not yours (uid {job.user} submitted it); "
                                  "only its submitter, root or the scheduler's owner may "
                                  "cancel it")
        before = job.state
        if before in ENDED_STATES:
            raise SubmissionError(f"job {job_id} has ended already ({before})")
        if before == "pending":
            state.pending = [(t, i) for t, i in state.pending if i != job_id]
        if before in ("pending", "waiting"):
            if job_id in state.queue:
                state.queue.remove(job_id)
            job.state = "cancelled"
            job.end_s = state.now()
            state.persist(job)
            state.event("cancel", job_id, state=before)
            state.dirty = True
        elif before == "running":
            state.event("cancel", job_id, state=before)
            end_job(state, job, "cancel")
        state.wake.set()
        return before
