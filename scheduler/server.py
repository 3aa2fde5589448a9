"""The real scheduler: the mechanism around the pure algorithms, on real processes.

:class:`Server` keeps the cluster state (free nodes, queued and running jobs), runs the
*same* algorithm objects as the simulator (:mod:`scheduler.algorithms`) on a
:class:`~scheduler.algorithms.base.View` built from it, and applies their decisions to real
jobs: it starts processes, sends ``shrink``/``grow`` orders over TCP, listens for the jobs'
notifications, ends jobs that overrun their required time, and cleans up every process of
the jobs it ends.  The clock is injected (``clock``, default ``time.monotonic``), as in the
simulator (STYLE.md habit 12); times in the event log and in views are seconds since the
server started.

::

    control socket ─► submit / status / cancel / shutdown ──┐
    notifications  ─► APGAS-Ready, ...Time... ──────────────┤   (threads; one state lock)
    order threads  ─► shrink replies, grow done ────────────┤
                                                            ▼
    main loop (every 0.1 s): admit due submissions, reap ended jobs, end overrunning ones,
        SIGKILL after the grace; every ``interval_s`` and after any event:
        View(now_s, free, running, waiting) ─► algorithm.decide(view) ─► apply:
            Start  → node file + environment, NodePool.launch (own session)
            Shrink → thread: "shrink n", n reply lines (20 s each) → free the named nodes
            Grow   → nodes to the job at once; thread: "grow n h1 … hn " until the job closes

Job environment (SPEC §2, §6): ``NODES``, ``NODE_FILE`` (absolute, one host a line, in the
job's node order), ``SCHEDULER_IP``, ``SCHEDULER_PORT``, ``JOBNAME`` (the numeric id),
``ELASTIC`` (``malleable`` only for a malleable job under an algorithm that resizes jobs,
else ``rigid``), ``PYTHONUNBUFFERED=1``, plus the server's ``job_env``.

Orders, as the Java scheduler sends them (:mod:`scheduler.wire`): a failed shrink (an
``ERROR`` line, a line later than 20 s, the job unreachable) frees no node and marks the job
*not reachable*: it is treated as rigid from then on.  A refused grow gives its nodes back.
Nodes a shrink reply names go back to the pool when the job holds them (matched by name); a
name the job does not hold is logged as an error.  While a shrink is in flight the job's
``RunningJob.releasing`` counts the nodes it will give back, and the job takes no order until
the reply (or, for a grow, until the job closes the order connection).

A pool that a resource manager stands behind (the hooks of
:class:`~scheduler.nodes.ResourceManager`; Slurm: :mod:`scheduler.slurm_mode`) is told of each
step: ``arrange`` orders a new job's nodes (its first process runs on the first), ``acquire``
makes a grow's nodes the job's before the order is sent (a failure gives them back, as a
refused grow), ``release`` takes back the nodes a shrink reply names before they are free (a
failure keeps them with the job, which is treated as rigid from then on) and the nodes of a
grow that failed after ``acquire``, ``ended`` follows every job's end, ``close`` the shutdown.

Job states: ``pending`` (submitted with a delay), ``waiting``, ``running``, then ``done``
(exit 0), ``failed`` (other exit status, or it could not start), ``killed`` (overran its
required time), ``cancelled``.  Jobs that can never fit are refused at submission.

The event log (``log_path``) has one JSON object a line: ``t`` (seconds since start),
``event``, ``job`` (id or null) and the event's fields.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .algorithms import Algorithm, Decision, RunningJob, Shrink, Start, View, WaitingJob
from .algorithms.base import node_key
from .algorithms.decisions import decision_problem
from .jobs import BatchEntry, JobClass, JobSpec, load_batch, load_job_script, parse_job_script
from .metrics import result_from_records
from .nodes import JobLaunch, NodePool, ResourceManager
from .procs import ProcessTree, proc_table
from .simulate import JobRecord, SimResult
from .wire import (
    SHRINK_LINE_TIMEOUT_S,
    NotificationListener,
    OrderFailedError,
    parse_notification,
    send_grow,
    send_shrink,
    split_timing,
)

__all__ = [
    "DEFAULT_PORT",
    "ENDED_STATES",
    "RESIZING_ALGORITHMS",
    "Server",
    "SubmissionError",
    "free_nodes_of",
    "job_of",
]

#: The Java scheduler's constant port for notifications and orders (SPEC §6).
DEFAULT_PORT = 8081
#: Algorithms that resize running jobs: only under them is a malleable job ``ELASTIC=malleable``.
RESIZING_ALGORITHMS = frozenset({"malleable"})
#: Job states in which a job holds no node and never will again.
ENDED_STATES = frozenset({"done", "failed", "killed", "cancelled"})

_SCAN_PERIOD_S = 0.5  # how often the process trees are refreshed from /proc
_LOOP_PERIOD_S = 0.1  # longest sleep of the main loop


class SubmissionError(ValueError):
    """A job cannot be accepted.

    Raised by :meth:`Server.submit` (and the other ``submit_*`` methods) when the job can never
    fit the cluster (``JobSpec.fits``), has no command, or its script does not parse; and by
    :meth:`Server.cancel` for an unknown or ended job.  The message says why.
    """


@dataclass(eq=False)
class _Job:
    job_id: int
    spec: JobSpec
    argv: tuple[str, ...]
    submit_s: float
    state: str = "waiting"
    elastic: bool = False
    nodes: list[str] = field(default_factory=list)
    address: str = ""
    start_s: float = math.nan
    end_s: float = math.nan
    proc: Any = None
    tree: ProcessTree | None = None
    returncode: int | None = None
    ready: bool = False
    busy: bool = False
    reachable: bool = True
    releasing: int = 0
    last_order_s: float | None = None
    order_seq: int = 0
    shrinks: int = 0
    grows: int = 0
    orders: list[tuple[str, list[str]]] = field(default_factory=list)
    allotment: list[tuple[float, tuple[str, ...]]] = field(default_factory=list)
    ending: str = ""  # why the scheduler is ending it: overrun, cancel, shutdown
    kill_at_s: float = math.inf
    stdout: Path | None = None
    stderr: Path | None = None
    node_file: Path | None = None

    def info(self, now_s: float) -> dict[str, Any]:
        """The job as JSON data (``status``)."""
        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 3)

        return {
            "id": self.job_id,
            "name": self.spec.name,
            "class": self.spec.job_class.value,
            "min_nodes": self.spec.lo,
            "max_nodes": self.spec.hi,
            "required_time_s": self.spec.required_time_s,
            "state": self.state,
            "nodes": list(self.nodes),
            "elastic": self.elastic,
            "ready": self.ready and not self.busy and self.reachable,
            "reachable": self.reachable,
            "order_in_flight": self.busy,
            "submit_s": round(self.submit_s, 3),
            "start_s": num(self.start_s),
            "end_s": num(self.end_s),
            "run_s": (None if math.isnan(self.start_s) else
                      round((self.end_s if not math.isnan(self.end_s) else now_s)
                            - self.start_s, 3)),
            "shrinks": self.shrinks,
            "grows": self.grows,
            "orders": [[kind, list(nodes)] for kind, nodes in self.orders],
            "returncode": self.returncode,
            "pid": self.proc.pid if self.proc is not None else None,
            "command": list(self.argv),
            "stdout": str(self.stdout) if self.stdout else None,
            "stderr": str(self.stderr) if self.stderr else None,
        }


def _script_argv(path: str) -> tuple[str, ...]:
    """How a job script is run: directly when executable, else with bash."""
    return (path,) if os.access(path, os.X_OK) else ("bash", path)


class Server:
    """A long-running elastic batch job scheduler (module docstring).

    Args:
        nodes: the node pool (:class:`~scheduler.nodes.LocalNodes`, ``SshHosts`` …).
        algorithm: the scheduling policy (the simulator's objects).
        port: ``SCHEDULER_PORT``: the notification port here and the jobs' order port
            (0: a free port, chosen when binding).
        listen: the address to listen on and give jobs as ``SCHEDULER_IP`` (default:
            ``nodes.scheduler_address()``).
        run_dir: directory for node files, job output and inline scripts (created).
        log_path: the JSON-lines event log (appended), or None.
        interval_s: period of the algorithm's runs (seconds; SPEC §5: 5 s).  It also runs
            after every submission, end, readiness and order reply.
        grace_s: seconds between SIGTERM and SIGKILL when the scheduler ends a job.
        cwd: working directory of the jobs (default: this process's).
        job_env: extra environment variables for every job.
        clock: the time source (seconds, monotonic); the server's time is ``clock()``
            minus its value at construction.
        on_event: called with each event dict (from the server's threads), e.g. to print
            progress.
        shrink_line_timeout_s: seconds to wait for each shrink reply line (Java: 20).
        grow_timeout_s: seconds to wait for a job to close a grow's connection.

    Use :meth:`start`, then :meth:`submit` (and friends), :meth:`status`, :meth:`cancel`,
    and :meth:`shutdown`; or :meth:`serve_control` for the command line's control socket.
    """

    def __init__(
        self,
        nodes: NodePool,
        algorithm: Algorithm,
        *,
        port: int = DEFAULT_PORT,
        listen: str | None = None,
        run_dir: str | os.PathLike[str],
        log_path: str | os.PathLike[str] | None = None,
        interval_s: float = 5.0,
        grace_s: float = 5.0,
        cwd: str | None = None,
        job_env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        shrink_line_timeout_s: float = SHRINK_LINE_TIMEOUT_S,
        grow_timeout_s: float = 120.0,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0 s, got {interval_s}")
        if grace_s < 0:
            raise ValueError(f"grace_s must be >= 0 s, got {grace_s}")
        if not 0 <= port < 65536:
            raise ValueError(f"port must be 0-65535, got {port}")
        self.nodes = nodes
        #: The pool's resource-manager hooks (Slurm), or None (logical nodes, ssh hosts).
        self._rm: ResourceManager | None = (nodes if isinstance(nodes, ResourceManager)
                                            else None)
        self.algorithm = algorithm
        self.port = port
        self.listen = listen or nodes.scheduler_address()
        self.run_dir = Path(run_dir).resolve()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.interval_s = float(interval_s)
        self.grace_s = float(grace_s)
        self.cwd = str(Path(cwd or os.getcwd()).resolve())
        self.job_env = dict(job_env or {})
        self.shrink_line_timeout_s = shrink_line_timeout_s
        self.grow_timeout_s = grow_timeout_s
        self._clock = clock
        self._t0 = clock()
        self._on_event = on_event
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._all_nodes = tuple(nodes.names())
        self._free: set[str] = set(self._all_nodes)
        self._jobs: dict[int, _Job] = {}
        self._pending: list[tuple[float, int]] = []  # (due_s, job id)
        self._queue: list[int] = []  # waiting job ids, in submission order
        self._stragglers: list[tuple[float, ProcessTree, int]] = []
        self._refused: list[tuple[str, str]] = []
        self._next_id = 1
        self._dirty = True
        self._decide_calls = 0
        self._log_lock = threading.Lock()
        self._log_file: IO[str] | None = (
            open(log_path, "a", encoding="utf-8") if log_path else None  # noqa: SIM115
        )
        self.log_path = Path(log_path).resolve() if log_path else None
        self.events: list[dict[str, Any]] = []
        self._listener: NotificationListener | None = None
        self._loop_thread: threading.Thread | None = None
        self._control: socket.socket | None = None
        self._control_path: Path | None = None
        self._control_thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------ basics

    def now(self) -> float:
        """Seconds since the server was made, on the injected clock."""
        return self._clock() - self._t0

    @property
    def elastic_algorithm(self) -> bool:
        """Whether the algorithm resizes running jobs (:data:`RESIZING_ALGORITHMS`)."""
        return getattr(self.algorithm, "name", "") in RESIZING_ALGORITHMS

    def _event(self, event: str, job: int | None = None, **fields: Any) -> dict[str, Any]:
        record = {"t": round(self.now(), 3), "event": event, "job": job, **fields}
        with self._log_lock:
            self.events.append(record)
            if self._log_file is not None:
                self._log_file.write(json.dumps(record) + "\n")
                self._log_file.flush()
        if self._on_event is not None:
            try:
                self._on_event(record)
            except Exception:  # noqa: BLE001 - a progress printer must not stop the scheduler
                pass
        return record

    def start(self) -> None:
        """Bind the notification port and start the main loop.

        Raises:
            OSError: the address and port cannot be bound.
        """
        try:
            self._listener = NotificationListener(self.listen, self.port, self._notification)
        except OSError:
            with self._log_lock:
                if self._log_file is not None:
                    self._log_file.close()
                    self._log_file = None
            raise
        self.port = self._listener.port
        self._event("server_start", None, nodes=list(self._all_nodes),
                    algorithm=getattr(self.algorithm, "name", "?"), listen=self.listen,
                    port=self.port, run_dir=str(self.run_dir), interval_s=self.interval_s,
                    pid=os.getpid(), wall=time.time())
        self._loop_thread = threading.Thread(target=self._loop, name="scheduler-loop",
                                             daemon=True)
        self._loop_thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until :meth:`shutdown` has finished (or ``timeout_s`` seconds; None: for ever).
        Returns whether it has."""
        return self._stopped.wait(timeout_s)

    # -------------------------------------------------------------------------- submission

    def _command_of(self, spec: JobSpec) -> tuple[str, ...]:
        if spec.command is None:
            raise SubmissionError(f"job {spec.name!r} has no command")
        if isinstance(spec.command, str):
            path = spec.command
            if not os.path.isabs(path):
                path = os.path.join(self.cwd, path)
            return _script_argv(path)
        if not spec.command:
            raise SubmissionError(f"job {spec.name!r} has an empty command")
        return tuple(str(a) for a in spec.command)

    def submit(self, spec: JobSpec, *, delay_s: float = 0.0) -> int:
        """Queue a job now, or ``delay_s`` seconds from now; return its id.

        Raises:
            SubmissionError: the job can never fit, or has no command (it is refused: the
                refusal is logged with its reason).
        """
        with self._lock:
            reason = spec.fits(len(self._all_nodes))
            argv: tuple[str, ...] = ()
            if reason is None:
                try:
                    argv = self._command_of(spec)
                except SubmissionError as exc:
                    reason = str(exc)
            if reason is not None:
                self._refused.append((spec.name, reason))
                self._event("refuse", None, name=spec.name, reason=reason)
                raise SubmissionError(f"refused: {reason}")
            if not math.isfinite(delay_s) or delay_s < 0:
                raise SubmissionError(f"delay_s must be a finite number >= 0, got {delay_s}")
            job_id = self._next_id
            self._next_id += 1
            now = self.now()
            job = _Job(job_id, spec, argv, now + delay_s,
                       state="pending" if delay_s > 0 else "waiting")
            self._jobs[job_id] = job
            if delay_s > 0:
                self._pending.append((now + delay_s, job_id))
                self._pending.sort()
                self._event("submit", job_id, name=spec.name, due_s=round(now + delay_s, 3),
                            **self._spec_fields(spec))
            else:
                self._admit(job)
            return job_id

    def _spec_fields(self, spec: JobSpec) -> dict[str, Any]:
        return {"class": spec.job_class.value, "min_nodes": spec.lo, "max_nodes": spec.hi,
                "required_time_s": spec.required_time_s}

    def _admit(self, job: _Job) -> None:
        job.state = "waiting"
        self._queue.append(job.job_id)
        self._event("queue", job.job_id, name=job.spec.name, **self._spec_fields(job.spec),
                    command=list(job.argv))
        self._dirty = True
        self._wake.set()

    def submit_script(self, path: str | os.PathLike[str], *, delay_s: float = 0.0) -> int:
        """Submit a job script file (headers as in :mod:`scheduler.jobs`); return its id.

        Raises:
            SubmissionError: the script cannot be read, its headers do not parse, or the job
                is refused.
        """
        p = Path(path)
        if not p.is_absolute():
            p = Path(self.cwd) / p
        try:
            spec = load_job_script(p)
        except OSError as exc:
            raise SubmissionError(f"cannot read the job script {p}: {exc.strerror or exc}") \
                from None
        except ValueError as exc:  # JobScriptError: the message names the file and line
            raise SubmissionError(f"the job script does not parse: {exc}") from None
        return self.submit(spec, delay_s=delay_s)

    def submit_text(self, text: str, *, name: str | None = None, delay_s: float = 0.0) -> int:
        """Submit an inline job script (written to the run directory); return its id.

        Raises:
            SubmissionError: its headers do not parse, or the job is refused.
        """
        try:
            spec = parse_job_script(text, name=name or "job")
        except ValueError as exc:
            raise SubmissionError(f"the script does not parse: {exc}") from None
        with self._lock:
            path = self.run_dir / f"script-{self._next_id}-{int(time.time() * 1000)}.sh"
            path.write_text(text, encoding="utf-8")
            return self.submit(spec.replace(command=str(path)), delay_s=delay_s)

    def submit_batch(self, entries: Iterable[BatchEntry] | str | os.PathLike[str]
                     ) -> tuple[list[int], list[tuple[str, str]]]:
        """Submit a batch (entries, or a batch file path): each job ``submit_s`` seconds
        from now.  Returns the ids of the accepted jobs and ``(name, reason)`` of refused ones.

        Raises:
            SubmissionError: the batch file cannot be read (no job is submitted then).
        """
        if isinstance(entries, (str, os.PathLike)):
            p = Path(entries)
            if not p.is_absolute():
                p = Path(self.cwd) / p
            try:
                entries = load_batch(p)
            except (OSError, ValueError) as exc:
                raise SubmissionError(f"cannot submit the batch {p}: {exc}") from None
        ids, refused = [], []
        for entry in entries:
            try:
                ids.append(self.submit(entry.spec, delay_s=entry.submit_s))
            except SubmissionError as exc:
                refused.append((entry.spec.name, str(exc)))
        return ids, refused

    def cancel(self, job_id: int) -> str:
        """Cancel a pending, waiting or running job; return its state before.

        A running job is ended (SIGTERM to its process tree, SIGKILL after the grace).

        Raises:
            SubmissionError: no such job, or it has ended already.
        """
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise SubmissionError(f"no job {job_id}")
            before = job.state
            if before in ENDED_STATES:
                raise SubmissionError(f"job {job_id} has ended already ({before})")
            if before == "pending":
                self._pending = [(t, i) for t, i in self._pending if i != job_id]
            if before in ("pending", "waiting"):
                if job_id in self._queue:
                    self._queue.remove(job_id)
                job.state = "cancelled"
                job.end_s = self.now()
                self._event("cancel", job_id, state=before)
                self._dirty = True
            elif before == "running":
                self._event("cancel", job_id, state=before)
                self._end_job(job, "cancel")
            self._wake.set()
            return before

    # -------------------------------------------------------------------------- status

    def status(self) -> dict[str, Any]:
        """The cluster as JSON data: ``now_s``, ``algorithm``, ``nodes`` (each ``name`` and
        ``job``: the id holding it or null), ``free``, ``jobs`` (each job's state and
        allotment), ``listen``, ``port``, ``run_dir``."""
        with self._lock:
            now = self.now()
            owner = {n: j.job_id for j in self._jobs.values() if j.state == "running"
                     for n in j.nodes}
            return {
                "now_s": round(now, 3),
                "algorithm": getattr(self.algorithm, "name", "?"),
                "listen": self.listen,
                "port": self.port,
                "run_dir": str(self.run_dir),
                "log": str(self.log_path) if self.log_path else None,
                "nodes": [{"name": n, "job": owner.get(n)}
                          for n in sorted(self._all_nodes, key=node_key)],
                "free": len(self._free),
                "jobs": [{**j.info(now), **self._rm_info(j)} for j in self._jobs.values()],
                "refused": [list(r) for r in self._refused],
            }

    def _rm_info(self, job: _Job) -> dict[str, Any]:
        """The resource manager's fields of a running job (``{}`` without one)."""
        if self._rm is None or job.state != "running":
            return {}
        try:
            return dict(self._rm.job_info(job.job_id))
        except Exception as exc:  # noqa: BLE001 - status must answer
            return {"rm_error": str(exc)}

    def job_ids(self) -> list[int]:
        """Every job id so far."""
        with self._lock:
            return list(self._jobs)

    def all_done(self) -> bool:
        """No job is pending, waiting or running."""
        with self._lock:
            return all(j.state in ENDED_STATES for j in self._jobs.values())

    def leftover_pids(self) -> list[int]:
        """Pids of processes of any job (as far as ``/proc`` showed them) still running."""
        with self._lock:
            trees = [j.tree for j in self._jobs.values() if j.tree is not None]
        return sorted({pid for tree in trees for pid in tree.alive()})

    def records(self) -> list[JobRecord]:
        """Simulator-style records of the jobs that ran (started and ended)."""
        with self._lock:
            out = []
            for j in self._jobs.values():
                if math.isnan(j.start_s) or math.isnan(j.end_s):
                    continue
                out.append(JobRecord(
                    job_id=j.job_id, name=j.spec.name, job_class=j.spec.job_class.value,
                    program=j.spec.program, size=j.spec.size, min_nodes=j.spec.lo,
                    max_nodes=j.spec.hi, submit_s=j.submit_s, start_s=j.start_s,
                    end_s=j.end_s, allotment=tuple(j.allotment), shrinks=j.shrinks,
                    grows=j.grows))
            return out

    def result(self) -> SimResult:
        """The run's metrics, computed as the simulator does (:mod:`scheduler.metrics`)."""
        with self._lock:
            refused = list(self._refused)
            calls = self._decide_calls
        return result_from_records(self.records(), algorithm=getattr(self.algorithm, "name", "?"),
                                   total_nodes=len(self._all_nodes), refused=refused,
                                   decide_calls=calls)

    # -------------------------------------------------------------------------- main loop

    def _loop(self) -> None:
        next_tick = self.now()
        last_scan = -math.inf
        while not self._stop.is_set():
            with self._lock:
                now = self.now()
                self._admit_due(now)
                if now - last_scan >= _SCAN_PERIOD_S:
                    self._scan()
                    last_scan = now
                self._reap(now)
                self._police(now)
                if self._dirty or now >= next_tick:
                    self._dirty = False
                    if now >= next_tick:
                        next_tick = now + self.interval_s
                    self._schedule(now)
                wait = min(_LOOP_PERIOD_S, max(0.0, next_tick - now))
                if self._pending:
                    wait = min(wait, max(0.0, self._pending[0][0] - now))
            self._wake.wait(wait)
            self._wake.clear()

    def _admit_due(self, now: float) -> None:
        while self._pending and self._pending[0][0] <= now:
            _, job_id = self._pending.pop(0)
            job = self._jobs[job_id]
            if job.state == "pending":
                self._admit(job)

    def _scan(self) -> None:
        trees = [j.tree for j in self._jobs.values() if j.tree is not None
                 and j.state == "running"] + [t for _, t, _ in self._stragglers]
        if not trees:
            return
        table = proc_table()
        for tree in trees:
            tree.refresh(table)

    def _reap(self, now: float) -> None:
        for job in list(self._jobs.values()):
            if job.state != "running" or job.proc is None:
                continue
            code = job.proc.poll()
            if code is None:
                continue
            self._finish(job, code, now)
        left = []
        for deadline, tree, job_id in self._stragglers:
            pids = tree.alive()
            if not pids:
                continue
            if now >= deadline:
                self._event("leftover_killed", job_id, pids=pids)
                tree.signal(signal.SIGKILL)
                left.append((now + 2.0, tree, job_id))
            else:
                left.append((deadline, tree, job_id))
        self._stragglers = [s for s in left if s[1].alive()]

    def _finish(self, job: _Job, code: int, now: float) -> None:
        job.returncode = code
        job.end_s = now
        if job.ending == "overrun":
            job.state = "killed"
        elif job.ending in ("cancel", "shutdown"):
            job.state = "cancelled"
        else:
            job.state = "done" if code == 0 else "failed"
        self._free.update(job.nodes)
        held = list(job.nodes)
        job.nodes = []
        job.allotment.append((now, ()))
        job.busy = False
        job.releasing = 0
        job.ready = False
        self._event("end", job.job_id, state=job.state, returncode=code, nodes=held,
                    run_s=round(now - job.start_s, 3), shrinks=job.shrinks, grows=job.grows)
        if self._rm is not None:
            self._rm.ended(job.job_id)  # e.g. scancel its Slurm jobs
        if job.tree is not None:
            job.tree.refresh()
            if job.tree.alive():
                # Processes of a job that ended by itself get the grace to exit on their own;
                # those of a job the scheduler ends are killed at once.
                grace = 0.0 if job.ending else self.grace_s
                if job.ending:
                    job.tree.signal(signal.SIGKILL)
                self._stragglers.append((now + grace, job.tree, job.job_id))
        self._dirty = True

    def _police(self, now: float) -> None:
        for job in self._jobs.values():
            if job.state != "running":
                continue
            if not job.ending and now - job.start_s > job.spec.required_time_s:
                self._event("overrun", job.job_id, required_time_s=job.spec.required_time_s,
                            run_s=round(now - job.start_s, 3))
                self._end_job(job, "overrun")
            elif job.ending and now >= job.kill_at_s and job.tree is not None:
                pids = job.tree.signal(signal.SIGKILL)
                self._event("sigkill", job.job_id, pids=pids)
                job.kill_at_s = math.inf

    def _end_job(self, job: _Job, why: str) -> None:
        """SIGTERM the job's whole tree now; SIGKILL at ``grace_s`` (by ``_police``)."""
        job.ending = why
        job.kill_at_s = self.now() + self.grace_s
        if job.tree is not None:
            pids = job.tree.signal(signal.SIGTERM)
            self._event("sigterm", job.job_id, reason=why, pids=pids)

    # --------------------------------------------------------------------------- deciding

    def _view(self, now: float) -> View:
        running = []
        for job in self._jobs.values():
            if job.state != "running":
                continue
            running.append(RunningJob(
                job_id=job.job_id, spec=job.spec, nodes=tuple(job.nodes), start_s=job.start_s,
                malleable_ready=(job.elastic and job.ready and job.reachable and not job.busy
                                 and not job.ending),
                last_order_s=job.last_order_s, releasing=job.releasing))
        running.sort(key=lambda r: (r.start_s, r.job_id))
        waiting = tuple(WaitingJob(i, self._jobs[i].spec, self._jobs[i].submit_s)
                        for i in self._queue)
        return View(now, tuple(sorted(self._free, key=node_key)), tuple(running), waiting,
                    len(self._all_nodes))

    def _schedule(self, now: float) -> None:
        if self._stop.is_set():
            return
        view = self._view(now)
        try:
            decisions = self.algorithm.decide(view)
        except Exception as exc:  # noqa: BLE001 - a policy bug must not stop the scheduler
            self._event("algorithm_error", None, error=f"{type(exc).__name__}: {exc}")
            return
        self._decide_calls += 1
        for decision in decisions:
            problem = self._apply(decision, now)
            if problem:
                self._event("invalid_decision", getattr(decision, "job_id", None),
                            decision=repr(decision), error=problem)

    def _apply(self, decision: Decision, now: float) -> str | None:
        """Apply one decision; return why it cannot be applied, or None.

        The check is :func:`scheduler.algorithms.decisions.decision_problem`, the simulator's.
        """
        job = self._jobs.get(getattr(decision, "job_id", None))  # type: ignore[arg-type]
        problem = decision_problem(
            decision,
            spec=job.spec if job is not None else None,
            state=job.state if job is not None else None,
            held=len(job.nodes) if job is not None else 0,
            takes_orders=job is not None and bool(
                job.elastic and job.ready and job.reachable and not job.busy),
            free=self._free,
        )
        if problem is not None:
            return problem
        assert job is not None
        if isinstance(decision, Start):
            self._start(job, list(decision.nodes), now)
        elif isinstance(decision, Shrink):
            self._order_shrink(job, decision.count, now)
        else:
            self._order_grow(job, list(decision.nodes), now)
        return None

    # ---------------------------------------------------------------------------- starting

    def _job_env(self, job: _Job) -> dict[str, str]:
        env = dict(self.job_env)
        env.update({
            "NODES": str(len(job.nodes)),
            "NODE_FILE": str(job.node_file),
            "SCHEDULER_IP": self.listen,
            "SCHEDULER_PORT": str(self.port),
            "JOBNAME": str(job.job_id),
            "ELASTIC": "malleable" if job.elastic else "rigid",
            "PYTHONUNBUFFERED": "1",
        })
        return env

    def _start(self, job: _Job, nodes: list[str], now: float) -> None:
        self._queue.remove(job.job_id)
        job.elastic = job.spec.job_class is JobClass.MALLEABLE and self.elastic_algorithm
        if self._rm is not None:
            nodes = list(self._rm.arrange(nodes))  # e.g. Slurm's batch host first
        job.nodes = nodes
        job.node_file = self.run_dir / f"job-{job.job_id}.nodes"
        job.node_file.write_text("".join(f"{n}\n" for n in nodes), encoding="ascii")
        job.stdout = self.run_dir / f"job-{job.job_id}.out"
        job.stderr = self.run_dir / f"job-{job.job_id}.err"
        self._free.difference_update(nodes)
        try:
            job.address = self.nodes.address(nodes[0])
            launch = JobLaunch(job.job_id, job.argv, self.cwd, job.stdout, job.stderr)
            job.proc = self.nodes.launch(launch, nodes, self._job_env(job))
        except OSError as exc:
            self._free.update(nodes)
            job.nodes = []
            job.state = "failed"
            job.start_s = job.end_s = now
            job.allotment = [(now, tuple(nodes)), (now, ())]
            self._event("start_failed", job.job_id, nodes=nodes, error=str(exc))
            self._dirty = True
            return
        job.tree = ProcessTree(job.proc.pid)
        job.state = "running"
        job.start_s = now
        job.allotment.append((now, tuple(nodes)))
        self._event("start", job.job_id, name=job.spec.name, nodes=nodes, pid=job.proc.pid,
                    elastic=job.elastic, wait_s=round(now - job.submit_s, 3),
                    command=shlex.join(job.argv), **self._rm_info(job))

    # ------------------------------------------------------------------------------ orders

    def _order_shrink(self, job: _Job, count: int, now: float) -> None:
        job.releasing = count
        self._send_order(job, "shrink", self._shrink_thread, count, now,
                         count=count, nodes=list(job.nodes))

    def _send_order(self, job: _Job, kind: str, thread: Any, arg: Any, now: float,
                    **event: Any) -> None:
        """Mark ``job`` busy with a new order, log ``<kind>_order`` and run
        ``thread(job, seq, address, arg)`` on its own thread (the exchange with the job)."""
        job.busy = True
        job.last_order_s = now
        job.order_seq += 1
        self._event(f"{kind}_order", job.job_id, **event)
        threading.Thread(target=thread, args=(job, job.order_seq, (job.address, self.port), arg),
                         name=f"{kind}-{job.job_id}", daemon=True).start()

    def _shrink_thread(self, job: _Job, seq: int, address: tuple[str, int], count: int) -> None:
        t0 = time.monotonic()
        try:
            names = send_shrink(address, count, source=self.listen,
                                line_timeout_s=self.shrink_line_timeout_s)
            error = None
        except OrderFailedError as exc:
            names, error = [], str(exc)
        rm_fields: dict[str, Any] = {}
        rm_error = None
        if error is None and self._rm is not None:
            # The job's places on the named nodes are gone: the resource manager takes the
            # nodes back (Slurm: scontrol update … NodeList=<kept>) before they are free.
            with self._lock:
                held = list(job.nodes) if job.order_seq == seq and job.state == "running" \
                    else []
            gone = [n for n in dict.fromkeys(names) if n in held]
            if gone:
                try:
                    rm_fields = dict(self._rm.release(job.job_id, gone))
                except OSError as exc:
                    rm_error = str(exc)
        took = round(time.monotonic() - t0, 3)
        with self._lock:
            if job.order_seq != seq or job.state != "running":
                self._event("shrink_late", job.job_id, names=names, error=error)
                return
            now = self.now()
            job.busy = False
            job.releasing = 0
            if error is not None or rm_error is not None:
                job.reachable = False
                if rm_error is not None:
                    error = (f"the job released {','.join(names)}, but the resource manager "
                             f"did not take them back: {rm_error}")
                self._event("shrink_failed", job.job_id, count=count, error=error,
                            seconds=took, note="not reachable: treated as rigid from now on")
            else:
                freed = []
                for name in names:
                    if name in job.nodes:
                        job.nodes.remove(name)
                        self._free.add(name)
                        freed.append(name)
                    else:
                        self._event("shrink_unknown_node", job.job_id, node=name,
                                    error=f"the job named {name!r}, which it does not hold",
                                    nodes=list(job.nodes))
                job.shrinks += 1
                job.orders.append(("shrink", freed))
                job.allotment.append((now, tuple(job.nodes)))
                self._event("shrink_done", job.job_id, released=freed, nodes=list(job.nodes),
                            seconds=took, **rm_fields)
            self._dirty = True
        self._wake.set()

    def _order_grow(self, job: _Job, nodes: list[str], now: float) -> None:
        self._free.difference_update(nodes)
        job.nodes.extend(nodes)
        job.allotment.append((now, tuple(job.nodes)))
        self._send_order(job, "grow", self._grow_thread, nodes, now,
                         added=nodes, nodes=list(job.nodes))

    def _grow_thread(self, job: _Job, seq: int, address: tuple[str, int],
                     nodes: list[str]) -> None:
        t0 = time.monotonic()
        error: OrderFailedError | None = None
        rm_fields: dict[str, Any] = {}
        stuck: list[str] = []
        if self._rm is not None:
            # The nodes become the job's in the resource manager first (Slurm: expand its
            # allocation), so that the job can start places there.
            try:
                rm_fields = dict(self._rm.acquire(job.job_id, nodes))
            except OSError as exc:
                error = OrderFailedError(f"the resource manager could not add "
                                         f"{','.join(nodes)}: {exc}", refused=True)
        acquired = self._rm is not None and error is None
        if error is None:
            try:
                send_grow(address, nodes, source=self.listen,
                          done_timeout_s=self.grow_timeout_s)
            except OrderFailedError as exc:
                error = exc
        if error is not None and acquired and self._rm is not None:
            try:
                rm_fields = dict(self._rm.release(job.job_id, nodes))
            except OSError as exc:  # they stay with the job
                stuck = list(nodes)
                rm_fields = {"rm_error": str(exc)}
        took = round(time.monotonic() - t0, 3)
        with self._lock:
            if job.order_seq != seq or job.state != "running":
                self._event("grow_late", job.job_id, error=str(error) if error else None)
                return
            now = self.now()
            job.busy = False
            if error is None:
                job.grows += 1
                job.orders.append(("grow", list(nodes)))
                self._event("grow_done", job.job_id, added=nodes, nodes=list(job.nodes),
                            seconds=took, **rm_fields)
            else:
                back = [n for n in nodes if n in job.nodes and n not in stuck]
                for n in back:
                    job.nodes.remove(n)
                    self._free.add(n)
                job.allotment.append((now, tuple(job.nodes)))
                if not error.refused:
                    job.reachable = False
                self._event("grow_failed", job.job_id, added=nodes, error=str(error),
                            seconds=took, returned=back,
                            note=None if error.refused else
                            "not reachable: treated as rigid from now on", **rm_fields)
            self._dirty = True
        self._wake.set()

    # ----------------------------------------------------------------------- notifications

    def _notification(self, line: str) -> None:
        message, address = parse_notification(line)
        with self._lock:
            # The running job at that address; else the last one that ran there (a job's
            # last notifications may come after its end was seen).
            matches = sorted((j for j in self._jobs.values() if j.address == address
                              and not math.isnan(j.start_s)),
                             key=lambda j: (j.state == "running", j.start_s))
            job = matches[-1] if matches else None
            job_id = job.job_id if job else None
            if "APGAS-Ready" in message:
                if job is None or job.state != "running":
                    self._event("notify_unknown_job", None, line=line)
                    return
                if not job.elastic:
                    self._event("ready_ignored", job_id, line=line,
                                reason="the job is not malleable under this algorithm")
                    return
                job.ready = True
                self._event("ready", job_id, after_s=round(self.now() - job.start_s, 3))
                self._dirty = True
            elif "APGAS-Rigid" in message:
                # apgaspy: the job could not open its order port and computes on as rigid.
                if job is not None and job.state == "running":
                    job.ready = False
                    job.reachable = False
                self._event("rigid", job_id, line=line)
            elif "APGAS-Disabled" in message:
                if job is not None:
                    job.ready = False
                self._event("disabled", job_id, line=line)
            elif "Time" in message:
                self._event("timing", job_id, fields=split_timing(line))
                return
            else:
                self._event("notify_undefined", job_id, line=line)
                return
        self._wake.set()

    # ----------------------------------------------------------------------------- shutdown

    def shutdown(self) -> list[int]:
        """End every running job (SIGTERM, SIGKILL after the grace), cancel the queue, stop
        listening, close the log; return the ids of the jobs it ended.  Idempotent; blocks
        up to about ``grace_s`` + 5 seconds."""
        with self._lock:
            if self._stop.is_set():
                ended: list[int] = []
                first = False
            else:
                first = True
                self._stop.set()
                self._wake.set()
                now = self.now()
                for job in self._jobs.values():
                    if job.state in ("pending", "waiting"):
                        job.state = "cancelled"
                        job.end_s = now
                self._pending.clear()
                self._queue.clear()
                running = [j for j in self._jobs.values() if j.state == "running"]
                ended = [j.job_id for j in running]
                self._event("shutdown", None, ending=ended)
                for job in running:
                    job.ending = job.ending or "shutdown"
                    if job.tree is not None:
                        job.tree.signal(signal.SIGTERM)
        if not first:
            self._stopped.wait(30)
            return []
        if self._loop_thread is not None and self._loop_thread is not threading.current_thread():
            self._loop_thread.join(timeout=10)
        deadline = time.monotonic() + self.grace_s
        trees = [j.tree for j in running if j.tree is not None] + \
            [t for _, t, _ in self._stragglers]
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
        with self._lock:
            now = self.now()
            for job in running:
                if job.state == "running":
                    self._finish(job, job.proc.poll() if job.proc.poll() is not None else -9,
                                 now)
            left = sorted({p for t in trees for p in t.alive()})
            self._event("stopped", None, left=left)
        if self._rm is not None:
            self._rm.close()
        if self._listener is not None:
            self._listener.close()
        self._close_control()
        with self._log_lock:
            if self._log_file is not None:
                self._log_file.close()
                self._log_file = None
        self._stopped.set()
        return ended

    # ------------------------------------------------------------------------------ control

    def serve_control(self, path: str | os.PathLike[str]) -> Path:
        """Listen for control requests (JSON lines) on the Unix socket ``path``.

        Requests (one JSON object a line; replies likewise, ``{"ok": true, ...}`` or
        ``{"ok": false, "error": "..."}``)::

            {"op": "submit", "script": PATH}          one job script file
            {"op": "submit", "text": SCRIPT, "name"?} an inline job script
            {"op": "submit", "batch": PATH}           a batch file (JSON or CSV)
            {"op": "submit", "job": {JobSpec fields, "submit_s"?}}
            {"op": "status"}
            {"op": "cancel", "job": ID}
            {"op": "shutdown"}                        replies once everything has ended

        Raises:
            OSError: the path is taken by a live scheduler, or cannot be bound.
        """
        p = Path(path).resolve()
        if p.exists():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                try:
                    probe.connect(str(p))
                except OSError:
                    p.unlink()  # a stale socket of a scheduler that is gone
                else:
                    raise OSError(f"a scheduler already listens on {p}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(p))
        sock.listen(16)
        sock.settimeout(0.2)
        self._control, self._control_path = sock, p
        self._control_thread = threading.Thread(target=self._control_accept,
                                                name="scheduler-control", daemon=True)
        self._control_thread.start()
        self._event("control", None, path=str(p))
        return p

    def _close_control(self) -> None:
        sock, path = self._control, self._control_path
        self._control = None
        if sock is not None:
            if self._control_thread is not None and \
                    self._control_thread is not threading.current_thread():
                self._control_thread.join(timeout=5)
            sock.close()
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()

    def _control_accept(self) -> None:
        while self._control is not None and not self._stopped.is_set():
            sock = self._control
            try:
                conn, _ = sock.accept()
            except (TimeoutError, OSError):
                if self._stop.is_set() and self._stopped.is_set():
                    return
                continue
            threading.Thread(target=self._control_conn, args=(conn,), daemon=True,
                             name="scheduler-control-conn").start()

    def _control_conn(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rw", encoding="utf-8", newline="\n") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                    if not isinstance(request, dict):
                        raise ValueError("a request is a JSON object")
                    reply = self.handle(request)
                except (ValueError, TypeError) as exc:
                    reply = {"ok": False, "error": str(exc)}
                try:
                    fh.write(json.dumps(reply) + "\n")
                    fh.flush()
                except OSError:
                    return

    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Answer one control request (see :meth:`serve_control`); never raises for bad
        input: the reply says ``{"ok": false, "error": ...}``."""
        op = request.get("op")
        try:
            if op == "status":
                return {"ok": True, **self.status()}
            if op == "submit":
                return self._handle_submit(request)
            if op == "cancel":
                raw = request.get("job")
                try:
                    job_id = int(raw)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    return {"ok": False, "error": f"a job id is a number, got {raw!r}"}
                before = self.cancel(job_id)
                return {"ok": True, "job": job_id, "was": before}
            if op == "shutdown":
                ended = self.shutdown()
                return {"ok": True, "ended": ended}
            if op == "ping":
                return {"ok": True}
            return {"ok": False, "error": f"unknown op {op!r}: use submit, status, cancel, "
                                          "shutdown"}
        except SubmissionError as exc:
            return {"ok": False, "error": str(exc)}

    def _handle_submit(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self._stop.is_set():
            return {"ok": False, "error": "the scheduler is shutting down"}
        delay = float(request.get("delay_s", 0.0) or 0.0)
        if "script" in request:
            return {"ok": True, "jobs": [self.submit_script(str(request["script"]),
                                                            delay_s=delay)], "refused": []}
        if "text" in request:
            name = request.get("name")
            return {"ok": True, "jobs": [self.submit_text(str(request["text"]),
                                                          name=str(name) if name else None,
                                                          delay_s=delay)], "refused": []}
        if "batch" in request:
            ids, refused = self.submit_batch(str(request["batch"]))
            return {"ok": True, "jobs": ids, "refused": [list(r) for r in refused]}
        if "job" in request:
            raw = dict(request["job"])
            delay = float(raw.pop("submit_s", delay) or 0.0)
            if isinstance(raw.get("command"), str):
                raw["command"] = tuple(shlex.split(raw["command"]))
            elif raw.get("command") is not None:
                raw["command"] = tuple(raw["command"])
            try:
                spec = JobSpec(**raw)
            except (TypeError, ValueError) as exc:
                raise SubmissionError(f"not a valid job: {exc}") from None
            return {"ok": True, "jobs": [self.submit(spec, delay_s=delay)], "refused": []}
        return {"ok": False, "error": "submit needs one of script, text, batch, job"}


def free_nodes_of(status: Mapping[str, Any]) -> list[str]:
    """The free node names of a :meth:`Server.status` answer."""
    return [n["name"] for n in status["nodes"] if n["job"] is None]


def job_of(status: Mapping[str, Any], job_id: int) -> dict[str, Any]:
    """One job's entry of a :meth:`Server.status` answer.  Raises ``KeyError``."""
    for job in status["jobs"]:
        if job["id"] == job_id:
            return dict(job)
    raise KeyError(job_id)

