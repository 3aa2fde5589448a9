"""GLB end to end: the four benchmarks through their command lines, on real places."""

from __future__ import annotations

import json
import math
import sys

import networkx as nx
import numpy as np
import pytest
from conftest import ROOT, env_for, run_benchmark, run_program
from oracles import py_brandes

SMALL = {
    "uts": ["--depth", "9"],
    "nqueens": ["-N", "11"],
    "bc": ["--scale", "8"],
    "pi": ["--samples", "3e7"],
}


@pytest.mark.parametrize("places", [1, 2, 3])
def test_uts_exact(places):
    r = run_benchmark("uts", ["--depth", "10"], places)
    assert r["result"] == 4_130_071 and r["correct"] is True and r["places"] == places
    assert sum(s["process_calls"] for s in r["log"]) > 0


@pytest.mark.timeout(180)
def test_every_place_accounts_its_time_and_cpu():
    """Per-place accounting (glb.PlaceStats): a place's worker spends no more CPU inside
    process() than in its whole loop, nor more than its process; its first work starts
    before its last one ends; the CPU of the places' process() calls adds up to about the
    work a one-place run does; and (Linux) the workers' wait for a CPU is known."""
    one = run_benchmark("uts", ["--depth", "11"], 1)
    two = run_benchmark("uts", ["--depth", "11"], 2)
    assert one["result"] == two["result"] == 16_526_523
    for s in one["log"] + two["log"]:
        assert s["process_calls"] > 0, s
        assert 0 <= s["first_work_s"] <= s["last_work_s"], s
        assert 0 < s["busy_cpu_s"] <= s["worker_cpu_s"] + 1e-3 <= s["cpu_s"] + 2e-3, s
        assert s["busy_cpu_s"] <= s["busy_s"] + 5e-3, s
        if sys.platform == "linux":
            assert s["run_delay_s"] is not None and s["run_delay_s"] >= 0, s
    work_1 = one["log"][0]["busy_cpu_s"]
    work_2 = sum(s["busy_cpu_s"] for s in two["log"])
    assert 0.5 * work_1 < work_2 < 2 * work_1, (work_1, work_2)


@pytest.mark.parametrize("places", [1, 2, 3])
def test_nqueens_exact(places):
    r = run_benchmark("nqueens", ["-N", "12"], places)
    assert r["result"] == 14_200 and r["correct"] is True


def test_uts_seed_29_under_mpiexec():
    # the reference UTS workload T1L (Olivier et al., LCPC 2006), every rank a place
    r = run_benchmark("uts", ["--depth", "13", "--seed", "29"], 3, mode="mpiexec")
    assert r["places"] == 3 and r["result"] == 102_181_082 and r["correct"] is True


def test_work_is_shared_by_stealing():
    r = run_benchmark("uts", ["--depth", "11", "--work-units", "16384"], 3)
    assert r["result"] == 16_526_523
    busy = [s for s in r["log"] if s["process_calls"] > 0]
    assert len(busy) == 3, r["log"]  # every place got work
    assert sum(s["steals_won"] + s["lifeline_loot"] for s in r["log"]) > 0


@pytest.mark.parametrize("places", [1, 3])
def test_bc_against_independent_oracles(places):
    from benchmarks.kernels.bc import rmat_edges

    # the benchmark's R-MAT graph has duplicate edges, which networkx would merge: a plain
    # Brandes (tests/oracles.py) that counts each edge is the oracle there
    r = run_benchmark("bc", ["--scale", "7"], places)
    src, dst = rmat_edges(7, 2)
    np.testing.assert_allclose(np.array(r["result"]), py_brandes(128, src, dst), rtol=1e-9)
    # on a simple graph (no duplicate edge, no self-loop) networkx is the oracle of GLB's own
    # result (the sources spread over the places by stealing)
    out = run_program("glb_bc_simple.py", places, "spawn", "7", timeout=120)
    assert out.returncode == 0, out.stderr
    got = out.json_lines()[0]
    g = nx.DiGraph()
    g.add_nodes_from(range(got["n"]))
    g.add_edges_from(map(tuple, got["edges"]))
    assert g.number_of_edges() == len(got["edges"]) > 500
    nxbc = nx.betweenness_centrality(g, normalized=False, endpoints=False)
    np.testing.assert_allclose(got["bc"], [nxbc[i] for i in range(got["n"])], rtol=1e-9)


def test_pi_reproducible_across_places():
    runs = [run_benchmark("pi", ["--samples", "2e7", "--seed", "5"], p) for p in (1, 2, 3)]
    runs.append(run_benchmark("pi", ["--samples", "2e7", "--seed", "5", "--static"], 3))
    estimates = {r["result"] for r in runs}
    assert len(estimates) == 1, estimates
    (estimate,) = estimates
    assert abs(estimate - math.pi) <= 5 * 1.64 / math.sqrt(2e7)
    assert all(r["correct"] for r in runs)


# A shrink first (it takes milliseconds), then a grow (a few hundred): both happen early in
# runs of one to two seconds; later orders land if the run is still going.
SCHEDULE = ("after 0.05 s shrink 1; after 0.1 s grow 2 on localhost localhost; "
            "after 0.6 s shrink 1; after 0.9 s grow 1; after 1.2 s shrink 2")


