"""No secret on any wire, and no frame that runs twice (docs/reference/security.md), on real
processes:

* a passive capture of the loopback interface (an ``AF_PACKET`` socket, as an observer on the
  path would have) runs while ``python -m scheduler serve`` starts a keyed malleable job on
  logical nodes, grows it onto a second node and shrinks it again for a rigid job; in no form
  (raw, hex, base64) does the capture hold the places' secret or the job's line key;
* the same capture around ``mpiexec -n 3`` (the secret handed to the ranks over MPI);
* every frame the places of a job sent during a computation, sent again unchanged to every
  place, runs nothing and changes no count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from capture import Capture, can_capture, found_in
from conftest import ROOT, env_for, wait_until

from scheduler.server import job_of

PY = sys.executable
UTS_D13 = 264_459_392
PROGRAMS = Path(__file__).parent / "programs"

needs_capture = pytest.mark.skipif(not can_capture(),
                                   reason="a packet capture needs root (CAP_NET_RAW)")


def _last_json(text: str) -> dict:
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in:\n{text[-2000:]}")


@needs_capture
@pytest.mark.timeout(180)
def test_no_secret_crosses_loopback_through_a_jobs_start_grow_and_shrink(tmp_path):
    from test_scheduler_real import Serve, job_spec, kill_all

    # UTS d=13 (a quarter of d=14's work; the same grow, shrink and exact count checked)
    # and decisions every 0.5 s: the shrink is done within about 4 s on a busy 2-core
    # machine, several seconds before the end (a shrink that missed the job fails
    # "shrinks >= 1")
    cap = Capture("lo").start()
    serve = Serve(tmp_path, "--nodes", "2", "--port", "0", "--cooldown", "0",
                  "--interval", "0.5")
    try:
        uts = serve.ask(op="submit", job=job_spec(
            "secret-uts", [PY, str(PROGRAMS / "secret_uts.py"), "13"],
            job_class="malleable", min_nodes=1, max_nodes=2))["jobs"][0]
        wait_until(lambda: serve.events("grow_done", uts), 60, "the grow onto node 2")
        key = bytes.fromhex((serve.run_dir / f"job-{uts}.key").read_text().strip())
        # a rigid job that holds a node for a moment (the malleable job shrinks for it)
        rigid = serve.ask(op="submit", job=job_spec(
            "rigid", [PY, "-c", "import time; time.sleep(0.5)"], job_class="rigid",
            nodes=1))["jobs"][0]
        wait_until(lambda: all(j["state"] not in ("waiting", "running", "pending")
                               for j in serve.ask(op="status")["jobs"]), 120, "both jobs")
        st = serve.ask(op="status")
        job = job_of(st, uts)
        assert job["state"] == "done" and job_of(st, rigid)["state"] == "done", st
        assert job["grows"] >= 1 and job["shrinks"] >= 1, job
        assert job["authenticated"]
        out = _last_json(Path(job["stdout"]).read_text())
    finally:
        wire = cap.stop()
        kill_all(serve.close())
    assert out["result"] == UTS_D13, out
    assert len(out["fingerprints"]) == 1  # every place holds the same secret
    secret = bytes.fromhex(out["secret"])
    assert len(wire) > 100_000 and cap.lost == 0  # the job's traffic was seen
    assert found_in(wire, secret) == []
    assert found_in(wire, key) == []


@needs_capture
@pytest.mark.timeout(120)
def test_no_secret_crosses_loopback_when_mpiexec_starts_the_places(tmp_path):
    cap = Capture("lo").start()
    try:
        run = subprocess.run(["mpiexec", "-n", "3", PY, str(PROGRAMS / "secret_uts.py"), "10"],
                             cwd=ROOT, env=env_for(ROOT), capture_output=True, text=True,
                             timeout=90)
    finally:
        wire = cap.stop()
    assert run.returncode == 0, run.stderr[-3000:]
    out = _last_json(run.stdout)
    assert out["result"] == 4_130_071 and out["places"] == 3
    assert len(out["fingerprints"]) == 1
    assert found_in(wire, bytes.fromhex(out["secret"])) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("start", ["spawn", "mpiexec"])
def test_every_captured_frame_sent_again_to_every_place_runs_nothing(start, tmp_path):
    prog = [PY, str(PROGRAMS / "replay.py")]
    argv = ["mpiexec", "-n", "3", *prog] if start == "mpiexec" else prog
    env = env_for(ROOT)
    if start == "spawn":
        env["APGAS_PLACES"] = "3"
    run = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=100)
    assert run.returncode == 0, run.stderr[-3000:]
    out = _last_json(run.stdout)
    assert out["frames"] >= 10, out  # the computation's traffic was recorded
    assert out["counts_before"] == out["counts_after"] == [100, 100, 100], out
    assert out["marker_runs"] == 0, out
    # every replayed frame was refused at every socket it was sent to
    assert sum(out["dropped"]) - sum(out["dropped_before"]) == out["sent"], out
