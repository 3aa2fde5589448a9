"""Test helpers: run real programs with real processes, with a watchdog, and leave nothing.

Programs run in their own session (``start_new_session``) so that signals MPICH's process
manager sends to a process group never reach pytest.  On a timeout the harness kills the
processes it started, by pid: the program and its descendants, found through /proc.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cluster.netns import netns_cluster, netns_cluster_factory  # noqa: F401 - fixtures
from cluster.slurm import slurm_cluster, slurm_session  # noqa: F401 - fixtures

# The multi-process tests time their orders and failures for the numpy kernels' speed (a UTS
# d = 12 run lasts seconds); the compiled kernels would finish most of them before the first
# order.  They run with numpy unless the environment or the test says otherwise; the tests
# that want the compiled kernels set APGAS_KERNELS=numba themselves.
os.environ.setdefault("APGAS_KERNELS", "numpy")

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = Path(__file__).resolve().parent / "programs"
BIN = Path(sys.executable).parent
MPIEXEC = str(BIN / "mpiexec")


def descendants(pid: int) -> list[int]:
    """Pids of all processes below ``pid`` (from /proc), deepest last."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid: int) -> bool:
    """True when ``pid`` is a running (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process below it."""
    for p in [pid, *descendants(pid)]:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass


def shut_down_server(proc: subprocess.Popen[Any], control: Path) -> None:
    """Ask a running ``python -m scheduler serve`` to shut down over its control socket and
    wait up to 20 s for it to exit (the caller kills what is left)."""
    from scheduler.control_client import ControlError, request

    if proc.poll() is not None:
        return
    try:
        request(control, {"op": "shutdown"}, timeout_s=30)
    except ControlError:
        pass
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pass


def wait_until(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``cond`` every 0.05 s until it is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def wait_decisions(server: Any, n: int = 2, timeout: float = 30.0) -> None:
    """Wait until the algorithm of ``server`` (a :class:`scheduler.server.Server` running in
    this process) has been asked ``n`` more times than now: the positive event that shows
    that ``n`` scheduling periods have passed, before a test checks that nothing happened in
    them.  Fails the test after ``timeout`` seconds."""
    start = server.result().decide_calls
    wait_until(lambda: server.result().decide_calls >= start + n, timeout,
               f"{n} more decisions of the scheduler")


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` runs; return those still running after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [p for p in left if alive(p)]
    return left


def old_journal(state: Path, without: tuple[str, ...], job_state: str) -> None:
    """Write a scheduler journal of an older schema into ``state``: today's
    (:class:`scheduler.journal.Journal`) less the ``jobs`` columns ``without``, holding one row,
    job 1 named ``old`` in ``job_state`` (``"running"``, ``"done"`` …), for the tests that a
    newer scheduler opens it, read only and to write."""
    from scheduler.journal import Journal

    Journal(state).close()
    db = sqlite3.connect(state / "journal.sqlite")
    try:
        for column in without:
            db.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
        db.execute("INSERT INTO jobs (id, spec, argv, state, submit_wall) VALUES "
                   "(1, '{\"name\": \"old\"}', '[]', ?, 1.0)", (job_state,))
        db.commit()
    finally:
        db.close()


@dataclass
class Result:
    """What a program run produced."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def json_lines(self) -> list[Any]:
        """Lines of stdout that are JSON objects, parsed."""
        return [json.loads(line) for line in self.lines if line.startswith("{")]


def env_for(places: int | None = None, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("APGAS_PLACES", None)
    if places is not None:
        env["APGAS_PLACES"] = str(places)
    env.update(extra)
    return env


def command(program: str | Path, mode: str, places: int, *args: str) -> list[str]:
    """The command line that runs ``program`` with ``places`` places.

    ``mode`` is ``"spawn"`` (plain python; place 0 spawns the others) or ``"mpiexec"``.
    """
    path = str(program if Path(program).is_absolute() else PROGRAMS / program)
    if mode == "spawn":
        return [sys.executable, path, *args]
    if mode == "mpiexec":
        return [MPIEXEC, "-n", str(places), sys.executable, path, *args]
    raise ValueError(mode)


def run_program(program: str | Path, places: int = 2, mode: str = "spawn", *args: str,
                timeout: float = 60, env: dict[str, str] | None = None,
                stdin: str | None = None) -> Result:
    """Run a program to its end (killing it and its descendants after ``timeout`` s)."""
    cmd = command(program, mode, places, *args)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env or env_for(places), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end within {timeout} s\n--- stdout\n{out}\n"
                    f"--- stderr\n{err}")
    return Result(proc.returncode, out, err)



def run_benchmark(name: str, args: list[str], places: int, mode: str = "spawn",
                  env: dict[str, str] | None = None, timeout: float = 120) -> Any:
    """Run ``python -m benchmarks.<name> <args> --json`` (under ``mpiexec -n places`` when
    ``mode`` is ``"mpiexec"``) and return its last stdout line parsed as JSON; fails the test
    when it exits non-zero, and kills it with its descendants after ``timeout`` s."""
    import json

    cmd = [sys.executable, "-m", f"benchmarks.{name}", *args, "--json"]
    if mode == "mpiexec":
        cmd = [MPIEXEC, "-n", str(places), *cmd]
    rc, out, err = run_command(cmd, env or env_for(places), timeout)
    assert rc == 0, err
    return json.loads(out.strip().splitlines()[-1])


def run_command(cmd: list[str], env: dict[str, str], timeout: float,
                cwd: Path = ROOT) -> tuple[int, str, str]:
    """Run ``cmd`` in ``cwd`` (default the repository root) in a session of its own and return
    its exit status, stdout and stderr; after ``timeout`` s kill it with its descendants and
    fail the test."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end within {timeout} s\n{out}\n{err}")
    return proc.returncode, out, err

class Program:
    """A program running in the background, for tests that talk to it while it runs."""

    def __init__(self, program: str | Path, places: int = 2, mode: str = "spawn", *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.cmd = command(program, mode, places, *args)
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=env or env_for(places), text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, bufsize=1)

    def readline(self, timeout: float = 30) -> str:
        """The next line of stdout (without the newline); fails the test after ``timeout``."""
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        try:
            if not sel.select(timeout):
                self.kill()
                pytest.fail(f"no output from {' '.join(self.cmd)} within {timeout} s")
        finally:
            sel.close()
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            self.kill()
            err = self.proc.stderr.read()  # type: ignore[union-attr]
            pytest.fail(f"{' '.join(self.cmd)} ended early\n--- stderr\n{err}")
        return line.rstrip("\n")

    def send(self, text: str) -> None:
        """Write ``text`` to the program's stdin."""
        self.proc.stdin.write(text)  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def finish(self, timeout: float = 60) -> Result:
        """Wait for the end; kill everything after ``timeout`` s and fail."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            out, err = self.proc.communicate()
            pytest.fail(f"{' '.join(self.cmd)} did not end within {timeout} s\n{err}")
        return Result(self.proc.returncode, out, err)

    def kill(self) -> None:
        """Kill the program and its descendants."""
        kill_tree(self.proc.pid)


@pytest.fixture
def program_factory():
    """Start background programs; whatever is still running at the end is killed."""
    started: list[Program] = []

    def start(*args: Any, **kwargs: Any) -> Program:
        prog = Program(*args, **kwargs)
        started.append(prog)
        return prog

    yield start
    for prog in started:
        if prog.proc.poll() is None:
            prog.kill()
            prog.proc.communicate()
