"""Reading the processes of a job for the runtime-scale benchmark: their CPU time, memory and
roles, and the file descriptors of a process.

Process fields (parent, state, CPU times, threads, start time, RSS, command line) come from
psutil; the memory breakdown (``/proc/<pid>/status``, ``smaps``, ``smaps_rollup``) and the
socket tables of ``/proc/net`` are Linux's own (proc(5)), which psutil does not break down:
their parsing functions take the files' text, so they can be tested on any text.  A process
that ends while it is being read is left out.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import psutil

__all__ = [
    "ProcStat", "parse_status", "read_stat", "read_cmdline", "ppid_map",
    "descendants", "classify", "job_processes", "fd_info", "fd_kinds", "socket_inodes",
    "parse_smaps_rss", "top_mappings", "CLK_TCK",
]

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

_STATE = {psutil.STATUS_RUNNING: "R", psutil.STATUS_SLEEPING: "S",
          psutil.STATUS_DISK_SLEEP: "D", psutil.STATUS_STOPPED: "T",
          psutil.STATUS_TRACING_STOP: "t", psutil.STATUS_ZOMBIE: "Z",
          psutil.STATUS_DEAD: "X", psutil.STATUS_IDLE: "I"}
_ATTRS = ["pid", "ppid", "name", "status", "cpu_times", "num_threads", "create_time",
          "memory_info"]


class ProcStat(dict):  # type: ignore[type-arg]
    """What the benchmark uses of a process (a ``dict``): ``pid``, ``comm``, ``state`` (the
    letter of proc(5): ``R``, ``S``, ``Z``, ...), ``ppid``, ``utime_s``, ``stime_s``,
    ``cutime_s``, ``cstime_s`` (seconds), ``threads``, ``starttime`` (clock ticks after boot,
    identifies the process together with its pid) and ``rss_bytes``."""


def _proc_stat(info: dict[str, Any], boot: float) -> ProcStat:
    cpu = info["cpu_times"]
    return ProcStat(
        pid=info["pid"], comm=info["name"], state=_STATE.get(info["status"], "?"),
        ppid=info["ppid"], utime_s=cpu.user, stime_s=cpu.system,
        cutime_s=cpu.children_user, cstime_s=cpu.children_system,
        threads=info["num_threads"],
        starttime=round((info["create_time"] - boot) * CLK_TCK),
        rss_bytes=info["memory_info"].rss)


def parse_status(text: str) -> dict[str, int]:
    """The memory and thread lines of ``/proc/<pid>/status``: ``VmRSS``, ``RssAnon``,
    ``RssFile``, ``RssShmem``, ``VmSwap`` (bytes, from the file's kB, which are KiB) and
    ``Threads``; the lines that are missing are left out."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmSwap"):
            out[key] = int(value.split()[0]) * 1024
        elif key == "Threads":
            out[key] = int(value)
    return out


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def read_stat(pid: int) -> ProcStat:
    """The :class:`ProcStat` of process ``pid``, read now.

    Raises:
        ProcessLookupError: no such process (any more).
        PermissionError: the process may not be read.
    """
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return _proc_stat(proc.as_dict(_ATTRS), psutil.boot_time())
    except psutil.NoSuchProcess as exc:
        raise ProcessLookupError(f"no process {pid}") from exc
    except psutil.AccessDenied as exc:
        raise PermissionError(f"process {pid} may not be read") from exc


def read_cmdline(pid: int) -> list[str]:
    """The command line of ``pid``, ``[]`` for a zombie or kernel thread.

    Raises:
        ProcessLookupError: no such process (any more).
        PermissionError: the process may not be read.
    """
    try:
        return psutil.Process(pid).cmdline()
    except psutil.ZombieProcess:
        return []
    except psutil.NoSuchProcess as exc:
        raise ProcessLookupError(f"no process {pid}") from exc
    except psutil.AccessDenied as exc:
        raise PermissionError(f"process {pid} may not be read") from exc


def ppid_map() -> dict[int, ProcStat]:
    """Every process now running with its :class:`ProcStat`, by pid."""
    boot = psutil.boot_time()
    out: dict[int, ProcStat] = {}
    for proc in psutil.process_iter(_ATTRS):
        info = proc.info
        if any(info.get(a) is None for a in _ATTRS):
            continue  # ended (or unreadable) while it was read
        out[info["pid"]] = _proc_stat(info, boot)
    return out


