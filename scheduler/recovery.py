"""Resuming from the journal after a restart: the jobs a crashed (or stopped) scheduler left.

:func:`recover` reads every job of the journal (:mod:`scheduler.journal`) into the new
server's state before its main loop starts:

* ``pending`` and ``waiting`` jobs are queued again, in their old order (a pending one at its
  old due time);
* ``starting`` and ``running`` jobs on logical nodes or ssh hosts are looked for: their first
  process by the pid and start time the journal recorded (or, for a job caught between
  journal and launch, by the pid its launcher wrapper wrote and its command line, which names
  the job's status file).  A job found is *adopted*: it keeps its nodes (a job asking for
  cores: exactly the cores of each node its row names, :meth:`CoreLedger.adopt
  <scheduler.resources.CoreLedger.adopt>`; from a journal that recorded none, its share of
  each node, the lowest free cores, after every exact one), its process tree is
  followed again, its end is seen by polling (:class:`scheduler.procs.AdoptedProcess`) and
  its exit status read from the file its wrapper writes.  A job not found has ended while the
  scheduler was down: ``done``/``failed`` by its status file, else ``failed`` with the reason
  that its exit status is unknown.  A ``starting`` job that never got as far as its wrapper
  is queued again.  A job with an order in flight keeps every node it held and is treated as
  rigid (the order's reply went to the dead scheduler); one that was being ended (overrun,
  cancel, shutdown) is ended again;
* ended jobs are kept for ``status`` and ``history``.

Slurm mode (:mod:`scheduler.slurm_mode`): a running job is found by its local watcher
process (pid and start time, as above) and adopted with the Slurm job ids the journal kept
(:meth:`~scheduler.slurm_mode.SlurmNodes.adopt`); it is treated as rigid from then on.  Its
exit status comes from the wrapper's status file, written on the job's first node into the
shared run directory.  A job not adopted (its watcher gone, or caught before its launch)
has whatever Slurm still runs of it, found by name (``squeue --name apgaspy-<id>``),
cancelled.

An adopted job's line key is read back from its owner-only key file (``files["key"]`` of
its row); its notifications are taken from the restart on only (a line captured before
cannot be replayed: :class:`apgaspy.wire.auth.ReplayGuard` with the restart time as its
floor).  An adopted job whose key file is gone is driven keyless (its orders unsigned, which
it refuses).  The key files of jobs found ended or queued again are removed.

Nothing is started on a node an adopted job holds, since those nodes are not free.  The
changes are journaled in one transaction; the whole takes milliseconds for a thousand jobs.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

import psutil

from apgaspy.wire.auth import ReplayGuard, load_key

from .journal import JobRow, spec_from_json
from .launch import drop_key_file, end_job, set_final_state
from .procs import AdoptedProcess, ProcessTree, read_status
from .resources import start_counts
from .state import ENDED_STATES, ServerJob, ServerState

__all__ = ["recover"]


def _cancel_slurm(state: ServerState, job_id: int) -> None:
    """In Slurm mode, ``scancel`` what Slurm still runs of a job that is not adopted (found
    by its name, ``apgaspy-<id>``): nothing would follow it.  Never raises."""
    find = getattr(state.rm, "find", None)
    cancel = getattr(state.rm, "cancel", None)
    if find is None or cancel is None:
        return
    try:
        ids = find(job_id)
    except OSError:
        return
    if ids:
        cancel(ids)
        state.event("slurm_cancelled", job_id, slurm_jobs=ids,
                    reason="left by the crashed scheduler, not adopted")


def _find(row: JobRow, *, slurm: bool = False) -> tuple[int, float] | None:
    """The pid and start time of the job's live first process (in Slurm mode, its local
    watcher), or None."""
    files = row.files
    if slurm and row.pid is None:
        return None  # the wrapper's pid is on the job's node, not here
    if row.pid is not None and row.pid_start is not None:
        try:
            proc = psutil.Process(row.pid)
            if proc.create_time() == row.pid_start and proc.status() != psutil.STATUS_ZOMBIE:
                return row.pid, row.pid_start
        except psutil.Error:
            pass
        return None
    pid_file = files.get("pidfile")
    status = files.get("status")
    if not pid_file or not status:
        return None
    try:
        pid = int(Path(pid_file).read_text(encoding="ascii").strip())
        proc = psutil.Process(pid)
        with proc.oneshot():
            if status in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                return pid, proc.create_time()
    except (OSError, ValueError, psutil.Error):
        pass
    return None


def _job(state: ServerState, row: JobRow) -> ServerJob:
    def s(wall: float | None) -> float:
        return math.nan if wall is None else state.from_wall(wall)

    job = ServerJob(row.id, spec_from_json(row.spec), tuple(row.argv), s(row.submit_wall),
                    state=row.state, elastic=row.elastic, nodes=list(row.nodes),
                    address=row.address, order_port=row.order_port,
                    start_s=s(row.start_wall), end_s=s(row.end_wall),
                    returncode=row.returncode, ready=row.ready, reachable=row.reachable,
                    shrinks=row.shrinks, grows=row.grows, ending=row.ending, user=row.user,
                    reason=row.reason, queue_seq=row.queue_seq,
                    due_s=None if row.due_wall is None else s(row.due_wall),
                    pid_start=row.pid_start, spec_json=row.spec, requested=row.requested,
                    requests=row.requests, requests_served=row.requests_served,
                    releases=row.releases)
    job.allotment = [(state.from_wall(t), tuple(n)) for t, n in row.allotment]
    f = row.files
    for attr, key in (("stdout", "stdout"), ("stderr", "stderr"), ("node_file", "node_file"),
                      ("status_file", "status"), ("pid_file", "pidfile")):
        if f.get(key):
            setattr(job, attr, Path(f[key]))
    if f.get("key"):
        job.key_file = Path(f["key"])
    return job


def _read_key(state: ServerState, job: ServerJob) -> None:
    """Read an adopted job's key back from its file; lines sent before now are refused."""
    if job.key_file is None:
        return
    try:
        job.key = load_key({"SCHEDULER_KEY_FILE": str(job.key_file)})
    except ValueError as exc:
        state.event("key_error", job.job_id, error=f"{exc}; the job is driven without a key")
        job.key_file = None
        return
    job.notify_guard = ReplayGuard(floor=time.time_ns())


