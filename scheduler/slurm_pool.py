"""A Slurm pool on a shared site (``python -m scheduler serve --slurm-pool MIN:MAX``).

Where ``serve --slurm`` must be the only user of its partition, a pool shares it: the
scheduler holds each node it uses through a Slurm job of its own, a *placeholder*, and
only the node Slurm gave that placeholder (``squeue %N``) ever joins the scheduler's pool
(:mod:`scheduler.pool`).  Other users' jobs and the scheduler's jobs then never share a
node: Slurm keeps them apart.  After the pilot jobs of dask-jobqueue's adaptive mode and
Parsl's blocks, with their users' complaints answered: a node leaves only after it was idle
for a while (dask-jobqueue's ``wait_count``), a placeholder's walltime is renewed before it
runs out, and a placeholder that ends anyway is a node failure, not a lost scheduler.

::

    placeholder   sbatch --parsable -J apgaspy-pool -p P -N 1 --exclusive [--time T]
                         --output=/dev/null <scratch>/placeholder.sh   ("exec sleep infinity")
    its node      squeue -h -u <uid> -n apgaspy-pool -o "%i|%T|%N|%L"  → RUNNING on n3
                  ─► add_node("n3") ─► the pool (node add)
    a job         srun --jobid=<placeholder of its first node> -N 1 -n 1 -w <first node>
                       --overlap --export=ALL <command>      (run here; its exit is the job's)
                  its places on the other nodes: the fallback launcher of the Slurm mode
                  (HYDRA_LAUNCHER_EXEC=<run-dir>/slurm-launch, APGAS_SLURM=0), through the
                  pool's map node → placeholder (``$SCHEDULER_SLURM_NODES``, rewritten at
                  every change), so a grow needs no Slurm command at all
    give back     node remove (pool.py) ─► gone ─► forget_node ─► scancel <placeholder>

:class:`SlurmPool` is the node backend (it starts with no node; the keeper of
:mod:`scheduler.slurm_pool_keeper` asks for placeholders, adds and removes their nodes).
Its Slurm commands raise :class:`~scheduler.slurm_commands.SlurmError`; the keeper counts
failures and backs off (:meth:`SlurmPool.failed`).  The placeholders are kept in the
journal (:meth:`SlurmPool.to_json`), so that a restarted scheduler adopts those still
running (:meth:`SlurmPool.adopt`).  Docs: docs/guides/scheduler.md, "Slurm pool on a
shared site".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .nodes import JobLaunch, _popen, python_bin_dir, source_towards
from .private import write_private
from .slurm_commands import (
    ENDED_STATES,
    SlurmError,
    client_env,
    expand_hostlist,
    run_slurm,
    scontrol_fields,
    slurm_job_status,
)
from .slurm_helpers_cli import NODE_MAP_ENV, step_argv, write_launcher

__all__ = ["PLACEHOLDER_NAME", "Placeholder", "PoolSettings", "SlurmPool", "pool_range",
           "walltime"]

#: The Slurm job name of every placeholder (``squeue -n``).
PLACEHOLDER_NAME = "apgaspy-pool"
_MAX_BACKOFF_S = 30.0


def pool_range(text: str) -> tuple[int, int]:
    """``MIN:MAX`` of ``--slurm-pool`` as two whole numbers, 0 ≤ MIN ≤ MAX, MAX ≥ 1.

    Raises:
        ValueError: not two whole numbers, MIN > MAX, or MAX < 1 (one line).
    """
    lo, sep, hi = text.partition(":")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise ValueError(f"--slurm-pool is MIN:MAX (whole numbers), got {text!r}")
    low, high = int(lo), int(hi)
    if high < 1:
        raise ValueError(f"--slurm-pool: MAX must be >= 1, got {text!r}")
    if low > high:
        raise ValueError(f"--slurm-pool: MIN {low} > MAX {high}")
    return low, high


def walltime(seconds: float) -> str:
    """Seconds as Slurm's ``--time`` (``H:MM:SS``, rounded up to whole seconds)."""
    s = max(1, math.ceil(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _left_s(text: str) -> float | None:
    """``squeue %L`` (``[D-]H:MM:SS``, ``M:SS``, ``UNLIMITED``…) in seconds, or None."""
    days, _, rest = text.strip().rpartition("-")
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    secs = 0
    for p in parts:
        secs = secs * 60 + int(p)
    return secs + (int(days) * 86400 if days.isdigit() else 0)


@dataclass(frozen=True)
class PoolSettings:
    """The pool's settings (``serve --slurm-pool MIN:MAX --pool-…``); seconds throughout.

    Attributes:
        min_nodes, max_nodes: placeholders held (running) at least / held and pending at most.
        wait_s: a queue head waiting longer asks for another placeholder.
        idle_s: a node idle longer is given back (never below ``min_nodes``).
        poll_s: seconds between two looks at Slurm (``squeue``).
        walltime_s: each placeholder's ``--time`` (None: the partition's default).
        renew_s: a busy node whose placeholder has less walltime left is replaced and
            drained (at most half the walltime it had when first seen running: a
            walltime shorter than ``renew_s`` does not renew at once).

    Raises:
        ValueError: ``min_nodes > max_nodes``, ``max_nodes < 1``, or a time ≤ 0.
    """

    min_nodes: int = 0
    max_nodes: int = 1
    wait_s: float = 3.0
    idle_s: float = 30.0
    poll_s: float = 1.0
    walltime_s: float | None = None
    renew_s: float = 120.0

    def __post_init__(self) -> None:
        if self.max_nodes < 1 or not 0 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"a Slurm pool holds MIN..MAX nodes, 0 <= MIN <= MAX, MAX >= 1; "
                             f"got {self.min_nodes}:{self.max_nodes}")
        for name in ("wait_s", "idle_s", "poll_s", "renew_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0 s, got {getattr(self, name)}")
        if self.walltime_s is not None and not self.walltime_s > 0:
            raise ValueError(f"walltime_s must be > 0 s, got {self.walltime_s}")


@dataclass
class Placeholder:
    """One placeholder job: its Slurm id, Slurm's state (``PENDING``, ``RUNNING`` …), its
    node once running, the walltime left at the last poll (s; None: unlimited or not
    known), when that poll was (``time.monotonic``) and the walltime left when it was first
    seen running (``full_s``; the last two are not journaled)."""

    slurm_job: int
    state: str = "PENDING"
    node: str | None = None
    left_s: float | None = None
    polled: float = 0.0
    full_s: float | None = None


class SlurmPool:
    """The nodes of a partition held through placeholders (module docstring).

    Args:
        settings: :class:`PoolSettings`.
        partition: the partition (default: Slurm's default one).
        listen: the scheduler's address (``SCHEDULER_IP``); default: the address this
            machine reaches the partition's first node from.
        timeout_s: seconds a Slurm command may take.
        env: the environment of Slurm commands and jobs (default ``os.environ``, without an
            enclosing Slurm job's variables).

    Raises:
        SlurmError: Slurm does not answer, or there is no such partition.
    """

    def __init__(self, settings: PoolSettings, partition: str | None = None, *,
                 listen: str | None = None, timeout_s: float = 30.0,
                 env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        #: The most nodes the pool may hold (MAX): the scheduler queues jobs up to it.
        self.capacity = settings.max_nodes
        #: Placeholders Slurm ended (walltime, scancel from outside, node failure): the
        #: latest 20, ``{"slurm_job", "node", "state", "wall"}``.
        self.lost: list[dict[str, Any]] = []
        self.env = client_env(env)
        self.timeout_s = float(timeout_s)
        self.listen = listen
        self.partition, self.members = self._partition(partition)
        self._scratch = tempfile.mkdtemp(prefix="apgaspy-slurm-pool-")
        self._script = Path(self._scratch) / "placeholder.sh"
        self._script.write_text("#!/bin/sh\n# an apgaspy scheduler's placeholder: it holds "
                                "this node for the scheduler's jobs\nexec sleep infinity\n")
        self._lock = threading.Lock()
        self._held: dict[int, Placeholder] = {}
        self._joined: set[str] = set()  # nodes in the scheduler's pool
        self._cancel: list[int] = []  # placeholders to scancel (their node left the pool)
        self.map_file: Path | None = None
        #: The latest Slurm error (one line) and its wall time, failures in a row, and the
        #: seconds the keeper waits before it tries Slurm again.
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.failures = 0
        self.backoff_s = 0.0

    def __repr__(self) -> str:
        return (f"SlurmPool(partition={self.partition!r}, "
                f"{self.settings.min_nodes}:{self.settings.max_nodes})")

    def _slurm(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run_slurm(argv, env=self.env, cwd=self._scratch, check=check,
                         timeout_s=self.timeout_s)

    def _partition(self, name: str | None) -> tuple[str, list[str]]:
        out = run_slurm(["scontrol", "show", "partition", "-o"], env=self.env,
                        timeout_s=self.timeout_s).stdout
        parts = [scontrol_fields(line) for line in out.splitlines() if line.strip()]
        chosen = ([p for p in parts if p.get("Default") == "YES"] or parts[:1] if name is None
                  else [p for p in parts if p.get("PartitionName") == name])
        if not chosen:
            known = ", ".join(p.get("PartitionName", "?") for p in parts) or "none"
            raise SlurmError(f"no partition {name!r} (known: {known})" if name else
                             "Slurm has no partition")
        nodes = expand_hostlist(chosen[0].get("Nodes", ""), env=self.env,
                                timeout_s=self.timeout_s)
        return chosen[0]["PartitionName"], nodes

    # ------------------------------------------------------------------ NodeBackend

    def names(self) -> tuple[str, ...]:
        """No node at the start: nodes join as their placeholders run."""
        return ()

    def scheduler_address(self) -> str:
        """``listen``, else the source address of a route to the partition's first node.

        Raises ``OSError`` when no node name resolves.
        """
        if self.listen:
            return self.listen
        if not self.members:
            raise OSError(f"partition {self.partition} has no nodes; give --listen")
        return source_towards(self.address(self.members[0]))

    def address(self, name: str) -> str:
        """The node's resolved address (``socket.gethostbyname``).

        Raises ``OSError`` when the name does not resolve.
        """
        return socket.gethostbyname(name)

    def add_node(self, name: str | None = None) -> tuple[str, None]:
        """Let ``name`` join the pool: only the node a running placeholder holds.

        Raises:
            ValueError: no name, or no running placeholder of this pool holds it.
        """
        with self._lock:
            holder = next((p for p in self._held.values()
                           if p.node == name and p.state == "RUNNING"), None)
            if name is None or holder is None:
                raise ValueError(f"{name or 'a new node'}: only a node Slurm gave to a "
                                 "placeholder of this pool can join it")
            self._joined.add(name)
        self._write_map()
        return name, None

    def forget_node(self, name: str) -> None:
        """``name`` left the pool: its placeholder is cancelled (by the keeper, at once)."""
        with self._lock:
            self._joined.discard(name)
            for p in list(self._held.values()):
                if p.node == name:
                    self._cancel.append(p.slurm_job)
                    del self._held[p.slurm_job]
        self._write_map()

    def launch(self, job: JobLaunch, nodes: Sequence[str],
               env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Start ``job`` as a step of the placeholder holding its first node (``srun
        --overlap``, run here: its exit status is the job's), with the fallback launcher
        for its places on the other nodes (module docstring).

        Raises:
            SlurmError: a node is held by no running placeholder of the pool.
            OSError: ``srun`` cannot be started.
        """
        run_dir = Path(job.stdout).resolve().parent
        with self._lock:
            holders = {p.node: p.slurm_job for p in self._held.values()
                       if p.node in self._joined}
            self.map_file = run_dir / "slurm-pool-nodes.json"
        missing = [n for n in nodes if n not in holders]
        if missing or not nodes:
            raise SlurmError(f"no placeholder of the pool holds {','.join(missing) or 'a node'}")
        self._write_map()
        full = dict(self.env)
        full.update(env)
        full["PATH"] = f"{python_bin_dir()}{os.pathsep}{full.get('PATH', '')}"
        full.update({"SLURM_OVERLAP": "1", "APGAS_SLURM": "0", "HYDRA_LAUNCHER": "ssh",
                     "HYDRA_LAUNCHER_EXEC": str(write_launcher(run_dir)),
                     NODE_MAP_ENV: str(self.map_file)})
        return _popen(step_argv(holders[nodes[0]], nodes[0], list(job.argv)), job, full)

    def _write_map(self) -> None:
        if self.map_file is None:
            return
        with self._lock:
            out = {p.node: p.slurm_job for p in self._held.values() if p.node in self._joined}
        tmp = self.map_file.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            write_private(tmp, json.dumps(out))
            os.replace(tmp, self.map_file)

    # ------------------------------------------------------------------ placeholders

    def placeholders(self) -> list[Placeholder]:
        """Copies of the placeholders known now, oldest first."""
        with self._lock:
            return [Placeholder(**asdict(p)) for _, p in sorted(self._held.items())]

    def joined(self) -> set[str]:
        """The nodes in the scheduler's pool now."""
        with self._lock:
            return set(self._joined)

    def request(self) -> int:
        """``sbatch`` one placeholder; its Slurm id (it is PENDING until :meth:`poll`).

        Raises:
            SlurmError: ``sbatch`` fails or answers no job id.
        """
        argv = ["sbatch", "--parsable", f"--job-name={PLACEHOLDER_NAME}",
                f"--partition={self.partition}", "--nodes=1", "--ntasks=1", "--exclusive",
                "--output=/dev/null", "--error=/dev/null", "--chdir=/tmp"]
        if self.settings.walltime_s is not None:
            argv.append(f"--time={walltime(self.settings.walltime_s)}")
        res = self._slurm(*argv, str(self._script))
        try:
            slurm_job = int(res.stdout.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch answered {res.stdout.strip()!r}, not a job id") from None
        with self._lock:
            self._held[slurm_job] = Placeholder(slurm_job, polled=time.monotonic())
        return slurm_job

    def poll(self) -> tuple[list[Placeholder], list[Placeholder]]:
        """Look at Slurm (``squeue`` of this user's placeholders): returns the placeholders
        that run now and did not before, and those that ended (not listed any more, or in
        an ended or ``COMPLETING`` state), which are forgotten; an ended one's ``state`` is
        Slurm's (``CANCELLED``, ``TIMEOUT``, ``NODE_FAIL`` …; ``UNKNOWN`` when neither
        ``scontrol`` nor ``sacct`` knows it).

        Raises:
            SlurmError: ``squeue`` fails (then nothing changes).
        """
        out = self._slurm("squeue", "-h", "-u", str(os.getuid()), f"--name={PLACEHOLDER_NAME}",
                          "-o", "%i|%T|%N|%L").stdout
        seen: dict[int, tuple[str, list[str], float | None]] = {}
        for line in out.splitlines():
            fields = line.strip().split("|")
            if len(fields) == 4 and fields[0].isdigit():
                seen[int(fields[0])] = (fields[1], expand_hostlist(
                    fields[2], env=self.env, timeout_s=self.timeout_s), _left_s(fields[3]))
        now = time.monotonic()
        started, ended = [], []
        with self._lock:
            for slurm_job, p in list(self._held.items()):
                state, nodes, left = seen.get(slurm_job, ("GONE", [], None))
                if state in ENDED_STATES or state in ("GONE", "COMPLETING"):
                    p.state = state
                    ended.append(p)
                    del self._held[slurm_job]
                    continue
                was = p.state
                p.state, p.left_s, p.polled = state, left, now
                if state == "RUNNING" and nodes:
                    p.node = nodes[0]
                    if p.full_s is None:
                        p.full_s = left
                    if was != "RUNNING":
                        started.append(Placeholder(**asdict(p)))
        self._write_map()
        for p in ended:  # why it ended: CANCELLED, TIMEOUT, NODE_FAIL … (scontrol, sacct)
            if p.state == "GONE":
                with contextlib.suppress(SlurmError):
                    p.state = slurm_job_status(p.slurm_job, env=self.env,
                                               timeout_s=self.timeout_s)[0]
        return started, ended

    def cancel_due(self) -> list[int]:
        """``scancel`` the placeholders whose node left the pool; the ids cancelled.

        Raises:
            SlurmError: ``scancel`` fails (they are tried again next time).
        """
        with self._lock:
            ids, self._cancel = self._cancel, []
        if ids:
            try:
                self._slurm("scancel", *map(str, ids))
            except SlurmError:
                with self._lock:
                    self._cancel.extend(ids)
                raise
        return ids

    def failed(self, exc: BaseException | None) -> None:
        """Count a Slurm command's failure (``exc``) or, with None, a success: after ``k``
        failures in a row the keeper waits ``poll_s · 2^k`` s (at most 30) before the
        next try."""
        if exc is None:
            self.failures, self.backoff_s = 0, 0.0
            return
        self.failures += 1
        self.last_error = str(exc).splitlines()[0] if str(exc) else repr(exc)
        self.last_error_at = time.time()
        self.backoff_s = min(_MAX_BACKOFF_S, self.settings.poll_s * 2 ** self.failures)

    def pool_status(self) -> dict[str, Any]:
        """``status``'s ``pool.slurm``: settings, ``held`` (running placeholders), ``pending``,
        ``placeholders`` (id, state, node, walltime left), ``lost`` (placeholders Slurm
        ended), ``last_error``,
        ``last_error_at`` (wall time), ``failures`` in a row and ``backoff_s``."""
        st = self.settings
        with self._lock:
            held = [p for p in self._held.values() if p.state == "RUNNING"]
            pending = [p for p in self._held.values() if p.state != "RUNNING"]
            listed = [{"slurm_job": p.slurm_job, "state": p.state, "node": p.node,
                       "left_s": p.left_s} for _, p in sorted(self._held.items())]
        return {"partition": self.partition, "min": st.min_nodes, "max": st.max_nodes,
                "held": len(held), "pending": len(pending), "placeholders": listed,
                "lost": list(self.lost),
                "last_error": self.last_error, "last_error_at": self.last_error_at,
                "failures": self.failures, "backoff_s": self.backoff_s}

    # ------------------------------------------------------------------ journal

    def to_json(self) -> str:
        """The placeholders as JSON (the journal's ``slurm_pool`` entry)."""
        with self._lock:
            return json.dumps({str(i): {"state": p.state, "node": p.node}
                               for i, p in self._held.items()})

    def adopt(self, text: str) -> list[int]:
        """Take over the placeholders a journal names (:meth:`to_json`) and keep those
        ``squeue`` still lists (running ones with their node); returns their ids.  None is
        cancelled.

        Raises:
            SlurmError: ``squeue`` fails.
            ValueError: the text is not :meth:`to_json`'s.
        """
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError(f"the journal's Slurm pool entry is not an object: {text[:80]!r}")
        with self._lock:
            for key, value in raw.items():
                self._held[int(key)] = Placeholder(int(key), str(value.get("state", "PENDING")),
                                                   value.get("node"))
        self.poll()
        return [p.slurm_job for p in self.placeholders()]

    def close(self) -> None:
        """``scancel`` every placeholder and remove the scratch directory.  Never raises."""
        with self._lock:
            ids = [*self._held, *self._cancel]
            self._held.clear()
            self._cancel = []
            self._joined.clear()
        if ids:
            with contextlib.suppress(SlurmError):
                self._slurm("scancel", *map(str, ids), check=False)
        shutil.rmtree(self._scratch, ignore_errors=True)
