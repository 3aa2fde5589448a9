"""A real multi-host test cluster made of Linux network namespaces.

Each host is a network namespace ``<prefix>-h<k>`` with its own hostname (``h<k>``), its own
``/etc/hosts`` (``/etc/netns/<ns>/hosts``, bind-mounted by ``ip netns exec``), one address
``10.231.7.<k>`` on a private subnet, and one sshd on port 22.  The hosts are joined through
veth pairs to a bridge that lives in its own namespace ``<prefix>-br``; the root namespace
gets no interface in the subnet and no host has a default route, so nothing leaves the
cluster.  A client key made for the run and an ssh wrapper (``Cluster.ssh``) let one host log
in to another, as MPICH's Hydra does (``mpiexec -launcher-exec <wrapper> -hosts h1,h2 ...``).

Processes run "on" a host through ``nsenter`` into the namespaces of that host's sshd
(network, UTS and mount, the last one holding the per-host ``/etc/hosts``)::

    with start_cluster(3) as cluster:
        out = cluster.host("h1").run(["getent", "hosts", "h2"], timeout=10)

Everything needs root.  ``unavailable()`` says why a cluster cannot be made here;
``remove_stale()`` removes what a killed run left behind (its state lives in
``/tmp/apgaspy-netns-<prefix>.json``).  As a script::

    python tests/cluster/netns.py up [-n 3] [--prefix apgt]   # leaves the cluster up
    python tests/cluster/netns.py down [--prefix apgt]        # removes it
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

SUBNET = "10.231.7.0/24"
"""The default private subnet of a cluster (hosts get .1, .2, ...)."""

MPI_NETWORK_ENV = {"UCX_TLS": "tcp,self"}
"""Environment for MPICH (ch4:ucx) ranks on different hosts to talk over the cluster network.

