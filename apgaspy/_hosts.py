"""Hosts: where a place may start, which address it binds, and how it is launched there.

A place is started *for a host*: a name or address in the spelling the scheduler (or
``NODE_FILE``, or mpiexec) gave.  Three questions come up about a host, each answered here:

* **Is it this machine?**  A host that resolves to a loopback address or to an address of
  this machine is local; its places start here (``MPI_Comm_spawn`` with host ``localhost``,
  since MPICH would try ssh for 127.0.1.2), except inside a Slurm allocation, where Hydra
  launches with ``srun --nodelist`` and needs the Slurm node name.
* **Which address does a place bind and advertise?**  One its peers can reach
  (:func:`choose_address`): ``APGAS_INTERFACE``'s address, else ``APGAS_HOST`` where it is an
  address of this machine, else the host's resolved address, unless that is a loopback address
  while peers live on other machines (Debian's default ``127.0.1.1 hostname`` line): then the
  address this machine routes towards those peers from.
* **Can a place start there, and how?**  :func:`check_host` runs the same launcher Hydra will
  run (``-launcher``/``-launcher-exec`` of the ``mpiexec`` this job runs under,
  ``HYDRA_LAUNCHER``/``HYDRA_LAUNCHER_EXEC``, else ssh), with the same options, so a host that
  would make MPICH abort or hang the caller is refused with a clear reason before anything is
  spawned.
"""

from __future__ import annotations

import fcntl
import ipaddress
import logging
import os
import shlex
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

from ._config import setting
from ._exceptions import ConfigurationError, MalleabilityError

__all__ = [
    "resolve_host",
    "is_local_host",
    "node_file_hosts",
    "my_host",
    "local_addresses",
    "interface_address",
    "route_source",
    "choose_address",
    "is_loopback",
    "Launcher",
    "launcher",
    "SlurmAllocation",
    "slurm_allocation",
    "check_host",
    "note_reachable",
    "forget_reachable",
    "recently_reachable",
]

log = logging.getLogger("apgaspy")

_SIOCGIFADDR = 0x8915


# ---------------------------------------------------------------------- names and addresses
def resolve_host(host: str) -> str:
    """The IPv4 address of ``host`` (a name or an address), as this machine resolves it.

    Raises:
        OSError: the name does not resolve.
    """
    return socket.gethostbyname(host)


def is_loopback(address: str) -> bool:
    """True when the IPv4 ``address`` (dotted text) is in 127.0.0.0/8."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _bindable(address: str) -> bool:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind((address, 0))  # only an address of this machine can be bound
        return True
    except OSError:
        return False
    finally:
        probe.close()


def is_local_host(host: str) -> bool:
    """True when ``host`` is this machine: a loopback address or one of its own addresses.

    Raises:
        OSError: the name does not resolve.
    """
    ip = resolve_host(host)
    return is_loopback(ip) or _bindable(ip)


def node_file_hosts() -> list[str]:
    """The hosts listed in ``$NODE_FILE`` (one a line, blanks skipped), or ``[]``.

    Raises:
        OSError: ``NODE_FILE`` names a file that cannot be read.
    """
    path = os.environ.get("NODE_FILE")
    if not path:
        return []
    with open(path, encoding="ascii") as fh:
        return [line.strip() for line in fh if line.strip()]


def my_host() -> str:
    """The host this process runs for: the first line of ``NODE_FILE``, else, inside a
    Slurm allocation, this Slurm node's name, else this machine's host name."""
    hosts = node_file_hosts()
    if hosts:
        return hosts[0]
    alloc = slurm_allocation()
    if alloc is not None:
        return alloc.here
    return socket.gethostname()


def local_addresses() -> list[str]:
    """The IPv4 addresses of this machine's interfaces that are up, loopback ones last."""
    out: list[str] = []
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR,
                                  struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            out.append(socket.inet_ntoa(raw[20:24]))
    finally:
        probe.close()
    return sorted(set(out), key=lambda a: (is_loopback(a), out.index(a)))


def interface_address(name: str) -> str:
    """The IPv4 address of network interface ``name`` (``eth0``, say).

    Raises:
        ConfigurationError: there is no such interface, or it has no IPv4 address.
    """
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        raw = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
    except OSError as exc:
        names = ", ".join(n for _, n in socket.if_nameindex())
        raise ConfigurationError(
            f"APGAS_INTERFACE={name!r}: no IPv4 address on that interface here ({exc}); "
            f"the interfaces of {socket.gethostname()} are {names}") from None
    finally:
        probe.close()
    return socket.inet_ntoa(raw[20:24])


