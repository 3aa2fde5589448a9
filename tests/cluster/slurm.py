"""A local Slurm cluster on this one machine, for tests and for trying things by hand.

The cluster has ``nodes`` node names (``n1`` .. ``nN``), all on this host (``NodeAddr=127.0.0.1``,
one ``slurmd -N nX`` each, on its own port, ``CPUs`` = this machine's CPU count), one partition
``test`` with all of them that hands out whole nodes (``OverSubscribe=EXCLUSIVE``: a node is
the unit a job grows or shrinks by), and (optionally) accounting through ``slurmdbd`` and a
private MariaDB.  Every file the cluster needs lives under one work dir::

    <workdir>/slurm.conf, slurmdbd.conf, plugstack.conf
    <workdir>/munge/    munge.key, munged socket, pid, log, seed
    <workdir>/mysql/    MariaDB datadir, socket, pid, log, init.sql
    <workdir>/state/    slurmctld state;  spool/<node>/  slurmd spool dirs
    <workdir>/log/      daemon logs (and their stdout/stderr);  run/  pid files

Nothing is written to /etc/slurm, /etc/munge or /run/munge: munged gets its own key, socket,
pid, log and seed paths, and Slurm finds that socket through ``AuthInfo=socket=...`` in
slurm.conf and slurmdbd.conf (and ``AccountingStoragePass=<socket>``, which 22.05 uses for the
connections to slurmdbd).  Client commands use the cluster through the environment only
(``SlurmCluster.env``: ``SLURM_CONF=<workdir>/slurm.conf``).

Daemons run in the foreground (``-D``/``-F``), each in its own session, with the environment
variable ``APGASPY_SLURM_WORKDIR=<workdir>`` as a marker; ``stop()`` kills them by pid and then
any process still carrying the marker (slurmctld's slurmscriptd, stray slurmstepds).  Running
clusters are recorded in ``/tmp/apgaspy-slurm.json`` so that ``remove_stale()`` can clean up
after a run that was killed before it could stop its cluster.

Needs root (slurmd runs jobs as any user; SlurmUser=root).  Use from pytest through the
session fixture ``slurm_cluster``, or by hand::

    python tests/cluster/slurm.py start [--dir D] [--nodes 4] [--no-accounting]
    eval "$(python tests/cluster/slurm.py start)"    # sets SLURM_CONF in this shell
    python tests/cluster/slurm.py stop
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

try:
    import pytest
except ImportError:  # the CLI also works without pytest
    pytest = None  # type: ignore[assignment]

STATE_FILE = Path("/tmp/apgaspy-slurm.json")
"""Where running clusters are recorded (a JSON object ``{"runs": [...]}``)."""

MARKER = "APGASPY_SLURM_WORKDIR"
"""Environment variable (value: the work dir) that marks every daemon of a cluster."""

CLUSTER_NAME = "apgaspy"
PARTITION = "test"
DAEMONS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mariadb-install-db")
CLIENTS = ("sinfo", "srun", "salloc", "sbatch", "scontrol", "squeue", "scancel", "sacctmgr")
_SEARCH = ("/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/sbin", "/usr/local/bin")
_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes; leave room

#: The test cluster's node names and their loopback addresses (``SCHEDULER_TEST_HOSTS``).
NODE_ADDRESSES = "n1=127.0.1.1,n2=127.0.1.2,n3=127.0.1.3,n4=127.0.1.4"
#: A name service for those names (:meth:`SlurmCluster.named_environ`): a real cluster's
#: node names resolve, the test cluster's do not, so every Python process of a run gets this
#: ``sitecustomize`` on ``PYTHONPATH`` and each job listens for orders on its first node's
#: own loopback address, as logical nodes do.
SITECUSTOMIZE = '''\
import os
import socket

_MAP = dict(item.split("=", 1) for item in
            os.environ.get("SCHEDULER_TEST_HOSTS", "").split(",") if "=" in item)
if _MAP:
    _byname, _byname_ex, _getaddrinfo = (socket.gethostbyname, socket.gethostbyname_ex,
                                         socket.getaddrinfo)

    def gethostbyname(host):
        return _MAP.get(host) or _byname(host)

    def gethostbyname_ex(host):
        return (host, [], [_MAP[host]]) if host in _MAP else _byname_ex(host)

    def getaddrinfo(host, *args, **kwargs):
        return _getaddrinfo(_MAP.get(host, host) if isinstance(host, str) else host,
                            *args, **kwargs)

    socket.gethostbyname = gethostbyname
    socket.gethostbyname_ex = gethostbyname_ex
    socket.getaddrinfo = getaddrinfo
'''


class ClusterError(RuntimeError):
    """The cluster could not be started (the message holds the tails of the daemons' logs)."""


# --------------------------------------------------------------------------- processes


def _which(name: str) -> str | None:
    """Absolute path of the executable ``name`` (PATH, then the usual sbin/bin dirs)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH])
    return shutil.which(name, path=path)


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """True when ``pid`` is a running (not zombie) process."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields is not None and len(fields) > 19 else None


def _cmdline(pid: int) -> list[str] | None:
    """The argument vector of ``pid``, or None when it cannot be read."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]]


def env_pids(name: str, value: str) -> list[int]:
    """Pids of live processes (this one left out) whose environment holds ``name=value``, as
    ``/proc/<pid>/environ`` shows it (the environment they started with)."""
    needle = f"{name}={value}".encode()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
        except OSError:
            continue
        if needle in env and _alive(int(entry)):
            out.append(int(entry))
    return out


def _marked_pids(workdir: Path) -> list[int]:
    """Pids of live processes whose environment holds ``MARKER=<workdir>``."""
    return env_pids(MARKER, str(workdir))


@dataclass
class _Daemon:
    """One process this module started (``proc`` only in the process that started it)."""

    name: str
    pid: int
    cmdline: list[str]
    start: int | None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def running(self) -> bool:
        """True while this very process (same pid, start time and command line) runs."""
        if self.proc is not None:
            self.proc.poll()  # reap it if it has ended
        return (_alive(self.pid) and _start_time(self.pid) == self.start
                and _cmdline(self.pid) == self.cmdline)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "cmdline": self.cmdline, "start": self.start}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> _Daemon:
        return cls(data["name"], int(data["pid"]), list(data["cmdline"]), data.get("start"))


def _signal_all(daemons: list[_Daemon], sig: signal.Signals) -> None:
    for d in daemons:
        if d.running():
            with contextlib.suppress(OSError):
                os.kill(d.pid, sig)


def _wait_all(daemons: list[_Daemon], timeout: float) -> list[_Daemon]:
    """Wait up to ``timeout`` s until none of ``daemons`` runs; return those still running."""
    deadline = time.monotonic() + timeout
    left = [d for d in daemons if d.running()]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [d for d in left if d.running()]
    return left


def _terminate(daemons: list[_Daemon], timeout: float) -> list[_Daemon]:
    """SIGTERM ``daemons``, SIGKILL those left after ``timeout`` s; return any survivors."""
    _signal_all(daemons, signal.SIGTERM)
    left = _wait_all(daemons, timeout)
    _signal_all(left, signal.SIGKILL)
    return _wait_all(left, 5.0)


def _kill_marked(workdir: Path, timeout: float = 3.0) -> None:
    """SIGTERM, then SIGKILL, every process still marked with ``workdir``."""
    pids = _marked_pids(workdir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            time.sleep(0.05)
            pids = [p for p in pids if _alive(p)]
        if not pids:
            return


# --------------------------------------------------------------------------- state file


@contextlib.contextmanager
def _state(path: Path = STATE_FILE) -> Iterator[dict[str, Any]]:
    """The state file's content, locked; what the block leaves in it is written back."""
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text()) if path.exists() else {}
        except (OSError, ValueError):
            data = {}
        data.setdefault("runs", [])
        yield data
        if data["runs"]:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(data, indent=1))
            tmp.replace(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _owner_alive(run: dict[str, Any]) -> bool:
    pid = int(run.get("owner_pid", 0))
    return pid > 0 and _alive(pid) and _start_time(pid) == run.get("owner_start")


def _stop_recorded(run: dict[str, Any], timeout: float = 10.0) -> list[int]:
    """Kill what the record ``run`` lists (checked by command line); return the pids killed."""
    daemons = [_Daemon.from_json(d) for d in run.get("daemons", [])]
    running = [d for d in daemons if d.running()]
    workdir = Path(run["workdir"])
    _terminate(running, timeout)
    _kill_marked(workdir)
    if run.get("owns_workdir"):
        shutil.rmtree(workdir, ignore_errors=True)
    return [d.pid for d in running]


def remove_stale(state_file: Path = STATE_FILE) -> list[int]:
    """Kill the daemons of earlier runs that were killed before they could stop their cluster.

    A run is stale when the process that started it (pytest, a script) no longer runs; runs
    started with the CLI (``start``) are kept until ``stop``.  A recorded pid is only killed
    while its start time and command line still match the record.  Work dirs the runs made
    are removed.  Returns the pids killed (empty when there was nothing to do).
    """
    killed: list[int] = []
    with _state(state_file) as data:
        keep = []
        for run in data["runs"]:
            if run.get("persistent") or _owner_alive(run):
                keep.append(run)
            else:
                killed += _stop_recorded(run)
        data["runs"] = keep
    return killed


# --------------------------------------------------------------------------- the cluster


def unavailable() -> str | None:
    """Why a local Slurm cluster cannot be started here, or None when it can.

    Checks that this process runs as root and that the daemons (slurmctld, slurmd, slurmdbd,
    munged, mariadbd, mariadb-install-db) and the clients (sinfo, srun, salloc, scontrol,
    squeue, scancel, sacctmgr) are installed.  The reason suits ``pytest.skip(reason)``.
    """
    if sys.platform != "linux":
        return f"a local Slurm cluster needs Linux, not {sys.platform}"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd runs jobs as their user)"
    missing = [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]
    if missing:
        return f"Slurm/munge/MariaDB programs not installed: {', '.join(missing)}"
    return None


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range of source ports for outgoing connections (``ip_local_port_range``)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as fh:
            lo, hi = (int(x) for x in fh.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def _free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that were free on every address a moment ago.

    They are drawn below the ephemeral range: a port from ``bind(0)`` lies inside it, where
    any outgoing connection of another test (ZeroMQ, MPI, ssh) may take it as its source port
    before the daemon binds it ("Address already in use", seen once in a full-suite run).
    """
    lo, _ = _ephemeral_range()
    low = 10000 if lo > 12000 else 1024
    rng = secrets.SystemRandom()
    ports: list[int] = []
    while len(ports) < count:
        port = rng.randrange(low, lo)
        if port in ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        ports.append(port)
    return ports


def _listening(port: int) -> bool:
    """True when some socket listens on TCP ``port`` (read from /proc/net/tcp{,6})."""
    want = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as fh:
                next(fh, None)
                for line in fh:
                    parts = line.split()
                    if len(parts) > 3 and parts[3] == "0A" and parts[1].endswith(want):
                        return True
        except OSError:
            continue
    return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


class SlurmCluster:
    """A running local Slurm cluster (made by ``start_slurm``; stop it with ``stop()``).

    Attributes:
        workdir: the directory that holds every file of the cluster.
        nodes: node names, ``["n1", ..., "nN"]``.
        partition: the one partition (default partition, all nodes).
        env: variables to merge into ``os.environ`` for Slurm clients
            (``{"SLURM_CONF": "<workdir>/slurm.conf"}``); ``environ()`` does the merge.
        accounting: whether slurmdbd (and MariaDB) run.
        ports: TCP ports on 127.0.0.1 by daemon (``"slurmctld"``, ``"slurmdbd"``,
            ``"mariadb"``, ``"slurmd-n1"``, ...).
        setup_seconds: wall time of ``start_slurm`` from its call until ``sinfo`` showed
            every node idle, in seconds.
        owns_workdir: whether ``stop()`` removes ``workdir`` (``start_slurm`` made it).
    """

    def __init__(self, workdir: Path, nodes: list[str], *, accounting: bool,
                 owns_workdir: bool, ports: dict[str, int]) -> None:
        self.workdir = workdir
        self.nodes = nodes
        self.partition = PARTITION
        self.accounting = accounting
        self.owns_workdir = owns_workdir
        self.ports = ports
        self.env: dict[str, str] = {"SLURM_CONF": str(workdir / "slurm.conf")}
        self.setup_seconds = 0.0
        self._daemons: list[_Daemon] = []
        self._stopped = False

    # ---- information

    @property
    def pids(self) -> dict[str, int]:
        """Pid of each daemon started, by name (``"munged"``, ``"slurmd-n1"``, ...)."""
        return {d.name: d.pid for d in self._daemons}

    def environ(self, **extra: str) -> dict[str, str]:
        """A full environment for a Slurm client of this cluster.

        ``os.environ`` without variables of an enclosing job (``SLURM_*`` except
        ``SLURM_CONF``), with ``env`` and then ``extra`` merged in.
        """
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SALLOC_",
                                                                          "SBATCH_", "SRUN_"))}
        env.pop(MARKER, None)
        env.update(self.env)
        env.update(extra)
        return env

    def named_environ(self, shim_dir: Path, root: Path, **extra: str) -> dict[str, str]:
        """:meth:`environ` for apgaspy's scheduler and jobs on this cluster: the name service
        of :data:`SITECUSTOMIZE` (written to ``shim_dir/sitecustomize.py``) and ``root`` (the
        source tree) first on ``PYTHONPATH``, ``SCHEDULER_TEST_HOSTS``, no ``APGAS_PLACES``;
        then ``extra``."""
        shim_dir.mkdir(parents=True, exist_ok=True)
        (shim_dir / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env = self.environ(PYTHONPATH=os.pathsep.join((str(shim_dir), str(root))),
                           SCHEDULER_TEST_HOSTS=NODE_ADDRESSES, **extra)
        env.pop("APGAS_PLACES", None)
        return env

    def run(self, *args: str, timeout: float = 30.0, check: bool = True,
            input: str | None = None, env: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        """Run a command (e.g. ``"sinfo", "-h"``) against this cluster and wait for it.

        ``env`` is merged over ``environ()``.  Output is captured as text.  Raises
        ``subprocess.CalledProcessError`` when ``check`` and the exit status is not 0, and
        ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the command is killed).
        """
        return subprocess.run(list(args), env=self.environ(**(env or {})), input=input,
                              capture_output=True, text=True, timeout=timeout, check=check,
                              stdin=None if input is not None else subprocess.DEVNULL)

    def node_states(self) -> dict[str, str]:
        """State of each node as ``sinfo`` shows it (``{"n1": "idle", ...}``)."""
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", timeout=10).stdout
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def settle(self, timeout: float = 30.0) -> None:
        """Cancel every job left over and wait until every node is ``idle`` again.

        A job that just ended leaves its nodes ``comp`` (completing) until slurmd has run the
        epilog and told slurmctld, which under load takes a few seconds; a test that counts
        idle nodes starts only after that.  Raises ``ClusterError`` after ``timeout`` seconds,
        with the tail of slurmctld's log.
        """
        deadline = time.monotonic() + timeout
        self._cancel_jobs(timeout)
        self._wait("every node idle in sinfo", self._all_idle, deadline, None,
                   [self.workdir / "log" / "slurmctld.log"])

    def _all_idle(self) -> bool:
        """True when sinfo lists exactly this cluster's nodes, every one ``idle``."""
        try:
            states = self.node_states()
        except (subprocess.SubprocessError, ValueError):
            return False
        return sorted(states) == sorted(self.nodes) and set(states.values()) == {"idle"}

    # ---- starting (used by start_slurm)

    def _spawn(self, name: str, argv: list[str], log: Path) -> _Daemon:
        env = self.environ(**{MARKER: str(self.workdir)})
        with open(log, "ab") as out:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    cwd=self.workdir)
        # Popen returns once exec succeeded: /proc shows the daemon itself.
        daemon = _Daemon(name, proc.pid, list(argv), _start_time(proc.pid), proc)
        self._daemons.append(daemon)
        return daemon

    def _wait(self, what: str, ready: Callable[[], bool], deadline: float,
              daemon: _Daemon | None, logs: list[Path]) -> None:
        """Poll ``ready`` until true; raise ClusterError when ``daemon`` ends or time is up."""
        delay = 0.01
        while not ready():
            if daemon is not None and daemon.proc is not None and daemon.proc.poll() is not None:
                raise ClusterError(f"{daemon.name} exited with status {daemon.proc.returncode}"
                                   f" while waiting for {what}" + self._logs(logs))
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out waiting for {what}" + self._logs(logs))
            time.sleep(delay)
            delay = min(delay * 1.5, 0.1)

    @staticmethod
    def _logs(paths: list[Path]) -> str:
        return "".join(f"\n--- {p}\n{_tail(p)}" for p in paths if p.exists())

    def _record(self, persistent: bool, state_file: Path = STATE_FILE) -> None:
        """Write (or replace) this cluster's entry in the state file."""
        run = {"workdir": str(self.workdir), "owns_workdir": self.owns_workdir,
               "persistent": persistent, "owner_pid": os.getpid(),
               "owner_start": _start_time(os.getpid()),
               "nodes": self.nodes, "env": self.env, "accounting": self.accounting,
               "ports": self.ports, "setup_seconds": self.setup_seconds,
               "daemons": [d.to_json() for d in self._daemons]}
        with _state(state_file) as data:
            data["runs"] = [r for r in data["runs"] if r["workdir"] != str(self.workdir)]
            data["runs"].append(run)

    def _unrecord(self, state_file: Path = STATE_FILE) -> None:
        with _state(state_file) as data:
            data["runs"] = [r for r in data["runs"] if r["workdir"] != str(self.workdir)]

    # ---- stopping

    def _cancel_jobs(self, timeout: float) -> None:
        """Cancel every job and wait (up to ``timeout`` s) until none is left."""
        ctld = [d for d in self._daemons if d.name == "slurmctld"]
        if not ctld or not ctld[0].running():
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                out = self.run("squeue", "-h", "-o", "%i %T", timeout=5, check=False).stdout
            except subprocess.TimeoutExpired:
                return
            jobs = [line.split()[0] for line in out.splitlines() if line.strip()]
            if not jobs:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.run("scancel", *jobs, timeout=5, check=False)
            time.sleep(0.2)
        # Let the slurmstepds end their tasks before their slurmd goes.
        while time.monotonic() < deadline and any(
                (_cmdline(p) or [""])[0].startswith("slurmstepd")
                for p in _marked_pids(self.workdir)):
            time.sleep(0.05)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel all jobs, stop every daemon started, remove the work dir if it was made.

        Daemons get SIGTERM (slurmd and slurmctld first, then slurmdbd, then MariaDB and
        munged) and SIGKILL after ``timeout`` s; then any process still marked with this
        work dir (slurmscriptd, slurmstepd) is killed too.  Returns once none of them runs.
        Idempotent; never raises for daemons that are already gone.
        """
        if self._stopped:
            return
        self._stopped = True
        self._cancel_jobs(min(timeout, 10.0))
        order = (("slurmd", "slurmctld"), ("slurmdbd",), ("mariadbd", "munged",
                                                           "mariadb-install-db"))
        for names in order:  # slurmd-n1 .. slurmd-nN count as "slurmd"
            _terminate([d for d in self._daemons
                        if ("slurmd" if d.name.startswith("slurmd-") else d.name) in names],
                       timeout)
        _kill_marked(self.workdir)
        for d in self._daemons:
            if d.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    d.proc.wait(1.0)
        if self.owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self._unrecord()

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"SlurmCluster(workdir={str(self.workdir)!r}, nodes={self.nodes!r}, "
                f"accounting={self.accounting}, stopped={self._stopped})")

    @classmethod
    def _from_record(cls, run: dict[str, Any]) -> SlurmCluster:
        cluster = cls(Path(run["workdir"]), list(run["nodes"]), accounting=run["accounting"],
                      owns_workdir=run["owns_workdir"], ports=dict(run["ports"]))
        cluster.env = dict(run["env"])
        cluster.setup_seconds = float(run.get("setup_seconds", 0.0))
        cluster._daemons = [_Daemon.from_json(d) for d in run["daemons"]]
        return cluster


# --------------------------------------------------------------------------- configuration

_MARIADB_OPTS = ["--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M",
                 "--skip-name-resolve"]


def _slurm_conf(c: SlurmCluster, host: str, cpus: int, munge_socket: Path) -> str:
    w = c.workdir
    lines = [
        f"ClusterName={CLUSTER_NAME}",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={c.ports['slurmctld']}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "CredType=cred/munge",
        f"StateSaveLocation={w}/state",
        f"SlurmdSpoolDir={w}/spool/%n",
        f"SlurmctldPidFile={w}/run/slurmctld.pid",
        f"SlurmdPidFile={w}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={w}/log/slurmctld.log",
        f"SlurmdLogFile={w}/log/slurmd-%n.log",
        f"PlugStackConfig={w}/plugstack.conf",
        f"TmpFS={w}/tmp",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=permit_job_expansion",
        "SlurmdParameters=config_overrides",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmctldTimeout=10",
        "SlurmdTimeout=30",
        "MessageTimeout=10",
        "TCPTimeout=2",
        "KillWait=2",
        "MinJobAge=10",
        "InactiveLimit=0",
        "Waittime=0",
        "UnkillableStepTimeout=20",
        "JobCompType=jobcomp/none",
    ]
    if c.accounting:
        # With auth/munge, AccountingStoragePass names the munge socket used towards
        # slurmdbd (AuthInfo is not used for those connections in 22.05).
        lines += ["AccountingStorageType=accounting_storage/slurmdbd",
                  "AccountingStorageHost=127.0.0.1",
                  f"AccountingStoragePass={munge_socket}",
                  f"AccountingStoragePort={c.ports['slurmdbd']}"]
    else:
        lines += ["AccountingStorageType=accounting_storage/none"]
    for node in c.nodes:
        lines.append(f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 "
                     f"Port={c.ports['slurmd-' + node]} CPUs={cpus} State=UNKNOWN")
    # Whole nodes per job: a node is the unit a job grows or shrinks by.
    lines.append(f"PartitionName={PARTITION} Nodes={','.join(c.nodes)} Default=YES "
                 "MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE")
    return "\n".join(lines) + "\n"


def _slurmdbd_conf(c: SlurmCluster, host: str, munge_socket: Path, password: str) -> str:
    w = c.workdir
    return "\n".join([
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        f"DbdHost={host}",
        "DbdAddr=127.0.0.1",
        f"DbdPort={c.ports['slurmdbd']}",
        "SlurmUser=root",
        f"PidFile={w}/run/slurmdbd.pid",
        f"LogFile={w}/log/slurmdbd.log",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={c.ports['mariadb']}",
        "StorageUser=slurm",
        f"StoragePass={password}",
        "StorageLoc=slurm_acct_db",
    ]) + "\n"


def _init_sql(password: str) -> str:
    sql = ["CREATE DATABASE IF NOT EXISTS slurm_acct_db;"]
    for host in ("127.0.0.1", "localhost"):
        sql += [f"CREATE USER IF NOT EXISTS 'slurm'@'{host}' IDENTIFIED BY '{password}';",
                f"GRANT ALL ON slurm_acct_db.* TO 'slurm'@'{host}';"]
    return "\n".join(sql) + "\n"


def _prepare_workdir(workdir: str | os.PathLike[str] | None) -> tuple[Path, bool]:
    """The work dir to use (made when needed) and whether this module made it."""
    if workdir is None:
        return Path(tempfile.mkdtemp(prefix="apgaspy-slurm-")), True
    path = Path(workdir).absolute()
    if not path.exists():
        path.mkdir(mode=0o700, parents=True)
        return path, True
    if not path.is_dir():
        raise ClusterError(f"{path} is not a directory")
    entries = list(path.iterdir())
    if entries and not (path / ".apgaspy-slurm").exists():
        raise ClusterError(f"{path} is neither empty nor the work dir of an earlier cluster")
    if _marked_pids(path):
        raise ClusterError(f"daemons of an earlier cluster still run in {path}; stop them")
    for entry in entries:  # an earlier cluster's files: start afresh
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return path, False


def start_slurm(workdir: str | os.PathLike[str] | None = None, nodes: int = 4, *,
                accounting: bool = True, timeout: float = 60.0) -> SlurmCluster:
    """Start a local Slurm cluster with ``nodes`` node names and wait until all are idle.

    Args:
        workdir: directory for every file of the cluster.  None: a fresh temporary dir,
            removed by ``stop()``.  A path that does not exist is made (and removed by
            ``stop()``); an existing one must be empty or an earlier cluster's work dir
            (whose files are then replaced; the dir is kept by ``stop()``).
        nodes: number of node names, ``n1`` .. ``nN`` (1 or more); each has ``CPUs`` equal
            to this machine's CPU count (``nproc``).
        accounting: run MariaDB and slurmdbd and use ``accounting_storage/slurmdbd``;
            False: ``accounting_storage/none`` (faster, no sacct/sacctmgr).
        timeout: seconds allowed for the whole start.

    Returns:
        The running cluster (also recorded in ``STATE_FILE``); ``setup_seconds`` says how
        long the start took.

    Raises:
        ClusterError: unavailable here (see ``unavailable()``), bad ``workdir``, a daemon
            exited or was not ready within ``timeout``.  Whatever was started is stopped
            again first.
        ValueError: ``nodes`` < 1.
    """
    if nodes < 1:
        raise ValueError(f"nodes must be at least 1, not {nodes}")
    reason = unavailable()
    if reason is not None:
        raise ClusterError(reason)
    t0 = time.monotonic()
    deadline = t0 + timeout
    path, owns = _prepare_workdir(workdir)
    names = [f"n{i}" for i in range(1, nodes + 1)]
    port_names = ["slurmctld", *(f"slurmd-{n}" for n in names)]
    if accounting:
        port_names += ["slurmdbd", "mariadb"]
    cluster = SlurmCluster(path, names, accounting=accounting, owns_workdir=owns,
                           ports=dict(zip(port_names, _free_ports(len(port_names)),
                                          strict=True)))
    try:
        _start(cluster, deadline)
    except BaseException:
        cluster.stop()
        raise
    cluster.setup_seconds = time.monotonic() - t0
    cluster._record(persistent=False)
    return cluster


def _start(c: SlurmCluster, deadline: float) -> None:
    """Write the configuration and start the daemons of ``c`` in order (see start_slurm)."""
    w = c.workdir
    os.chmod(w, 0o755)  # munged wants its socket dir and all above it searchable by all
    (w / ".apgaspy-slurm").write_text("work dir of a local Slurm cluster (tests/cluster)\n")
    # munged's socket dir, and slurmd's spool dirs (as a site's /var/spool/slurmd): the
    # batch script of another user's job is run from there
    for sub in ("munge", "mysql", "state", "spool", "log", "run", "tmp"):
        (w / sub).mkdir(mode=0o755 if sub in ("munge", "spool") else 0o700)
    for node in c.nodes:
        (w / "spool" / node).mkdir(mode=0o755)
    munge_socket = w / "munge" / "munge.socket"
    if max(len(str(munge_socket)), len(str(w / "mysql/mysqld.sock"))) > _MAX_SOCKET_PATH:
        raise ClusterError(f"work dir path too long for a unix socket: {w}")
    host = socket.gethostname().split(".")[0]
    cpus = len(os.sched_getaffinity(0)) or 1  # what nproc says
    log = w / "log"
    # The Slurm configuration.  slurmdbd reads slurmdbd.conf next to $SLURM_CONF.
    (w / "slurm.conf").write_text(_slurm_conf(c, host, cpus, munge_socket))
    (w / "plugstack.conf").write_text("")

    # munged: a key of our own; no /etc/munge, /run/munge or /var/lib/munge.
    key = w / "munge" / "munge.key"
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secrets.token_bytes(1024))
    munged = c._spawn("munged", [
        _which("munged") or "munged", "-F", f"--socket={munge_socket}", f"--key-file={key}",
        f"--pid-file={w}/munge/munged.pid", f"--log-file={w}/munge/munged.log",
        f"--seed-file={w}/munge/munged.seed", "--num-threads=2"], log / "munged.out")

    install = None
    if c.accounting:
        password = secrets.token_hex(12)
        slurmdbd_conf = w / "slurmdbd.conf"
        fd = os.open(slurmdbd_conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as conf:
            conf.write(_slurmdbd_conf(c, host, munge_socket, password))
        (w / "mysql" / "init.sql").write_text(_init_sql(password))
        # mariadb-install-db runs while munged starts.
        install = c._spawn("mariadb-install-db", [
            _which("mariadb-install-db") or "mariadb-install-db", "--no-defaults",
            f"--datadir={w}/mysql/data", "--user=root", "--skip-test-db",
            "--auth-root-authentication-method=socket", *_MARIADB_OPTS],
            log / "mariadb-install-db.out")

    c._wait("munged's socket", munge_socket.exists, deadline, munged,
            [log / "munged.out", w / "munge" / "munged.log"])

    if install is not None and install.proc is not None:
        installer = install.proc
        c._wait("mariadb-install-db", lambda: installer.poll() is not None, deadline,
                None, [])
        if installer.returncode != 0:
            raise ClusterError("mariadb-install-db failed"
                               + c._logs([log / "mariadb-install-db.out"]))
        c._daemons.remove(install)
        mariadbd = c._spawn("mariadbd", [
            _which("mariadbd") or "mariadbd", "--no-defaults", "--user=root",
            f"--datadir={w}/mysql/data", f"--socket={w}/mysql/mysqld.sock",
            f"--pid-file={w}/mysql/mysqld.pid", f"--log-error={w}/log/mariadbd.log",
            f"--tmpdir={w}/tmp", "--bind-address=127.0.0.1", f"--port={c.ports['mariadb']}",
            f"--init-file={w}/mysql/init.sql", "--skip-log-bin",
            "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0", *_MARIADB_OPTS],
            log / "mariadbd.out")
        c._wait("MariaDB", lambda: _listening(c.ports["mariadb"]), deadline, mariadbd,
                [log / "mariadbd.out", log / "mariadbd.log"])
        slurmdbd = c._spawn("slurmdbd", [_which("slurmdbd") or "slurmdbd", "-D"],
                            log / "slurmdbd.out")
        c._wait("slurmdbd", lambda: _listening(c.ports["slurmdbd"]), deadline, slurmdbd,
                [log / "slurmdbd.out", log / "slurmdbd.log"])

    slurmctld = c._spawn("slurmctld", [_which("slurmctld") or "slurmctld", "-D", "-i",
                                       "-f", str(w / "slurm.conf")], log / "slurmctld.out")
    c._wait("slurmctld", lambda: _listening(c.ports["slurmctld"]), deadline, slurmctld,
            [log / "slurmctld.out", log / "slurmctld.log"])
    slurmds = [c._spawn(f"slurmd-{node}", [_which("slurmd") or "slurmd", "-D", "-N", node,
                                           "-f", str(w / "slurm.conf")],
                        log / f"slurmd-{node}.out") for node in c.nodes]

    def all_idle() -> bool:
        for d in slurmds:
            if d.proc is not None and d.proc.poll() is not None:
                raise ClusterError(f"{d.name} exited with status {d.proc.returncode}"
                                   + c._logs([log / f"{d.name}.out", log / f"{d.name}.log"]))
        return c._all_idle()

    c._wait("all nodes idle in sinfo", all_idle, deadline, slurmctld,
            [log / "slurmctld.log", *(log / f"slurmd-{n}.log" for n in c.nodes)])


# --------------------------------------------------------------------------- pytest fixture

if pytest is not None:

    @pytest.fixture(scope="session")
    def slurm_session() -> Iterator[SlurmCluster]:
        """A local Slurm cluster for the test session (4 nodes, accounting); skips when
        ``unavailable()`` says why it cannot run; removes stale runs before starting."""
        reason = unavailable()
        if reason is not None:
            pytest.skip(reason)
        remove_stale()
        cluster = start_slurm()
        try:
            yield cluster
        finally:
            cluster.stop()

    @pytest.fixture
    def slurm_cluster(slurm_session: SlurmCluster) -> SlurmCluster:
        """The session's Slurm cluster, settled for this test: no job of an earlier test is
        left and every node is idle (not still completing an earlier job)."""
        slurm_session.settle()
        return slurm_session


# --------------------------------------------------------------------------- CLI


def _become_subreaper() -> None:
    """Make orphans below this process (slurmstepd, slurmscriptd) its children to reap."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _cli_start(args: argparse.Namespace) -> int:
    """Start a cluster in a child that stays behind as the daemons' parent.

    The child (in its own session, output to /dev/null, a child subreaper) starts the
    cluster, reports it to this process through a pipe and then only reaps: so daemons (and
    the slurmstepds they leave) stopped later leave no zombies behind.  It exits once all
    its children are gone.
    """
    reason = unavailable()
    if reason is not None:
        print(f"cannot start Slurm here: {reason}", file=sys.stderr)
        return 1
    remove_stale()
    _cli_stop_all()  # one by-hand cluster at a time
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the supervisor
        os.close(read_end)
        os.setsid()
        _become_subreaper()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        try:
            cluster = start_slurm(args.dir, args.nodes, accounting=not args.no_accounting,
                                  timeout=args.timeout)
            cluster._record(persistent=True)
            report: dict[str, Any] = {"env": cluster.env, "workdir": str(cluster.workdir),
                                      "nodes": cluster.nodes,
                                      "setup_seconds": cluster.setup_seconds}
        except BaseException as exc:  # reported to the parent
            report = {"error": str(exc) or type(exc).__name__}
        with os.fdopen(write_end, "w") as fh:
            fh.write(json.dumps(report))
        while True:
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                os._exit(0)
            except InterruptedError:
                continue
    os.close(write_end)
    with os.fdopen(read_end) as fh:
        text = fh.read()
    report = json.loads(text) if text else {"error": "the starting process died"}
    if "error" in report:
        print(f"cannot start Slurm: {report['error']}", file=sys.stderr)
        return 1
    for key, value in report["env"].items():
        print(f"export {key}={value}")
    print(f"# {len(report['nodes'])} nodes idle after {report['setup_seconds']:.2f} s; work dir "
          f"{report['workdir']}; stop: python {Path(__file__)} stop", file=sys.stderr)
    return 0


