"""Jacobi 2D (benchmarks/jacobi.py): the same grid, bit for bit, whatever the places and orders.

The oracle is the sequential solver of benchmarks/kernels/jacobi.py, itself checked against
values worked out by hand; the distributed runs are real processes (embedded, mpiexec, and
malleable jobs driven by the schedule and socket communicators).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import MPIEXEC, ROOT, env_for, kill_tree, run_command

from benchmarks.jacobi import check_params
from benchmarks.kernels.jacobi import advance, checksum, initial_rows, partition, solve
from communicators.testing import SchedulerEndpoint

# ------------------------------------------------------------------------------------------
# the kernel, in one process


def test_solve_matches_hand_computed_values():
    g = solve(3, 1)  # one interior point: the mean of 1, 0, 0, 0
    assert g[1, 1] == 0.25 and g[0].tolist() == [1.0, 1.0, 1.0]
    g = solve(4, 2)  # 2 x 2 interior; after one iteration the top row is 0.25, 0.25
    # second iteration: (1 + 0 + 0 + 0.25) / 4 for the top interior row, (0.25 + 0 + 0 + 0) / 4
    # below it (each neighbour value of the first iteration)
    assert g[1:3, 1:3].tolist() == [[0.3125, 0.3125], [0.0625, 0.0625]]
    assert solve(5, 0).tolist() == initial_rows(5, 0, 5).tolist()


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_both_backends_give_the_same_bits(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    assert checksum(solve(37, 29, backend)) == checksum(solve(37, 29, "numpy"))
    assert solve(4, 2, backend)[1:3, 1:3].tolist() == [[0.3125, 0.3125], [0.0625, 0.0625]]


def test_partition_cuts_interior_rows_evenly():
    assert partition(12, 3) == [(1, 5), (5, 8), (8, 11)]
    assert partition(5, 5) == [(1, 2), (2, 3), (3, 4), (4, 4), (4, 4)]
    with pytest.raises(ValueError, match="grid 2"):
        partition(2, 1)


@pytest.mark.parametrize("blocks,depth,k", [(2, 3, 3), (3, 4, 2), (4, 2, 2)])
def test_blocks_with_deep_halos_give_the_sequential_bits(blocks, depth, k):
    # emulate the distributed steps in one process: blocks with `depth` halo rows run `k`
    # iterations, then exchange halos; 10 steps
    n, steps = 23, 10
    parts = partition(n, blocks)
    grid = initial_rows(n, 0, n)
    for _ in range(steps):
        new = grid.copy()
        for lo, hi in parts:
            base, end = max(0, lo - depth), min(n, hi + depth)
            u = grid[base:end].copy()
            u, _ = advance(u, u.copy(), base, n, lo, hi, k)
            new[lo:hi] = u[lo - base:hi - base]
        grid = new
    assert checksum(grid) == checksum(solve(n, steps * k))


def test_check_params_names_the_bad_value():
    assert check_params(3, 0, 1) is None
    assert "--grid 2" in check_params(2, 5, 8)
    assert "--iterations -1" in check_params(10, -1, 8)
    assert "--batch 0" in check_params(10, 5, 0)
    assert check_params(10, 5, 8, 0.0) is None and check_params(10, 5, 8, 1e6) is None
    assert "--node-rate -1.0" in check_params(10, 5, 8, -1.0)
    assert "--node-rate nan" in check_params(10, 5, 8, float("nan"))


def test_rescale_cost_is_the_time_the_iterations_stand_still():
    """``order_medians``: an order's cost to the job leaves out the wait for the step under
    way (the job computes meanwhile); a kind with no completed order gives ``None``."""
    from benchmarks.jacobi_scaling import order_medians

    runs = [[{"kind": "grow", "wait_s": 1.5, "resume_s": 2.5},
             {"kind": "shrink", "wait_s": 0.25, "resume_s": 0.5}],
            [{"kind": "grow", "wait_s": 0.5, "resume_s": 2.0},
             {"kind": "shrink", "wait_s": 0.0}]]  # this shrink never resumed mid-run
    assert order_medians(runs) == {"grow_s": 2.25, "grow_pause_s": 1.25,
                                   "shrink_s": 0.5, "shrink_pause_s": 0.25}
    assert order_medians([]) == dict.fromkeys(
        ("grow_s", "grow_pause_s", "shrink_s", "shrink_pause_s"))


# ------------------------------------------------------------------------------------------
# the benchmark, on real places

CMD = [sys.executable, "-m", "benchmarks.jacobi"]


def _run(args, env=None, timeout=60, prefix=()):
    return run_command([*prefix, *CMD, *args], env or env_for(None), timeout)


def _report(args, **kw):
    rc, out, err = _run([*args, "--json"], **kw)
    assert rc == 0, err
    return json.loads(out.strip().splitlines()[-1])


N, K = 41, 45  # 39 interior rows; 45 iterations = several steps of the default batch


def test_same_checksum_on_1_2_3_places():
    want = checksum(solve(N, K))
    for p in (1, 2, 3):
        rep = _report(["--grid", str(N), "--iterations", str(K), "--places", str(p)])
        assert (rep["places"], rep["result"]) == (p, want)


def test_numpy_kernels_on_places_give_the_same_checksum():
    rep = _report(["--grid", str(N), "--iterations", str(K), "--places", "2"],
                  env=env_for(None, APGAS_KERNELS="numpy"))
    assert (rep["kernels"], rep["result"]) == ("numpy", checksum(solve(N, K)))


def test_under_mpiexec():
    rep = _report(["--grid", str(N), "--iterations", str(K), "--batch", "4", "--verify"],
                  prefix=(MPIEXEC, "-n", "2"))
    assert (rep["places"], rep["result"], rep["correct"]) == (2, checksum(solve(N, K)), True)


def test_grow_then_shrink_mid_run_keeps_the_bits():
    # 2 places, grow to 3, then shrink to 1; the pause between steps makes the run last
    # at least 4 s, so that both orders land mid-run (the grow is done about 1 s in, the
    # shrink comes at 2 s), with steps on 3 places between them
    n, k = 60, 320
    env = env_for(None, APGAS_COMMUNICATOR="schedule",
                  APGAS_SCHEDULE="after 0.3 s grow 1 on localhost; after 2 s shrink 2")
    rep = _report(["--grid", str(n), "--iterations", str(k), "--batch", "4", "--places", "2",
                   "--pause", "0.05"], env=env, timeout=90)
    assert [(o["kind"], o["places"], o["places_after"]) for o in rep["orders"]] == [
        ("grow", [2], 3), ("shrink", [1, 2], 1)]
    grow, shrink = rep["orders"]
    assert 0 < grow["at_iteration"] < shrink["at_iteration"] < k
    assert "resume_s" in grow and "resume_s" in shrink
    assert (rep["places"], rep["places_at_end"]) == (2, 1)
    assert rep["result"] == checksum(solve(n, k))


def test_shrink_under_mpiexec_keeps_the_bits():
    # the released rank retires (it cannot leave MPI_COMM_WORLD); its rows move to the others
    n, k = 50, 320
    env = env_for(None, APGAS_COMMUNICATOR="schedule", APGAS_SCHEDULE="after 0.5 s shrink 1")
    rep = _report(["--grid", str(n), "--iterations", str(k), "--batch", "4", "--pause", "0.04"],
                  env=env, prefix=(MPIEXEC, "-n", "3"), timeout=90)
    assert [(o["kind"], o["places"]) for o in rep["orders"]] == [("shrink", [2])]
    assert 0 < rep["orders"][0]["at_iteration"] < k
    assert (rep["places"], rep["places_at_end"]) == (3, 2)
    assert rep["result"] == checksum(solve(n, k))


def test_socket_communicator_job_shrinks_on_order(tmp_path):
    sched = SchedulerEndpoint()
    node_file = tmp_path / "nodes"
    node_file.write_text("127.0.1.1\n")
    env = env_for(None, NODE_FILE=str(node_file), NODES="1",
                  **sched.env())
    n, k = 50, 240
    args = [*CMD, "--grid", str(n), "--iterations", str(k), "--batch", "4", "--places", "3",
            "--pause", "0.05", "--json"]
    proc = subprocess.Popen(args, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert sched.wait_for("APGAS-Ready", timeout=30).startswith("APGAS-Ready")
        reply = sched.order(("127.0.1.1", sched.port), "shrink 1\n", timeout=30)
        assert len(reply) == 1 and not reply[0].startswith("ERROR"), reply
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.communicate()
        sched.close()
    assert proc.returncode == 0, err
    rep = json.loads(out.strip().splitlines()[-1])
    assert [o["kind"] for o in rep["orders"]] == ["shrink"]
    assert rep["places_at_end"] == 2 and rep["result"] == checksum(solve(n, k))


@pytest.mark.parametrize("args,message", [
    (["--grid", "2"], "--grid 2: the grid needs at least 3 x 3 points"),
    (["--grid", "10", "--iterations", "-3"], "--iterations -3: must be 0 or more"),
    (["--grid", "6", "--places", "5"], "--places 5 for a grid of 6: at most 4 places"),
    (["--grid", "10", "--node-rate", "-5"], "--node-rate -5.0: must be a finite number"),
    (["--grid", "10", "--node-rate", "inf"], "--node-rate inf: must be a finite number"),
    (["--grid", "10", "--node-rate", "nan"], "--node-rate nan: must be a finite number"),
    (["--grid", "10", "--node-rate", "fast"], "--node-rate: invalid float value: 'fast'"),
])
def test_bad_input_is_a_clear_error(args, message):
    rc, out, err = _run(args, timeout=30)
    assert rc == 2 and message in err and out == ""


def test_more_mpi_ranks_than_rows_is_a_clear_error():
    rc, out, err = _run(["--grid", "4", "--iterations", "3"], prefix=(MPIEXEC, "-n", "3"),
                        timeout=60)
    assert rc == 2 and "3 places for a grid of 4: at most 2 places" in err


def test_emulated_nodes_keep_the_bits_and_pace_the_steps():
    # 41 x 41 grid on 3 places (13 rows each, rows that do not divide evenly: 39 = 13 x 3):
    # at 2e5 points/s a place's 45 iterations last at least 45 x 13 x 41 / 2e5 = 0.12 s;
    # the grid is the one-place grid bit for bit
    rep = _report(["--grid", str(N), "--iterations", str(K), "--places", "3",
                   "--node-rate", "2e5"])
    assert rep["result"] == checksum(solve(N, K))
    assert rep["params"]["node_rate"] == 2e5
    assert rep["phases"]["compute_s"] >= K * 13 * N / 2e5
    # a grid whose interior rows do not divide by the places (39 over 5): blocks of 8 and 7
    rep = _report(["--grid", str(N), "--iterations", "9", "--places", "5",
                   "--node-rate", "1e7"])
    assert rep["result"] == checksum(solve(N, 9))


def test_zero_iterations_is_the_initial_grid():
    rep = _report(["--grid", "7", "--iterations", "0", "--places", "2"])
    assert rep["result"] == checksum(initial_rows(7, 0, 7))
    assert np.array_equal(solve(7, 0), initial_rows(7, 0, 7))