MPI works without it, but UCX then finds the ranks on one machine (one kernel) and connects
them through shared memory (sysv/cma), so no byte crosses the bridge.
"""

SSHD = "/usr/sbin/sshd"
NETNS_ETC = Path("/etc/netns")
RUN_NETNS = Path("/run/netns")
STATE_DIR = Path(tempfile.gettempdir())
CLONE_NEWNET = 0x40000000
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_TOOLS = ("ip", "unshare", "nsenter", "ssh", "ssh-keygen", "hostname", "sh")


class ClusterError(RuntimeError):
    """A cluster could not be set up or torn down."""


class ClusterBusyError(ClusterError):
    """The prefix belongs to a cluster whose owning process still runs."""


# ---------------------------------------------------------------------------------------------
# small helpers


def _sh(args: Sequence[str], *, input: str | None = None, timeout: float = 30,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a set-up command (not in a namespace); raise ClusterError when it fails."""
    proc = subprocess.run(list(args), input=input, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise ClusterError(f"{' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def _start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot), None when it does not run."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _alive(pid: int) -> bool:
    return _start_time(pid) is not None


def _descendants(pid: int) -> list[int]:
    """Pids of all processes below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _kill(pids: Collection[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything below it."""
    _kill([pid, *_descendants(pid)])


def _ns_pids(ns: str) -> list[int]:
    """Pids of the processes in network namespace ``ns`` (``ip netns pids``); [] if none."""
    proc = _sh(["ip", "netns", "pids", ns], check=False)
    return [int(word) for word in proc.stdout.split() if word.isdigit()]


def _existing_namespaces() -> list[str]:
    proc = _sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]


def _kill_namespaces(namespaces: Collection[str], timeout: float = 10.0) -> list[int]:
    """SIGKILL every process in ``namespaces`` until none is left; return survivors' pids."""
    deadline = time.monotonic() + timeout
    present = set(_existing_namespaces())
    names = [ns for ns in namespaces if ns in present]
    while True:
        pids = sorted({pid for ns in names for pid in _ns_pids(ns)})
        if not pids or time.monotonic() > deadline:
            return pids
        _kill(pids)
        time.sleep(0.02)


def _state_path(prefix: str) -> Path:
    return STATE_DIR / f"apgaspy-netns-{prefix}.json"


def _read_state(prefix: str) -> dict[str, Any] | None:
    try:
        return json.loads(_state_path(prefix).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_state(prefix: str, state: Mapping[str, Any]) -> None:
    path = _state_path(prefix)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
    os.replace(tmp, path)


def _owner_alive(state: Mapping[str, Any] | None) -> int | None:
    """The pid of the state's owning process when that process still runs, else None."""
    owner = (state or {}).get("owner")
    if not owner:
        return None
    pid, start = int(owner["pid"]), owner.get("start")
    return pid if _start_time(pid) == start else None


def _teardown(prefix: str, namespaces: Collection[str], tmpdir: str | None,
              timeout: float = 10.0) -> list[str]:
    """Kill, delete and remove everything named; return what could not be removed."""
    problems: list[str] = []
    survivors = _kill_namespaces(namespaces, timeout)
    if survivors:
        problems.append(f"processes still running in the namespaces: {survivors}")
    present = set(_existing_namespaces())
    gone = [ns for ns in namespaces if ns in present]
    if gone:
        _sh(["ip", "-force", "-batch", "-"], check=False,
            input="".join(f"netns del {ns}\n" for ns in gone))
    # Veths live in the namespaces and die with them; a set-up killed half-way may have left
    # one end in the root namespace.
    links = _sh(["ip", "-o", "link", "show"], check=False).stdout
    for match in re.finditer(rf"^\d+: ({re.escape(prefix)}-[^:@\s]+)", links, re.M):
        _sh(["ip", "link", "del", match.group(1)], check=False)
    for ns in namespaces:
        shutil.rmtree(NETNS_ETC / ns, ignore_errors=True)
    with contextlib.suppress(OSError):
        NETNS_ETC.rmdir()  # only when empty: other clusters may still use it
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)
    left = set(_existing_namespaces()) & set(namespaces)
    if left:
        problems.append(f"namespaces not deleted: {sorted(left)}")
    return problems


def _wait_carrier(namespaces: Sequence[str], deadline: float) -> None:
    """Wait until ``eth0`` of every namespace is running (operstate UP, carrier on).

    The kernel reports a new veth's carrier up to a second or more after ``link set up``
    (linkwatch); meanwhile TCP works, but UCX, MPICH's network layer, skips interfaces that
    are not running and a place started then cannot be reached by MPI from other hosts.

    Raises:
        ClusterError: not all are running by ``deadline`` (``time.monotonic()``).
    """
    todo = list(namespaces)
    while todo:
        ns = todo[0]
        out = _sh(["ip", "-j", "-n", ns, "link", "show", "eth0"], check=False).stdout
        try:
            link = json.loads(out)[0]
        except (ValueError, IndexError):
            link = {}
        if link.get("operstate") == "UP" and "NO-CARRIER" not in link.get("flags", []):
            todo.pop(0)
            continue
        if time.monotonic() > deadline:
            raise ClusterError(f"eth0 of {ns} is not running: {link}")
        time.sleep(0.02)


def _setns_connect(ns: str, addresses: Sequence[str], port: int, deadline: float,
                   alive: Callable[[], str | None]) -> None:
    """From inside network namespace ``ns``, wait until ``port`` answers on every address.

    Runs in a thread of its own (``setns`` changes only the calling thread's namespace).
    Raises ClusterError past ``deadline`` (``time.monotonic()``) or when ``alive()`` returns a
    reason to give up.
    """
    result: list[BaseException] = []

    def work() -> None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(RUN_NETNS / ns, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({ns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            todo = list(addresses)
            while todo:
                reason = alive()
                if reason:
                    raise ClusterError(reason)
                with socket.socket() as sock:
                    sock.settimeout(0.5)
                    if sock.connect_ex((todo[0], port)) == 0:
                        todo.pop(0)
                        continue
                if time.monotonic() > deadline:
                    raise ClusterError(f"nothing answers on {todo[0]}:{port}")
                time.sleep(0.01)
        except BaseException as exc:  # handed to the caller's thread
            result.append(exc)

    thread = threading.Thread(target=work, name=f"netns-wait-{ns}", daemon=True)
    thread.start()
    thread.join()
    if result:
        raise result[0]


# ---------------------------------------------------------------------------------------------
# public API


def unavailable() -> str | None:
    """None when a namespace cluster can be made here, else the reason (for ``pytest.skip``).

    Checks for root, Linux, the tools (``ip``, ``unshare``, ``nsenter``, ``ssh``,
    ``ssh-keygen``, ``/usr/sbin/sshd``) and that a network namespace can be created.
    """
    if not sys.platform.startswith("linux"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "a namespace cluster needs root"
    for tool in _TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    if not os.access(SSHD, os.X_OK):
        return f"{SSHD} is not installed (openssh-server)"
    probe = f"apgprobe{os.getpid()}"
    made = _sh(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    _sh(["ip", "netns", "del", probe], check=False)
    return None


def remove_stale(prefix: str = "apgt", *, force: bool = False) -> list[str]:
    """Remove what an earlier (killed) run with ``prefix`` left behind.

    Kills the processes in every namespace named ``<prefix>-*`` (by pid, from
    ``ip netns pids``), deletes those namespaces (and with them their veths), any
    ``<prefix>-*`` link left in the root namespace, the ``/etc/netns/<ns>`` directories, the
    temporary directory and the state file recorded in ``/tmp/apgaspy-netns-<prefix>.json``.

    Args:
        prefix: the cluster's name prefix.
        force: remove the cluster even when the process that made it still runs.

    Returns:
        The namespaces it removed (possibly empty).

    Raises:
        ClusterBusyError: the state file names a live owning process (and ``force`` is false).
        ClusterError: something could not be removed.
    """
    state = _read_state(prefix)
    owner = _owner_alive(state)
    if owner is not None and not force:
        raise ClusterBusyError(f"netns cluster {prefix!r} is in use by live process {owner}")
    names = set((state or {}).get("namespaces", []))
    names.update(ns for ns in _existing_namespaces() if ns.startswith(f"{prefix}-"))
    if NETNS_ETC.is_dir():
        names.update(p.name for p in NETNS_ETC.iterdir() if p.name.startswith(f"{prefix}-"))
    problems = _teardown(prefix, sorted(names), (state or {}).get("tmpdir"))
    if problems:
        raise ClusterError(f"stale netns cluster {prefix!r}: " + "; ".join(problems))
    _state_path(prefix).unlink(missing_ok=True)
    return sorted(names)


class Host:
    """One host of a cluster: a network namespace with its own hostname, hosts file and sshd.

    Attributes:
        name: the host name (``h1``, ``h2``, ...), as seen inside the cluster.
        ns: the network namespace (``<prefix>-h<k>``).
        address: the host's IPv4 address on the cluster subnet.
        sshd_pid: the pid of the host's sshd; its namespaces are "the host".
    """

    def __init__(self, name: str, ns: str, address: str, sshd_pid: int) -> None:
        self.name = name
        self.ns = ns
        self.address = address
        self.sshd_pid = sshd_pid

    def __repr__(self) -> str:
        return f"Host({self.name!r}, ns={self.ns!r}, address={self.address!r}, " \
               f"sshd_pid={self.sshd_pid})"

    def command(self, argv: Sequence[str | os.PathLike[str]], *,
                cwd: str | os.PathLike[str] | None = None) -> list[str]:
        """``argv`` prefixed so that it runs on this host.

        The prefix is ``nsenter -t <sshd_pid> -n -u -m --wd=<dir> --``: the process gets the
        host's network, hostname and mount namespace (hence its ``/etc/hosts``).  Entering a
        mount namespace resets the working directory to ``/``, so ``--wd`` restores ``cwd``
        (default: the caller's working directory).
        """
        if cwd is None:
            try:
                cwd = os.getcwd()
            except OSError:
                cwd = "/"
        return ["nsenter", "-t", str(self.sshd_pid), "-n", "-u", "-m",
                f"--wd={os.fspath(cwd)}", "--", *(os.fspath(a) for a in argv)]

    def popen(self, argv: Sequence[str | os.PathLike[str]], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` on this host; ``kw`` goes to ``subprocess.Popen``.

        The process always gets its own session (``start_new_session=True``), so signals sent
        to a process group never reach the caller.  ``cwd`` is honoured inside the host.

        Raises:
            ValueError: ``start_new_session=False`` was asked for.
        """
        if kw.get("start_new_session", True) is not True:
            raise ValueError("Host.popen always starts a new session")
        kw["start_new_session"] = True
        return subprocess.Popen(self.command(argv, cwd=kw.get("cwd")), **kw)

    def run(self, argv: Sequence[str | os.PathLike[str]], timeout: float = 60.0, *,
            input: str | bytes | None = None, check: bool = False,
            **kw: Any) -> subprocess.CompletedProcess[Any]:
        """Run ``argv`` on this host to its end, like ``subprocess.run``.

        Output is captured as text unless ``stdout``/``stderr``/``text`` say otherwise.

        Args:
            argv: the command.
            timeout: seconds to wait; then the process and its descendants are SIGKILLed.
            input: sent to stdin.
            check: raise ``subprocess.CalledProcessError`` on a non-zero exit status.
            kw: passed to ``Host.popen``.

        Raises:
            subprocess.TimeoutExpired: the process did not end within ``timeout`` s.
            subprocess.CalledProcessError: with ``check``, on a non-zero exit status.
        """
        kw.setdefault("stdout", subprocess.PIPE)
        kw.setdefault("stderr", subprocess.PIPE)
        if "encoding" not in kw and "errors" not in kw:
            kw.setdefault("text", True)
        if input is not None:
            kw["stdin"] = subprocess.PIPE
        else:
            kw.setdefault("stdin", subprocess.DEVNULL)
        cmd = self.command(argv, cwd=kw.get("cwd"))
        with self.popen(argv, **kw) as proc:
            try:
                out, err = proc.communicate(input, timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_tree(proc.pid)
                try:
                    out, err = proc.communicate(timeout=5)
                except subprocess.TimeoutExpired:  # a stray descendant holds the pipes
                    out, err = None, None
                raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
        done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        if check:
            done.check_returncode()
        return done

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 120.0) -> Any:
        """Run ``fn(*args)`` in a thread that has entered this host's network namespace, and
        return its value (or raise its exception).

        Sockets ``fn`` creates belong to this host's network and stay usable from any thread
        afterwards: a scheduler endpoint made this way listens and connects from this host's
        address, while the test runs in this process.

        Raises:
            OSError: the namespace cannot be entered.
            TimeoutError: ``fn`` did not return within ``timeout`` seconds.
        """
        out: list[Any] = []
        err: list[BaseException] = []

        def work() -> None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                fd = os.open(RUN_NETNS / self.ns, os.O_RDONLY)
                try:
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        code = ctypes.get_errno()
                        raise OSError(code, f"setns({self.ns}): {os.strerror(code)}")
                finally:
                    os.close(fd)
                out.append(fn(*args))
            except BaseException as exc:  # handed to the caller's thread
                err.append(exc)

        thread = threading.Thread(target=work, name=f"netns-call-{self.ns}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"{fn!r} did not return within {timeout} s on {self.name}")
        if err:
            raise err[0]
        return out[0]

    def pids(self) -> list[int]:
        """Pids of the processes in this host's network namespace, its sshd left out."""
        return [pid for pid in _ns_pids(self.ns) if pid != self.sshd_pid]


class Cluster:
    """A running namespace cluster; ``close()`` (or ``with``) removes all of it.

    Attributes:
        hosts: the hosts, ``h1`` first.
        prefix: the name prefix of its namespaces.
        bridge_ns: the namespace holding the bridge.
        ssh: path of the ssh wrapper (``<ssh> [-x] <host> <command>``), usable on any host.
        subnet: the cluster's subnet, e.g. ``"10.231.7.0/24"``.
        tmpdir: the run's temporary directory (keys, configs, sshd logs ``sshd-<host>.log``).
        setup_seconds: wall-clock seconds ``start_cluster`` took.
    """

    def __init__(self, *, prefix: str, hosts: list[Host], bridge_ns: str, ssh: str, subnet: str,
                 tmpdir: str, setup_seconds: float,
                 procs: Sequence[subprocess.Popen[Any]] = ()) -> None:
        self.prefix = prefix
        self.hosts = hosts
        self.bridge_ns = bridge_ns
        self.ssh = ssh
        self.subnet = subnet
        self.tmpdir = tmpdir
        self.setup_seconds = setup_seconds
        self._procs = list(procs)
        self._closed = False
        self._owner = os.getpid()
        atexit.register(self._atexit)

    def __repr__(self) -> str:
        names = ",".join(h.name for h in self.hosts)
        return f"Cluster({self.prefix!r}, hosts={names}, closed={self._closed})"

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def namespaces(self) -> list[str]:
        """All the cluster's namespaces: the hosts' and the bridge's."""
        return [h.ns for h in self.hosts] + [self.bridge_ns]

    @property
    def closed(self) -> bool:
        """True once ``close()`` ran."""
        return self._closed

    def host(self, name: str) -> Host:
        """The host called ``name``.

        Raises:
            KeyError: there is no such host.
        """
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def close(self) -> None:
        """Kill every process in the cluster's namespaces (sshds and whatever a test left), by
        pid, and delete the namespaces, veths, ``/etc/netns`` dirs, temporary directory and
        state file.  Idempotent.

        Raises:
            ClusterError: something could not be removed.
        """
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self._atexit)
        problems = _teardown(self.prefix, self.namespaces, self.tmpdir)
        for proc in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        state = _read_state(self.prefix)
        if state is not None and state.get("tmpdir") == self.tmpdir:
            _state_path(self.prefix).unlink(missing_ok=True)
        if problems:
            raise ClusterError(f"netns cluster {self.prefix!r}: " + "; ".join(problems))

    def detach(self) -> None:
        """Leave the cluster running after this process ends (the CLI's ``up``); a later
        ``remove_stale(prefix)`` or ``down`` removes it."""
        atexit.unregister(self._atexit)
        state = _read_state(self.prefix) or {}
        state["owner"] = None
        _write_state(self.prefix, state)
        self._closed = True

    def _atexit(self) -> None:
        if os.getpid() == self._owner:
            with contextlib.suppress(Exception):
                self.close()


def _hosts_file(name: str, names: Sequence[str], addresses: Sequence[str],
                loopback_self: bool, hidden: Collection[str]) -> str:
    lines = ["127.0.0.1 localhost"]
    if loopback_self:
        lines.append(f"127.0.1.1 {name}")
    lines += [f"{addr} {other}" for other, addr in zip(names, addresses, strict=True)
              if other not in hidden]
    return "\n".join(lines) + "\n"


def _sshd_config(tmp: Path, name: str) -> str:
    return "\n".join([
        "Port 22",
        "ListenAddress 0.0.0.0",  # every address of the host's own namespace
        "AddressFamily inet",
        f"HostKey {tmp / 'ssh_host_ed25519_key'}",
        f"PidFile {tmp / f'sshd-{name}.pid'}",
        f"AuthorizedKeysFile {tmp / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "MaxStartups 200:30:400",
        "MaxSessions 200",
        "LogLevel INFO",
        "",
    ])


def _ssh_config(tmp: Path) -> str:
    return "\n".join([
        "Host *",
        "  User root",
        f"  IdentityFile {tmp / 'id_ed25519'}",
        "  IdentitiesOnly yes",
        "  StrictHostKeyChecking no",
        "  UserKnownHostsFile /dev/null",
        "  GlobalKnownHostsFile /dev/null",
        "  CheckHostIP no",
        "  LogLevel ERROR",
        "  BatchMode yes",
        "  ConnectTimeout 5",
        "  ForwardX11 no",
        "  ForwardAgent no",
        "  KexAlgorithms ^curve25519-sha256",  # quicker than the post-quantum default
        "",
    ])


def start_cluster(n: int = 3, *, prefix: str = "apgt", loopback_self: Collection[str] = (),
                  hide: Mapping[str, Collection[str]] | None = None, subnet: str = SUBNET,
                  timeout: float = 10.0) -> Cluster:
    """Start a cluster of ``n`` hosts ``h1``..``hn`` in network namespaces.

    Args:
        n: number of hosts (1 to the subnet's size).
        prefix: name prefix, 1-8 chars ``[a-z][a-z0-9]*``; namespaces are ``<prefix>-h<k>``
            and ``<prefix>-br``.  Clusters with different prefixes coexist (even on the same
            subnet: they share no link).
        loopback_self: host names whose hosts file maps their own name to 127.0.1.1, before
            the real entries (Debian's default), so that the name resolves to loopback there.
        hide: host name -> names of other hosts left out of its hosts file.
        subnet: an IPv4 network; host ``hk`` gets its k-th address.
        timeout: seconds to wait for each sshd to answer.

    Returns:
        The running Cluster (close it, or use it as a context manager).

    Raises:
        ValueError: bad arguments.
        ClusterBusyError: a live process owns a cluster with this prefix.
        ClusterError: namespaces of this prefix exist already (see ``remove_stale``), or the
            set-up failed (the message carries sshd's log); what was made is removed.
    """
    t0 = time.monotonic()
    if not _PREFIX_RE.match(prefix):
        raise ValueError(f"prefix must match {_PREFIX_RE.pattern}: {prefix!r}")
    net = ipaddress.ip_network(subnet)
    if not 1 <= n < net.num_addresses - 1 or n > 999:
        raise ValueError(f"n={n} hosts do not fit in {subnet}")
    names = [f"h{k}" for k in range(1, n + 1)]
    hide = {k: set(v) for k, v in (hide or {}).items()}
    for name in {*loopback_self, *hide, *(x for v in hide.values() for x in v)}:
        if name not in names:
            raise ValueError(f"no host {name!r} in {names}")
    if _owner_alive(_read_state(prefix)) is not None:
        raise ClusterBusyError(f"netns cluster {prefix!r} is in use by a live process")
    clash = [ns for ns in _existing_namespaces() if ns.startswith(f"{prefix}-")]
    if clash:
        raise ClusterError(f"namespaces {clash} exist already; call remove_stale({prefix!r})")

    addresses = [str(net.network_address + k) for k in range(1, n + 1)]
    host_ns = [f"{prefix}-{name}" for name in names]
    bridge_ns = f"{prefix}-br"
    namespaces = [*host_ns, bridge_ns]
    tmp = Path(tempfile.mkdtemp(prefix=f"apgaspy-netns-{prefix}-"))
    _write_state(prefix, {"prefix": prefix, "tmpdir": str(tmp), "namespaces": namespaces,
                          "subnet": subnet,
                          "owner": {"pid": os.getpid(), "start": _start_time(os.getpid())}})
    procs: list[subprocess.Popen[Any]] = []
    try:
        keygen = [subprocess.Popen(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                                    f"apgaspy-{prefix}", "-f", str(tmp / key)],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
                  for key in ("ssh_host_ed25519_key", "id_ed25519")]
        # Namespaces and veth pairs, both ends made right in their namespaces.
        batch = [f"netns add {ns}" for ns in namespaces]
        batch += [f"link add eth0 netns {ns} type veth peer name {prefix}-p{k} netns {bridge_ns}"
                  for k, ns in enumerate(host_ns, 1)]
        _sh(["ip", "-batch", "-"], input="\n".join(batch) + "\n")
        config = {bridge_ns: ["link set lo up", "link add br0 type bridge", "link set br0 up"]
                  + [f"link set {prefix}-p{k} master br0\nlink set {prefix}-p{k} up"
                     for k in range(1, n + 1)]}
        for ns, addr in zip(host_ns, addresses, strict=True):
            config[ns] = ["link set lo up", f"addr add {addr}/{net.prefixlen} dev eth0",
                          "link set eth0 up"]
        ipprocs = {ns: subprocess.Popen(["ip", "-n", ns, "-batch", "-"], text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE) for ns in config}
        for ns, lines in config.items():
            _, err = ipprocs[ns].communicate("\n".join(lines) + "\n", timeout=30)
            if ipprocs[ns].returncode != 0:
                raise ClusterError(f"configuring {ns} failed: {err.strip()}")
        _wait_carrier(host_ns, time.monotonic() + timeout)

        for name, ns in zip(names, host_ns, strict=True):
            etc = NETNS_ETC / ns
            for _ in range(5):  # another cluster's close() may rmdir an empty /etc/netns
                with contextlib.suppress(FileNotFoundError):
                    etc.mkdir(parents=True, exist_ok=True)
                    break
            (etc / "hosts").write_text(_hosts_file(name, names, addresses,
                                                   name in loopback_self, hide.get(name, ())))
            # No name server: a lookup of an unknown name fails at once (loopback, refused).
            (etc / "resolv.conf").write_text("# apgaspy netns test cluster: no DNS\n"
                                             "options timeout:1 attempts:1\n")
            (tmp / f"sshd-{name}.conf").write_text(_sshd_config(tmp, name))
        ssh_config = tmp / "ssh_config"
        ssh_config.write_text(_ssh_config(tmp))
        wrapper = tmp / "ssh"
        wrapper.write_text(f"#!/bin/sh\nexec {shutil.which('ssh')} -F {ssh_config} \"$@\"\n")
        wrapper.chmod(0o755)
        for proc in keygen:
            _, err = proc.communicate(timeout=30)
            if proc.returncode != 0:
                raise ClusterError(f"ssh-keygen failed: {err.strip()}")
        shutil.copyfile(tmp / "id_ed25519.pub", tmp / "authorized_keys")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

        logs: dict[str, Path] = {}
        for name, ns in zip(names, host_ns, strict=True):
            logs[name] = tmp / f"sshd-{name}.log"
            script = f"hostname {name} && exec {SSHD} -D -e -f {tmp / f'sshd-{name}.conf'}"
            with open(logs[name], "wb") as log:
                procs.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", script],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True))

        def dead() -> str | None:
            for name, proc in zip(names, procs, strict=True):
                if proc.poll() is not None:
                    return f"sshd of {name} ended ({proc.returncode}):\n" + \
                        logs[name].read_text(errors="replace")
            return None

        try:
            _setns_connect(host_ns[0], addresses, 22, time.monotonic() + timeout, dead)
        except ClusterError as exc:
            text = "\n".join(f"--- {k}\n{p.read_text(errors='replace')}" for k, p in logs.items())
            raise ClusterError(f"sshd did not start: {exc}\n{text}") from None

        hosts = []
        for name, ns, addr, proc in zip(names, host_ns, addresses, procs, strict=True):
            # ip netns exec, unshare and sh all exec: the Popen pid is sshd's now.
            exe = os.readlink(f"/proc/{proc.pid}/exe")
            if exe != SSHD:
                raise ClusterError(f"pid {proc.pid} of {name} runs {exe}, not {SSHD}")
            hosts.append(Host(name, ns, addr, proc.pid))
        cluster = Cluster(prefix=prefix, hosts=hosts, bridge_ns=bridge_ns, ssh=str(wrapper),
                          subnet=str(net), tmpdir=str(tmp), setup_seconds=0.0, procs=procs)
    except BaseException:
        _teardown(prefix, namespaces, str(tmp))
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        _state_path(prefix).unlink(missing_ok=True)
        raise

    try:
        # Log in the way Hydra does (``<ssh> -x <host> <command>``), from the first host to the
        # second, by address so that ``hide``/``loopback_self`` do not matter.  One login is
        # enough: every sshd answered above, and all share the keys.
        first, target = hosts[0], hosts[min(1, n - 1)]
        argv = [str(wrapper), "-x", target.address, "hostname"]
        try:
            done = first.run(argv, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"ssh from {first.name} to {target.name} hangs") from None
        if done.returncode != 0 or done.stdout.strip() != target.name:
            raise ClusterError(f"ssh -x from {first.name} to {target.name} gave "
                               f"{done.returncode} {done.stdout.strip()!r}: "
                               f"{done.stderr.strip()}")
        cluster.setup_seconds = time.monotonic() - t0
        state = _read_state(prefix) or {}
        state.update(ssh=str(wrapper), setup_seconds=cluster.setup_seconds,
                     hosts=[{"name": h.name, "ns": h.ns, "address": h.address,
                             "sshd_pid": h.sshd_pid} for h in hosts])
        _write_state(prefix, state)
    except BaseException:
        cluster.close()
        raise
    return cluster


# ---------------------------------------------------------------------------------------------
# pytest


@pytest.fixture(scope="session")
def netns_cluster() -> Iterator[Cluster]:
    """A session-wide cluster of 3 hosts (prefix ``apgt``); skips where none can be made."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        remove_stale("apgt")
    except ClusterBusyError as exc:
        pytest.skip(str(exc))
    cluster = start_cluster(3, prefix="apgt")
    try:
        yield cluster
    finally:
        cluster.close()


@contextlib.contextmanager
def special_cluster(n: int = 3, *, prefix: str = "apgu", **options: Any) -> Iterator[Cluster]:
    """A cluster with special options for one test, beside the session cluster.

    ``with special_cluster(loopback_self={"h2"}) as c: ...``; ``options`` go to
    ``start_cluster``.  Skips the test where no cluster can be made (or a live process of
    another run holds ``prefix``); removes a stale cluster of ``prefix`` first.
    """
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    try:
        remove_stale(prefix)
    except ClusterBusyError as exc:
        pytest.skip(str(exc))
    with start_cluster(n, prefix=prefix, **options) as cluster:
        yield cluster


@pytest.fixture
def netns_cluster_factory() -> Iterator[Callable[..., Cluster]]:
    """A factory ``make(n=3, *, prefix="apgu", **options) -> Cluster`` of special clusters;
    all are closed at the end of the test.  Use distinct prefixes for several at once."""
    stack = contextlib.ExitStack()

    def make(n: int = 3, *, prefix: str = "apgu", **options: Any) -> Cluster:
        return stack.enter_context(special_cluster(n, prefix=prefix, **options))

    with stack:
        yield make


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: Sequence[str] | None = None) -> int:
    """``up [-n N] [--prefix P] [--loopback-self H ...]`` or ``down [--prefix P]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start a cluster and leave it running")
    up.add_argument("-n", type=int, default=3, help="number of hosts (default 3)")
    up.add_argument("--loopback-self", nargs="*", default=[], metavar="HOST",
                    help="hosts whose own name resolves to 127.0.1.1")
    down = sub.add_parser("down", help="remove a cluster (and anything running in it)")
    for p in (up, down):
        p.add_argument("--prefix", default="apgt", help="namespace prefix (default apgt)")
    args = parser.parse_args(argv)
    reason = unavailable()
    if reason:
        print(f"netns cluster unavailable: {reason}", file=sys.stderr)
        return 2
    if args.action == "down":
        removed = remove_stale(args.prefix, force=True)
        print("removed: " + (" ".join(removed) or "nothing"))
        return 0
    remove_stale(args.prefix)
    cluster = start_cluster(args.n, prefix=args.prefix, loopback_self=args.loopback_self)
    cluster.detach()
    for h in cluster.hosts:
        print(f"{h.name} {h.address} ns={h.ns} sshd_pid={h.sshd_pid}")
    print(f"ssh wrapper: {cluster.ssh}")
    print(f"set-up: {cluster.setup_seconds:.2f} s; state: {_state_path(args.prefix)}")
    first = cluster.hosts[0]
    print(f"shell on {first.name}: nsenter -t {first.sshd_pid} -n -u -m -- bash")
    return 0


if __name__ == "__main__":
    sys.exit(main())
