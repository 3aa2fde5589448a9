"""Process trees of running jobs, found through ``/proc``, and how to end them.

A job is started in its own session (``start_new_session``), but its processes do not all
stay there: MPICH's ``hydra_pmi_proxy`` calls ``setsid``, and a process whose parent ends is
re-parented to init, so neither the session nor the parent links alone find every process a
job made.  :class:`ProcessTree` therefore *remembers* every process it has ever seen below
the job (its pid and start time, so that a reused pid is never taken for it) and, at each
:meth:`~ProcessTree.refresh`, adds the descendants of the job's root, of every remembered
process still alive, and every process of the root's session.  Ending a job signals all of
them, as ``tests/conftest.py`` does for the test programs.

Linux only (``/proc``).  Nothing here kills a process the tree has not seen below its root.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass

__all__ = ["ProcInfo", "ProcessTree", "alive", "proc_table"]


@dataclass(frozen=True)
class ProcInfo:
    """One line of ``/proc/<pid>/stat``: parent pid, session id, start time (clock ticks
    since boot), and state letter (``R``, ``S``, ``Z`` …)."""

    ppid: int
    sid: int
    start: int
    state: str

    @property
    def running(self) -> bool:
        """Not a zombie (``Z``) nor dead (``X``)."""
        return self.state not in ("Z", "X")


def _read_stat(pid: int) -> ProcInfo | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    try:
        return ProcInfo(int(fields[1]), int(fields[3]), int(fields[19]), fields[0])
    except (IndexError, ValueError):
        return None


def proc_table() -> dict[int, ProcInfo]:
    """Every process of this machine (this pid namespace): pid → :class:`ProcInfo`."""
    table: dict[int, ProcInfo] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = _read_stat(int(entry))
            if info is not None:
                table[int(entry)] = info
    return table


def alive(pid: int, start: int | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, when ``start`` is given, is still the process
    that started at that time (clock ticks since boot), not a later one with a reused pid."""
    info = _read_stat(pid)
    return info is not None and info.running and (start is None or info.start == start)


class ProcessTree:
    """Every process a job has made, as far as ``/proc`` shows it (module docstring).

    Args:
        root: the pid of the job's first process (the one the scheduler started, a session
            leader when started with ``start_new_session=True``).
    """

    def __init__(self, root: int) -> None:
        self.root = root
        info = _read_stat(root)
        self.session = info.sid if info is not None and info.sid == root else None
        #: pid → start time of every process seen below the root (the root included).
        self.known: dict[int, int] = {root: info.start} if info is not None else {}

    def refresh(self, table: dict[int, ProcInfo] | None = None) -> None:
        """Add the processes now below the root, below remembered ones, or in its session.

        Args:
            table: a :func:`proc_table` to use (one scan can serve several trees).
        """
        table = proc_table() if table is None else table
        children: dict[int, list[int]] = {}
        for pid, info in table.items():
            children.setdefault(info.ppid, []).append(pid)
        todo = [pid for pid, start in self.known.items()
                if pid in table and table[pid].start == start]
        if self.session is not None:
            todo += [pid for pid, info in table.items() if info.sid == self.session]
        seen: set[int] = set()
        while todo:
            pid = todo.pop()
            if pid in seen or pid not in table:
                continue
            seen.add(pid)
            self.known.setdefault(pid, table[pid].start)
            todo.extend(children.get(pid, ()))

    def alive(self, table: dict[int, ProcInfo] | None = None) -> list[int]:
        """Pids of the remembered processes still running (same start time, not zombies)."""
        if table is None:
            return [pid for pid, start in self.known.items() if alive(pid, start)]
        return [pid for pid, start in self.known.items()
                if pid in table and table[pid].start == start and table[pid].running]

    def signal(self, sig: int) -> list[int]:
        """Refresh, then send ``sig`` to every live process of the tree; return their pids.

        Processes that have ended meanwhile, or that this user may not signal, are skipped.
        """
        self.refresh()
        pids = self.alive()
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        return pids

    def end(self, grace_s: float = 5.0, *, poll_s: float = 0.05) -> list[int]:
        """SIGTERM the whole tree, wait up to ``grace_s`` seconds, SIGKILL what is left.

        Blocks for up to ``grace_s`` + 2 seconds.  Returns the pids still running at the end
        (normally none; a process in uninterruptible sleep may outlive SIGKILL for a moment).
        """
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while self.alive() and time.monotonic() < deadline:
            time.sleep(poll_s)
            self.refresh()
        if self.alive():
            self.signal(signal.SIGKILL)
        deadline = time.monotonic() + 2.0
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(poll_s)
        return left
