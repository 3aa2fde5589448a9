"""Process trees of running jobs, found through psutil, and how to end them.

A job is started in its own session (``start_new_session``), but its processes do not all
stay there: MPICH's ``hydra_pmi_proxy`` calls ``setsid``, and a process whose parent ends is
re-parented to init, so neither the session nor the parent links alone find every process a
job made.  :class:`ProcessTree` therefore *remembers* every process it has ever seen below
the job (its pid and start time, so that a reused pid is never taken for it) and, at each
:meth:`~ProcessTree.refresh`, adds the descendants of the job's root, of every remembered
process still alive, and every process of the root's session.  Ending a job signals all of
them, as ``tests/conftest.py`` does for the test programs.

The process table comes from psutil (parent, start time, state) and ``os.getsid`` (the
session, which psutil does not report); sessions make this POSIX only.  Nothing here kills a
process the tree has not seen below its root.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass

import psutil

__all__ = ["AdoptedProcess", "ProcInfo", "ProcessTree", "alive", "proc_table", "start_time"]

_GONE = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


@dataclass(frozen=True)
class ProcInfo:
    """What a process tree needs to know of one process.

    Attributes:
        ppid: the parent's pid.
        sid: the session id (-1 when it could not be read).
        start: the start time (seconds since the epoch, psutil's ``create_time``), which
            tells a process from a later one with the same pid.
        status: psutil's status (``"running"``, ``"sleeping"``, ``"zombie"`` …).
    """

    ppid: int
    sid: int
    start: float
    status: str

    @property
    def running(self) -> bool:
        """Not a zombie nor dead."""
        return self.status not in _GONE


def _sid(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def _read(pid: int) -> ProcInfo | None:
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            return ProcInfo(proc.ppid(), _sid(pid), proc.create_time(), proc.status())
    except psutil.Error:
        return None


def proc_table() -> dict[int, ProcInfo]:
    """Every process of this machine (this pid namespace): pid → :class:`ProcInfo`."""
    table: dict[int, ProcInfo] = {}
    for proc in psutil.process_iter(["ppid", "create_time", "status"]):
        ppid, start, status = (proc.info[k] for k in ("ppid", "create_time", "status"))
        if ppid is not None and start is not None and status is not None:
            table[proc.pid] = ProcInfo(ppid, _sid(proc.pid), start, status)
    return table


def alive(pid: int, start: float | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, when ``start`` is given, is still the process
    that started at that time (:attr:`ProcInfo.start`), not a later one with a reused pid."""
    info = _read(pid)
    return info is not None and info.running and (start is None or info.start == start)


def start_time(pid: int) -> float | None:
    """The start time of ``pid`` (psutil ``create_time``, s since the epoch), or None when
    it does not exist."""
    info = _read(pid)
    return None if info is None else info.start


def read_status(path: str | os.PathLike[str] | None) -> int | None:
    """The exit status a launcher wrapper wrote to ``path`` (one integer; a status above 128
    is a death by that signal, given as minus the signal, as ``subprocess`` does), or None
    when there is no such file or it does not hold a number."""
    if path is None:
        return None
    try:
        code = int(open(path, encoding="ascii").read().strip())  # noqa: SIM115
    except (OSError, ValueError):
        return None
    return -(code - 128) if 128 < code < 128 + 65 else code


class AdoptedProcess:
    """A job's first process that is not our child (found again after a restart): the parts
    of ``subprocess.Popen`` the scheduler uses, through psutil.

    Args:
        pid: the process id.
        start: its start time (:func:`start_time`), which tells it from a later process with
            the same pid.
        status_file: where its launcher wrapper writes its exit status, or None.
    """

    def __init__(self, pid: int, start: float | None, status_file: str | None) -> None:
        self.pid = pid
        self.start = start
        self.status_file = status_file
        self.returncode: int | None = None
        self._gone = False

    def running(self) -> bool:
        """Whether it still runs; once it has not, ``returncode`` is read from the status
        file (None when unknown)."""
        if self._gone:
            return False
        if alive(self.pid, self.start):
            return True
        self._gone = True
        self.returncode = read_status(self.status_file)
        return False

    def poll(self) -> int | None:
        """``Popen.poll``: the exit status once ended (None while running, or unknown)."""
        self.running()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds (None: for ever) for it to end; return the exit
        status (None when unknown).

        Raises:
            TimeoutError: still running after ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.running():
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"process {self.pid} still runs")
            time.sleep(0.05)
        return self.returncode


class ProcessTree:
    """Every process a job has made, as far as the process table shows it (module
    docstring).

    Args:
        root: the pid of the job's first process (the one the scheduler started, a session
            leader when started with ``start_new_session=True``).
    """

    def __init__(self, root: int) -> None:
        self.root = root
        info = _read(root)
        self.session = info.sid if info is not None and info.sid == root else None
        #: pid → start time of every process seen below the root (the root included).
        self.known: dict[int, float] = {root: info.start} if info is not None else {}

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
