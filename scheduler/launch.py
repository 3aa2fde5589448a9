"""Job processes: starting a job on its nodes, and seeing it end or ending it.

A job is started on its first node by the node backend (:mod:`scheduler.nodes`), in its own
session, with the environment of :data:`apgaspy.wire.protocol.JOB_ENVIRONMENT` (``NODES``,
``NODE_FILE``: absolute, one host a line in the job's node order, ``SCHEDULER_IP``,
``SCHEDULER_PORT``, ``JOBNAME``: the numeric id, ``ELASTIC``) plus ``PYTHONUNBUFFERED=1`` and
the server's ``job_env``.  Its processes are followed through :class:`scheduler.procs.
ProcessTree`; a job the scheduler ends (overrun, cancel, shutdown) gets SIGTERM, then SIGKILL
after the grace, and processes it leaves behind are killed too.

With a journal (:mod:`scheduler.journal`), a job is started through a small ``sh`` wrapper
(:data:`WRAPPER`) that writes its pid to ``job-<id>.pid`` first and its exit status to
``job-<id>.status`` last (atomically, by rename), and passes a death by signal on as its
own: a scheduler restarted after a crash finds the job again by its pid and start time and
learns its exit status from the file, though the job is not its child
(:mod:`scheduler.recovery`). (In Slurm mode the wrapper runs in the batch script, on the
job's first node: the run directory is on a shared file system there anyway.) The job is
journaled as ``starting`` with its nodes before the launch and as ``running`` with its pid
after it.

Every job gets a fresh random key (:mod:`apgaspy.wire.auth`), unless its script says
``#AUTH plain`` or its name matches ``serve --plain-lines``: the key is written to the
owner-only file ``job-<id>.key`` in the run directory (mode 0600; a restarted scheduler reads
it back for an adopted job; removed when the job ends) and given to the job by its path
only, ``SCHEDULER_KEY_FILE``: never the key itself, which would cross the network in the
clear with the job's environment (mpiexec's proxies, Slurm, ssh command lines;
docs/reference/security.md).

Cores and shapes (:mod:`scheduler.resources`): where the nodes have a core count
(``--cores-per-node``, ssh hosts, Slurm), a job is also given its shape: ``APGAS_PLACES_PER_HOST``
and ``GLB_WORKERS`` (:func:`scheduler.resources.shape` of its profile, the cores it holds on
its first host and the server's shape policy), and, unless ``serve --no-pin``, ``APGAS_CORES``
(``host=cpulist;…``, the CPUs it holds on each host, :mod:`apgaspy.wire.cores`) and
``APGAS_CORES_FILE``: the owner-only file
``job-<id>.cores``, one ``host=cpulist`` a line, rewritten before a grow order is sent and
after a shrink, so that a malleable job learns the cores of a host a grow brings (the order
names hosts only).  The node file keeps one host a line, as the Java jobs read it.  They
override the same variables of ``job_env``.  Without a core count (each node one slot) a job
is given none of them.

Where nodes have a core count, jobs may share a first node (``#CORES`` jobs, co-location:
docs/guides/colocation.md), and only one of them could listen on ``<address>:SCHEDULER_PORT``:
so each malleable or evolving job with a key (an apgaspy job) is given ``APGAS_ORDER_PORT=0``,
listens on an ephemeral port and announces it (``APGAS-Ready;<port>``); its orders go there
(:attr:`scheduler.state.ServerJob.order_port`).  A keyless (Java) job gets no such variable
and takes its orders on ``SCHEDULER_PORT``, as in Java.

Every function here is called with the state's lock held.
"""

from __future__ import annotations

import contextlib
import fnmatch
import math
import shlex
import signal
from collections.abc import Sequence
from pathlib import Path

from apgaspy.wire.auth import KEY_ENV, KEY_FILE_ENV, new_key, write_key_file
from apgaspy.wire.cores import format_cores_env, format_cpulist
from apgaspy.wire.protocol import ORDER_PORT_ENV, job_environment

from .jobs import JobClass
from .nodes import JobLaunch
from .private import write_private
from .resources import shape, start_counts
from .procs import AdoptedProcess, ProcessTree, proc_table, start_time
from .state import ServerJob, ServerState

__all__ = ["WRAPPER", "drop_key_file", "end_job", "finish", "job_env", "keyed", "police",
           "reap", "scan",
           "set_final_state", "start_job", "wrapped"]

