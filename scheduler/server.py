"""The real scheduler: the mechanism around the pure algorithms, on real processes.

:class:`Server` is the façade: it keeps one :class:`~scheduler.state.ServerState` (free
nodes, queued and running jobs, the event log) and hands each concern to its module:

::

    control socket ─► scheduler.control_server ─► submit / status / cancel / shutdown ─┐
    notifications  ─► notification_listener.NotificationListener ─► scheduler.notifications ─┤
    order threads  ─► scheduler.orders (shrink replies, grow done) ─────────────────────┤
                                                              (threads; one state lock)
                                                                                        ▼
    scheduler.loop.MainLoop: admit due submissions (scheduler.submission), reap, police and
        start jobs (scheduler.launch), run the algorithm and apply its decisions
        (Start → launch.start_job, Shrink/Grow → orders.order_shrink / order_grow)
    scheduler.shutdown: cancel the queue, end the running jobs

It runs the *same* algorithm objects as the simulator (:mod:`scheduler.algorithms`), on a
:class:`~scheduler.algorithms.base.View` built from the state.  The clock is injected
(``clock``, default ``time.monotonic``), as in the simulator; times in the event log and in
views are seconds since the server started.  The wire protocol is
:mod:`apgaspy.wire.protocol`'s (docs/reference/protocol.md); the modules and how they call
each other are described in docs/design/scheduler-structure.md.

A backend that a resource manager stands behind (the hooks of
:class:`~scheduler.nodes.ResourceManager`; Slurm: :mod:`scheduler.slurm_mode`) is told of each
step: ``arrange`` orders a new job's nodes (:mod:`scheduler.launch`), ``acquire`` and
``release`` bracket orders (:mod:`scheduler.orders`), ``ended`` follows every job's end,
``close`` the shutdown.

With a state directory (``state_dir``), every job is journaled in SQLite
(:mod:`scheduler.journal`) before the scheduler acts on it, the directory is locked against a
second scheduler, and :meth:`Server.start` resumes from the journal (:mod:`scheduler.recovery`):
queued jobs are queued again, running ones adopted (docs/guides/durable-scheduler.md).

Jobs that can never fit are refused at submission (:mod:`scheduler.submission`); job states
and the event log are described in :mod:`scheduler.state`.
"""

from __future__ import annotations

import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from apgaspy.wire.protocol import DEFAULT_PORT, SHRINK_LINE_TIMEOUT_S

from . import colocation, pool, submission
from ._exceptions import PoolError, SubmissionError
from .algorithms import Algorithm
from .algorithms.base import node_key
from .control_server import ControlServer, handle_request
from .jobs import BatchEntry, JobSpec
from .journal import Journal
from .loop import MainLoop
from .metrics import result_from_records
from .nodes import NodeBackend
from .notification_listener import ListenerLimits, NotificationListener
from .notifications import on_notification
from .private import private_dir
from .records import JobRecord, SimResult
from .recovery import recover
from .resources import SHAPES
from .shutdown import begin_shutdown, end_running_jobs
from .state import ENDED_STATES, RESIZING_ALGORITHMS, ServerState

__all__ = [
    "DEFAULT_PORT",
    "ENDED_STATES",
    "PoolError",
    "RESIZING_ALGORITHMS",
    "Server",
    "SubmissionError",
    "free_nodes_of",
    "job_of",
]