def descendants(parents: Mapping[int, int], root: int) -> list[int]:
    """``root`` and every process below it, by pid (breadth first).

    Args:
        parents: each pid's parent pid.
        root: the pid at the top.
    """
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, ())))
    return out


def _spawned_role(cmdline: list[str]) -> str | None:
    """``"anchor"`` for the waiting anchor, ``"child"`` for ``apgaspy/_child.py`` (a place,
    or an anchor still in its MPI handshake), else ``None``."""
    if "apgaspy-anchor" in cmdline:
        return "anchor"
    text = " ".join(cmdline)
    if "apgaspy/_child.py" in text or "apgaspy._child" in text:
        return "child"
    return None


def classify(cmdline: list[str], parent_cmdline: list[str], is_root: bool) -> str:
    """The role of one process of an embedded apgaspy job.

    A spawned place is two processes (see ``apgaspy/_child.py``): Hydra's proxy starts
    ``python -P …/apgaspy/_child.py``, which forks the place and, after the MPI handshake,
    becomes the waiting anchor (``apgaspy-anchor`` in its argv); so the place is the
    ``_child.py`` process whose parent is one too, or is the anchor.

    Args:
        cmdline: the process's command line.
        parent_cmdline: its parent's.
        is_root: it is the job's first process (place 0).

    Returns:
        ``"place0"``, ``"place"``, ``"anchor"``, ``"proxy"`` (``hydra_pmi_proxy``),
        ``"process_manager"`` (Hydra's ``mpiexec``) or ``"other"``.
    """
    if is_root:
        return "place0"
    role = _spawned_role(cmdline)
    if role == "anchor":
        return "anchor"
    if role == "child":
        return "place" if _spawned_role(parent_cmdline) is not None else "anchor"
    first = os.path.basename(cmdline[0]) if cmdline else ""
    if first == "hydra_pmi_proxy":
        return "proxy"
    if first in ("mpiexec", "mpiexec.hydra", "mpirun"):
        return "process_manager"
    return "other"


def _status(pid: int) -> dict[str, int]:
    return parse_status(_read(f"/proc/{pid}/status"))


def _pss(pid: int) -> int | None:
    """Proportional set size of ``pid`` in bytes (``/proc/<pid>/smaps_rollup``), or ``None``."""
    try:
        for line in _read(f"/proc/{pid}/smaps_rollup").splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def job_processes(root: int) -> list[dict[str, Any]]:
    """Every live process of the job whose first process is ``root``, read now.

    Returns:
        One dict per process: ``pid``, ``ppid``, ``role`` (see :func:`classify`), ``starttime``
        (clock ticks after boot), ``cpu_s`` (user + system seconds of all its threads),
        ``children_cpu_s`` (user + system seconds of its children that ended and were waited
        for), ``threads``, ``rss_bytes``, ``rss_anon_bytes``, ``rss_file_bytes``,
        ``rss_shmem_bytes`` and ``pss_bytes`` (``None`` where unreadable).
    """
    stats = ppid_map()
    pids = descendants({p: s["ppid"] for p, s in stats.items()}, root)
    cmdlines: dict[int, list[str]] = {}
    for pid in pids:
        try:
            cmdlines[pid] = read_cmdline(pid)
        except OSError:
            cmdlines[pid] = []
    out = []
    for pid in pids:
        s = stats[pid]
        try:
            status = _status(pid)
        except (OSError, ValueError):
            continue
        out.append({
            "pid": pid, "ppid": s["ppid"],
            "role": classify(cmdlines[pid], cmdlines.get(s["ppid"], []), pid == root),
            "starttime": s["starttime"], "cpu_s": s["utime_s"] + s["stime_s"],
            "children_cpu_s": s["cutime_s"] + s["cstime_s"], "threads": s["threads"],
            "rss_bytes": status.get("VmRSS", 0), "rss_anon_bytes": status.get("RssAnon", 0),
            "rss_file_bytes": status.get("RssFile", 0),
            "rss_shmem_bytes": status.get("RssShmem", 0), "pss_bytes": _pss(pid),
        })
    return out


