"""The scheduler's journal: its jobs in one SQLite file, so that it survives its own crash.

One file, ``journal.sqlite`` in the state directory (``serve --state-dir``; default
``<run-dir>/state``), in WAL mode with ``synchronous=NORMAL`` (a commit is atomic and durable
against a crash of the process; against a power loss the last commits may be lost, never
half-written: docs/guides/durable-scheduler.md).  Python's stdlib :mod:`sqlite3`.

Tables:

* ``jobs``: one row a job, written whole (an upsert) at every change of the job, *before*
  the scheduler acts on the change or in the same step: submission, queueing, the start (once
  with its nodes before the launch, once with its pid after), every resize, the end with its
  exit status, a cancel.  The job's specification is stored as JSON of the
  :class:`~scheduler.jobs.JobSpec` dataclass's fields, so a new field needs no change here;
  unknown keys are dropped when a row is read back.  An evolving job's counters
  (``requested``: a request pending, 0 or 1; ``requests``, ``requests_served``,
  ``releases``; docs/guides/evolving-scheduling.md) are columns too, written with the request,
  the grant and the release, so ``status`` and ``history`` show them after a restart.  The
  cores a job asking for cores holds (``cores``: JSON ``{node: [core indices]}``, the
  :class:`~scheduler.resources.CoreLedger`'s) are written with its start, every grow and
  every shrink, so a restarted scheduler re-adopts it on the same cores
  (:mod:`scheduler.recovery`); ``{}`` for a node job.  A journal written before these
  columns existed gets them (as 0, ``{}``) when a scheduler opens it; read only, their
  value is 0 (``{}``).
* ``meta``: key/value pairs (``port``: the notification port jobs were told).

A lock file ``lock`` beside it is held with ``fcntl.flock`` for the scheduler's life
(:meth:`Journal.lock`): a second scheduler on the same state directory is refused; a crashed
one's lock is released by the kernel.

Times in the journal are wall-clock seconds since the epoch (``time.time``); the server's own
times are seconds since it started (:mod:`scheduler.state`), converted at the boundary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._exceptions import JournalLockedError
from .jobs import JobSpec
from .private import open_private, private_dir

__all__ = ["ENDED", "JOURNAL_NAME", "LOCK_NAME", "Journal", "JournalLockedError", "JobRow",
           "spec_from_json", "spec_to_json"]

JOURNAL_NAME = "journal.sqlite"
#: Job states in which a job has ended (as :data:`scheduler.state.ENDED_STATES`).
ENDED = frozenset({"done", "failed", "killed", "cancelled"})
LOCK_NAME = "lock"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    spec TEXT NOT NULL,          -- JSON of the JobSpec's fields
    argv TEXT NOT NULL,          -- JSON list: the command line
    state TEXT NOT NULL,         -- pending, waiting, starting, running, done, failed, ...
    user INTEGER,                -- uid of the submitter (SO_PEERCRED), or NULL
    submit_wall REAL NOT NULL,   -- when it was submitted (s since the epoch)
    due_wall REAL,               -- when a delayed submission is queued
    queue_seq INTEGER,           -- its place in the queue (admission order)
    start_wall REAL,
    end_wall REAL,
    nodes TEXT NOT NULL DEFAULT '[]',      -- JSON list: the nodes it holds now
    allotment TEXT NOT NULL DEFAULT '[]',  -- JSON [[wall, [nodes...]], ...]
    elastic INTEGER NOT NULL DEFAULT 0,
    ready INTEGER NOT NULL DEFAULT 0,
    reachable INTEGER NOT NULL DEFAULT 1,
    order_kind TEXT,             -- 'shrink' / 'grow' while an order is in flight
    shrinks INTEGER NOT NULL DEFAULT 0,
    grows INTEGER NOT NULL DEFAULT 0,
    address TEXT NOT NULL DEFAULT '',
    pid INTEGER,                 -- the job's first process (its session leader)
    pid_start REAL,              -- that process's start time (psutil create_time)
    returncode INTEGER,
    ending TEXT NOT NULL DEFAULT '',
    reason TEXT,                 -- why it failed or ended so, for people
    files TEXT NOT NULL DEFAULT '{}',      -- JSON: stdout, stderr, node_file, status, pidfile
    rm TEXT NOT NULL DEFAULT '{}',         -- JSON: the resource manager's fields (Slurm job)
    requested INTEGER NOT NULL DEFAULT 0,  -- evolving: a request pending (0 or 1)
    requests INTEGER NOT NULL DEFAULT 0,   -- evolving: request lines taken
    requests_served INTEGER NOT NULL DEFAULT 0,  -- evolving: requests granted
    releases INTEGER NOT NULL DEFAULT 0,   -- evolving: nodes given back
    cores TEXT NOT NULL DEFAULT '{}',      -- JSON {node: [core indices]} held now (core jobs)
    order_port INTEGER           -- the port it announced for orders (APGAS-Ready;<port>)
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_COLUMNS = ("id", "spec", "argv", "state", "user", "submit_wall", "due_wall", "queue_seq",
            "start_wall", "end_wall", "nodes", "allotment", "elastic", "ready", "reachable",
            "order_kind", "shrinks", "grows", "address", "pid", "pid_start", "returncode",
            "ending", "reason", "files", "rm", "requested", "requests", "requests_served",
            "releases", "cores", "order_port")
#: Columns added after the first journals: (name, SQL type and default), added on open.
_ADDED = (("requested", "INTEGER NOT NULL DEFAULT 0"), ("requests", "INTEGER NOT NULL DEFAULT 0"),
          ("requests_served", "INTEGER NOT NULL DEFAULT 0"),
          ("releases", "INTEGER NOT NULL DEFAULT 0"), ("cores", "TEXT NOT NULL DEFAULT '{}'"),
          ("order_port", "INTEGER"))
_UPSERT = (f"INSERT OR REPLACE INTO jobs ({', '.join(_COLUMNS)}) "
           f"VALUES ({', '.join('?' for _ in _COLUMNS)})")


def spec_to_json(spec: JobSpec) -> str:
    """The spec as JSON of its dataclass fields (enums by value, tuples as lists)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(spec):
        value = getattr(spec, f.name)
        if hasattr(value, "value") and not isinstance(value, (int, float, str)):
            value = value.value  # an enum (JobClass)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return json.dumps(out)


