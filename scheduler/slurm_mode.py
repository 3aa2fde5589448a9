"""Slurm as the resource manager of the real scheduler (``python -m scheduler serve --slurm``).

The scheduler keeps choosing the nodes itself (its algorithm, as with logical nodes); Slurm
is the mechanism that holds them.  Every job the scheduler starts is one Slurm job pinned
to the chosen nodes, and a malleable job's Slurm allocation is resized with it, so that
``squeue`` shows, at every moment between orders, the nodes the scheduler gave each job.
:class:`SlurmNodes` is a :class:`~scheduler.nodes.NodeBackend` with the optional
:class:`~scheduler.nodes.ResourceManager` hooks the server calls around starts and orders.

Commands (``<id>``: the Slurm job id of the scheduler's job, ``P``: the partition)::

    start   sbatch --parsable -J apgaspy-<job> -p P -N k --nodelist=<nodes> --exclusive
                   --chdir=<cwd> -o <run-dir>/job-<job>.out -e ….err <run-dir>/job-<job>.sbatch
            (the script is "exec <command>"; the environment, NODES, NODE_FILE, SCHEDULER_IP,
            SCHEDULER_PORT, JOBNAME, ELASTIC …, goes with sbatch's default --export=ALL), then a
            local watcher process, ``python -m scheduler.slurm_helpers_cli watch <id>``, which polls
            ``scontrol show job`` and exits with the job's exit status when Slurm says it has
            ended (a SIGTERM to it is passed on: ``scancel --signal=TERM --full <id>``)
    shrink  after the job's reply named the released nodes (its places there are gone),
            and once ``squeue -s -j <id>`` lists no step there any more (up to 10 s: the
            steps that ran the places end a moment after them; a resize kills a step still
            there, and MPICH's process manager then kills the whole job):
            scontrol update JobId=<id> NodeList=<nodes it keeps>
    grow    before the order is sent:
            salloc --no-shell -N m --nodelist=<new nodes> --exclusive
                   --dependency=expand:<id> --immediate=S        → helper job <h>
            scontrol update JobId=<h> NumNodes=0                 (h's nodes move into <id>)
            scontrol update JobId=<id> NumNodes=ALL
    end     scancel <id> (and every helper of the job)

The batch script runs on the first node of the allocation in Slurm's node order, so a job's
nodes are put in that order before its ``NODE_FILE`` is written (:meth:`SlurmNodes.arrange`):
the job's first process runs on its first node, which it never gives back.  A job whose
Slurm allocation ends for another reason (``scancel`` by hand, a Slurm time limit) ends in
the scheduler when its watcher sees it.  A grow onto a node the job gave back within the
same second waits for the next second (Slurm refuses a step there as "credential revoked"
until then).

**Grow without** ``expand`` (``grow="fallback"``; ``"auto"`` picks it when the controller's
``SchedulerParameters`` lack ``permit_job_expansion``; a refused ``expand`` also switches
the jobs started later to it): each new node is held by a helper allocation of its own
(``salloc --no-shell -N 1 --nodelist=<node> --exclusive``), kept alive beside the job and
cancelled when the job shrinks off that node or ends.  ``squeue`` then shows the job's Slurm
job with its original nodes plus one 1-node helper per added node.  Such a job cannot pass
apgaspy's own check that a node belongs to its Slurm job, so jobs started in fallback mode
get ``APGAS_SLURM=0`` (apgaspy ignores the allocation and checks hosts by name) and
``HYDRA_LAUNCHER=ssh`` with ``HYDRA_LAUNCHER_EXEC=<run-dir>/slurm-launch``: a launcher that
starts a process for node ``h`` as ``srun --jobid=<Slurm job holding h> -N 1 -n 1 -w h
--overlap`` (the map of nodes to Slurm jobs is the file ``$SCHEDULER_SLURM_NODES``,
rewritten at every resize), and runs it here when ``h`` is this machine and held by none.
Limits: node names must resolve on every node (apgaspy checks hosts by name then); apgaspy
spawns the places of a host that is this machine with host ``localhost``, which MPICH's
process manager, reading the allocation, launches on the job's first node, so where all
nodes are one machine (the test cluster) the places of a fallback job run as steps of the
job's own Slurm job on its first node, and the helpers only reserve their nodes; ``mpiexec``
inside such a job sees the original allocation only.

Requirements: the Slurm client commands on ``PATH``, ``SLURM_CONF`` (or the default
configuration), whole nodes per job (``--exclusive``), accounting or ``MinJobAge`` long
enough for ``scontrol show job`` to report a job's end (the watcher asks ``sacct`` when the
controller has forgotten the job), and the scheduler being the only user of its nodes
(another user's job on a node makes ``sbatch`` wait and an ``expand`` fail).  Node names must
resolve to the node's address (a job listens for orders on its first node's address, and
``address()`` resolves the name the same way).
"""