def route_source(address: str) -> str | None:
    """The address this machine sends from towards ``address`` (no packet is sent), or
    ``None`` when there is no route."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((address, 9))
        return str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()


def choose_address(host: str, toward: str | None = None) -> str:
    """The address a place started for ``host`` binds and advertises.

    In this order: the address of ``APGAS_INTERFACE``; ``APGAS_HOST`` if it is an address of
    this machine (it is forwarded to every place, so elsewhere it is ignored); ``host``'s
    resolved address if it is one of this machine's and reachable from the peers (not a
    loopback address while ``toward`` is remote); the source address of the route towards
    ``toward``; a non-loopback address of this machine; 127.0.0.1.

    Args:
        host: the host the place runs for (a name or address).
        toward: the address of a peer on another machine (place 0's, say), or ``None`` when
            every peer is on this machine.

    Raises:
        ConfigurationError: ``APGAS_INTERFACE`` names no interface with an IPv4 address.
    """
    iface = setting("INTERFACE")
    if iface:
        return interface_address(iface)
    explicit = setting("HOST")
    if explicit:
        try:
            ip = resolve_host(explicit)
        except OSError:
            ip = ""
        if ip and _bindable(ip):
            return ip
        log.info("APGAS_HOST=%s is not an address of %s: ignored here", explicit,
                 socket.gethostname())
    remote = toward is not None and not is_loopback(toward)
    try:
        ip = resolve_host(host)
    except OSError:
        ip = ""
    if ip and _bindable(ip) and not (remote and is_loopback(ip)):
        return ip
    if remote:
        assert toward is not None
        source = route_source(toward)
        if source is not None:
            if ip and is_loopback(ip):
                log.warning("host %s resolves to the loopback address %s here (a line like "
                            "'127.0.1.1 %s' in /etc/hosts); this place advertises %s, the "
                            "address it reaches %s from (set APGAS_INTERFACE to choose)",
                            host, ip, host, source, toward)
            return source
    if ip and _bindable(ip):
        return ip
    for address in local_addresses():
        if not is_loopback(address) and remote:
            return address
    return "127.0.0.1"


# ---------------------------------------------------------------------- Slurm
@dataclass(frozen=True)
class SlurmAllocation:
    """The Slurm job this process runs in.

    Attributes:
        job_id: ``SLURM_JOB_ID``.
        here: the Slurm node name of this process (``SLURMD_NODENAME``), or the first node of
            the allocation when this process runs outside it (an ``salloc`` shell).
        nodes: the allocation's node names when the job started (``SLURM_JOB_NODELIST``
            expanded); :meth:`current_nodes` asks Slurm for the nodes held now.
    """

    job_id: str
    here: str
    nodes: tuple[str, ...]

    def current_nodes(self) -> list[str]:
        """The nodes the job holds now (after resizes), from ``scontrol``.

        Raises:
            MalleabilityError: Slurm does not answer within ``APGAS_CHECK_TIMEOUT`` seconds.
        """
        try:
            job = subprocess.run(["scontrol", "show", "job", "-o", self.job_id],
                                 capture_output=True, text=True, timeout=setting("CHECK_TIMEOUT"))
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise MalleabilityError(f"cannot ask Slurm for the nodes of job {self.job_id}: "
                                    f"{exc}") from None
        for field in job.stdout.split():
            if field.startswith("NodeList="):
                return _expand_nodelist(field.split("=", 1)[1])
        raise MalleabilityError(f"Slurm does not know job {self.job_id}: "
                                f"{(job.stderr or job.stdout).strip()}")


def _expand_nodelist(nodelist: str) -> list[str]:
    if not nodelist or nodelist == "(null)":
        return []
    try:
        out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                             text=True, timeout=setting("CHECK_TIMEOUT"))
        names = out.stdout.split()
        if out.returncode == 0 and names:
            return names
    except (OSError, subprocess.TimeoutExpired):
        pass
    return [n for n in nodelist.split(",") if n]


_ALLOCATION: tuple[tuple[str, str, str], SlurmAllocation | None] | None = None


def slurm_allocation() -> SlurmAllocation | None:
    """The Slurm allocation this process runs in (``SLURM_JOB_ID`` set), or ``None``.

    ``APGAS_SLURM=0`` makes apgaspy ignore an allocation (MPICH's Hydra still uses it).
    """
    global _ALLOCATION
    if not setting("SLURM"):
        return None
    job = os.environ.get("SLURM_JOB_ID") or os.environ.get("SLURM_JOBID")
    if not job:
        return None
    key = (job, os.environ.get("SLURM_JOB_NODELIST", ""), os.environ.get("SLURMD_NODENAME", ""))
    if _ALLOCATION is not None and _ALLOCATION[0] == key:
        return _ALLOCATION[1]
    nodes = tuple(_expand_nodelist(key[1]))
    here = key[2] or (nodes[0] if nodes else socket.gethostname())
    alloc = SlurmAllocation(job, here, nodes)
    _ALLOCATION = (key, alloc)
    return alloc


# ---------------------------------------------------------------------- launcher
@dataclass(frozen=True)
class Launcher:
    """How Hydra (MPICH's process manager) starts processes on another host.

    Attributes:
        kind: Hydra's launcher name: ``ssh``, ``rsh``, ``slurm``, ``fork``, ...
        exec: the launcher executable (``-launcher-exec``), or ``None`` for the default.
        source: where this was found (for messages).
    """

    kind: str
    exec: str | None
    source: str

    def command(self, host: str, argv: list[str]) -> list[str]:
        """The command line Hydra would run to start ``argv`` on ``host`` (ssh/rsh kinds)."""
        exe = self.exec or self.kind
        if self.kind == "ssh":
            extra = [] if self.exec else ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
            return [exe, "-x", *extra, host, shlex.join(argv)]
        return [exe, host, shlex.join(argv)]


def _mpiexec_options() -> dict[str, str]:
    """Launcher options of the mpiexec this process runs under (an ancestor), if any."""
    import psutil  # here: only a grow onto other hosts asks

    try:
        ancestors = psutil.Process().parents()[:6]
    except psutil.Error:
        return {}
    for proc in ancestors:
        if proc.pid <= 1:
            return {}
        try:
            argv = proc.cmdline()
        except psutil.Error:
            return {}
        if argv and os.path.basename(argv[0]).startswith(("mpiexec", "mpirun")):
            opts: dict[str, str] = {}
            for i, arg in enumerate(argv[:-1]):
                name = arg.lstrip("-")
                if arg.startswith("-") and name in ("launcher", "bootstrap", "launcher-exec",
                                                    "bootstrap-exec"):
                    opts[name.replace("bootstrap", "launcher")] = argv[i + 1]
            return opts
    return {}


def launcher() -> Launcher:
    """The launcher Hydra uses for this job: the ``-launcher``/``-launcher-exec`` options of
    the mpiexec this process runs under, else ``HYDRA_LAUNCHER``/``HYDRA_LAUNCHER_EXEC`` (or
    their ``HYDRA_BOOTSTRAP`` spellings), else ``slurm`` inside a Slurm allocation, else ssh."""
    opts = _mpiexec_options()
    if opts:
        kind = opts.get("launcher") or ("slurm" if slurm_allocation() else "ssh")
        return Launcher(kind, opts.get("launcher-exec"), "the options of mpiexec")
    env = os.environ
    named = env.get("HYDRA_LAUNCHER") or env.get("HYDRA_BOOTSTRAP")
    exe = env.get("HYDRA_LAUNCHER_EXEC") or env.get("HYDRA_BOOTSTRAP_EXEC")
    if named or exe:
        return Launcher(named or "ssh", exe, "HYDRA_LAUNCHER/HYDRA_LAUNCHER_EXEC")
    if slurm_allocation() is not None:
        return Launcher("slurm", None, "the Slurm allocation")
    return Launcher("ssh", None, "the default")


# ---------------------------------------------------------------------- the pre-spawn check
_PROBE = ("import socket,sys\n"
          "try:\n"
          "    socket.gethostbyname(sys.argv[1])\n"
          "except OSError:\n"
          "    print('apgaspy-unresolved')\n"
          "else:\n"
          "    print('apgaspy-ok')\n")


def check_host(host: str, *, control_host: str | None = None) -> str:
    """The MPI ``host`` info value that starts a place for ``host``, after checking that a
    place can start there.

    Local hosts give ``localhost`` (inside a Slurm allocation: this node's Slurm name).  A
    remote host is tried with the launcher Hydra will use (:func:`launcher`), running this
    Python there, unless it ran this job's places or passed this check within the last
    ``APGAS_CHECK_TTL`` seconds (:func:`recently_reachable`); inside a Slurm allocation it must
    be a node the job holds now, and ``SLURM_OVERLAP=1`` must be set (else the spawned step
    waits for busy CPUs forever).

    Args:
        host: the host, as given.
        control_host: a name the new host must resolve (the control address MPICH's
            process manager of an embedded job hands its remote proxies), or ``None``.

    Raises:
        MalleabilityError: the host does not resolve, cannot be reached with the launcher,
            cannot resolve ``control_host``, has no such Python, or is outside the Slurm
            allocation; the message says which and how to fix it.
    """
    alloc = slurm_allocation()
    if alloc is not None:
        return _check_slurm_host(alloc, host)
    try:
        if is_local_host(host):
            return "localhost"
    except OSError as exc:
        raise MalleabilityError(f"cannot start a place on host {host!r}: {exc}") from None
    if recently_reachable(host):
        return host
    how = launcher()
    if how.kind not in ("ssh", "rsh"):
        raise MalleabilityError(
            f"cannot start a place on host {host!r}: it is not this machine and Hydra's "
            f"launcher is {how.kind!r} ({how.source}), which apgaspy cannot check")
    # -I -S: the probe needs the standard library only; skipping site-packages (the path
    # files of a virtual environment, editable installs) saves part of an interpreter start
    # on the grow's path.
    argv = [sys.executable, "-I", "-S", "-c", _PROBE, control_host or "localhost"]
    cmd = how.command(host, argv)
    try:
        probe = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                               timeout=setting("CHECK_TIMEOUT"))
        out, why, code = probe.stdout, probe.stderr.strip(), probe.returncode
    except (OSError, subprocess.TimeoutExpired) as exc:
        out, why, code = "", str(exc), -1
    if "apgaspy-ok" in out:
        note_reachable(host)
        return host
    if "apgaspy-unresolved" in out:
        raise MalleabilityError(
            f"cannot start a place on host {host!r}: it cannot resolve {control_host!r}, the "
            f"name MPICH's process manager gives it to connect back to this machine; add "
            f"{control_host} to {host}'s /etc/hosts, or start the job with mpiexec")
    raise MalleabilityError(
        f"cannot start a place on host {host!r} with Hydra's launcher "
        f"({' '.join(cmd[:1])}, from {how.source}): exit {code}, "
        f"{why[-300:] or 'no answer'} (the host must run {sys.executable})")


_reachable: dict[str, float] = {}
"""Host → when (``time.monotonic``) it last ran a place of this job or passed the check."""


def note_reachable(host: str) -> None:
    """Remember that ``host`` runs (or ran until now) a place of this job, or passed the
    launcher check: :func:`check_host` skips the check there for ``APGAS_CHECK_TTL`` s.

    The check costs a launcher round trip (an ssh connection and an interpreter start, about
    half a second on a loaded machine) on the path of every grow; a scheduler often gives a
    job back a host it has just released, which the launcher reached a moment ago."""
    _reachable[host] = time.monotonic()


def forget_reachable(host: str) -> None:
    """Forget what :func:`note_reachable` saw of ``host`` (a place of it died): the next grow
    there is checked."""
    _reachable.pop(host, None)


def recently_reachable(host: str) -> bool:
    """True when :func:`note_reachable` saw ``host`` within the last ``APGAS_CHECK_TTL``
    seconds (never when that setting is 0)."""
    seen = _reachable.get(host)
    ttl = setting("CHECK_TTL")
    if seen is None or ttl <= 0 or time.monotonic() - seen > ttl:
        return False
    log.debug("host %s ran this job's places or passed the check %.1f s ago: not checked "
              "again (APGAS_CHECK_TTL=%g)", host, time.monotonic() - seen, ttl)
    return True


def _check_slurm_host(alloc: SlurmAllocation, host: str) -> str:
    if os.environ.get("SLURM_OVERLAP") != "1":
        raise MalleabilityError(
            f"cannot start a place on {host!r} inside Slurm job {alloc.job_id}: "
            "SLURM_OVERLAP=1 must be set for the job (export it before mpiexec), or the new "
            "job step waits for CPUs held by the running ones")
    nodes = alloc.current_nodes()
    if host in nodes:
        return host
    try:
        if is_local_host(host) and alloc.here in nodes:
            return alloc.here
    except OSError:
        pass
    raise MalleabilityError(
        f"cannot start a place on {host!r}: it is not a node of Slurm job {alloc.job_id}, "
        f"which holds {','.join(nodes) or 'no node'} (MPI_Comm_spawn would hang)")