def _cli_stop_all() -> list[str]:
    stopped = []
    with _state() as data:
        runs = [r for r in data["runs"] if r.get("persistent")]
    for run in runs:
        SlurmCluster._from_record(run).stop()
        stopped.append(run["workdir"])
    return stopped


def _cli_stop(args: argparse.Namespace) -> int:
    stale = remove_stale()
    stopped = _cli_stop_all()
    for workdir in stopped:
        print(f"stopped the cluster in {workdir}", file=sys.stderr)
    if stale:
        print(f"killed stale daemons: {stale}", file=sys.stderr)
    if not stopped and not stale:
        print("no cluster was running", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line: ``start [--dir D] [--nodes N] [--no-accounting] [--timeout S]``, ``stop``.

    ``start`` prints ``export SLURM_CONF=...`` lines on stdout and exits with the daemons
    running (recorded as a by-hand cluster); ``stop`` stops it (and stale runs).  Returns
    the exit status.
    """
    parser = argparse.ArgumentParser(prog="slurm.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start a cluster and leave it running")
    start.add_argument("--dir", help="work dir (default: a fresh temporary dir)")
    start.add_argument("--nodes", type=int, default=4, help="number of nodes (default 4)")
    start.add_argument("--no-accounting", action="store_true",
                       help="no slurmdbd/MariaDB (accounting_storage/none)")
    start.add_argument("--timeout", type=float, default=60.0, help="seconds (default 60)")
    start.set_defaults(func=_cli_start)
    stop = sub.add_parser("stop", help="stop the cluster started with 'start'")
    stop.set_defaults(func=_cli_stop)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