#: The launcher wrapper (``sh -c WRAPPER sh PIDFILE STATUSFILE COMMAND…``): writes its pid,
#: runs the command, writes the exit status by rename, and dies of the command's signal.
#: Signals that would end it are caught (a handler, reset for the command by exec) so that it
#: outlives the command and records its status.  Its two files are written in subshells with
#: umask 077 (mode 0600), the command keeps the umask it was given.
WRAPPER = ('trap : TERM INT HUP; (umask 077; echo $$ > "$1"); s=$2; shift 2; "$@"; rc=$?; '
           '(umask 077; echo $rc > "$s.tmp") && mv -f "$s.tmp" "$s"; '
           'if [ $rc -gt 128 ]; then trap - TERM INT HUP; kill -s $(kill -l $rc) $$; fi; '
           'exit $rc')

#: Why a job is failed when it ended unseen and left no exit status.
UNKNOWN_STATUS = "it ended while the scheduler was down; exit status unknown"


def wrapped(argv: tuple[str, ...], pid_file: str, status_file: str) -> tuple[str, ...]:
    """``argv`` run through :data:`WRAPPER`, which writes ``pid_file`` and ``status_file``."""
    return ("sh", "-c", WRAPPER, "sh", pid_file, status_file, *argv)


def job_env(state: ServerState, job: ServerJob) -> dict[str, str]:
    """The environment variables a job is started with (module docstring)."""
    env = dict(state.job_env)
    env.update(job_environment(nodes=len(job.nodes), node_file=str(job.node_file),
                               scheduler_ip=state.listen, port=state.port, job_id=job.job_id,
                               malleable=job.elastic))
    if job.elastic and job.spec.job_class is JobClass.EVOLVING:
        env["ELASTIC"] = "evolving"  # its runtime asks for and gives back nodes itself
    env["PYTHONUNBUFFERED"] = "1"
    env.update(shape_env(state, job))
    env.pop(ORDER_PORT_ENV, None)
    if job.elastic and job.key is not None and not state.graph.slots:
        env[ORDER_PORT_ENV] = "0"  # a port of its own: jobs may share its first node
    env.pop(KEY_ENV, None)  # never one from job_env: a job's key is its own
    env.pop(KEY_FILE_ENV, None)
    if job.key is not None and job.key_file is not None:
        # The path only, never the key: a job's environment crosses the network in the clear
        # (Hydra forwards it to its proxies, Slurm to its nodes); the file is owner-only.
        env[KEY_FILE_ENV] = str(job.key_file)
    return env


def shape_env(state: ServerState, job: ServerJob) -> dict[str, str]:
    """The job's shape variables (module docstring); empty where each node is one slot.

    Raises:
        OSError: its cores file cannot be written.
    """
    if state.graph.slots or not job.nodes:
        return {}
    held = state.ledger.cores_of(job.job_id)
    first = job.nodes[0]
    on_first = len(held[first]) if first in held else state.graph.size(first)
    places, workers = shape(job.shape_profile, on_first, state.shape)
    env = {"APGAS_PLACES_PER_HOST": str(places), "GLB_WORKERS": str(workers)}
    if state.pin:
        env["APGAS_CORES"] = format_cores_env(state.ledger.cpus_of(job.job_id, job.nodes))
        env["APGAS_CORES_FILE"] = str(write_cores_file(state, job))
    return env


def write_cores_file(state: ServerState, job: ServerJob) -> Path:
    """Write the job's ``job-<id>.cores`` (``host=cpulist`` a line, its hosts in order, as the
    runtime reads ``APGAS_CORES_FILE``; owner-only) and return its path.  Raises ``OSError``."""
    path = state.run_dir / f"job-{job.job_id}.cores"
    cpus = state.ledger.cpus_of(job.job_id, job.nodes)
    write_private(path, "".join(f"{h}={format_cpulist(c)}\n" for h, c in cpus.items()),
                  encoding="ascii")
    return path


def keyed(state: ServerState, job: ServerJob) -> bool:
    """Whether ``job`` gets a key: its spec does not say ``auth="plain"`` and its name
    matches none of the server's ``plain_lines`` patterns."""
    if job.spec.auth == "plain":
        return False
    return not any(fnmatch.fnmatchcase(job.spec.name, p) for p in state.plain_lines)


def _give_key(state: ServerState, job: ServerJob) -> None:
    """Draw the job's key and write its owner-only file (raises OSError)."""
    job.key, job.key_file = None, None
    if keyed(state, job):
        path = state.run_dir / f"job-{job.job_id}.key"
        key = new_key()
        write_key_file(path, key)
        job.key, job.key_file = key, path