def _numba_missing() -> bool:
    from benchmarks.kernels._backend import numba_available

    return not numba_available()


@pytest.mark.parametrize("name,args,kernels", [
    ("uts", ["--depth", "12"], "numpy"),
    # the compiled kernel is about 9 times faster: a larger tree lasts as long
    pytest.param("uts", ["--depth", "14"], "numba",
                 marks=pytest.mark.skipif(_numba_missing(), reason="numba is not installed")),
    ("nqueens", ["-N", "16"], "numpy"),
    ("bc", ["--scale", "13", "--verify"], "numpy"),
    ("pi", ["--samples", "1.5e9"], "numpy"),
])
def test_exact_with_shrinks_and_grows_during_the_run(name, args, kernels):
    env = env_for(3, APGAS_COMMUNICATOR="schedule", APGAS_SCHEDULE=SCHEDULE,
                  APGAS_KERNELS=kernels)
    r = run_benchmark(name, args, 3, env=env, timeout=240)
    assert r["correct"] is True, {k: v for k, v in r.items() if k != "result"}
    assert r["kernels"] == kernels
    kinds = [kind for kind, _ in r["orders"]]
    assert "grow" in kinds and "shrink" in kinds, r["orders"]
    released = [s for s in r["log"] if s["released"]]
    assert released, "no place was released during the run"
    assert r["places_at_end"] == 3 + sum(len(p) if k == "grow" else -len(p)
                                         for k, p in r["orders"])


def test_wrong_answers_exit_non_zero(monkeypatch):
    from benchmarks import _cli, uts

    monkeypatch.setitem(uts.KNOWN, (19, 3), 255)  # the real count is 254
    assert _cli.main(uts.BENCHMARK, ["--depth", "3", "--places", "1"]) == 1


def test_user_bag_example_is_short_and_exact_under_orders():
    source = (ROOT / "examples" / "glb_primes.py").read_text()
    assert len(source.splitlines()) < 60
    env = env_for(2, APGAS_COMMUNICATOR="schedule",
                  APGAS_SCHEDULE="after 0.05 s grow 1; after 0.5 s shrink 1")
    r = run_program(ROOT / "examples" / "glb_primes.py", 2, "spawn", "400000000", env=env,
                    timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.lines == ["21336326 primes below 400000000"]  # pi(4e8), from tables


def test_benchmark_is_a_malleable_job_under_a_scheduler(tmp_path):
    """A benchmark run by a (stub) scheduler over TCP: orders and GLB notifications."""
    import subprocess

    from conftest import kill_tree

    from communicators.testing import SchedulerEndpoint

    sched = SchedulerEndpoint()
    nodes = tmp_path / "nodes"
    nodes.write_text("127.0.1.1\n127.0.1.2\n")
    env = env_for(None, NODE_FILE=str(nodes), NODES="2", **sched.env())
    cmd = [sys.executable, "-m", "benchmarks.uts", "--depth", "13", "--json"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert sched.wait_for("APGAS-Ready", timeout=60) == "APGAS-Ready:127.0.1.1"
        job = ("127.0.1.1", sched.port)
        assert sched.order(job, "grow 1 127.0.1.3\n") == []
        assert sched.wait_for("preGrowTimeGLB;1;")
        assert sched.wait_for("postGrowTimeGLB;1;")
        assert sched.wait_for("growTimeAPGAS;1;")
        assert sched.order(job, "shrink 2\n") == ["127.0.1.2", "127.0.1.3"]
        assert sched.wait_for("preShrinkTimeGLB;2;")
        assert sched.wait_for("postShrinkTimeGLB;2;")
        assert sched.wait_for("shrinkTimeAPGAS;2;")
        out, err = proc.communicate(timeout=180)
        assert sched.wait_for("APGAS-Disabled") == "APGAS-Disabled:127.0.1.1"
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.communicate()
        sched.close()
    assert proc.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["correct"] is True and report["result"] == 264_459_392
    assert report["orders"] == [["grow", [2]], ["shrink", [1, 2]]]
    assert report["places_at_end"] == 1


@pytest.mark.timeout(120)
def test_short_options_are_the_java_benchmarks_problem_sizes():
    """A job script written for the Java GLB benchmarks (LifelineGLB) runs the same problem:
    ``-n 10`` is the board (it used to mean 10 work units with the default N=14)."""
    assert run_benchmark("nqueens", ["-n", "10"], 1)["result"] == 724
    assert run_benchmark("bc", ["-n", "6"], 1)["params"]["scale"] == 6
    assert run_benchmark("pi", ["-n", "1e6"], 1)["params"]["samples"] == 10**6
    r = run_benchmark("uts", ["-d", "6", "-s", "19", "-b", "4"], 1)
    assert r["result"] == 16_000
    r = run_benchmark("nqueens", ["-n", "10", "--work-units", "3", "--random-steals", "2",
                          "--lifeline-base", "3"], 2)
    assert r["result"] == 724 and r["glb"]["n"] == 3 and r["glb"]["w"] == 2 and r["glb"]["l"] == 3
