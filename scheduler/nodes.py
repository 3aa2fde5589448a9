"""Node backends: the nodes a real scheduler hands out, and how a job is started on them.

A node backend is the mechanism's knowledge of the machine; the policy only sees node names
(and keeps its own pool of free ones, :class:`scheduler.algorithms.base.FreeNodes`).  The
interface (:class:`NodeBackend`) is small on purpose, so that a Slurm partition is a third
kind (:class:`scheduler.slurm_mode.SlurmNodes`):

* ``names()``: the node names, in the order they are shown (the algorithms sort them again).
* ``scheduler_address()``: the address the scheduler listens on for notifications, also
  given to jobs as ``SCHEDULER_IP`` (docs/reference/protocol.md).
* ``address(name)``: the address of a node, where a job whose first node it is listens for
  orders and from which its notifications come (``<message>:<job address>``).
* ``launch(job, nodes, env)``: start the job on its first node; returns the local
  ``subprocess.Popen`` (its own session, output to the job's files).

A backend whose nodes a resource manager hands out (Slurm: :mod:`scheduler.slurm_mode`) also
has the hooks of :class:`ResourceManager`, which the server calls around starts, orders and
ends: ``arrange`` (the order of a new job's nodes), ``acquire`` (before a grow order),
``release`` (after a shrink reply, or a failed grow), ``ended``, ``job_info``, ``close``.

Two kinds here (the third, Slurm, is :mod:`scheduler.slurm_mode`):

* :class:`LocalNodes`: N logical nodes of this machine, named by the loopback addresses
  127.0.1.1 … 127.0.1.N; jobs start here, and apgaspy starts the places of local hosts on
  this machine.  The scheduler listens on 127.0.0.1 only (jobs listen on the same port of
  their own addresses).
* :class:`SshHosts`: real hosts reached by ssh; a job is started on its first host with
  ``<ssh> -t -t <host> cd <dir> && exec env VAR=… <command>`` (the Java scheduler's
  ``ssh -t -t <host> VAR=… <script>``; the ``cd`` puts the job in the scheduler's working
  directory, as on a shared file system).  Every host needs the same Python environment at
  the same path and the run directory on a shared file system.  The job's line key is never
  put on that command line (where ``ps`` on either machine would show it): the job reads it
  from the owner-only file ``SCHEDULER_KEY_FILE`` names, in the shared run directory
  (docs/reference/security.md).

Each backend may carry ``graph``, its nodes' cores (:class:`scheduler.resources.ResourceGraph`),
given by ``cores_per_node``: a count, or ``"auto"`` (logical nodes: this machine's CPUs; ssh
hosts: ``nproc`` on each host at start, :func:`ssh_nproc`; Slurm: each node's ``CPUTot``).
``None`` (the default) leaves ``graph`` ``None``: each node one slot, as before.

Logical nodes and ssh hosts may also change while the scheduler runs (``python -m scheduler
node add|remove|drain``, :mod:`scheduler.pool`): ``add_node(name)`` checks a new node and
returns its CPUs (a logical node: the next free loopback address, its CPUs mapped as
:mod:`scheduler.resources` documents; an ssh host: reached and its ``nproc`` read, as at
start), ``forget_node(name)`` drops one that left.  A backend without them (Slurm, whose
nodes are the partition's) refuses ``node add``.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from apgaspy.wire.auth import KEY_ENV

from .private import open_private
from .resources import ResourceGraph, local_cpus, local_graph

__all__ = ["JobLaunch", "LocalNodes", "NodeBackend", "ResourceManager", "SshHosts",
           "cores_option", "python_bin_dir", "ssh_nproc"]

#: Largest number of logical nodes (127.0.1.1 … 127.0.1.254).
MAX_LOCAL_NODES = 254


def python_bin_dir() -> str:
    """The directory of this Python (the venv's ``bin``): put first on a job's ``PATH`` so
    that ``python`` and ``mpiexec`` in a job's command are the scheduler's own."""
    return str(Path(sys.executable).parent)


@dataclass(frozen=True)
class JobLaunch:
    """How to start one job.

    Attributes:
        job_id: the scheduler's numeric id (``JOBNAME``).
        argv: the command line (``argv[0]`` is looked up on ``PATH``).
        cwd: the working directory (absolute).
        stdout, stderr: files that receive the job's output (created or truncated).
    """

    job_id: int
    argv: tuple[str, ...]
    cwd: str
    stdout: Path
    stderr: Path


@runtime_checkable
class NodeBackend(Protocol):
    """The nodes jobs run on and how a job is started there (module docstring): logical
    nodes, ssh hosts, a Slurm partition."""

    def names(self) -> tuple[str, ...]:
        """The node names."""
        ...

    def scheduler_address(self) -> str:
        """The address the scheduler listens on and gives jobs as ``SCHEDULER_IP``."""
        ...

    def address(self, name: str) -> str:
        """The address of node ``name`` (where a job whose first node it is takes orders).

        Raises ``OSError`` when the name does not resolve.
        """
        ...

    def launch(self, job: JobLaunch, nodes: Sequence[str],
               env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Start ``job`` on ``nodes[0]`` with ``env`` added to its environment.

        Raises ``OSError`` when the command cannot be started.
        """
        ...


@runtime_checkable
class ResourceManager(Protocol):
    """Optional hooks of a node backend whose nodes a resource manager holds (Slurm).

    The server calls them when its backend has all of them; a backend without them (logical
    nodes, ssh hosts) works as before.  ``acquire`` and ``release`` run on the order
    threads, outside the server's lock, and may block for seconds; the others run under
    the lock and should be quick.
    """

    def arrange(self, nodes: Sequence[str]) -> list[str]:
        """The order to give a new job's nodes in (its first process runs on the first)."""
        ...

    def acquire(self, job_id: int, nodes: Sequence[str]) -> dict[str, Any]:
        """Make ``nodes`` the job's in the resource manager before a grow order is sent;
        return fields for the event log.  Raises ``OSError``: the grow is given up."""
        ...

    def release(self, job_id: int, nodes: Sequence[str]) -> dict[str, Any]:
        """Give ``nodes`` back after the job released its places there; return fields for
        the event log.  Raises ``OSError``: the nodes stay with the job."""
        ...

    def ended(self, job_id: int) -> None:
        """The job has ended: free whatever it still holds.  Never raises."""
        ...

    def job_info(self, job_id: int) -> dict[str, Any]:
        """Fields describing the job in the resource manager (status, start event)."""
        ...

    def close(self) -> None:
        """The server stops: free everything still held.  Never raises."""
        ...


def _popen(argv: Sequence[str], job: JobLaunch, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    flags = os.O_WRONLY | os.O_TRUNC  # mode 0600, never through a link (scheduler.private)
    with os.fdopen(open_private(job.stdout, flags), "wb") as out, \
            os.fdopen(open_private(job.stderr, flags), "wb") as err:
        return subprocess.Popen(list(argv), cwd=job.cwd, env=dict(env), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)


def source_towards(address: str) -> str:
    """The local address this machine sends from towards ``address`` (the kernel's route
    choice; a UDP socket is connected, no packet is sent): where a scheduler listens so that a
    job on that host reaches it.  (``apgaspy.hosts`` has its own, IPv4 only: the scheduler
    does not import the runtime.)

    Raises:
        OSError: no route to ``address``.
    """
    family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        s.connect((address, 9))
        return str(s.getsockname()[0])


def cores_option(text: str) -> int | str:
    """Read ``--cores-per-node``: a whole number >= 1 or ``auto``.

    Raises:
        ValueError: anything else.
    """
    if text.strip().lower() == "auto":
        return "auto"
    if not text.strip().isdigit() or int(text) < 1:
        raise ValueError(f"--cores-per-node is a whole number >= 1 or auto, got {text!r}")
    return int(text)


def ssh_nproc(ssh: Sequence[str], host: str, timeout_s: float = 30.0) -> int:
    """The number of CPUs ``host`` offers (``nproc`` run there through ``ssh``).

    Raises:
        OSError: ssh fails or times out, or ``nproc`` prints no positive number.
    """
    try:
        out = subprocess.run([*ssh, host, "nproc"], capture_output=True, text=True,
                             timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired:
        raise OSError(f"{host}: nproc over ssh did not answer in {timeout_s:g} s") from None
    words = out.stdout.split()
    if out.returncode != 0 or not words or not words[0].isdigit() or int(words[0]) < 1:
        raise OSError(f"{host}: nproc over ssh failed (exit {out.returncode}): "
                      f"{out.stderr.strip()[:200]}")
    return int(words[0])


class LocalNodes:
    """``n`` logical nodes of this machine: 127.0.1.1 … 127.0.1.n (1 ≤ n ≤ 254).

    Jobs are started here, with this process's environment plus the job's variables, and
    this Python's ``bin`` directory first on ``PATH``.

    Args:
        n: the number of nodes.
        cores_per_node: cores of each node (core ``j`` of node ``k`` is CPU ``(k*C + j) mod
            os.cpu_count()``; :func:`scheduler.resources.local_graph`), ``"auto"``: this
            machine's CPUs, or ``None``: each node one slot.  ``note`` says when the nodes
            share CPUs.

    Raises:
        ValueError: ``n`` outside 1-254, or a core count below 1.
    """

    def __init__(self, n: int, cores_per_node: int | str | None = None) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LOCAL_NODES:
            raise ValueError(f"LocalNodes: 1 to {MAX_LOCAL_NODES} logical nodes, got {n!r}")
        self._names = tuple(f"127.0.1.{k}" for k in range(1, n + 1))
        if cores_per_node == "auto":
            cores_per_node = os.cpu_count() or 1
        #: Cores of each node (a count), or None: a slot a node.
        self.cores_per_node: int | None = cores_per_node  # type: ignore[assignment]
        graph, note = local_graph(self._names, cores_per_node)  # type: ignore[arg-type]
        #: The nodes' cores, or None (a slot a node).
        self.graph: ResourceGraph | None = None if graph.slots else graph
        #: One line to say at start when the nodes share CPUs, or None.
        self.note = note

    @classmethod
    def named(cls, names: Sequence[str], cores_per_node: int | str | None = None) -> LocalNodes:
        """Logical nodes given by name (``127.0.1.k``: a child scheduler's, from the
        ``NODE_FILE`` its parent gave it, :mod:`scheduler.child`), their CPUs as if the
        first ``max k`` had been made.

        Raises:
            ValueError: no name, a name that is not a logical node's, or one twice.
        """
        if not names or len(set(names)) != len(names):
            raise ValueError(f"LocalNodes.named: distinct logical node names, got {names!r}")
        for name in names:
            _local_index(name)
        nodes = cls(1, cores_per_node)
        nodes._names = tuple(names)
        if nodes.graph is not None and nodes.cores_per_node is not None:
            nodes.graph = ResourceGraph(
                {n: local_cpus(_local_index(n) - 1, nodes.cores_per_node) for n in names})
        return nodes

    def __repr__(self) -> str:
        return f"LocalNodes({len(self._names)})"

    def names(self) -> tuple[str, ...]:
        """127.0.1.1 … 127.0.1.n."""
        return self._names

    def scheduler_address(self) -> str:
        """127.0.0.1: one loopback address, none of the nodes' (whose jobs use the same port)."""
        return "127.0.0.1"

    def address(self, name: str) -> str:
        """The name itself (the names are addresses)."""
        return name

    def add_node(self, name: str | None = None) -> tuple[str, tuple[int, ...] | None]:
        """Add a logical node: ``name`` (``127.0.1.k``, 1 ≤ k ≤ 254, not in use) or, for
        None, the lowest free one; returns ``(name, its CPUs)`` (core ``j`` of node ``k-1``
        is CPU ``((k-1)*C + j) mod os.cpu_count()``; None without a core count).

        Raises:
            ValueError: not a logical node's name, one in use, or no free address left.
        """
        if name is None:
            used = set(self._names)
            free = [f"127.0.1.{k}" for k in range(1, MAX_LOCAL_NODES + 1)
                    if f"127.0.1.{k}" not in used]
            if not free:
                raise ValueError(f"all {MAX_LOCAL_NODES} logical nodes are in use")
            name = free[0]
        k = _local_index(name)
        if name in self._names:
            raise ValueError(f"{name} is a node already")
        self._names = (*self._names, name)
        cpus = (None if self.cores_per_node is None
                else local_cpus(k - 1, self.cores_per_node))
        return name, cpus

    def forget_node(self, name: str) -> None:
        """Drop ``name`` (it left the pool); unknown names are ignored."""
        self._names = tuple(n for n in self._names if n != name)

    def launch(self, job: JobLaunch, nodes: Sequence[str],
               env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Start ``job.argv`` here, in its own session (see :class:`NodeBackend`)."""
        full = dict(os.environ)
        full.update(env)
        full["PATH"] = f"{python_bin_dir()}{os.pathsep}{full.get('PATH', '')}"
        return _popen(job.argv, job, full)


def _local_index(name: str) -> int:
    """k of a logical node's name ``127.0.1.k``.  Raises ``ValueError`` for anything else."""
    prefix, _, last = name.rpartition(".")
    if prefix != "127.0.1" or not last.isdigit() or not 1 <= int(last) <= MAX_LOCAL_NODES \
            or str(int(last)) != last:
        raise ValueError(f"{name!r} is not a logical node's name (127.0.1.1 ... "
                         f"127.0.1.{MAX_LOCAL_NODES})")
    return int(last)


class SshHosts:
    """Real hosts reached by ssh.

    Args:
        hosts: the host names (as the jobs will be given them in ``NODE_FILE``).
        ssh: the ssh command (a path, or a command line such as ``"ssh -p 2222"``).
        listen: the scheduler's address (``SCHEDULER_IP``); default: the address this machine
            uses to reach the first host.
        tty: start jobs with ``-t -t`` as the Java scheduler does (the job then gets SIGHUP
            when the connection ends, so ending the local ssh ends the job).

    Only the job's own variables (and ``PATH`` with this Python's directory first) are passed:
    ssh does not forward the scheduler's environment.  ``SCHEDULER_KEY`` is left out (it
    would show in ``ps``); the job reads its key from ``SCHEDULER_KEY_FILE``.

        cores_per_node: the hosts' cores: a count, ``"auto"`` (``nproc`` over ssh on each
            host, now), or ``None``: a slot a host.

    Raises:
        ValueError: no hosts, or a host named twice.
        OSError: ``cores_per_node="auto"`` and ``nproc`` fails on a host.
    """

    def __init__(self, hosts: Sequence[str], ssh: str = "ssh", *, listen: str | None = None,
                 tty: bool = True, cores_per_node: int | str | None = None) -> None:
        hosts = tuple(h.strip() for h in hosts if h.strip())
        if not hosts:
            raise ValueError("SshHosts: give at least one host")
        if len(set(hosts)) != len(hosts):
            raise ValueError(f"SshHosts: a host is named twice in {list(hosts)}")
        self._names = hosts
        self.ssh = tuple(shlex.split(ssh)) or ("ssh",)
        self.listen = listen
        self.tty = tty
        #: The hosts' cores (``cores_per_node``: a count, or ``"auto"``: ``nproc`` on each
        #: host, :func:`ssh_nproc`), or None: a slot a host.
        self.graph: ResourceGraph | None = None
        #: The ``cores_per_node`` given (a count, ``"auto"`` or None), for added hosts.
        self.cores_per_node = cores_per_node
        if cores_per_node == "auto":
            self.graph = ResourceGraph.counted({h: ssh_nproc(self.ssh, h) for h in hosts})
        elif cores_per_node is not None:
            self.graph = ResourceGraph.counted({h: int(cores_per_node) for h in hosts})

    def __repr__(self) -> str:
        return f"SshHosts({list(self._names)!r}, ssh={' '.join(self.ssh)!r})"

    def names(self) -> tuple[str, ...]:
        """The hosts as given."""
        return self._names

    def add_node(self, name: str | None = None) -> tuple[str, tuple[int, ...] | None]:
        """Add host ``name``: it must resolve and answer ``nproc`` over ssh (as at start,
        :func:`ssh_nproc`); returns ``(name, its cores 0…C-1)`` (C: ``nproc`` with ``auto``,
        else the count given), or ``(name, None)`` without a core count.

        Raises:
            ValueError: no name, or a host already in the pool.
            OSError: the host does not resolve, or ssh or ``nproc`` fails there.
        """
        if not name or not name.strip():
            raise ValueError("name the ssh host to add")
        name = name.strip()
        if name in self._names:
            raise ValueError(f"{name} is a host already")
        self.address(name)
        count = ssh_nproc(self.ssh, name)  # reachable, and what it offers
        self._names = (*self._names, name)
        if self.cores_per_node is None:
            return name, None
        return name, tuple(range(count if self.cores_per_node == "auto"
                                 else int(self.cores_per_node)))

    def forget_node(self, name: str) -> None:
        """Drop ``name`` (it left the pool); unknown names are ignored."""
        self._names = tuple(n for n in self._names if n != name)

    def scheduler_address(self) -> str:
        """``listen``, else the source address of a route to the first host.

        Raises ``OSError`` when the first host does not resolve.
        """
        return self.listen or source_towards(self.address(self._names[0]))

    def address(self, name: str) -> str:
        """The host's resolved address (``socket.gethostbyname``).

        Raises ``OSError`` (``socket.gaierror``) when it does not resolve.
        """
        return socket.gethostbyname(name)

    def command(self, job: JobLaunch, host: str, env: Mapping[str, str]) -> list[str]:
        """The local command line that starts ``job`` on ``host`` (without the job's key)."""
        assigns = [shlex.quote(f"{k}={v}") for k, v in env.items()
                   if k not in ("PATH", KEY_ENV)]
        path = shlex.quote(f"PATH={python_bin_dir()}{os.pathsep}") + '"$PATH"'
        remote = (f"cd {shlex.quote(job.cwd)} && exec env {path} {' '.join(assigns)} "
                  + " ".join(shlex.quote(a) for a in job.argv))
        return [*self.ssh, *(["-t", "-t"] if self.tty else []), host, remote]

    def launch(self, job: JobLaunch, nodes: Sequence[str],
               env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Start ``job`` on ``nodes[0]`` through ssh (see :class:`NodeBackend`)."""
        return _popen(self.command(job, nodes[0], env), job, os.environ)
