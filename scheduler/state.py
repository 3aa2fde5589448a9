"""The real scheduler's shared state: its settings, its jobs, its nodes, its event log.

Every part of the server (:mod:`scheduler.submission`, :mod:`scheduler.loop`,
:mod:`scheduler.launch`, :mod:`scheduler.orders`, :mod:`scheduler.notifications`,
:mod:`scheduler.shutdown`) works on one :class:`ServerState` under its one lock
(``state.lock``); none of them holds state of its own.  The clock is injected, as in the
simulator: times in the event log and in views are seconds since the state was made.

Job states: ``pending`` (submitted with a delay), ``waiting``, ``running``, then ``done``
(exit 0), ``failed`` (other exit status, or it could not start, or it ended while the
scheduler was down and its exit status is unknown: ``reason`` says), ``killed`` (overran its
required time), ``cancelled``.

With a journal (:mod:`scheduler.journal`), every change of a job is written there by
:meth:`ServerState.persist` before the scheduler acts on it; a restarted scheduler resumes
from it (:mod:`scheduler.recovery`).

The event log (``log_path``) has one JSON object a line: ``t`` (seconds since start),
``event``, ``job`` (id or null) and the event's fields.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from apgaspy.wire.auth import (
    NOTIFICATION,
    ORDER,
    Counter,
    LineAuthError,
    RefusalLog,
    ReplayGuard,
    sign_line,
    verify_line,
)

from . import colocation
from .algorithms import RESIZING_ALGORITHMS, Algorithm
from .job_state import JobState
from .jobs import JobClass, JobSpec
from .journal import JobRow, Journal, spec_to_json
from .nodes import NodeBackend, ResourceManager
from .pool_book import PoolBook
from .private import open_private
from .procs import ProcessTree
from .resources import CoreLedger, ProfileThresholds, ResourceGraph

__all__ = ["ENDED_STATES", "RESIZING_ALGORITHMS", "EventLog", "ServerJob", "ServerState"]

#: Job states in which a job holds no node and never will again.
ENDED_STATES = frozenset({"done", "failed", "killed", "cancelled"})


@dataclass(eq=False)
class ServerJob(JobState):
    """One job as the real scheduler keeps it (mutable; guarded by the state's lock).

    Its state, its transitions, what it takes orders and what the policy sees of it are the
    simulator's (:class:`~scheduler.job_state.JobState`, whose fields it has); here is what
    only the real scheduler keeps.

    Attributes (the less obvious ones):
        elastic (a :class:`JobState` field): the job is malleable under a resizing algorithm
            (``ELASTIC=malleable``), or evolving under an evolving policy
            (``ELASTIC=evolving``).
        address: where it takes orders (its first node's address).
        order_port: the port it announced for its orders (``APGAS-Ready;<port>``, given
            ``APGAS_ORDER_PORT``), or None: orders go to the server's port, as in Java.
        order_seq: counts its orders, so that a late reply to an old one is recognised.
        orders: the orders it carried out, ``(kind, nodes)``, for ``status``.
        kill_at_s: when it gets SIGKILL if still running (after the grace).
        user: the submitter's uid (from the control socket's peer credentials), or None.
        reason: why it failed or was ended so (for people), or None.
        adopted: it was found running by a restarted scheduler (not our child).
        queue_seq: its place in the queue (admission order), or None.
        due_s: when a delayed submission is queued (server seconds), or None.
        status_file, pid_file: where its launcher wrapper writes its exit status and pid.
        pid_start: the start time of its first process (psutil ``create_time``), which tells
            it from a later process with the same pid.
        key: its line key (:mod:`apgaspy.wire.auth`), or None: it speaks plain Java lines,
            checked by peer address only.  Never shown (not in ``repr``, ``status``, the
            journal or the event log); ``key_file``: the owner-only file that holds it.
        notify_guard: the anti-replay window of its notifications; ``order_counter``: the
            counter of the orders sent to it.
        measured_profile: the profile its last load report gives
            (:func:`scheduler.resources.measured_profile`), or None before the first.
    """

    job_id: int
    spec: JobSpec
    argv: tuple[str, ...]
    submit_s: float
    address: str = ""
    order_port: int | None = None
    proc: Any = None
    tree: ProcessTree | None = None
    returncode: int | None = None
    order_seq: int = 0
    orders: list[tuple[str, list[str]]] = field(default_factory=list)
    kill_at_s: float = math.inf
    stdout: Path | None = None
    stderr: Path | None = None
    node_file: Path | None = None
    user: int | None = None
    reason: str | None = None
    adopted: bool = False
    queue_seq: int | None = None
    due_s: float | None = None
    status_file: Path | None = None
    pid_file: Path | None = None
    pid_start: float | None = None
    spec_json: str = ""
    key: bytes | None = field(default=None, repr=False)
    key_file: Path | None = None
    notify_guard: ReplayGuard = field(default_factory=ReplayGuard, repr=False)
    order_counter: Counter = field(default_factory=Counter, repr=False)
    measured_profile: str | None = None

    @property
    def shape_profile(self) -> str:
        """The profile the job is shaped by: its ``#PROFILE`` when it declared one, else its
        measured one, else ``cpu`` (:func:`scheduler.resources.shape_profile`)."""
        from .resources import shape_profile

        return shape_profile(self.spec.profile, self.spec.profile_declared,
                             self.measured_profile)

    def signer(self) -> Callable[[str], str] | None:
        """The function that signs an order line to this job, or None (a keyless job)."""
        key = self.key
        if key is None:
            return None
        job = str(self.job_id)
        return lambda line: sign_line(key, ORDER, job, line, self.order_counter.next())

    def check_notification(self, line: str) -> str:
        """The Java line of one of its authenticated notification lines.

        Raises:
            LineAuthError: the line fails :func:`apgaspy.wire.auth.verify_line` (no MAC, a
                malformed or wrong one, a replay), or the job has no key.
        """
        if self.key is None:
            raise LineAuthError("the job has no key")
        return verify_line(self.key, NOTIFICATION, str(self.job_id), line, self.notify_guard)

    def info(self, now_s: float) -> dict[str, Any]:
        """The job as JSON data (one entry of ``status``); ``now_s`` gives a running job's
        run time so far."""
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
            "authenticated": self.key is not None,
            "ready": self.ready and not self.busy and self.reachable,
            "reachable": self.reachable,
            "order_port": self.order_port,
            "order_in_flight": self.busy,
            "submit_s": round(self.submit_s, 3),
            "start_s": num(self.start_s),
            "end_s": num(self.end_s),
            "run_s": (None if math.isnan(self.start_s) else
                      round((self.end_s if not math.isnan(self.end_s) else now_s)
                            - self.start_s, 3)),
            "shrinks": self.shrinks,
            "grows": self.grows,
            "requested": self.requested,
            "requests": self.requests,
            "requests_served": self.requests_served,
            "releases": self.releases,
            "duty_cycle": None if self.load is None else round(self.load.duty, 3),
            "bytes_per_s": None if self.load is None else round(self.load.bytes_per_s),
            "gil": None if self.load is None or self.load.gil is None
            else round(self.load.gil, 3),
            "rss_bytes": None if self.load is None else self.load.rss_bytes,
            "load_at_s": None if self.load is None else round(self.load.at, 3),
            "profile": self.spec.profile,
            "profile_declared": self.spec.profile_declared,
            "measured_profile": self.measured_profile,
            "orders": [[kind, list(nodes)] for kind, nodes in self.orders],
            "returncode": self.returncode,
            "reason": self.reason,
            "user": self.user,
            "adopted": self.adopted,
            "pid": self.proc.pid if self.proc is not None else None,
            "command": list(self.argv),
            "stdout": str(self.stdout) if self.stdout else None,
            "stderr": str(self.stderr) if self.stderr else None,
        }


class EventLog:
    """The server's events: kept in memory (``records``), appended to a JSON-lines file,
    and passed to a callback.

    Args:
        now: the server's clock (seconds since start).
        path: the JSON-lines file (appended; made with mode 0600, an existing one of ours
            narrowed to 0600), or None.
        on_event: called with each event dict from the calling thread, or None; an error
            it raises is ignored (a progress printer must not stop the scheduler).

    Raises:
        OSError: ``path`` cannot be opened for appending.
    """

    def __init__(self, now: Callable[[], float], path: str | os.PathLike[str] | None,
                 on_event: Callable[[dict[str, Any]], None] | None) -> None:
        self._now = now
        self._lock = threading.Lock()
        self._file: IO[str] | None = (  # a new log is 0600 (scheduler.private)
            os.fdopen(open_private(path, os.O_WRONLY | os.O_APPEND, follow=True), "a",
                      encoding="utf-8") if path else None
        )
        self.path = Path(path).resolve() if path else None
        self._on_event = on_event
        self.records: list[dict[str, Any]] = []

    def __call__(self, event: str, job: int | None = None, **fields: Any) -> dict[str, Any]:
        """Record one event (``event`` name, ``job`` id or None, its fields); return it."""
        record = {"t": round(self._now(), 3), "event": event, "job": job, **fields}
        with self._lock:
            self.records.append(record)
            if self._file is not None:
                self._file.write(json.dumps(record) + "\n")
                self._file.flush()
        if self._on_event is not None:
            try:
                self._on_event(record)
            except Exception:  # noqa: BLE001 - a progress printer must not stop the scheduler
                pass
        return record

    def close(self) -> None:
        """Close the file (events are still kept in memory afterwards).  Idempotent."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


class ServerState:
    """Settings, nodes, jobs, queues and events of one server; every field is guarded by
    ``lock`` (the events by their own).

    Args: as :class:`scheduler.server.Server` (which validates them).
    """

    def __init__(self, nodes: NodeBackend, algorithm: Algorithm, *, port: int, listen: str,
                 run_dir: Path, log_path: str | os.PathLike[str] | None, interval_s: float,
                 grace_s: float, cwd: str, job_env: Mapping[str, str],
                 clock: Callable[[], float],
                 on_event: Callable[[dict[str, Any]], None] | None,
                 shrink_line_timeout_s: float, grow_timeout_s: float,
                 journal: Journal | None = None, plain_lines: tuple[str, ...] = (),
                 graph: ResourceGraph | None = None, shape: str = "scale",
                 colocate_bound: float | None = None, pin: bool = True) -> None:
        # settings
        self.nodes = nodes
        #: The backend's resource-manager hooks (Slurm), or None (logical nodes, ssh hosts).
        self.rm: ResourceManager | None = (nodes if isinstance(nodes, ResourceManager)
                                           else None)
        self.algorithm = algorithm
        self.port = port
        self.listen = listen
        self.run_dir = run_dir
        self.interval_s = interval_s
        self.grace_s = grace_s
        self.cwd = cwd
        self.job_env = dict(job_env)
        self.shrink_line_timeout_s = shrink_line_timeout_s
        self.grow_timeout_s = grow_timeout_s
        #: Job names (shell patterns) that run without a key (plain Java lines).
        self.plain_lines = tuple(plain_lines)
        #: Notification lines refused (failed authentication or a stranger's peer).
        self.line_refusals = RefusalLog()
        #: Notification lines for addresses where no job ran: counted, logged once a 10 s.
        self.line_drops = RefusalLog(burst=1, period_s=10.0)
        #: ``APGAS-Load`` lines refused (not running, malformed, out of range), counted and
        #: logged as ``load_refused`` at most 10 every 10 s.
        self.load_refusals = RefusalLog()
        #: Where a measured load makes a job network or memory bound
        #: (``APGAS_SCHEDULER_*_PER_CORE``, read at start; ValueError when invalid).
        self.profile_thresholds = ProfileThresholds.from_env()
        self._clock = clock
        self._t0 = clock()
        self._wall0 = time.time()
        #: The journal (:mod:`scheduler.journal`), or None (nothing survives a crash).
        self.journal = journal
        self.queue_seq = 0
        # synchronisation
        self.lock = threading.RLock()
        self.wake = threading.Event()  # the main loop's wake-up call
        self.stop = threading.Event()  # shutdown has begun
        self.stopped = threading.Event()  # shutdown has finished
        # cluster
        self.all_nodes: tuple[str, ...] = tuple(nodes.names())
        self.free: set[str] = set(self.all_nodes)
        #: The nodes' cores (:mod:`scheduler.resources`): without a count, a slot a node.
        self.graph = graph or ResourceGraph.whole_nodes(self.all_nodes)
        #: Who holds which cores; its whole-free nodes are ``free`` itself.
        self.ledger = CoreLedger(self.graph, self.free)
        #: The pool's changes (:mod:`scheduler.pool`): nodes added, draining, gone.
        self.pool = PoolBook()
        #: A child scheduler (:mod:`scheduler.child`): its parent may grant more nodes.
        self.parent = False
        #: The most nodes a pool that grows by itself may hold (a Slurm pool's MAX,
        #: :mod:`scheduler.slurm_pool`): jobs up to it are queued, and removals may empty
        #: the pool; None: the nodes there are.
        self.capacity: int | None = getattr(nodes, "capacity", None)
        #: The shape policy of jobs (``serve --shape``): ``scale`` or ``granularity``.
        self.shape = shape
        #: Co-location (``serve --colocate-bound``; :mod:`scheduler.colocation`): the bound
        #: on the duty cycles of the jobs on one core, or None (off; also where each node is
        #: one slot); the beta model's coefficient the rigid guard uses; the separations
        #: ordered (named shrinks off a shared node), the moves (grows onto free cores
        #: before such a shrink) and the overloads seen (shared cores past the bound);
        #: the moves under way (job id -> (shared node, target)) and the jobs moved (once
        #: each); the rigid jobs the guard has kept off shared cores (logged once each).
        self.colocate_bound = None if self.graph.slots else colocate_bound
        self.beta, self.beta_source = colocation.read_beta()
        self.separations = 0
        self.moves = 0
        self.overloads = 0
        self.overloaded: set[tuple[object, ...]] = set()
        self.moving: dict[object, tuple[str, str]] = {}
        self.moved: set[object] = set()
        self.guarded: set[int] = set()
        #: job name -> the last duty cycle a job of that name reported (what a job of that
        #: name counts as until it reports itself).
        self.duty_by_name: dict[str, float] = {}
        #: Whether jobs are told their cores to bind to (``serve --no-pin``: ``False``).
        self.pin = pin
        self.jobs: dict[int, ServerJob] = {}
        self.pending: list[tuple[float, int]] = []  # (due_s, job id), sorted
        self.queue: list[int] = []  # waiting job ids, in submission order
        self.stragglers: list[tuple[float, ProcessTree, int]] = []  # (kill at, tree, job)
        self.refused: list[tuple[str, str]] = []  # (name, reason)
        self.next_id = 1
        self.dirty = True  # run the algorithm at the next turn of the loop
        self.decide_calls = 0
        self.event = EventLog(self.now, log_path, on_event)

    def occupants(self, now: float) -> dict[object, colocation.Occupant]:
        """The running jobs as co-location sees them at ``now`` (s): their last duty cycle
        (until a job reports, the last one a job of its name reported, else none:
        docs/guides/colocation.md), ``#COLOCATE``, rigid or not, required and elapsed time
        (their time alone is unknown here: :data:`scheduler.colocation.ASSUMED_ALONE_SHARE`)."""
        running = [j for j in self.jobs.values() if j.state == "running"]
        for j in running:
            if j.duty_cycle is not None:
                self.duty_by_name[j.spec.name] = j.duty_cycle
        return {j.job_id: colocation.Occupant(
                    duty=(j.duty_cycle if j.duty_cycle is not None
                          else self.duty_by_name.get(j.spec.name)),
                    colocate=j.spec.colocate, rigid=not j.elastic,
                    required_s=j.spec.required_time_s, elapsed_s=now - j.start_s,
                    malleable=j.takes_orders)
                for j in running}

    def may_share(self, job: ServerJob) -> bool:
        """Whether waiting ``job`` may start on shared cores: it says ``#COLOCATE yes``
        and, if it will run rigid, :func:`scheduler.colocation.newcomer_fits` (its time
        alone unknown: half its required time)."""
        if self.colocate_bound is None or not job.spec.colocate:
            return False
        elastic = ((job.spec.job_class is JobClass.MALLEABLE and self.elastic_algorithm)
                   or (job.spec.job_class is JobClass.EVOLVING and self.evolving_algorithm))
        return elastic or colocation.newcomer_fits(
            job.spec.required_time_s, None, self.duty_by_name.get(job.spec.name),
            self.colocate_bound, self.beta)

    def shareable(self, now: float) -> dict[str, list[float]]:
        """node -> the room of each held core a ``#COLOCATE yes`` job may join now
        (:func:`scheduler.colocation.rooms`; empty when co-location is off)."""
        if self.colocate_bound is None:
            return {}
        return colocation.rooms(self.ledger, self.occupants(now), self.colocate_bound,
                                self.beta)

    def grow_targets(self, job: ServerJob, now: float) -> set[str]:
        """The nodes a Grow of ``job`` may take beside their holders
        (:func:`scheduler.colocation.grow_targets`; empty unless it is co-locatable and
        asks cores a node)."""
        per_node = job.spec.cores_per_node
        if self.colocate_bound is None or not job.spec.colocate or per_node is None:
            return set()
        return colocation.grow_targets(self.ledger, job.job_id, per_node, self.occupants(now),
                                       self.colocate_bound, self.beta)

    def acquire(self, job: ServerJob, nodes: Sequence[str], counts: Sequence[int],
                now: float) -> tuple[tuple[str, tuple[int, ...]], ...]:
        """``job`` takes ``nodes`` (whole) or ``counts`` cores of them; a ``#COLOCATE yes``
        job takes free cores first, then shareable ones
        (:func:`scheduler.colocation.acquire_colocated`).  Raises ``ValueError`` as
        :meth:`~scheduler.resources.CoreLedger.acquire`."""
        if counts and job.spec.colocate and self.colocate_bound is not None:
            return colocation.acquire_colocated(self.ledger, job.job_id, nodes, counts,
                                                self.occupants(now), self.colocate_bound,
                                                self.beta)
        return self.ledger.acquire(job.job_id, nodes, counts)

    @property
    def algorithm_name(self) -> str:
        """The algorithm's ``name`` (``"?"`` without one)."""
        return getattr(self.algorithm, "name", "?")

    @property
    def evolving_algorithm(self) -> bool:
        """Whether the algorithm serves evolving jobs' requests
        (:data:`scheduler.algorithms.EVOLVING_ALGORITHMS`)."""
        from .algorithms import EVOLVING_ALGORITHMS

        return self.algorithm_name in EVOLVING_ALGORITHMS

    @property
    def elastic_algorithm(self) -> bool:
        """Whether the algorithm resizes running jobs (:data:`RESIZING_ALGORITHMS`)."""
        return self.algorithm_name in RESIZING_ALGORITHMS

    def now(self) -> float:
        """Seconds since the state was made, on the injected clock."""
        return self._clock() - self._t0

    def wall(self, s: float) -> float:
        """Server seconds ``s`` as wall-clock seconds since the epoch."""
        return self._wall0 + s

    def from_wall(self, wall: float) -> float:
        """Wall-clock seconds since the epoch as server seconds (negative: before start)."""
        return wall - self._wall0

    def row(self, job: ServerJob) -> JobRow:
        """The job as a journal row (times as wall-clock seconds)."""
        def wall(x: float | None) -> float | None:
            return None if x is None or math.isnan(x) else self.wall(x)

        if not job.spec_json:
            job.spec_json = spec_to_json(job.spec)
        files = {k: str(v) for k, v in (("stdout", job.stdout), ("stderr", job.stderr),
                                         ("node_file", job.node_file),
                                         ("status", job.status_file),
                                         ("key", job.key_file),
                                         ("pidfile", job.pid_file)) if v is not None}
        order_kind = None
        if job.busy:
            order_kind = "shrink" if job.releasing else "grow"
        pid = job.proc.pid if job.proc is not None else None
        return JobRow(
            id=job.job_id, spec=job.spec_json, argv=list(job.argv), state=job.state,
            user=job.user, submit_wall=self.wall(job.submit_s), due_wall=wall(job.due_s),
            queue_seq=job.queue_seq, start_wall=wall(job.start_s), end_wall=wall(job.end_s),
            nodes=list(job.nodes),
            allotment=[[self.wall(t), list(n)] for t, n in job.allotment],
            elastic=job.elastic, ready=job.ready, reachable=job.reachable,
            order_kind=order_kind, shrinks=job.shrinks, grows=job.grows, address=job.address,
            order_port=job.order_port,
            pid=pid, pid_start=job.pid_start if pid is not None else None,
            returncode=job.returncode, ending=job.ending, reason=job.reason, files=files,
            rm=self.rm_info(job), requested=job.requested, requests=job.requests,
            requests_served=job.requests_served, releases=job.releases,
            cores={n: list(c) for n, c in self.ledger.cores_of(job.job_id).items()})

    def persist(self, *jobs: ServerJob) -> bool:
        """Write the jobs' rows to the journal (one transaction); nothing without one.

        Returns whether they were written (True without a journal).  A journal that cannot
        be written (the disk is full …) is logged as ``journal_error``; where the step can
        still be refused (a submission, a start, an order) the caller refuses it, elsewhere
        (an end that has happened) it goes on in memory.  Never raises.
        """
        if self.journal is None or not jobs:
            return True
        try:
            self.journal.put(*(self.row(j) for j in jobs))
        except sqlite3.Error as exc:
            self.event("journal_error", None, error=f"{type(exc).__name__}: {exc}",
                       jobs=[j.job_id for j in jobs])
            return False
        return True

    def changed(self) -> None:
        """Something the algorithm sees has changed: run it at the loop's next turn, now."""
        self.dirty = True
        self.wake.set()

    def rm_info(self, job: ServerJob) -> dict[str, Any]:
        """The resource manager's fields of a running job (``{}`` without one)."""
        if self.rm is None or job.state != "running":
            return {}
        try:
            return dict(self.rm.job_info(job.job_id))
        except Exception as exc:  # noqa: BLE001 - status must answer
            return {"rm_error": str(exc)}