def drop_key_file(job: ServerJob) -> None:
    """Remove the ended job's key file (the key stays in memory for its late lines)."""
    if job.key_file is not None:
        with contextlib.suppress(OSError):
            job.key_file.unlink()


def start_job(state: ServerState, job: ServerJob, nodes: list[str], now: float,
              cores: Sequence[int] = ()) -> None:
    """Start a waiting job on ``nodes`` (free, checked by the caller) at ``now`` (s);
    ``cores``: the cores it takes on each node (the Start's, for a job asking for cores).

    A start that fails (the backend raises ``OSError``) marks the job ``failed`` and frees
    its nodes; it is logged as ``start_failed``.
    """
    place = state.queue.index(job.job_id)
    state.queue.remove(job.job_id)
    job.elastic = ((job.spec.job_class is JobClass.MALLEABLE and state.elastic_algorithm)
                   or (job.spec.job_class is JobClass.EVOLVING and state.evolving_algorithm))
    counts = dict(zip(nodes, start_counts(job.spec, nodes, cores)[0], strict=False))
    if state.rm is not None:
        nodes = list(state.rm.arrange(nodes))  # e.g. Slurm's batch host first
    job.nodes = nodes
    job.node_file = state.run_dir / f"job-{job.job_id}.nodes"
    write_private(job.node_file, "".join(f"{n}\n" for n in nodes), encoding="ascii")
    job.stdout = state.run_dir / f"job-{job.job_id}.out"
    job.stderr = state.run_dir / f"job-{job.job_id}.err"
    argv = job.argv
    try:
        _give_key(state, job)
    except OSError as exc:  # not started: it keeps its place, the algorithm tries again
        job.nodes = []
        state.queue.insert(place, job.job_id)
        state.event("key_error", job.job_id, error=f"cannot write its key file: {exc}")
        return
    if state.journal is not None:
        job.pid_file = state.run_dir / f"job-{job.job_id}.pid"
        job.status_file = state.run_dir / f"job-{job.job_id}.status"
        for old in (job.pid_file, job.status_file):
            with contextlib.suppress(OSError):
                old.unlink()
        argv = wrapped(job.argv, str(job.pid_file), str(job.status_file))
    job.start_cores = state.acquire(job, nodes, [counts[n] for n in nodes] if counts else (),
                                    now)
    if state.journal is not None:
        # Journaled before the launch, with its cores: a crash from here on finds the
        # nodes and cores taken.
        job.state, job.start_s = "starting", now
        ok = state.persist(job)
        job.state, job.start_s = "waiting", math.nan
        if not ok:  # not started: it keeps its place, the algorithm tries again later
            state.ledger.release(job.job_id, nodes)
            job.start_cores = ()
            job.nodes = []
            state.queue.insert(place, job.job_id)
            return
    try:
        job.address = state.nodes.address(nodes[0])
        launch = JobLaunch(job.job_id, argv, state.cwd, job.stdout, job.stderr)
        job.proc = state.nodes.launch(launch, nodes, job_env(state, job))
    except OSError as exc:
        state.ledger.release(job.job_id, nodes)
        job.start_cores = ()
        job.nodes = []
        job.state = "failed"
        job.start_s = job.end_s = now
        job.allotment = [(now, tuple(nodes)), (now, ())]
        job.reason = f"it could not start: {exc}"
        state.persist(job)
        drop_key_file(job)
        state.event("start_failed", job.job_id, nodes=nodes, error=str(exc))
        state.dirty = True
        return
    job.tree = ProcessTree(job.proc.pid)
    job.pid_start = start_time(job.proc.pid)
    job.start(now, nodes, elastic=job.elastic)
    state.persist(job)
    state.event("start", job.job_id, name=job.spec.name, nodes=nodes, pid=job.proc.pid,
                elastic=job.elastic, authenticated=job.key is not None,
                **({"cores": {n: list(c) for n, c in job.start_cores}}
                   if job.start_cores else {}),
                wait_s=round(now - job.submit_s, 3),
                command=shlex.join(job.argv), **state.rm_info(job))


def scan(state: ServerState) -> None:
    """Refresh the process trees of running jobs and of stragglers from one process table."""
    trees = [j.tree for j in state.jobs.values() if j.tree is not None
             and j.state == "running"] + [t for _, t, _ in state.stragglers]
    if not trees:
        return
    table = proc_table()
    for tree in trees:
        tree.refresh(table)


