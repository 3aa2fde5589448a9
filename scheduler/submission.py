"""Submission and cancellation: how jobs enter and leave the real scheduler's queue.

A job is refused at submission when it can never fit the cluster (``JobSpec.fits``), has no
command, or its script does not parse; a refusal is logged with its reason.  A job submitted
with a delay is ``pending`` until it is due (the main loop admits it), then ``waiting``.
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
from .state import ENDED_STATES, ServerJob, ServerState

__all__ = ["admit", "admit_due", "cancel", "command_of", "submit", "submit_batch",
           "submit_script", "submit_text"]


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


def _spec_fields(spec: JobSpec) -> dict[str, Any]:
    return {"class": spec.job_class.value, "min_nodes": spec.lo, "max_nodes": spec.hi,
            "required_time_s": spec.required_time_s}


def submit(state: ServerState, spec: JobSpec, *, delay_s: float = 0.0) -> int:
    """Queue a job now, or ``delay_s`` seconds from now; return its id.

    Raises:
        SubmissionError: the job can never fit, has no command, or ``delay_s`` is not a
            finite number ≥ 0.
    """
    with state.lock:
        reason = spec.fits(len(state.all_nodes))
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
                        state="pending" if delay_s > 0 else "waiting")
        state.jobs[job_id] = job
        if delay_s > 0:
            state.pending.append((now + delay_s, job_id))
            state.pending.sort()
            state.event("submit", job_id, name=spec.name, due_s=round(now + delay_s, 3),
                        **_spec_fields(spec))
        else:
            admit(state, job)
        return job_id


def admit(state: ServerState, job: ServerJob) -> None:
    """Put a job (new, or pending and due) at the end of the queue.  Caller holds the lock."""
    job.state = "waiting"
    state.queue.append(job.job_id)
    state.event("queue", job.job_id, name=job.spec.name, **_spec_fields(job.spec),
                command=list(job.argv))
    state.changed()


def admit_due(state: ServerState, now: float) -> None:
    """Admit the pending jobs due at ``now`` (seconds).  Caller holds the lock."""
    while state.pending and state.pending[0][0] <= now:
        _, job_id = state.pending.pop(0)
        job = state.jobs[job_id]
        if job.state == "pending":
            admit(state, job)


def submit_script(state: ServerState, path: str | os.PathLike[str], *,
                  delay_s: float = 0.0, priority: int | None = None) -> int:
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
    return submit(state, _with_priority(spec, priority), delay_s=delay_s)


def _with_priority(spec: JobSpec, priority: int | None) -> JobSpec:
    """``spec`` with ``priority`` (1-5) when given; ``SubmissionError`` names a bad one."""
    if priority is None:
        return spec
    try:
        return spec.replace(priority=priority)
    except ValueError as exc:
        raise SubmissionError(str(exc)) from None


def submit_text(state: ServerState, text: str, *, name: str | None = None,
                delay_s: float = 0.0, priority: int | None = None) -> int:
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
        path.write_text(text, encoding="utf-8")
        return submit(state, spec.replace(command=str(path)), delay_s=delay_s)


def submit_batch(state: ServerState, entries: Iterable[BatchEntry] | str | os.PathLike[str]
                 ) -> tuple[list[int], list[tuple[str, str]]]:
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
            ids.append(submit(state, entry.spec, delay_s=entry.submit_s))
        except SubmissionError as exc:
            refused.append((entry.spec.name, str(exc)))
    return ids, refused


def cancel(state: ServerState, job_id: int) -> str:
    """Cancel a pending, waiting or running job; return its state before.

    A running job is ended (SIGTERM to its process tree, SIGKILL after the grace).

    Raises:
        SubmissionError: no such job, or it has ended already.
    """
    with state.lock:
        job = state.jobs.get(job_id)
        if job is None:
            raise SubmissionError(f"no job {job_id}")
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
            state.event("cancel", job_id, state=before)
            state.dirty = True
        elif before == "running":
            state.event("cancel", job_id, state=before)
            end_job(state, job, "cancel")
        state.wake.set()
        return before