def parse_smaps_rss(text: str) -> dict[str, int]:
    """Resident bytes by mapping from the text of ``/proc/<pid>/smaps``: the ``Rss`` of every
    mapping, summed by its path (shared libraries, the interpreter), ``[heap]``, ``[stack]``
    and the like, or ``[anon]`` for anonymous mappings without a name."""
    out: dict[str, int] = {}
    name = "[anon]"
    for line in text.splitlines():
        first = line.split(None, 1)[0] if line.strip() else ""
        if "-" in first and not first.endswith(":"):  # a mapping's header line
            parts = line.split(None, 5)
            name = parts[5].strip() if len(parts) > 5 and parts[5].strip() else "[anon]"
        elif first == "Rss:":
            out[name] = out.get(name, 0) + int(line.split()[1]) * 1024
    return out


def top_mappings(pid: int, top: int = 8) -> list[tuple[str, int]] | None:
    """The ``top`` mappings of ``pid`` holding the most resident memory, as
    ``(name, bytes)`` pairs (:func:`parse_smaps_rss`), or ``None`` if unreadable."""
    try:
        rss = parse_smaps_rss(_read(f"/proc/{pid}/smaps"))
    except OSError:
        return None
    return sorted(rss.items(), key=lambda kv: -kv[1])[:top]


def socket_inodes(texts: Mapping[str, str]) -> dict[int, str]:
    """Socket inode → protocol from the tables of ``/proc/net/`` (proc(5)).

    In ``tcp``, ``tcp6``, ``udp`` and ``udp6`` the inode is the tenth field of a row (the
    header names fewer columns than the rows have: ``tx_queue rx_queue`` is one field); in the
    other tables (``unix``, ``netlink``) it is the column the header calls ``Inode``.

    Args:
        texts: each table's name (``"tcp"``, ``"unix"``, ...) and content.
    """
    out: dict[int, str] = {}
    for proto, text in texts.items():
        lines = text.splitlines()
        if not lines:
            continue
        if proto in ("tcp", "tcp6", "udp", "udp6"):
            idx = 9
        else:
            header = [w.lower() for w in lines[0].split()]
            if "inode" not in header:
                continue
            idx = header.index("inode")
        for line in lines[1:]:
            fields = line.split()
            if idx < len(fields) and fields[idx].isdigit():
                out[int(fields[idx])] = proto
    return out


def fd_kinds(targets: Iterable[str], sockets: Mapping[int, str]) -> dict[str, int]:
    """Count file descriptors by kind from their ``readlink`` targets.

    Kinds: ``tcp`` / ``unix`` / ... (sockets found in ``sockets``), ``socket`` (other
    sockets), ``pipe``, ``eventfd``, ``eventpoll``, ``anon`` (other anonymous inodes),
    ``dev`` (``/dev/...``) and ``file``.
    """
    kinds: dict[str, int] = {}
    for t in targets:
        if t.startswith("socket:["):
            kind = sockets.get(int(t[8:-1]), "socket")
        elif t.startswith("pipe:["):
            kind = "pipe"
        elif t == "anon_inode:[eventfd]":
            kind = "eventfd"
        elif t == "anon_inode:[eventpoll]":
            kind = "eventpoll"
        elif t.startswith("anon_inode:"):
            kind = "anon"
        elif t.startswith("/dev/"):
            kind = "dev"
        else:
            kind = "file"
        kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def fd_info() -> dict[str, Any]:
    """This process's open file descriptors: ``count`` (``len(os.listdir('/proc/self/fd'))``,
    the listing's own descriptor included) and ``kinds`` (:func:`fd_kinds`), plus ``pid``."""
    names = os.listdir("/proc/self/fd")
    targets = []
    for name in names:
        try:
            targets.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:
            continue  # the listing's own descriptor, closed by now
    tables = {}
    for proto in ("tcp", "tcp6", "udp", "udp6", "unix", "netlink"):
        try:
            tables[proto] = _read(f"/proc/self/net/{proto}")
        except OSError:
            continue
    return {"pid": os.getpid(), "count": len(names),
            "kinds": fd_kinds(targets, socket_inodes(tables))}
