"""The runtime end to end: real programs, real processes, spawned and under mpiexec."""

from __future__ import annotations

import os
import pickle
import secrets
import shutil
import time
from pathlib import Path

import pytest
import zmq
from conftest import ROOT, env_for, run_program, wait_gone, wait_until

MODES = ["spawn", "mpiexec"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("places", [1, 2, 4])
def test_hello(mode, places):
    r = run_program(ROOT / "examples" / "hello.py", places, mode, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.lines
    explain = f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    assert lines[-1] == "Bye", explain
    assert sorted(lines[:-1]) == sorted(f"Hello from place({i})" for i in range(places)), explain


@pytest.mark.parametrize("mode,places", [("spawn", 1), ("spawn", 2), ("spawn", 3),
                                         ("mpiexec", 2), ("mpiexec", 3)])
def test_api_checks(mode, places):
    r = run_program("api_checks.py", places, mode, timeout=120)
    results = r.json_lines()
    failed = [c for c in results if not c["ok"]]
    assert not failed, "\n".join(f"{c['check']}:\n{c['error']}" for c in failed)
    assert len(results) == 21 and r.returncode == 0, r.stderr


@pytest.mark.parametrize("mode,places,seed", [("spawn", 3, 1), ("spawn", 2, 2),
                                              ("mpiexec", 3, 3)])
def test_stress_random_trees(mode, places, seed):
    r = run_program("stress.py", places, mode, str(seed), "8", timeout=180)
    trees = r.json_lines()
    assert len(trees) == 3, r.stderr
    for t in trees:
        assert t["nodes"] == t["expected_nodes"] and t["errors"] == t["expected_errors"], t
        assert t["mismatches"] == [], t
    assert sum(t["nodes"] for t in trees) > 3000  # thousands of tasks
    assert sum(t["errors"] for t in trees) > 0  # and failing leaves
    assert r.returncode == 0


@pytest.mark.parametrize("mode", MODES)
def test_no_process_left_behind(mode):
    r = run_program("pids.py", 3, mode, timeout=60)
    assert r.returncode == 0, r.stderr
    report = r.json_lines()[0]
    pids = [int(p) for p in report["pids"].values()]
    assert len(set(pids)) == 3
    anchors = [a[0] for pid, a in report["anchors"].items() if pid != "0"]
    assert wait_gone(pids + (anchors if mode == "spawn" else []), 10) == []


@pytest.mark.timeout(60)
def test_spawns_one_at_a_time():
    """APGAS_SPAWN_CONCURRENCY=1: place 0 spawns the 3 places one after the other; every place
    starts, and the bad value 0 is refused by name."""
    r = run_program("pids.py", 4, "spawn", env=env_for(4, APGAS_SPAWN_CONCURRENCY="1"))
    assert r.returncode == 0, r.stderr
    assert sorted(r.json_lines()[0]["pids"]) == ["0", "1", "2", "3"]
    r = run_program("pids.py", 2, "spawn", env=env_for(2, APGAS_SPAWN_CONCURRENCY="0"))
    assert r.returncode != 0 and "APGAS_SPAWN_CONCURRENCY" in r.stderr, r.stderr


@pytest.mark.timeout(60)
def test_a_spawned_place_anchor_waits_small():
    """Memory per place: after the MPI handshake a spawned place's anchor has
    finalized MPI and become GNU tail (argv[0] apgaspy-anchor), about 2 MB RSS, where
    it kept 38 MB of interpreter, apgaspy and MPICH before: ``tail --pid`` for a launcher of
    one place, ``tail -c 1`` on the pipe its places hold for a launcher of several (places 1
    and 2 of one host share one)."""
    if shutil.which("tail") is None:
        pytest.skip("no tail on PATH: the anchor waits as a small interpreter instead")
    for group, shared in (("1", False), (None, True)):
        env = env_for(3, APGAS_LAUNCH_GROUP=group) if group else None
        r = run_program("pids.py", 3, "spawn", timeout=60, env=env)
        assert r.returncode == 0, r.stderr
        anchors = r.json_lines()[0]["anchors"]
        for pid in ("1", "2"):
            anchor_pid, argv, rss_kb = anchors[pid]
            assert argv[0] == "apgaspy-anchor", argv
            assert argv[1:] == ["-c", "1"] if shared else argv[1].startswith("--pid="), argv
            assert rss_kb < 4096, anchors  # tail: 1.7-1.8 MB here
        assert (anchors["1"][0] == anchors["2"][0]) == shared, anchors
        assert "apgaspy-anchor" not in anchors["0"][1]  # place 0 is the program itself


@pytest.mark.timeout(30)
def test_the_python_anchor_waiter_forwards_signals_and_ends_with_its_place():
    """Where there is no GNU tail, the anchor runs _child.py again as its waiter
    (``python -I -S _child.py apgaspy-anchor <pid>``): it forwards SIGTERM to the place and
    exits 0 when the place has ended."""
    import signal
    import subprocess
    import sys

    script = ROOT / "apgaspy" / "_child.py"
    code = ("import os, sys, time\n"
            "child = os.fork()\n"
            "if child == 0:\n"
            "    time.sleep(60)\n"  # the place runs on until the waiter ends it
            "    os._exit(0)\n"
            "print(child, flush=True)\n"
            f"os.execv(sys.executable, [sys.executable, '-I', '-S', {str(script)!r}, "
            "'apgaspy-anchor', str(child)])\n")
    waiter = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    place = int(waiter.stdout.readline())
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the waiter catches SIGTERM
            status = Path(f"/proc/{waiter.pid}/status").read_text()
            caught = int(next(ln for ln in status.splitlines() if ln.startswith("SigCgt:"))
                         .split()[1], 16)
            if caught & (1 << (signal.SIGTERM - 1)):
                break
            time.sleep(0.02)
        assert "apgaspy-anchor" in Path(f"/proc/{waiter.pid}/cmdline").read_text()
        os.kill(waiter.pid, signal.SIGTERM)
        assert waiter.wait(10) == 0  # forwarded, then the place ended and so did the waiter
        assert wait_gone([place], 5) == []
    finally:
        for pid in (place, waiter.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        waiter.wait(5)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_to_a_waiting_anchor_does_not_end_the_job(sig):
    """The waiting anchor ignores TERM, INT and HUP: ended by one, it would be an abnormal
    exit, and MPICH's Hydra would kill every process of the job, place 0 included (it did,
    rc -9, before the anchor ignored them)."""
    r = run_program("signal_anchor.py", 3, "spawn", sig, timeout=60)
    assert r.returncode == 0, r.stderr
    report = r.json_lines()[0]
    if shutil.which("tail") is not None:
        assert report["anchor"] == "apgaspy-anchor"
    assert report["ignored"] is True  # discarded when sent: nothing comes of it later
    assert report["place2"] == "alive" and report["places"] == [0, 1, 2]
    assert "BAD TERMINATION" not in r.stdout + r.stderr
    assert wait_gone([report["anchor_pid"]], 10) == []


@pytest.mark.parametrize("mode", MODES)
def test_main_raising_ends_everything(mode):
    r = run_program("main_raises.py", 3, mode, timeout=60)
    assert r.returncode != 0
    assert "main failed on purpose" in r.stderr
    pids = [int(p) for p in r.json_lines()[0]["pids"].values()]
    assert wait_gone(pids, 10) == []


def test_dead_place_fails_the_finish():
    t = time.monotonic()
    r = run_program("dead_place.py", 3, "spawn", timeout=60)
    assert r.returncode == 0, r.stderr
    first, report = r.json_lines()
    assert report["errors"] == [["DeadPlaceError", 2]]
    assert report["waited"] < 5.0  # "within a few seconds", not the 60 s the task sleeps
    assert report["places"] == [0, 1] and report["survivors"] == [0, 1]
    assert report["at_error"] == 2
    pids = [int(p) for p in first["pids"].values()]
    assert wait_gone(pids, 10) == []
    assert time.monotonic() - t < 30


def test_stranger_gets_no_code_run(program_factory, tmp_path):
    marker = tmp_path / "pwned"
    prog = program_factory("stranger.py", 2, "spawn")
    endpoint = __import__("json").loads(prog.readline())["endpoint"].partition("#")[0]

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    payload = pickle.dumps(Evil())
    framed = len(payload).to_bytes(4, "little") + payload
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 2000)
    sock.connect(endpoint)
    forged = [
        [payload],  # unsigned
        [secrets.token_bytes(32), payload],  # random signature
        [__import__("hashlib").blake2b(framed, key=b"x" * 32, digest_size=32).digest()
         + framed],  # well framed, signed with the wrong key
        [b"garbage", b"\x00" * 1000, payload],  # malformed
    ]
    for frames in forged:
        sock.send_multipart(frames)
    sock.close()
    ctx.term()

    def dropped() -> int:
        prog.send("count\n")
        return __import__("json").loads(prog.readline())["dropped"]

    wait_until(lambda: dropped() >= 7, 30, "place 1 to drop the forged frames")
    prog.send("go\n")
    report = __import__("json").loads(prog.readline())
    result = prog.finish()
    assert result.returncode == 0, result.stderr
    # Each frame is checked on its own: 1 + 2 + 1 + 3 frames above, none unpickled.
    assert report == {"dropped": 7, "still_works": 42}
    assert not marker.exists()
    assert "failed authentication" in result.stderr


@pytest.mark.parametrize("mode", MODES)
def test_what_an_at_task_prints_is_written_before_the_at_returns(mode):
    """Since ``at`` waits on an inbox of its thread, the UPDATE no longer shares a
    connection with the output that place 0's receiver writes; now the UPDATE names the last
    output sent before it and waits for it to be written.  Before, 32 of 300 lines came late."""
    r = run_program("at_output_order.py", 3, mode, timeout=90)
    assert r.returncode == 0, r.stderr
    lines = r.lines
    where = {line: n for n, line in enumerate(lines)}
    assert len(where) == len(lines) == 60 * (2 * 2 + 3 + 1), r.stdout
    late = []
    for i in range(60):
        for p in (1, 2):
            if where[f"remote {i} at {p}"] > where[f"local {i} after {p}"]:
                late.append(f"remote {i} at {p}")
        for q in (0, 2):  # place 0 writes its own; place 2 is where the at ran
            if where[f"fan {i} from {q}"] > where[f"local {i} after fan"]:
                late.append(f"fan {i} from {q}")
    assert late == []


def test_bad_configuration_is_reported():
    r = run_program(ROOT / "examples" / "hello.py", 2, "spawn",
                    env={**os.environ, "APGAS_PLACES": "two"}, timeout=30)
    assert r.returncode != 0
    assert "APGAS_PLACES='two'" in r.stderr and "ConfigurationError" in r.stderr


def test_output_survives_a_slow_reader():
    """Nothing reads place 0's stdout until the pipe is full (place 0 is then blocked in its
    write); then all of it is read."""
    import array
    import fcntl
    import subprocess
    import sys
    import termios

    from conftest import PROGRAMS, env_for, kill_tree

    proc = subprocess.Popen([sys.executable, str(PROGRAMS / "big_output.py")], cwd=ROOT,
                            env=env_for(3), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)

    def unread() -> int:
        buf = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, buf)
        return buf[0]

    try:
        wait_until(lambda: unread() >= capacity or proc.poll() is not None, 60,
                   "place 0 to fill the pipe")
        assert proc.poll() is None  # the writer waits for the reader
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        raise
    assert proc.returncode == 0, err
    assert out == b"3:" + b"x" * 300_000 + b"\n"


def test_missing_process_manager_is_a_clear_error(monkeypatch, tmp_path):
    import shutil
    import sys

    from apgaspy import ApgasError, _spawn

    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(ApgasError, match="pip install mpich"):
        _spawn.ensure_process_manager()


@pytest.mark.timeout(90)
def test_a_main_module_without_a_guard_fails_fast_and_says_why(tmp_path):
    """Spawned places import the main module (as multiprocessing does); one that starts a
    computation at import used to hang for ever.  Now each place refuses, and place 0's run()
    raises StartupError naming the places."""
    prog = tmp_path / "unguarded.py"
    prog.write_text("from apgaspy import places, run\n\n\n"
                    "def main():\n    return len(places())\n\n\n"
                    "print(run(main))\n")
    t = time.monotonic()
    r = run_program(prog, 3, "spawn", timeout=60)
    assert r.returncode == 1, r.stderr
    assert time.monotonic() - t < 30
    assert "StartupError: 2 place(s) did not start" in r.stderr, r.stderr
    for p in (1, 2):
        assert (f"place({p}) imports the program's main module, and the module starts a "
                f"computation at import") in r.stderr, r.stderr
    assert "if __name__ == \"__main__\":" in r.stderr
