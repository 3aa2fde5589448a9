"""Reading Linux's ``/proc`` for the runtime-scale benchmark: the processes of a job, their CPU
time, memory and roles, and the file descriptors of a process.

Everything here reads ``/proc`` (proc(5)) and nothing else; the parsing functions take the
files' text, so they can be tested on any text.  A process that ends while it is being read is
left out (its files vanish: ``OSError``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "ProcStat", "parse_stat", "parse_status", "read_stat", "read_cmdline", "ppid_map",
    "descendants", "classify", "job_processes", "fd_info", "fd_kinds", "socket_inodes",
    "parse_smaps_rss", "top_mappings", "CLK_TCK",
    "PAGE_SIZE",
]

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class ProcStat(dict):  # type: ignore[type-arg]
    """The fields of ``/proc/<pid>/stat`` that the benchmark uses (a ``dict``): ``pid``,
    ``comm``, ``state``, ``ppid``, ``utime_s``, ``stime_s``, ``cutime_s``, ``cstime_s``
    (seconds), ``threads``, ``starttime`` (clock ticks after boot, identifies the process
    together with its pid) and ``rss_bytes``."""


def parse_stat(text: str, clk_tck: int = CLK_TCK, page_size: int = PAGE_SIZE) -> ProcStat:
    """Parse the one line of ``/proc/<pid>/stat`` (proc(5)).

    The command name (field 2) is in parentheses and may itself hold spaces and parentheses,
    so the fields after it are counted from the *last* ``)``.

    Args:
        text: the file's content.
        clk_tck: clock ticks per second (``sysconf(_SC_CLK_TCK)``), the unit of the times.
        page_size: bytes per page (``sysconf(_SC_PAGE_SIZE)``), the unit of field 24 (rss).

    Returns:
        A :class:`ProcStat`; times in seconds, RSS in bytes.

    Raises:
        ValueError: the text is not a stat line.
    """
    open_, close = text.find("("), text.rfind(")")
    if open_ < 0 or close < open_:
        raise ValueError(f"not a /proc/<pid>/stat line: {text[:60]!r}")
    rest = text[close + 2:].split()
    if len(rest) < 22:
        raise ValueError(f"not a /proc/<pid>/stat line (too few fields): {text[:60]!r}")
    # rest[0] is field 3 (state); field n is rest[n - 3]
    return ProcStat(
        pid=int(text[:open_]), comm=text[open_ + 1:close], state=rest[0], ppid=int(rest[1]),
        utime_s=int(rest[11]) / clk_tck, stime_s=int(rest[12]) / clk_tck,
        cutime_s=int(rest[13]) / clk_tck, cstime_s=int(rest[14]) / clk_tck,
        threads=int(rest[17]), starttime=int(rest[19]), rss_bytes=int(rest[21]) * page_size)


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
    """:func:`parse_stat` of ``/proc/<pid>/stat``.

    Raises:
        OSError: no such process (any more).
    """
    return parse_stat(_read(f"/proc/{pid}/stat"))


def read_cmdline(pid: int) -> list[str]:
    """The command line of ``pid`` (``/proc/<pid>/cmdline``, NUL-separated), ``[]`` for a
    zombie or kernel thread.

    Raises:
        OSError: no such process (any more).
    """
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        raw = fh.read()
    return [a.decode(errors="replace") for a in raw.split(b"\0")[:-1]] if raw else []


def ppid_map() -> dict[int, ProcStat]:
    """Every process now in ``/proc`` with its :func:`parse_stat` fields, by pid."""
    out: dict[int, ProcStat] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                out[int(name)] = read_stat(int(name))
            except (OSError, ValueError):
                continue  # ended meanwhile
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