from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._exceptions import SlurmError
from .nodes import JobLaunch, python_bin_dir, source_towards
from .private import open_private, write_private
from .resources import ResourceGraph
from .slurm_commands import (
    ENDED_STATES,
    SlurmError,
    client_env,
    expand_hostlist,
    run_slurm,
    scontrol_fields,
)
from .slurm_helpers_cli import NODE_MAP_ENV, write_launcher

__all__ = ["GROW_MODES", "SlurmNodes", "node_cpus"]

#: How a job's Slurm allocation grows: ``expand`` (``--dependency=expand``), ``fallback``
#: (helper allocations beside the job), ``auto`` (expand when the controller permits it).
GROW_MODES = ("auto", "expand", "fallback")

_GRANTED = re.compile(r"Granted job allocation (\d+)")
_CREDENTIAL_S = 1.05  # a step on a node the job gave back is refused in the same second


@dataclass
class _Held:
    """What Slurm holds for one job of the scheduler."""

    main: int  # the Slurm job id of its allocation
    nodes: list[str]  # nodes of that allocation, in Slurm's order
    fallback: bool  # started in fallback mode: grows go to helper allocations
    helpers: dict[str, int] = field(default_factory=dict)  # node → helper job (fallback)
    released: dict[str, float] = field(default_factory=dict)  # node → wall time given back
    map_file: Path | None = None

    def node_map(self) -> dict[str, int]:
        out = {n: self.main for n in self.nodes}
        out.update(self.helpers)
        return out


def node_cpus(text: str) -> dict[str, int]:
    """Node name → its CPUs (``CPUTot``) from ``scontrol show node -o``'s lines; a node
    whose line has no positive ``CPUTot`` is left out."""
    out = {}
    for line in text.splitlines():
        fields = scontrol_fields(line) if line.strip() else {}
        name, cpus = fields.get("NodeName", ""), fields.get("CPUTot", "")
        if name and cpus.isdigit() and int(cpus) > 0:
            out[name] = int(cpus)
    return out