def spec_from_json(text: str) -> JobSpec:
    """A :class:`JobSpec` from :func:`spec_to_json`'s JSON; keys that are no field of the
    current JobSpec are dropped, a list command becomes a tuple.

    Raises:
        ValueError: the JSON is bad or the fields do not make a valid spec.
    """
    raw = json.loads(text)
    names = {f.name for f in dataclasses.fields(JobSpec)}
    kwargs = {k: v for k, v in raw.items() if k in names}
    if isinstance(kwargs.get("command"), list):
        kwargs["command"] = tuple(kwargs["command"])
    try:
        return JobSpec(**kwargs)
    except TypeError as exc:
        raise ValueError(str(exc)) from None


@dataclass
class JobRow:
    """One row of ``jobs`` as Python values (JSON columns decoded; ``spec`` still text)."""

    id: int
    spec: str
    argv: list[str]
    state: str
    user: int | None
    submit_wall: float
    due_wall: float | None
    queue_seq: int | None
    start_wall: float | None
    end_wall: float | None
    nodes: list[str]
    allotment: list[list[Any]]
    elastic: bool
    ready: bool
    reachable: bool
    order_kind: str | None
    shrinks: int
    grows: int
    address: str
    pid: int | None
    pid_start: float | None
    returncode: int | None
    ending: str
    reason: str | None
    files: dict[str, str]
    rm: dict[str, Any] = dataclasses.field(default_factory=dict)
    requested: int = 0
    requests: int = 0
    requests_served: int = 0
    releases: int = 0
    cores: dict[str, list[int]] = dataclasses.field(default_factory=dict)
    order_port: int | None = None

    def values(self) -> tuple[Any, ...]:
        """The row's column values, JSON columns encoded, in ``_COLUMNS`` order."""
        d = {c: getattr(self, c) for c in _COLUMNS}  # not asdict: it deep-copies
        for key in ("argv", "nodes", "allotment", "files", "rm", "cores"):
            d[key] = json.dumps(d[key])
        for key in ("elastic", "ready", "reachable"):
            d[key] = int(d[key])
        return tuple(d[c] for c in _COLUMNS)

    @classmethod
    def from_db(cls, row: sqlite3.Row) -> JobRow:
        """Decode one database row (a column the file lacks keeps its default)."""
        keys = set(row.keys())
        d = {c: row[c] for c in _COLUMNS if c in keys}
        for key in ("argv", "nodes", "allotment", "files", "rm", "cores"):
            if key in d:
                d[key] = json.loads(d[key])
        for key in ("elastic", "ready", "reachable"):
            d[key] = bool(d[key])
        return cls(**d)