def _hold_cores(state: ServerState, job: ServerJob, row: JobRow) -> bool:
    """An adopted job takes what it held: the exact cores its row names (``row.cores``),
    or its whole nodes (a node job).  Returns ``False`` for a job asking for cores whose row
    names none (a journal written before cores were recorded): it is placed after every
    exact one (:func:`_hold_counts`)."""
    if row.cores:
        try:
            state.ledger.adopt(job.job_id, row.cores, shared=job.spec.colocate)
        except (ValueError, KeyError) as exc:
            state.event("cores_unknown", job.job_id, cores=row.cores,
                        error=f"{exc}; it holds its whole nodes instead")
            state.free.difference_update(job.nodes)
            return True
        job.start_cores = tuple((n, tuple(c)) for n, c in row.cores.items())
        return True
    if job.spec.asks_cores:
        return False
    state.free.difference_update(job.nodes)
    return True


def _hold_counts(state: ServerState, job: ServerJob) -> None:
    """A core job adopted from a row without cores takes its share of each node
    (:func:`~scheduler.resources.start_counts`), the lowest free cores; where they are not
    free, or the share is unknown, its whole nodes."""
    counts, problem = start_counts(job.spec, job.nodes, ())
    if problem is None and counts:
        try:
            job.start_cores = state.ledger.acquire(job.job_id, job.nodes, counts)
            return
        except ValueError as exc:
            problem = str(exc)
    state.event("cores_unknown", job.job_id,
                error=f"{problem or 'no share'}; it holds its whole nodes instead")
    state.free.difference_update(job.nodes)


def _ended_unseen(state: ServerState, job: ServerJob, row: JobRow, now: float) -> None:
    """The job ended while the scheduler was down: final state from its status file."""
    code = read_status(row.files.get("status"))
    end = now
    status = row.files.get("status")
    if status and os.path.exists(status):
        end = state.from_wall(os.path.getmtime(status))
    if math.isnan(job.start_s):
        job.start_s = end
    job.returncode = code
    set_final_state(job, code, "its processes were gone when the scheduler restarted; "
                               "exit status unknown")
    if job.state == "failed" and code is not None:
        job.reason = f"it ended while the scheduler was down, exit status {code}"
    job.end(end, job.state)