class SlurmNodes:
    """The nodes of a Slurm partition, handed out as Slurm jobs (module docstring).

    Args:
        partition: the partition (default: the default partition).
        count: how many of its nodes the scheduler may use, the first ones in Slurm's
            order (None: all).
        listen: the scheduler's address (``SCHEDULER_IP``); default: the address this
            machine reaches the first node from.
        grow: ``"auto"``, ``"expand"`` or ``"fallback"`` (:data:`GROW_MODES`).
        cores_per_node: the nodes' cores: a count, ``"auto"`` (each node's ``CPUTot``,
            :func:`node_cpus`), or ``None``: a slot a node.
        immediate_s: seconds ``salloc`` may wait for a grow's nodes (``--immediate``).
        step_wait_s: seconds a shrink waits for the job steps on the released nodes to end
            before the resize (which kills those still there).
        timeout_s: seconds any other Slurm command may take.
        env: the environment of Slurm commands and jobs (default ``os.environ``; variables of
            an enclosing Slurm job are dropped, ``SLURM_CONF`` is kept).

    Raises:
        SlurmError: Slurm does not answer, there is no such partition, or it has fewer than
            ``count`` nodes.
        ValueError: ``count`` < 1, or ``grow`` is not one of :data:`GROW_MODES`.
    """

    def __init__(self, partition: str | None = None, count: int | None = None, *,
                 listen: str | None = None, grow: str = "auto", immediate_s: float = 20.0,
                 step_wait_s: float = 10.0, timeout_s: float = 30.0,
                 env: Mapping[str, str] | None = None,
                 cores_per_node: int | str | None = None) -> None:
        if count is not None and (isinstance(count, bool) or count < 1):
            raise ValueError(f"SlurmNodes: count must be >= 1, got {count!r}")
        if grow not in GROW_MODES:
            raise ValueError(f"SlurmNodes: grow must be one of {', '.join(GROW_MODES)}, "
                             f"got {grow!r}")
        self.env = client_env(env)
        self.timeout_s = float(timeout_s)
        self.immediate_s = float(immediate_s)
        self.step_wait_s = float(step_wait_s)
        self.listen = listen
        self._scratch = tempfile.mkdtemp(prefix="apgaspy-slurm-mode-")  # scontrol's files
        self._lock = threading.Lock()
        self._jobs: dict[int, _Held] = {}
        self._closed = False
        try:
            self.partition, members = self._partition(partition)
            order, cputot = self._node_table()
            members = sorted(members, key=lambda n: order.get(n, math.inf))
            if count is not None:
                if count > len(members):
                    raise SlurmError(f"partition {self.partition} has {len(members)} nodes, "
                                     f"fewer than the {count} asked for")
                members = members[:count]
            #: Whether the controller's SchedulerParameters have permit_job_expansion.
            self.expand_permitted = self._expand_permitted()
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self._names = tuple(members)
        self._rank = {n: i for i, n in enumerate(self._names)}
        #: The nodes' cores (``cores_per_node``: a count, or ``"auto"``: Slurm's
        #: ``CPUTot`` of each node), or None: a slot a node.
        self.graph: ResourceGraph | None = None
        if cores_per_node == "auto":
            self.graph = ResourceGraph.counted({n: cputot.get(n, 1) for n in self._names})
        elif cores_per_node is not None:
            self.graph = ResourceGraph.counted({n: int(cores_per_node) for n in self._names})
        #: ``grow="auto"``: a refused expand switches later jobs to the fallback.
        self.auto = grow == "auto"
        if grow == "auto":
            grow = "expand" if self.expand_permitted else "fallback"
        #: The grow mode of jobs started from now on (``expand`` or ``fallback``).
        self.grow_mode = grow

    def __repr__(self) -> str:
        return (f"SlurmNodes(partition={self.partition!r}, nodes={list(self._names)!r}, "
                f"grow={self.grow_mode!r})")

    # ------------------------------------------------------------------ Slurm's answers

    def _slurm(self, *argv: str, check: bool = True,
               timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        return run_slurm(argv, env=self.env, cwd=self._scratch, check=check,
                         timeout_s=self.timeout_s if timeout_s is None else timeout_s)

    def _partition(self, name: str | None) -> tuple[str, list[str]]:
        out = self._slurm("scontrol", "show", "partition", "-o").stdout
        parts = [scontrol_fields(line) for line in out.splitlines() if line.strip()]
        if name is None:
            chosen = [p for p in parts if p.get("Default") == "YES"] or parts[:1]
        else:
            chosen = [p for p in parts if p.get("PartitionName") == name]
        if not chosen:
            known = ", ".join(p.get("PartitionName", "?") for p in parts) or "none"
            raise SlurmError(f"no partition {name!r} (known: {known})" if name else
                             "Slurm has no partition")
        part = chosen[0]
        nodes = expand_hostlist(part.get("Nodes", ""), env=self.env, timeout_s=self.timeout_s)
        if not nodes:
            raise SlurmError(f"partition {part.get('PartitionName')} has no nodes")
        return part["PartitionName"], nodes

    def _node_table(self) -> tuple[dict[str, int], dict[str, int]]:
        """Node name → index in the controller's node table (the order of allocations), and
        node name → its CPUs (:func:`node_cpus`)."""
        out = self._slurm("scontrol", "show", "node", "-o").stdout
        names = [scontrol_fields(line).get("NodeName", "") for line in out.splitlines()]
        return {n: i for i, n in enumerate(n for n in names if n)}, node_cpus(out)

    def _expand_permitted(self) -> bool:
        out = self._slurm("scontrol", "show", "config").stdout
        for line in out.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "SchedulerParameters":
                return "permit_job_expansion" in value
        return False

    def slurm_nodes(self, slurm_job: int) -> list[str]:
        """The nodes Slurm's controller says ``slurm_job`` holds now (``[]`` when it has
        ended or is unknown).

        Raises:
            SlurmError: ``scontrol`` does not answer.
        """
        res = self._slurm("scontrol", "show", "job", "-o", str(slurm_job), check=False)
        if res.returncode != 0:
            return []
        info = scontrol_fields(res.stdout)
        if info.get("JobState") in ENDED_STATES:
            return []
        return expand_hostlist(info.get("NodeList", ""), env=self.env,
                               timeout_s=self.timeout_s)

    def node_count(self, slurm_job: int) -> int:
        """The node count ``squeue -h -j <id> -o %D`` shows (0 when squeue lists nothing).

        Raises:
            SlurmError: ``squeue`` does not answer.
        """
        out = self._slurm("squeue", "-h", "-j", str(slurm_job), "-o", "%D",
                          check=False).stdout.split()
        return int(out[0]) if out and out[0].isdigit() else 0

    # ------------------------------------------------------------------ NodeBackend

    def names(self) -> tuple[str, ...]:
        """The partition's nodes the scheduler uses, in Slurm's order."""
        return self._names

    def scheduler_address(self) -> str:
        """``listen``, else the source address of a route to the first node.

        Raises ``OSError`` when the first node's name does not resolve.
        """
        return self.listen or source_towards(self.address(self._names[0]))

    def address(self, name: str) -> str:
        """The node's resolved address (``socket.gethostbyname``: the way a job resolves
        the first line of its ``NODE_FILE`` to listen for orders).

        Raises ``OSError`` (``socket.gaierror``) when the name does not resolve.
        """
        return socket.gethostbyname(name)

    def launch(self, job: JobLaunch, nodes: Sequence[str],
               env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Submit ``job`` as a Slurm batch job on exactly ``nodes`` and return its local
        watcher process (its exit status is the job's; see the module docstring).

        ``nodes`` must be in Slurm's order (:meth:`arrange`): the batch script runs on the
        first one.  The job gets ``env`` on top of the scheduler's environment (without an
        enclosing Slurm job's variables), this Python's directory first on ``PATH``,
        ``SLURM_OVERLAP=1`` (job steps started inside it, as MPICH's with ``srun``, share
        the CPUs), and in fallback mode ``APGAS_SLURM=0``, ``HYDRA_LAUNCHER``,
        ``HYDRA_LAUNCHER_EXEC`` and ``SCHEDULER_SLURM_NODES``.

        Raises:
            SlurmError: ``sbatch`` refuses the job, or the watcher cannot be started (the
                Slurm job is cancelled then).
            ValueError: a node is not one of :meth:`names`.
        """
        unknown = [n for n in nodes if n not in self._rank]
        if unknown or not nodes:
            raise ValueError(f"not nodes of this backend: {unknown or 'none given'}")
        if self._closed:
            raise SlurmError("the Slurm node backend is closed")
        run_dir = Path(job.stdout).resolve().parent
        fallback = self.grow_mode == "fallback"
        full = dict(self.env)
        full.update(env)
        full["PATH"] = f"{python_bin_dir()}{os.pathsep}{full.get('PATH', '')}"
        full.setdefault("SLURM_OVERLAP", "1")
        held = _Held(main=0, nodes=list(nodes), fallback=fallback)
        if fallback:
            held.map_file = run_dir / f"job-{job.job_id}.slurm-nodes.json"
            full.update({"APGAS_SLURM": "0", "HYDRA_LAUNCHER": "ssh",
                         "HYDRA_LAUNCHER_EXEC": str(write_launcher(run_dir)),
                         NODE_MAP_ENV: str(held.map_file)})
        script = run_dir / f"job-{job.job_id}.sbatch"
        write_private(script, "#!/bin/sh\n# written by the apgaspy scheduler (Slurm mode)\n"
                      f"exec {shlex.join(job.argv)}\n")  # 0600, as the files Slurm appends
        for out in (job.stdout, job.stderr):  # to (it keeps an existing file's mode)
            os.close(open_private(out, os.O_WRONLY | os.O_TRUNC))
        argv = ["sbatch", "--parsable", f"--job-name=apgaspy-{job.job_id}",
                f"--partition={self.partition}", f"--nodes={len(nodes)}",
                f"--nodelist={','.join(nodes)}", "--exclusive", f"--chdir={job.cwd}",
                f"--output={job.stdout}", f"--error={job.stderr}", str(script)]
        res = run_slurm(argv, env=full, cwd=self._scratch, timeout_s=self.timeout_s)
        try:
            held.main = int(res.stdout.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch answered {res.stdout.strip()!r}, not a job id") from None
        if held.map_file is not None:
            self._write_map(held)
        watch_log = Path(job.stdout).with_suffix(".slurm.log")
        try:
            with os.fdopen(open_private(watch_log, os.O_WRONLY | os.O_TRUNC), "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "scheduler.slurm_helpers_cli", "watch", str(held.main)],
                    env=self.env, cwd=self._scratch, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            self._cancel([held.main])
            raise SlurmError(f"cannot start the watcher of Slurm job {held.main}: {exc}") \
                from None
        with self._lock:
            self._jobs[job.job_id] = held
        return proc

    # ------------------------------------------------------------------ adoption

    def find(self, job_id: int) -> list[int]:
        """The Slurm jobs named ``apgaspy-<job_id>`` that ``squeue`` lists now (for a
        scheduler restarted after a crash; :mod:`scheduler.recovery`).

        Raises:
            SlurmError: ``squeue`` does not answer.
        """
        out = self._slurm("squeue", "-h", f"--name=apgaspy-{job_id}", "-o", "%i",
                          check=False).stdout.split()
        return [int(x) for x in out if x.isdigit()]

    def cancel(self, slurm_jobs: Sequence[int]) -> None:
        """``scancel`` the given Slurm jobs.  Never raises."""
        self._cancel(list(slurm_jobs), quiet=True)

    def adopt(self, job_id: int, nodes: Sequence[str], info: dict[str, Any]) -> None:
        """Take over a running job of a crashed scheduler: ``info`` is what
        :meth:`job_info` said of it (``slurm_job``, ``slurm_grow``, ``slurm_helpers``), kept
        in the journal; afterwards :meth:`ended` cancels its Slurm jobs as for a job started
        here.  A job adopted is not resized again (the scheduler treats it as rigid).

        Raises:
            ValueError: ``info`` names no Slurm job.
        """
        try:
            main = int(info["slurm_job"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"no Slurm job recorded for job {job_id}: {info!r}") from None
        helpers = {str(n): int(h) for n, h in (info.get("slurm_helpers") or {}).items()}
        held = _Held(main=main, nodes=[n for n in nodes if n not in helpers],
                     fallback=info.get("slurm_grow") == "fallback", helpers=helpers)
        with self._lock:
            self._jobs[job_id] = held

    # ------------------------------------------------------------------ ResourceManager

    def arrange(self, nodes: Sequence[str]) -> list[str]:
        """``nodes`` in Slurm's node order: the batch script runs on the first one."""
        return sorted(nodes, key=lambda n: self._rank.get(n, math.inf))

    def job_info(self, job_id: int) -> dict[str, Any]:
        """``{"slurm_job": id, "slurm_grow": mode, "slurm_helpers": {node: id}}`` for a job
        this backend started and has not seen end, else ``{}``."""
        with self._lock:
            held = self._jobs.get(job_id)
            if held is None:
                return {}
            return {"slurm_job": held.main,
                    "slurm_grow": "fallback" if held.fallback else "expand",
                    "slurm_helpers": dict(held.helpers)}

    def slurm_jobs(self, job_id: int) -> list[int]:
        """Every Slurm job (the job's own, then its helpers) held for ``job_id`` now."""
        with self._lock:
            held = self._jobs.get(job_id)
            return [] if held is None else [held.main, *sorted(set(held.helpers.values()))]

    def acquire(self, job_id: int, nodes: Sequence[str]) -> dict[str, Any]:
        """Make ``nodes`` part of job ``job_id``'s Slurm allocation before a grow order.

        Expand mode: a helper allocation with ``--dependency=expand:<id>`` whose nodes are
        moved into the job (module docstring).  Fallback mode: one helper allocation per
        node, kept beside the job.  Waits first, where needed, until a node the job gave
        back is more than a second old in Slurm's eyes (a job step on it would be refused
        with "credential revoked" otherwise).

        Returns:
            Fields for the event log: ``slurm_job``, ``slurm_nodes`` (``squeue``'s count of
            the job's own Slurm job afterwards), ``slurm_via``, ``slurm_helpers`` (node →
            helper job) and ``slurm_s`` (seconds spent in Slurm's commands).

        Raises:
            SlurmError: the nodes cannot be had within ``immediate_s`` seconds, ``expand`` is
                refused (in ``auto`` mode jobs started later use the fallback), or the
                nodes are not the job's afterwards.  Nothing stays allocated then.
        """
        held = self._held(job_id)
        self._wait_credentials(held, nodes)
        t0 = time.monotonic()
        if held.fallback:
            helpers = self._fallback_grow(job_id, held, nodes)
            via = "helper"
        else:
            helper = self._expand_grow(job_id, held, nodes)
            helpers, via = {n: helper for n in nodes}, "expand"
        took = round(time.monotonic() - t0, 3)
        return {"slurm_job": held.main, "slurm_nodes": self.node_count(held.main),
                "slurm_via": via, "slurm_helpers": helpers, "slurm_s": took}

    def _held(self, job_id: int) -> _Held:
        with self._lock:
            held = self._jobs.get(job_id)
        if held is None:
            raise SlurmError(f"job {job_id} has no Slurm job (it has ended)")
        return held

    def _wait_credentials(self, held: _Held, nodes: Sequence[str]) -> None:
        times = [held.released[n] for n in nodes if n in held.released]
        if times:
            wait = math.floor(max(times)) + _CREDENTIAL_S - time.time()
            if wait > 0:
                time.sleep(wait)

    def _allocate(self, nodes: Sequence[str], name: str, *extra: str) -> int:
        """``salloc --no-shell`` on exactly ``nodes``; the new Slurm job's id."""
        argv = ["salloc", "--no-shell", f"--job-name={name}", f"--partition={self.partition}",
                f"--nodes={len(nodes)}", f"--nodelist={','.join(nodes)}", "--exclusive",
                f"--immediate={max(1, math.ceil(self.immediate_s))}", *extra]
        res = self._slurm(*argv, check=False, timeout_s=self.immediate_s + self.timeout_s)
        match = _GRANTED.search(res.stderr) or _GRANTED.search(res.stdout)
        if res.returncode != 0 or match is None:
            why = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()
            if match is not None:  # granted, then something failed: do not leave it
                self._cancel([int(match.group(1))])
            raise SlurmError(f"{shlex.join(argv)}: exit {res.returncode}: {why[-1]}")
        return int(match.group(1))

    def _expand_grow(self, job_id: int, held: _Held, nodes: Sequence[str]) -> int:
        try:
            helper = self._allocate(nodes, f"apgaspy-{job_id}-grow",
                                    f"--dependency=expand:{held.main}")
        except SlurmError as exc:
            if "dependency" in str(exc).lower() and self.auto:
                self.grow_mode = "fallback"  # for the jobs started from now on
                raise SlurmError(f"Slurm refuses to expand job {held.main} ({exc}); jobs "
                                 "started from now on grow by helper allocations") from None
            raise
        try:
            self._slurm("scontrol", "update", f"JobId={helper}", "NumNodes=0")
            self._slurm("scontrol", "update", f"JobId={held.main}", "NumNodes=ALL")
        except SlurmError:
            self._cancel([helper])
            raise
        finally:
            self._clean_scratch()
        self._cancel([helper], quiet=True)  # normally gone already; never left behind
        now = self.slurm_nodes(held.main)
        missing = [n for n in nodes if n not in now]
        with self._lock:
            held.nodes = self.arrange(now)
            ended = self._jobs.get(job_id) is not held
        if ended:
            self._cancel([held.main], quiet=True)
            raise SlurmError(f"job {job_id} ended while its allocation grew")
        if missing:
            raise SlurmError(f"Slurm job {held.main} holds {','.join(now) or 'nothing'} after "
                             f"the expand, not {','.join(missing)}")
        return helper

    def _fallback_grow(self, job_id: int, held: _Held, nodes: Sequence[str]) -> dict[str, int]:
        made: dict[str, int] = {}
        try:
            for node in nodes:
                made[node] = self._allocate([node], f"apgaspy-{job_id}-{node}")
        except SlurmError:
            self._cancel(list(made.values()))
            raise
        with self._lock:
            ended = self._jobs.get(job_id) is not held
            if not ended:
                held.helpers.update(made)
        if ended:
            self._cancel(list(made.values()))
            raise SlurmError(f"job {job_id} ended while its nodes were allocated")
        self._write_map(held)
        return made

    def release(self, job_id: int, nodes: Sequence[str]) -> dict[str, Any]:
        """Give ``nodes`` of job ``job_id`` back to Slurm, after the job released its places
        there (a shrink's reply, or a grow that failed).

        Nodes of the job's own allocation: once no job step runs there any more (waiting up
        to ``step_wait_s`` seconds: the steps that ran the released places end a moment after
        them), ``scontrol update JobId=<id> NodeList=<kept>`` (Slurm frees them at once and
        kills steps still there).  Nodes held by a fallback helper: ``scancel <helper>``.

        Returns:
            Fields for the event log: ``slurm_job``, ``slurm_nodes`` (``squeue``'s count
            afterwards), ``slurm_s`` (seconds spent in Slurm's commands, the wait included),
            ``slurm_step_wait_s`` and, when steps had to be killed, ``slurm_killed_steps``.

        Raises:
            SlurmError: a node is the job's first (its batch script runs there), is not the
                job's in Slurm, or Slurm does not free it.
        """
        held = self._held(job_id)
        t0 = time.monotonic()
        gone = list(dict.fromkeys(nodes))
        own = [n for n in gone if n in held.nodes]
        helpers = sorted({held.helpers[n] for n in gone if n in held.helpers})
        strangers = [n for n in gone if n not in own and n not in held.helpers]
        if strangers:
            raise SlurmError(f"Slurm job {held.main} does not hold {','.join(strangers)}")
        fields: dict[str, Any] = {}
        if own:
            if held.nodes and held.nodes[0] in own:
                raise SlurmError(f"{held.nodes[0]} runs the batch script of Slurm job "
                                 f"{held.main}: it cannot be given back")
            # The job's processes there are gone, but the job steps that ran them (MPICH's
            # srun and proxy) may take a moment to end; the resize would kill a step still
            # there, and MPICH's process manager would then kill the whole job.
            waited, killed = self._wait_steps(held.main, own)
            fields["slurm_step_wait_s"] = waited
            if killed:
                fields["slurm_killed_steps"] = killed
            keep = [n for n in held.nodes if n not in own]
            try:
                self._slurm("scontrol", "update", f"JobId={held.main}",
                            f"NodeList={','.join(keep)}")
            finally:
                self._clean_scratch()
            now = self.slurm_nodes(held.main)
            still = [n for n in own if n in now]
            if still:
                raise SlurmError(f"Slurm job {held.main} still holds {','.join(still)}")
            with self._lock:
                held.nodes = self.arrange(now)
        if helpers:
            for helper in helpers:  # its steps, started by the launcher, end first
                waited, killed = self._wait_steps(helper, gone)
                fields["slurm_step_wait_s"] = fields.get("slurm_step_wait_s", 0.0) + waited
                if killed:
                    fields.setdefault("slurm_killed_steps", []).extend(killed)
            self._cancel(helpers)
        stamp = time.time()
        with self._lock:
            for n in gone:
                held.released[n] = stamp
                held.helpers.pop(n, None)
        if held.map_file is not None:
            self._write_map(held)
        took = round(time.monotonic() - t0, 3)
        return {"slurm_job": held.main, "slurm_nodes": self.node_count(held.main),
                "slurm_s": took, **fields}

    def steps_on(self, slurm_job: int, nodes: Sequence[str]) -> list[str]:
        """The job steps of ``slurm_job`` (``<id>.<step>``, not the batch or extern step)
        that run on any of ``nodes``, as ``squeue -s`` lists them.

        Raises:
            SlurmError: ``squeue`` does not answer.
        """
        out = self._slurm("squeue", "-h", "-s", "-j", str(slurm_job), "-o", "%i|%N",
                          check=False).stdout
        wanted, found = set(nodes), []
        for line in out.splitlines():
            step, _, hostlist = line.strip().partition("|")
            if not step or step.endswith((".batch", ".extern")):
                continue
            if wanted & set(expand_hostlist(hostlist, env=self.env, timeout_s=self.timeout_s)):
                found.append(step)
        return found

    def _wait_steps(self, slurm_job: int, nodes: Sequence[str]) -> tuple[float, list[str]]:
        """Wait up to ``step_wait_s`` until no step of the job runs on ``nodes``; return
        the seconds waited and the steps still there (the resize will kill them)."""
        t0 = time.monotonic()
        while True:
            steps = self.steps_on(slurm_job, nodes)
            waited = round(time.monotonic() - t0, 3)
            if not steps or waited >= self.step_wait_s:
                return waited, steps
            time.sleep(0.1)

    def ended(self, job_id: int) -> None:
        """Job ``job_id`` has ended (or been ended): ``scancel`` its Slurm job and every
        helper, and forget them.  Never raises."""
        with self._lock:
            held = self._jobs.pop(job_id, None)
        if held is not None:
            self._cancel([held.main, *held.helpers.values()], quiet=True)

    def close(self) -> None:
        """Cancel the Slurm jobs of every job still known and remove the scratch directory.
        Idempotent; never raises."""
        with self._lock:
            self._closed = True
            ids = list(self._jobs)
        for job_id in ids:
            self.ended(job_id)
        shutil.rmtree(self._scratch, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def _cancel(self, slurm_jobs: Sequence[int], *, quiet: bool = False) -> None:
        ids = [str(j) for j in dict.fromkeys(slurm_jobs) if j]
        if not ids:
            return
        try:
            self._slurm("scancel", *ids, check=False)
        except SlurmError:
            if not quiet:
                raise

    def _clean_scratch(self) -> None:
        """Remove the ``slurm_job_<id>_resize.{sh,csh}`` files ``scontrol`` may write."""
        for p in Path(self._scratch).glob("slurm_job_*_resize.*"):
            with contextlib.suppress(OSError):
                p.unlink()

    def _write_map(self, held: _Held) -> None:
        if held.map_file is None:
            return
        tmp = held.map_file.with_suffix(".tmp")
        write_private(tmp, json.dumps(held.node_map()))
        os.replace(tmp, held.map_file)

