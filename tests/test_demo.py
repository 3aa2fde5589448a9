"""``python -m scheduler demo`` is sized by time (:mod:`scheduler.demo`): its jobs are
calibrated from a measured Pi run, so that on any machine the batch needs a shrink (a rigid
job arrives while a malleable one holds every node) and a grow (that job ends while the
malleable one still runs), and every answer is checked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, env_for

from benchmarks.uts import KNOWN
from scheduler.demo import DEMO_PLAN, demo_batch, demo_entries, printed_result


def test_the_batch_is_sized_from_the_rate():
    jobs = demo_batch(1e8, 2.0)
    assert [j.submit_s for j in jobs] == [t.submit * 2.0 for t in DEMO_PLAN]
    pi_m = next(j for j in jobs if j.name == "pi-m")
    assert f"-n {int(1e8 * 24 * 2.0)} " in pi_m.command + " "
    uts = next(j for j in jobs if "benchmarks.uts" in j.command)
    assert (19, int(uts.command.split()[-1])) in KNOWN  # its answer is checked
    # a faster machine: more samples for the same time
    assert demo_batch(4e8, 2.0)[0].command != pi_m.command
    assert all(e.spec.command[-1] == "--json" for e in demo_entries(jobs))
    with pytest.raises(ValueError):
        demo_batch(0.0)


def test_printed_result_is_the_last_benchmark_line_of_the_output(tmp_path):
    out = tmp_path / "job.out"
    out.write_text('{"benchmark": "pi", "result": 1}\nprogress\n{"other": 2}\n'
                   '  {"benchmark": "pi", "result": 3}\n{"benchmark": broken\n["benchmark"]\n')
    assert printed_result({"stdout": str(out)}) == {"benchmark": "pi", "result": 3}
    out.write_text("no report: the job failed\n")
    assert printed_result({"stdout": str(out)}) == {}
    for info in ({}, {"stdout": None}, {"stdout": str(tmp_path / "absent.out")}):
        assert printed_result(info) == {}


@pytest.mark.timeout(150)
def test_the_demo_shows_a_shrink_and_a_grow_with_exact_answers(tmp_path):
    # a job-second of 1 s, decisions every 0.5 s, a 1 s cool-down: pi-m's grow onto every
    # node is decided within 1 s (done at 1.8 s on a busy 2-core machine) and pi-r3 arrives
    # at 3 s, so the shrink and the grow after it are the same as with longer settings
    done = subprocess.run(
        [sys.executable, "-m", "scheduler", "demo", "--job-seconds", "1", "--cooldown", "1",
         "--interval", "0.5", "--port", "0", "--no-plots", "--quiet", "--json",
         "--out", str(tmp_path / "demo")],
        cwd=ROOT, env=env_for(None, APGAS_KERNELS="numpy"), capture_output=True, text=True,
        timeout=140, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["processes_left"] == []
    assert report["shrinks"] >= 1 and report["grows"] >= 1, report["jobs"]
    assert all(j["correct"] is True and j["state"] == "done" for j in report["jobs"])
    # the shrunk job is the malleable one that held every node, and it grew again after
    first = next(j for j in report["jobs"] if j["name"] == "pi-m")
    kinds = [kind for kind, _ in first["job_orders"]]
    assert "shrink" in kinds and "grow" in kinds[kinds.index("shrink"):], kinds