def reap(state: ServerState, now: float) -> None:
    """Finish the running jobs whose first process has exited; SIGKILL stragglers (processes
    left by ended jobs) whose grace is over."""
    for job in list(state.jobs.values()):
        if job.state != "running" or job.proc is None:
            continue
        ended, code = exit_status(job)
        if ended:
            finish(state, job, code, now)
    left = []
    for deadline, tree, job_id in state.stragglers:
        pids = tree.alive()
        if not pids:
            continue
        if now >= deadline:
            state.event("leftover_killed", job_id, pids=pids)
            tree.signal(signal.SIGKILL)
            left.append((now + 2.0, tree, job_id))
        else:
            left.append((deadline, tree, job_id))
    state.stragglers = [s for s in left if s[1].alive()]


def exit_status(job: ServerJob) -> tuple[bool, int | None]:
    """Whether a running job's first process has ended, and its exit status (None when
    unknown: an adopted job that left no status file)."""
    proc = job.proc
    if isinstance(proc, AdoptedProcess):
        if proc.running():
            return False, None
        return True, proc.returncode
    code = proc.poll()
    return code is not None, code


def set_final_state(job: ServerJob, code: int | None, unknown_reason: str) -> None:
    """Set an ended job's final state from how it was ended and its exit status ``code``
    (None: unknown): ``killed`` (it overran its time), ``cancelled`` (cancel or shutdown),
    ``done`` (status 0) or ``failed`` (any other status; ``unknown_reason`` when unknown)."""
    if job.ending == "overrun":
        job.state = "killed"
    elif job.ending in ("cancel", "shutdown"):
        job.state = "cancelled"
    elif code is None:
        job.state = "failed"
        job.reason = unknown_reason
    else:
        job.state = "done" if code == 0 else "failed"


def finish(state: ServerState, job: ServerJob, code: int | None, now: float) -> None:
    """A running job has ended with exit status ``code`` (None: unknown) at ``now``: set its
    final state (``killed``, ``cancelled``, ``done`` or ``failed``), journal it, free its
    nodes, tell the resource manager, and keep its leftover processes as stragglers."""
    job.returncode = code
    set_final_state(job, code, UNKNOWN_STATUS)
    held = job.end(now, job.state)
    state.persist(job)
    drop_key_file(job)
    state.ledger.release(job.job_id, held)
    state.event("end", job.job_id, state=job.state, returncode=code, nodes=held,
                run_s=round(now - job.start_s, 3), shrinks=job.shrinks, grows=job.grows,
                requests=job.requests, requests_served=job.requests_served,
                releases=job.releases)
    if state.rm is not None:
        state.rm.ended(job.job_id)  # e.g. scancel its Slurm jobs
    if job.tree is not None:
        job.tree.refresh()
        if job.tree.alive():
            # Processes of a job that ended by itself get the grace to exit on their own;
            # those of a job the scheduler ends are killed at once.
            grace = 0.0 if job.ending else state.grace_s
            if job.ending:
                job.tree.signal(signal.SIGKILL)
            state.stragglers.append((now + grace, job.tree, job.job_id))
    state.dirty = True


def police(state: ServerState, now: float) -> None:
    """End the running jobs that overran their required time; SIGKILL those whose grace
    after SIGTERM is over."""
    for job in state.jobs.values():
        if job.state != "running":
            continue
        if not job.ending and now - job.start_s > job.spec.required_time_s:
            state.event("overrun", job.job_id, required_time_s=job.spec.required_time_s,
                        run_s=round(now - job.start_s, 3))
            end_job(state, job, "overrun")
        elif job.ending and now >= job.kill_at_s and job.tree is not None:
            pids = job.tree.signal(signal.SIGKILL)
            state.event("sigkill", job.job_id, pids=pids)
            job.kill_at_s = math.inf


def end_job(state: ServerState, job: ServerJob, why: str) -> None:
    """SIGTERM the job's whole tree now; SIGKILL at ``grace_s`` (by :func:`police`).
    ``why``: ``overrun``, ``cancel`` or ``shutdown``."""
    job.ending = why
    job.kill_at_s = state.now() + state.grace_s
    state.persist(job)
    if job.tree is not None:
        pids = job.tree.signal(signal.SIGTERM)
        state.event("sigterm", job.job_id, reason=why, pids=pids)