class Server:
    """A long-running elastic batch job scheduler (module docstring).

    Args:
        nodes: the node backend (:class:`~scheduler.nodes.LocalNodes`, ``SshHosts`` …).
        algorithm: the scheduling policy (the simulator's objects).
        port: ``SCHEDULER_PORT``: the notification port here and the jobs' order port
            (0: a free port, chosen when binding).
        listen: the address to listen on and give jobs as ``SCHEDULER_IP`` (default:
            ``nodes.scheduler_address()``).
        run_dir: directory for node files, job output and inline scripts (created; made
            owner-only, mode 0700, and every file the scheduler writes there is 0600).
        log_path: the JSON-lines event log (appended), or None.
        interval_s: period of the algorithm's runs (seconds; the Java scheduler's 5 s).  It
            also runs after every submission, end, readiness and order reply.
        grace_s: seconds between SIGTERM and SIGKILL when the scheduler ends a job.
        cwd: working directory of the jobs (default: this process's).
        job_env: extra environment variables for every job.
        clock: the time source (seconds, monotonic); the server's time is ``clock()``
            minus its value at construction.
        on_event: called with each event dict (from the server's threads), e.g. to print
            progress.
        shrink_line_timeout_s: seconds to wait for each shrink reply line (Java: 20).
        grow_timeout_s: seconds to wait for a job to close a grow's connection.
        state_dir: the state directory of the journal (created), or None: nothing survives
            a crash.  Locked for the server's life.
        plain_lines: names of jobs (shell patterns, :mod:`fnmatch`) that get no key and
            speak the plain Java lines (Java APGAS jobs); every other job gets a fresh key
            and must sign its lines (docs/reference/security.md).  A job script can opt out
            itself with ``#AUTH plain``.
        limits: the bounds on the notification port's connections and lines
            (:class:`~scheduler.notification_listener.ListenerLimits`; default: its defaults).
        shape: how a job's places and workers are laid on its cores
            (:func:`scheduler.resources.shape`): ``"scale"`` (a place a node, a worker a
            core), ``"granularity"`` (a place a core) or ``"core"`` (a place a core, every
            profile).  The nodes' cores come from the
            backend's ``graph`` (``LocalNodes(n, cores_per_node=C)``, ssh hosts, Slurm);
            a backend without one hands out whole nodes, a slot each, and gives jobs no shape.
        parent: the server is a child scheduler (``serve --parent``, :mod:`scheduler.child`):
            a job larger than its nodes is queued (its parent may grant more), not refused.
        colocate_bound: co-location (docs/guides/colocation.md): ``#COLOCATE yes`` jobs may
            share cores while the duty cycles on each core sum to at most this (> 0; the
            model's knee gives 1.0), or None (default): no job shares a core.  Ignored
            where each node is one slot.
        pin: give jobs their cores (``APGAS_CORES``, ``APGAS_CORES_FILE``) so that their
            places bind to them (default); ``False`` (``serve --no-pin``): jobs get their
            shape only and run wherever the kernel puts them (docs/guides/pinning.md).

    Raises:
        ValueError: ``interval_s`` ≤ 0, ``grace_s`` < 0, ``port`` outside 0-65535, an
            unknown ``shape``, or ``colocate_bound`` ≤ 0.
        OSError: the log cannot be opened, or the run directory made
            (:class:`~scheduler.private.UnsafePathError`: it is another user's or a link);
            :class:`~scheduler.journal.JournalLockedError` (an ``OSError``): another live
            scheduler holds ``state_dir``.

    Use :meth:`start`, then :meth:`submit` (and friends), :meth:`status`, :meth:`cancel`,
    and :meth:`shutdown`; or :meth:`serve_control` for the command line's control socket.
    """

    def __init__(
        self,
        nodes: NodeBackend,
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
        state_dir: str | os.PathLike[str] | None = None,
        plain_lines: Iterable[str] = (),
        limits: ListenerLimits | None = None,
        shape: str = "scale",
        parent: bool = False,
        colocate_bound: float | None = None,
        pin: bool = True,
    ) -> None:
        if colocate_bound is not None and not colocate_bound > 0:
            raise ValueError(f"colocate_bound must be > 0, got {colocate_bound}")
        if shape not in SHAPES:
            raise ValueError(f"shape is {' or '.join(SHAPES)}, got {shape!r}")
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0 s, got {interval_s}")
        if grace_s < 0:
            raise ValueError(f"grace_s must be >= 0 s, got {grace_s}")
        if not 0 <= port < 65536:
            raise ValueError(f"port must be 0-65535, got {port}")
        run = private_dir(run_dir).resolve()  # mode 0700, ours, not a link (.private)
        journal = None
        if state_dir is not None:
            journal = Journal(state_dir)
            try:
                journal.lock()
            except OSError:
                journal.close()
                raise
        self._state = ServerState(
            nodes, algorithm, port=port, listen=listen or nodes.scheduler_address(),
            run_dir=run, log_path=log_path, interval_s=float(interval_s),
            grace_s=float(grace_s), cwd=str(Path(cwd or os.getcwd()).resolve()),
            job_env=dict(job_env or {}), clock=clock, on_event=on_event,
            shrink_line_timeout_s=shrink_line_timeout_s, grow_timeout_s=grow_timeout_s,
            journal=journal, plain_lines=tuple(plain_lines),
            graph=getattr(nodes, "graph", None), shape=shape, colocate_bound=colocate_bound,
            pin=pin)
        self._state.parent = parent
        if journal is not None:
            self._state.next_id = journal.max_id() + 1  # ids are never reused
        self.nodes = nodes
        self.algorithm = algorithm
        self._loop = MainLoop(self._state)
        self._listener: NotificationListener | None = None
        self._limits = limits or ListenerLimits()
        self._loop_thread: threading.Thread | None = None
        self._control: ControlServer | None = None

    # ------------------------------------------------------------------------------ basics

    @property
    def listen(self) -> str:
        """The address the server listens on (``SCHEDULER_IP``)."""
        return self._state.listen

    @property
    def port(self) -> int:
        """``SCHEDULER_PORT`` (the bound one once started with port 0)."""
        return self._state.port

    @property
    def run_dir(self) -> Path:
        """The run directory (absolute)."""
        return self._state.run_dir

    @property
    def log_path(self) -> Path | None:
        """The JSON-lines event log (absolute), or None."""
        return self._state.event.path

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event so far, oldest first (the log's records)."""
        return self._state.event.records

    @property
    def elastic_algorithm(self) -> bool:
        """Whether the algorithm resizes running jobs (:data:`RESIZING_ALGORITHMS`)."""
        return self._state.elastic_algorithm

    @property
    def stopping(self) -> bool:
        """Whether :meth:`shutdown` has begun."""
        return self._state.stop.is_set()

    def now(self) -> float:
        """Seconds since the server was made, on the injected clock."""
        return self._state.now()

    @property
    def journal_path(self) -> Path | None:
        """The journal file (absolute), or None without a state directory."""
        j = self._state.journal
        return j.path if j is not None else None

    def start(self) -> None:
        """Bind the notification port, resume from the journal (if any) and start the main
        loop.  With port 0 and a journal that names the port of an earlier run, that port is
        tried first, so that adopted jobs reach the scheduler at the port they were told.

        Raises:
            OSError: the address and port cannot be bound.
            sqlite3.Error: the journal cannot be read or written.
        """
        s = self._state
        notify = lambda line, peer: on_notification(s, line, peer)  # noqa: E731
        try:
            self._listener = None
            old = s.journal.meta("port") if s.journal is not None else None
            if s.port == 0 and old:
                try:
                    self._listener = NotificationListener(s.listen, int(old), notify,
                                                          limits=self._limits)
                except OSError:
                    self._listener = None
            if self._listener is None:
                self._listener = NotificationListener(s.listen, s.port, notify,
                                                      limits=self._limits)
        except OSError:
            s.event.close()
            if s.journal is not None:
                s.journal.close()
            raise
        s.port = self._listener.port
        s.event("server_start", None, nodes=list(s.all_nodes), algorithm=s.algorithm_name,
                listen=s.listen, port=s.port, run_dir=str(s.run_dir), interval_s=s.interval_s,
                pid=os.getpid(), wall=time.time(),
                journal=str(s.journal.path) if s.journal is not None else None)
        if s.journal is not None:
            t0 = time.perf_counter()
            moved_port = old is not None and int(old) != s.port
            pooled = pool.restore(s)  # added nodes first: adopted jobs may hold them
            counts = {**recover(s), **pooled}
            if moved_port:
                with s.lock:
                    for job in s.jobs.values():
                        if job.adopted:
                            job.reachable = False  # it sends to the old port
            s.journal.set_meta("port", str(s.port))
            s.event("recovered", None, seconds=round(time.perf_counter() - t0, 4), **counts)
        self._loop_thread = threading.Thread(target=self._loop.run, name="scheduler-loop",
                                             daemon=True)
        self._loop_thread.start()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until :meth:`shutdown` has finished (or ``timeout_s`` seconds; None: for ever).
        Returns whether it has."""
        return self._state.stopped.wait(timeout_s)

    # -------------------------------------------------------------------------- submission

    def submit(self, spec: JobSpec, *, delay_s: float = 0.0, user: int | None = None) -> int:
        """Queue a job now, or ``delay_s`` seconds from now; return its id
        (:func:`scheduler.submission.submit`).  ``user``: the submitter's uid, recorded.

        Raises:
            SubmissionError: the job can never fit, or has no command (it is refused: the
                refusal is logged with its reason).
        """
        return submission.submit(self._state, spec, delay_s=delay_s, user=user)

    def submit_script(self, path: str | os.PathLike[str], *, delay_s: float = 0.0,
                      user: int | None = None, priority: int | None = None) -> int:
        """Submit a job script file (headers as in :mod:`scheduler.jobs`); return its id.

        Raises:
            SubmissionError: the script cannot be read, its headers do not parse, or the job
                is refused.
        """
        return submission.submit_script(self._state, path, delay_s=delay_s, user=user,
                                        priority=priority)

    def submit_text(self, text: str, *, name: str | None = None, delay_s: float = 0.0,
                    user: int | None = None, priority: int | None = None) -> int:
        """Submit an inline job script (written to the run directory); return its id.

        Raises:
            SubmissionError: its headers do not parse, or the job is refused.
        """
        return submission.submit_text(self._state, text, name=name, delay_s=delay_s,
                                      user=user, priority=priority)

    def submit_batch(self, entries: Iterable[BatchEntry] | str | os.PathLike[str], *,
                     user: int | None = None) -> tuple[list[int], list[tuple[str, str]]]:
        """Submit a batch (entries, or a batch file path): each job ``submit_s`` seconds
        from now.  Returns the ids of the accepted jobs and ``(name, reason)`` of refused ones.

        Raises:
            SubmissionError: the batch file cannot be read (no job is submitted then).
        """
        return submission.submit_batch(self._state, entries, user=user)

    def cancel(self, job_id: int, *, user: int | None = None) -> str:
        """Cancel a pending, waiting or running job; return its state before.

        A running job is ended (SIGTERM to its process tree, SIGKILL after the grace).

        Args:
            user: the requesting uid (None: any job may be cancelled).

        Raises:
            SubmissionError: no such job, it has ended already, or it is not ``user``'s
                (:func:`scheduler.submission.may_cancel`).
        """
        return submission.cancel(self._state, job_id, user=user)

    # ------------------------------------------------------------------------------ nodes

    def node_add(self, names: Iterable[str] = (), *, count: int = 1) -> dict[str, Any]:
        """Add nodes to the pool while jobs run (:func:`scheduler.pool.change_nodes`):
        ``names`` (ssh hosts; logical nodes ``127.0.1.k``; a draining or drained node serves
        again), or ``count`` new logical nodes.  Returns ``{"action", "nodes"}``.

        Raises:
            PoolError: a node in the pool already, a host that cannot be reached, a backend
                that cannot add nodes (Slurm); nothing changed.
        """
        return pool.change_nodes(self._state, "add", list(names), count=count)

    def node_drain(self, names: Iterable[str], *, force: bool = False) -> dict[str, Any]:
        """Drain nodes: no new job there, malleable and evolving jobs shrunk off them,
        rigid ones waited for (``force``: ended); they stay, held out, until added again.

        Raises:
            PoolError: an unknown or gone node, one held out already, or a drain that
                would leave no node or too few for a queued job; nothing changed.
        """
        return pool.change_nodes(self._state, "drain", list(names), force=force)

    def node_remove(self, names: Iterable[str], *, force: bool = False) -> dict[str, Any]:
        """Remove nodes: drained as :meth:`node_drain`, then gone from the pool.

        Raises:
            PoolError: as :meth:`node_drain`.
        """
        return pool.change_nodes(self._state, "remove", list(names), force=force)

    def journal_meta(self, key: str) -> str | None:
        """The journal's ``meta`` value of ``key`` (None: no journal, or no such key).

        Raises:
            sqlite3.Error: the journal cannot be read.
        """
        j = self._state.journal
        return None if j is None else j.meta(key)

    def set_journal_meta(self, key: str, value: str) -> None:
        """Keep ``value`` under ``key`` in the journal's ``meta`` table (nothing without a
        journal); an error is logged as ``journal_error``, not raised."""
        j = self._state.journal
        if j is None:
            return
        try:
            j.set_meta(key, value)
        except sqlite3.Error as exc:
            self._state.event("journal_error", None, error=f"{type(exc).__name__}: {exc}",
                              key=key)

    def record_event(self, kind: str, job: int | None = None, **fields: Any) -> None:
        """Log an event of a part outside the server (a pool keeper): ``kind`` and JSON
        ``fields``, in the event log with the server's time."""
        with self._state.lock:
            self._state.event(kind, job, **fields)

    # -------------------------------------------------------------------------- status

    def _cores(self, job: Any) -> dict[str, Any]:
        """``{"cores": {node: [core indices]}}`` of a job holding cores (``{}`` for a node
        job, or where each node is one slot)."""
        held = self._state.ledger.cores_of(job.job_id)
        if not held or self._state.graph.slots:
            return {}
        return {"cores": {n: list(c) for n, c in held.items()}}

    def status(self) -> dict[str, Any]:
        """The cluster as JSON data: ``now_s``, ``algorithm``, ``nodes`` (each ``name`` and
        ``job``: the id holding it or null), ``free``, ``jobs`` (each job's state and
        allotment), ``pool`` (the pool's latest ``changes`` and the nodes ``draining``,
        ``drained``, ``gone`` and ``added``: :mod:`scheduler.pool`, and on a Slurm pool
        ``slurm``: :meth:`scheduler.slurm_pool.SlurmPool.pool_status`; each node also has its
        ``state``: free, busy, draining, drained or gone, the gone ones listed last),
        ``listen``, ``port``, ``run_dir``, ``log``, ``refused``, ``shape`` (the
        shape policy, null where each node is one slot; each node then also has ``cores``
        and ``free_cores``; a node core jobs share names one of them as ``job``),
        a job holding cores has ``cores``, node -> its core indices there;
        ``refused_lines`` (notification lines refused: failed authentication or a stranger's
        address), ``refused_load_lines`` (``APGAS-Load`` lines refused: the job is not
        running, or the line is malformed or out of range), ``dropped_lines`` (lines for an
        address where no job ran),
        ``refused_connections`` (notification connections closed at once, over a cap),
        ``cut_connections`` (closed for a long line, too many lines or the idle deadline),
        ``open_connections`` (notification connections open now) and ``colocation`` (null
        when off; else ``bound``, ``beta``, ``beta_source``, ``separations``, ``moves``,
        ``overloads`` and ``shared``: each shared core's ``node``, ``core`` and ``jobs``)."""
        s = self._state
        listener = self._listener
        slurm = getattr(self.nodes, "pool_status", None)  # a Slurm pool's placeholders
        with s.lock:
            now = s.now()
            return {
                "now_s": round(now, 3),
                "algorithm": s.algorithm_name,
                "listen": s.listen,
                "port": s.port,
                "run_dir": str(s.run_dir),
                "log": str(s.event.path) if s.event.path else None,
                "journal": str(s.journal.path) if s.journal is not None else None,
                "nodes": pool.node_states(s),
                "pool": {"changes": list(s.pool.changes[-20:]),
                         "draining": sorted(s.pool.draining, key=node_key),
                         "drained": sorted(s.pool.drained, key=node_key),
                         "gone": list(s.pool.gone),
                         "added": sorted(s.pool.added, key=node_key),
                         **({"slurm": slurm()} if slurm is not None else {})},
                "shape": None if s.graph.slots else s.shape,
                "pin": None if s.graph.slots else s.pin,
                "free": len(s.free),
                "jobs": [{**j.info(now), **s.rm_info(j), **self._cores(j)}
                         for j in s.jobs.values()],
                "refused": [list(r) for r in s.refused],
                "refused_lines": s.line_refusals.total,
                "dropped_lines": s.line_drops.total,
                "refused_load_lines": s.load_refusals.total,
                "refused_connections": listener.refused_connections if listener else 0,
                "cut_connections": listener.cut_connections if listener else 0,
                "open_connections": listener.open_connections if listener else 0,
                "colocation": None if s.colocate_bound is None else {
                    "bound": s.colocate_bound, "beta": s.beta, "beta_source": s.beta_source,
                    "separations": s.separations, "moves": s.moves, "overloads": s.overloads,
                    "shared": colocation.sharing(s.ledger)},
            }

    def all_done(self) -> bool:
        """No job is pending, waiting or running."""
        with self._state.lock:
            return all(j.state in ENDED_STATES for j in self._state.jobs.values())

    def leftover_pids(self) -> list[int]:
        """Pids of processes of any job (as far as the process table showed them) still
        running."""
        with self._state.lock:
            trees = [j.tree for j in self._state.jobs.values() if j.tree is not None]
        return sorted({pid for tree in trees for pid in tree.alive()})

    def records(self) -> list[JobRecord]:
        """Simulator-style records of the jobs that ran (started and ended)."""
        with self._state.lock:
            out = []
            for j in self._state.jobs.values():
                if math.isnan(j.start_s) or math.isnan(j.end_s):
                    continue
                out.append(j.record())
            return out

    def result(self) -> SimResult:
        """The run's metrics, computed as the simulator does (:mod:`scheduler.metrics`)."""
        s = self._state
        with s.lock:
            refused = list(s.refused)
            calls = s.decide_calls
        return result_from_records(self.records(), algorithm=s.algorithm_name,
                                   total_nodes=len(s.all_nodes), refused=refused,
                                   decide_calls=calls)

    # ----------------------------------------------------------------------------- shutdown

    def shutdown(self) -> list[int]:
        """End every running job (SIGTERM, SIGKILL after the grace), cancel the queue, stop
        listening, close the log; return the ids of the jobs it ended.  Idempotent (a second
        call waits for the first and returns ``[]``); blocks up to about ``grace_s`` + 8
        seconds."""
        s = self._state
        running = begin_shutdown(s)
        if running is None:
            s.stopped.wait(30)
            return []
        if self._loop_thread is not None and self._loop_thread is not threading.current_thread():
            self._loop_thread.join(timeout=10)
        end_running_jobs(s, running)
        if self._listener is not None:
            self._listener.close()
        if self._control is not None:
            self._control.close()
        s.event.close()
        if s.journal is not None:
            s.journal.close()
        s.stopped.set()
        return [j.job_id for j in running]

    def detach(self) -> None:
        """Stop the scheduler *without* ending its jobs: they run on, as after a crash, and
        the journal keeps them for the next scheduler on the same state directory (without a
        journal they are orphans).  Used when the server cannot serve after all (its control
        socket is taken).  Idempotent."""
        s = self._state
        with s.lock:
            if s.stopped.is_set():
                return
            s.stop.set()
            s.wake.set()
        if self._loop_thread is not None and self._loop_thread is not threading.current_thread():
            self._loop_thread.join(timeout=10)
        if self._listener is not None:
            self._listener.close()
        if self._control is not None:
            self._control.close()
        s.event("detached", None)
        s.event.close()
        if s.journal is not None:
            s.journal.close()
        s.stopped.set()

    # ------------------------------------------------------------------------------ control

    def serve_control(self, path: str | os.PathLike[str], *, group: str | None = None) -> Path:
        """Listen for control requests (JSON lines) on the Unix socket ``path`` (the requests
        are listed in :mod:`scheduler.control_server`); return the socket's absolute path.
        The socket is the owner's only (mode 0600), or also ``group``'s (0660).

        Raises:
            OSError: the path is taken by a live scheduler, or cannot be bound.
            KeyError: no such group.
        """
        self._control = ControlServer(self, Path(path), group=group)
        self._state.event("control", None, path=str(self._control.path))
        return self._control.path

    def handle(self, request: Mapping[str, Any], *, user: int | None = None
               ) -> dict[str, Any]:
        """Answer one control request (see :mod:`scheduler.control_server`) from ``user`` (a
        uid, None: trusted); never raises for bad input: the reply says
        ``{"ok": false, "error": ...}``."""
        return handle_request(self, request, user=user)


def free_nodes_of(status: Mapping[str, Any]) -> list[str]:
    """The free node names of a :meth:`Server.status` answer."""
    return [n["name"] for n in status["nodes"]
            if n["job"] is None and n.get("state", "free") == "free"]


def job_of(status: Mapping[str, Any], job_id: int) -> dict[str, Any]:
    """One job's entry of a :meth:`Server.status` answer.  Raises ``KeyError``."""
    for job in status["jobs"]:
        if job["id"] == job_id:
            return dict(job)
    raise KeyError(job_id)

