"""Stopping a run: the first SIGINT (Ctrl-C) or SIGTERM anywhere ends the whole job in seconds.

Real runs of ``tests/programs/interrupted.py`` (3 places) in both start modes, embedded
(``python prog.py``, place 0 spawns the others) and ``mpiexec -n 3``, interrupted during a GLB
computation (UTS, minutes long) or during an ``at`` that blocks place 0: the signal goes to the
launcher (the terminal's process group for the embedded start, as Ctrl-C does; ``mpiexec``),
to a place other than 0, or to place 0.  Each run must end within 5 s with exit status 130
(SIGINT) or 143 (SIGTERM), one line on stderr and no traceback, place 0's ``finally`` block
run, and no process of its tree left (sampled with psutil while it runs).  Also: a second
signal forces the end, and a scheduler job that is cancelled (SIGTERM to its processes) ends
its places the same way.  The semantics: docs/concepts/failures.md, "Stopping a run".

A place that dies of another signal (SIGKILL) stays a dead place:
``tests/test_programs.py::test_dead_place_fails_the_finish``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import (
    PROGRAMS,
    ROOT,
    command,
    env_for,
    kill_tree,
    shut_down_server,
    wait_gone,
    wait_until,
)

PROGRAM = PROGRAMS / "interrupted.py"
BOUND_S = 5.0  # the run ends within this many seconds of the signal


class TreeWatch:
    """Every process below ``pid`` (and ``pid``), sampled with psutil every 0.05 s."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: set[int] = {pid}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        try:
            self.seen.update(c.pid for c in psutil.Process(self.pid).children(recursive=True))
        except psutil.Error:
            pass

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            time.sleep(0.05)

    def stop(self) -> set[int]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.seen


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _interrupt(mode: str, kind: str, target: str, sig: signal.Signals, *,
               twice: bool = False, frozen: int | None = None,
               **env: str) -> tuple[int, str, str, float, dict[int, int]]:
    """Run ``interrupted.py kind`` on 3 places in ``mode``, send ``sig`` to ``target``
    (``launcher``, or a place id) once its work runs (``twice``: again once place 0's
    ``finally`` block has begun; ``frozen``: SIGSTOP that place first); return the exit
    status, stdout, stderr, the seconds from the (last) signal to the end, and the places'
    pids.  Fails when a process of the run is left 5 s after its end."""
    proc = subprocess.Popen(command(PROGRAM, mode, 3, kind), cwd=ROOT,
                            env=env_for(3, **env), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    watch = TreeWatch(proc.pid)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert line.startswith("{"), (line, proc.stderr.read())  # type: ignore[union-attr]
        places = {int(k): v for k, v in json.loads(line)["pids"].items()}
        # paces on purpose: the signal must come while the work runs at every place, and the
        # program tells only when it starts the work, not when the work has spread
        time.sleep(1.5)
        watch.sample()
        assert set(places.values()) <= watch.seen
        if frozen is not None:
            os.kill(places[frozen], signal.SIGSTOP)
        early = ""  # stdout read before the end
        for i in range(2 if twice else 1):
            while i and "finally ran at place 0" not in early:  # place 0 hangs in its finally
                more = proc.stdout.readline()  # type: ignore[union-attr]
                assert more, ("the run ended before the second signal", early)
                early += more
            if target == "launcher" and mode == "spawn":
                os.killpg(proc.pid, sig)  # Ctrl-C in a terminal: the whole process group
            else:
                os.kill(proc.pid if target == "launcher" else places[int(target)], sig)
            sent = time.monotonic()
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            out, err = proc.communicate()
            pytest.fail(f"the run did not end 30 s after {sig.name}\n{out}\n{err}")
        took = time.monotonic() - sent
        out = early + out
        seen = watch.stop()
        left = wait_gone(sorted(seen), BOUND_S)
        assert left == [], [(p, psutil.Process(p).cmdline()) for p in left if psutil.pid_exists(p)]
        return proc.returncode, out, err, took, places
    finally:
        watch.stop()
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.communicate()
        _kill({p for p in watch.seen if p != proc.pid and psutil.pid_exists(p)})


CASES = [
    # mode, work, who gets the signal, signal
    ("spawn", "glb", "launcher", signal.SIGINT),
    ("spawn", "glb", "2", signal.SIGINT),
    ("spawn", "at", "0", signal.SIGINT),
    ("spawn", "at", "1", signal.SIGTERM),
    ("mpiexec", "glb", "launcher", signal.SIGINT),
    ("mpiexec", "glb", "0", signal.SIGINT),
    ("mpiexec", "at", "1", signal.SIGINT),
    ("mpiexec", "at", "launcher", signal.SIGTERM),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("mode", "kind", "target", "sig"), CASES,
                         ids=[f"{m}-{k}-{t}-{s.name}" for m, k, t, s in CASES])
def test_the_first_signal_ends_the_whole_run(mode, kind, target, sig):
    rc, out, err, took, places = _interrupt(mode, kind, target, sig)
    assert rc == 128 + sig, (rc, out, err)
    assert took < BOUND_S, took
    assert "finally ran at place 0" in out
    where = r"\d" if target == "launcher" else target  # mpiexec: the first rank to tell
    lines = [ln for ln in err.splitlines() if ln.startswith("apgaspy:")]
    assert len(lines) == 1 and re.fullmatch(
        rf"apgaspy: interrupted \({sig.name}\) at place {where}; ending 3 places", lines[0]), err
    assert "Traceback" not in err and "apgaspy.run(main)" not in err, err
    assert len(places) == 3


@pytest.mark.timeout(60)
def test_apgas_debug_adds_place_zeros_traceback():
    rc, out, err, took, _ = _interrupt("spawn", "at", "0", signal.SIGINT, APGAS_DEBUG="1")
    assert rc == 130 and took < BOUND_S, (rc, err)
    assert "Traceback" in err and "apgaspy._exceptions.Interrupted: SIGINT at place(0)" in err
    assert err.rstrip().endswith("apgaspy: interrupted (SIGINT) at place 0; ending 3 places")


@pytest.mark.timeout(60)
def test_a_second_signal_forces_the_end():
    """Place 0's finally block hangs (120 s): the second Ctrl-C kills what is left at once
    and exits 130."""
    rc, out, err, took, _ = _interrupt("spawn", "stuck", "launcher", signal.SIGINT, twice=True)
    assert rc == 130 and took < BOUND_S, (rc, err)
    assert "finally ran at place 0" in out
    assert "apgaspy: SIGINT again at place 0: ending at once" in err


@pytest.mark.timeout(60)
def test_a_place_that_does_not_answer_is_killed():
    """Place 2 is stopped (SIGSTOP): it cannot say goodbye, so place 0 kills it after
    ``APGAS_INTERRUPT_TIMEOUT`` (0.5 s here) instead of leaving it behind."""
    rc, out, err, took, _ = _interrupt("spawn", "at", "0", signal.SIGINT, frozen=2,
                                       APGAS_INTERRUPT_TIMEOUT="0.5")
    assert rc == 130 and took < BOUND_S, (rc, err)
    assert "place(2) did not end when told: killing its process" in err
    assert "apgaspy: interrupted (SIGINT) at place 0; ending 3 places" in err


@pytest.mark.timeout(90)
def test_a_cancelled_scheduler_job_ends_its_places(tmp_path):
    """``python -m scheduler serve`` on 2 logical nodes runs the program as a rigid job (a
    place per node); ``cancel`` SIGTERMs every process of the job: the places end within 5 s
    (the grace before SIGKILL is 30 s, so no SIGKILL does it), place 0's finally ran, and the
    job's stderr has the one line."""
    from scheduler.control_client import request

    control = tmp_path / "control.sock"
    env = dict(os.environ)
    env.pop("APGAS_PLACES", None)
    argv = [sys.executable, "-m", "scheduler",
            "serve", "--control", str(control), "--log", str(tmp_path / "events.jsonl"),
            "--run-dir", str(tmp_path / "run"), "--interval", "1", "--nodes", "2", "--port",
            "0", "--grace", "30"]
    with open(tmp_path / "serve.err", "wb") as log:
        server = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=log, start_new_session=True)
    watch = TreeWatch(server.pid)
    try:
        wait_until(lambda: control.exists() or server.poll() is not None, 30, "the server")
        job = request(control, {"op": "submit", "job": {
            "name": "interrupted", "command": command(PROGRAM, "spawn", 2, "at"),
            "required_time_s": 120, "job_class": "rigid", "nodes": 2}})["jobs"][0]
        out = tmp_path / "run" / f"job-{job}.out"
        wait_until(lambda: out.exists() and out.read_text().startswith("{"), 60,
                   "the job's places")
        places = json.loads(out.read_text().splitlines()[0])["pids"]
        assert len(places) == 2

        def every_place_seen() -> bool:
            watch.sample()
            return {int(pid) for pid in places.values()} <= watch.seen

        wait_until(every_place_seen, 10, "the job's places below the server")
        seen = set(watch.seen) - {server.pid}
        cancel = request(control, {"op": "cancel", "job": job})
        t = time.monotonic()
        assert cancel.get("ok", True), cancel
        assert wait_gone(sorted(seen), BOUND_S) == [], "the job's processes outlived 5 s"
        assert time.monotonic() - t < BOUND_S
        wait_until(lambda: "interrupted" in (tmp_path / "run" / f"job-{job}.err").read_text(),
                   5, "the job's line on stderr")
        err = (tmp_path / "run" / f"job-{job}.err").read_text()
        assert re.search(r"^apgaspy: interrupted \(SIGTERM\) at place \d; ending 2 places$",
                         err, re.M), err
        assert "Traceback" not in err, err
        assert "finally ran at place 0" in out.read_text()
        events = [json.loads(ln) for ln in (tmp_path / "events.jsonl").read_text().splitlines()]
        assert not [e for e in events if e["event"] == "sigkill" and e.get("job") == job]
    finally:
        shut_down_server(server, control)
        seen = watch.stop()
        if server.poll() is None:
            kill_tree(server.pid)
            server.wait(timeout=10)
        _kill({p for p in seen if p != server.pid and psutil.pid_exists(p)})
    assert wait_gone(sorted(seen), 10) == []


@pytest.mark.timeout(30)
def test_threads_started_shielded_hand_the_blocked_signals_to_their_processes():
    """What keeps MPICH's process manager out of an interrupt: a thread started inside
    ``shielded()`` (place 0's launch threads) has SIGINT and SIGTERM blocked, and a process
    it starts inherits the mask through fork and exec; the caller's own mask is back after
    the block."""
    from apgaspy._interrupt import INTERRUPTS, shielded

    started: list[subprocess.Popen[bytes]] = []
    with shielded():
        thread = threading.Thread(target=lambda: started.append(
            subprocess.Popen(["sleep", "30"])))
        thread.start()
    thread.join(10)
    assert not set(INTERRUPTS) & signal.pthread_sigmask(signal.SIG_BLOCK, [])
    (proc,) = started
    try:
        status = Path(f"/proc/{proc.pid}/status").read_text().splitlines()
        blocked = int(next(ln for ln in status if ln.startswith("SigBlk:")).split()[1], 16)
        for sig in INTERRUPTS:
            assert blocked & (1 << (sig - 1)), (sig, hex(blocked))
    finally:
        proc.kill()
        proc.wait(5)
