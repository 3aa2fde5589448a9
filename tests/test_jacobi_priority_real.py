"""The real priority evaluation (benchmarks/priority_real.py): its batch, its model, its small run.

The small run is real: the scheduler's server on 4 logical nodes, real Jacobi jobs (real
processes, emulated node speed), under two policies; every job's checksum is checked
against the one-place solve, and the simulator runs the same batch beside it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, env_for, kill_tree

from benchmarks.priority_real import SIZES, SMALL_SIZES, scaled_batch, scaled_model
from scheduler.workload import jacobi_batch

MODEL = ROOT / "benchmarks" / "results" / "jacobi_model-paced.json"


def test_the_scaled_batch_is_the_study_batch_with_ranges_divided_by_4():
    paper = jacobi_batch(35, submission_gap_s=90.0).entries
    ours = scaled_batch(35, SIZES, gap_s=9.0)
    assert [(e.spec.size, e.spec.priority) for e in ours] == \
        [(e.spec.size, e.spec.priority) for e in paper]
    assert [e.submit_s for e in ours] == [i * 9.0 for i in range(16)]
    for mine, theirs in zip(ours, paper, strict=True):
        lo, hi = theirs.spec.min_nodes, theirs.spec.max_nodes
        assert (mine.spec.min_nodes, mine.spec.max_nodes) == (max(1, lo // 4), hi // 4)
        job = SIZES[mine.spec.size]
        assert mine.spec.command[3:8] == ("--grid", str(job.grid), "--iterations",
                                          str(job.iterations), "--node-rate")


def test_scaled_model_comes_from_the_paced_measurements(tmp_path):
    data = {"models": [{"grid": 64, "steps": 100, "nodes": [1, 2], "seconds": [4.0, 2.5],
                        "overhead_s": [1.0, 1.5], "node_rate": 1e6, "grow_s": 1.0,
                        "shrink_s": 0.2},
                       {"grid": 256, "steps": 10, "nodes": [1, 2], "seconds": [6.0, 3.5],
                        "overhead_s": [2.0, 2.5], "node_rate": 1e6, "grow_s": 2.0,
                        "shrink_s": 0.4}]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    from benchmarks.priority_real import ScaledJob
    sizes = {"small": ScaledJob(64, 200, 1, 2), "medium": ScaledJob(256, 5, 1, 2),
             "large": ScaledJob(64, 100, 1, 2), "xlarge": ScaledJob(256, 10, 1, 2)}
    model = scaled_model(path, sizes, 2e6)  # twice the measured rate: half the compute
    assert dict(model.curves["small"].points) == {1: 1.0 + 4.0, 2: 1.5 + 2.5}
    assert dict(model.curves["medium"].points) == {1: 2.0 + 1.5, 2: 2.5 + 0.875}
    assert model.costs.grow_s(1) == pytest.approx(1.5)
    assert model.costs.shrink_s(3) == pytest.approx(0.3)
    # each size resizes at its own grid's cost: the time the iterations stand still where
    # measured, else the order's whole time
    data["models"][0].update(grow_pause_s=0.5, shrink_pause_s=0.05)
    path.write_text(json.dumps(data))
    model = scaled_model(path, sizes, 2e6)
    costs = model.sim_costs()
    assert (costs[("jacobi", "small")].grow_s(1), costs[("jacobi", "small")].shrink_s(2)) == \
        (0.5, 0.05)
    assert (costs[("jacobi", "xlarge")].grow_s(1), costs[("jacobi", "xlarge")].shrink_s(2)) \
        == (2.0, 0.4)
    assert model.costs.grow_s(1) == pytest.approx(1.25)
    del data["models"][0]["overhead_s"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="grid 64 was measured without emulated nodes"):
        scaled_model(path, sizes, 2e6)


@pytest.mark.parametrize("args,message", [
    (["--small", "--node-rate", "-1"], "--node-rate -1.0: must be a finite number"),
    (["--small", "--policies", "nope"], "unknown algorithm 'nope'"),
    (["--small", "--nodes", "1"], "--nodes 1 with --keep-free 1: too few"),
    (["--small", "--model", "/nonexistent.json"], "--model: "),
])
def test_bad_input_is_a_clear_error(args, message):
    done = subprocess.run([sys.executable, "-m", "benchmarks.priority_real", *args,
                           "--sim-only"], cwd=ROOT, env=env_for(None), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr


def test_small_real_run_checks_every_job_and_simulates_the_same_batch(tmp_path):
    # decisions every 0.5 s (the jobs wait for one to start): the same checks, sooner
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.priority_real", "--small",
                             "--interval", "0.5", "--out", str(tmp_path), "--quiet"],
                            cwd=ROOT, env=env_for(None),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"the small evaluation did not end within 400 s\n{out}\n{err}")
    assert proc.returncode == 0, out + err
    rep = json.loads((tmp_path / "priority_real.json").read_text())
    assert [r["policy"] for r in rep["rows"]] == ["rigid-min", "elastic-priority"]
    names = [b["name"] for b in rep["config"]["batch"]]
    assert len(names) == 4
    for row in rep["rows"]:
        real = row["real"]
        assert sorted(j["name"] for j in real["jobs"]) == sorted(names)
        assert all(j["state"] == "done" and j["correct"] for j in real["jobs"])
        assert real["processes_left"] == [] and not real["timed_out"]
        assert sorted(j["name"] for j in row["sim"]["jobs"]) == sorted(names)
        for key in ("total_time_s", "utilisation", "weighted_mean_response_s",
                    "weighted_mean_completion_s"):
            assert real["metrics"][key] >= 0 and row["sim"]["metrics"][key] >= 0
        # the server's records carry each job's own priority into the weighted metrics
        jobs = real["jobs"]
        weighted = sum(j["priority"] * (j["start_s"] - j["submit_s"]) for j in jobs) \
            / sum(j["priority"] for j in jobs)
        assert real["metrics"]["weighted_mean_response_s"] == pytest.approx(weighted, abs=0.01)
    rigid = rep["rows"][0]["real"]["jobs"]
    # rigid-min starts every job on its minimum and never resizes it
    assert all(j["places"][0] == j["range"][0] == j["places"][1] for j in rigid)
    assert all(j["shrinks"] == j["grows"] == 0 for j in rigid)
    assert set(SMALL_SIZES) >= {b["size"] for b in rep["config"]["batch"]}


def test_the_study_reader_takes_no_cost_per_point_from_emulated_nodes(tmp_path):
    from scheduler.model import load_jacobi_model

    paced = {"grid": 64, "steps": 100, "nodes": [1, 2], "seconds": [4.0, 2.5],
             "overhead_s": [1.0, 1.5], "node_rate": 1e6}
    real = {"grid": 1002, "steps": 10, "nodes": [1, 2], "seconds": [0.02, 0.011]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"models": [paced]}))
    with pytest.raises(ValueError, match="without emulated nodes"):
        load_jacobi_model(str(path))
    path.write_text(json.dumps({"models": [paced, real]}))
    # 0.02 s / (1002^2 x 10 points) = 1.99 ns a point, from the unpaced entry alone
    assert "1.99 ns/point" in load_jacobi_model(str(path)).source