def recover(state: ServerState) -> dict[str, Any]:
    """Load the journal into ``state`` (module docstring); return counts for the event log
    (``queued``, ``pending``, ``adopted``, ``ended``, ``requeued``, ``history``).

    Call before the main loop starts.  Raises ``sqlite3.Error`` when the journal cannot be
    read or written.
    """
    journal = state.journal
    if journal is None:
        return {}
    counts = dict.fromkeys(("queued", "pending", "adopted", "ended", "requeued", "history"),
                           0)
    rows = journal.rows()
    changed: list[ServerJob] = []
    to_end: list[ServerJob] = []
    queued: list[ServerJob] = []
    unplaced: list[ServerJob] = []  # adopted core jobs whose row names no cores
    with state.lock:
        now = state.now()
        state.next_id = max(state.next_id, journal.max_id() + 1)
        for row in rows:
            if row.id in state.jobs:  # submitted to this server before it started
                continue
            try:
                job = _job(state, row)
            except ValueError as exc:  # a spec the current JobSpec refuses
                spec = spec_from_json('{"name": "unreadable"}')
                job = ServerJob(row.id, spec, tuple(row.argv), state.from_wall(row.submit_wall),
                                state="failed", end_s=now,
                                reason=f"its specification no longer reads: {exc}")
                if row.state not in ENDED_STATES:
                    changed.append(job)
                state.jobs[row.id] = job
                continue
            state.jobs[row.id] = job
            state.queue_seq = max(state.queue_seq, row.queue_seq or 0)
            if row.state in ENDED_STATES:
                counts["history"] += 1
            elif row.state == "pending":
                due = job.due_s if job.due_s is not None else now
                state.pending.append((due, job.job_id))
                counts["pending"] += 1
            elif row.state == "waiting":
                queued.append(job)
            else:  # starting or running
                found = _find(row, slurm=state.rm is not None)
                if found is not None and state.rm is not None:
                    adopt = getattr(state.rm, "adopt", None)
                    try:
                        if adopt is None:
                            raise ValueError("this resource manager cannot adopt jobs")
                        adopt(job.job_id, job.nodes, row.rm)
                    except ValueError as exc:
                        found = None
                        job.reason = f"not adopted: {exc}"
                if found is not None:
                    pid, start = found
                    job.state = "running"
                    job.adopted = True
                    job.proc = AdoptedProcess(pid, start, row.files.get("status"))
                    job.pid_start = start
                    job.tree = ProcessTree(pid)
                    if math.isnan(job.start_s):
                        job.start_s = now
                    if not job.allotment:
                        job.allotment.append((job.start_s, tuple(job.nodes)))
                    if row.order_kind is not None or state.rm is not None:
                        # its order's reply went to the dead scheduler; a Slurm job adopted
                        # is not resized again
                        job.reachable = False
                    _read_key(state, job)
                    if not _hold_cores(state, job, row):
                        unplaced.append(job)
                    if job.ending:
                        to_end.append(job)
                    changed.append(job)
                    counts["adopted"] += 1
                    state.event("adopted", job.job_id, pid=pid, nodes=list(job.nodes),
                                reachable=job.reachable, **row.rm)
                elif (row.state == "starting" and not (row.files.get("pidfile") and
                                                        os.path.exists(row.files["pidfile"]))
                      and not (row.files.get("status") and
                               os.path.exists(row.files["status"]))):
                    _cancel_slurm(state, job.job_id)  # sbatch may have answered, unseen
                    job.state = "waiting"  # it never got as far as its wrapper
                    job.nodes = []
                    job.start_s = math.nan
                    job.allotment = []
                    drop_key_file(job)
                    job.key_file = None
                    queued.append(job)
                    changed.append(job)
                    counts["requeued"] += 1
                else:
                    _cancel_slurm(state, job.job_id)
                    _ended_unseen(state, job, row, now)
                    drop_key_file(job)
                    changed.append(job)
                    counts["ended"] += 1
                    state.event("ended_unseen", job.job_id, state=job.state,
                                returncode=job.returncode, reason=job.reason)
        for job in unplaced:  # after every exact one: these take the lowest free cores
            _hold_counts(state, job)
        state.pending.sort()
        queued.sort(key=lambda j: (j.queue_seq if j.queue_seq is not None else math.inf,
                                   j.job_id))
        for job in queued:
            if job.queue_seq is None:
                state.queue_seq += 1
                job.queue_seq = state.queue_seq
            state.queue.append(job.job_id)
        counts["queued"] = len(queued)
        state.persist(*changed)
        for job in to_end:
            end_job(state, job, job.ending)
        state.changed()
    return counts