class Journal:
    """The journal file of one state directory (module docstring).

    Args:
        state_dir: the state directory (created; narrowed to mode 0700 when it is ours and
            wider; its files are 0600: :mod:`scheduler.private`).
        readonly: open for reading only (``history``); no lock, no schema change.

    Raises:
        OSError: the directory cannot be made, or is another user's or a link
            (:class:`~scheduler.private.UnsafePathError`); sqlite3.Error: the file is not a
            journal.

    Thread-safe: one connection, used under an internal lock.
    """

    def __init__(self, state_dir: str | os.PathLike[str], *, readonly: bool = False) -> None:
        # Checked before it is resolved: a link planted at the path is refused, not followed.
        self.dir = (Path(state_dir) if readonly else private_dir(state_dir)).resolve()
        self.path = self.dir / JOURNAL_NAME
        self._lock = threading.Lock()
        self._lock_fd: int | None = None
        if readonly:
            if not self.path.exists():
                raise FileNotFoundError(f"no journal at {self.path}")
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True,
                                       check_same_thread=False)
        else:
            os.close(open_private(self.path, os.O_RDWR))  # 0600: SQLite gives -wal, -shm
            self._db = sqlite3.connect(self.path, check_same_thread=False,  # its mode
                                       isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            have = {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}
            for name, kind in _ADDED:
                if name not in have:  # a journal of an older scheduler
                    self._db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
        self._db.row_factory = sqlite3.Row
        self._columns = [c for c in _COLUMNS if c in {
            r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}]

    # -------------------------------------------------------------------------- the lock

    def lock(self) -> None:
        """Take the state directory's lock for this process's life (``fcntl.flock``).

        Raises:
            JournalLockedError: another live process holds it (its pid is in the message).
        """
        path = self.dir / LOCK_NAME
        fd = open_private(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise JournalLockedError(
                f"another scheduler (pid {holder}) uses the state directory {self.dir}; "
                "stop it first, or give another --state-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    # ------------------------------------------------------------------------------ writes

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def put(self, *rows: JobRow) -> None:
        """Write job rows whole, in one transaction."""
        with self._tx() as db:
            db.executemany(_UPSERT, [r.values() for r in rows])

    def set_meta(self, key: str, value: str) -> None:
        """Set one ``meta`` value."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------------------------- reads

    def meta(self, key: str) -> str | None:
        """One ``meta`` value, or None."""
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def rows(self, *, states: tuple[str, ...] | None = None) -> list[JobRow]:
        """Every job row (or those in ``states``), by id."""
        sql = f"SELECT {', '.join(self._columns)} FROM jobs"
        args: tuple[Any, ...] = ()
        if states is not None:
            sql += f" WHERE state IN ({', '.join('?' for _ in states)})"
            args = states
        with self._lock:
            return [JobRow.from_db(r) for r in self._db.execute(sql + " ORDER BY id", args)]

    def max_id(self) -> int:
        """The largest job id so far (0 when none)."""
        with self._lock:
            return int(self._db.execute("SELECT COALESCE(MAX(id), 0) FROM jobs").fetchone()[0])

    def close(self) -> None:
        """Close the database and release the lock.  Idempotent."""
        with self._lock:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
