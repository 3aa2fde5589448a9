"""Pinning end to end: real places bound to the cores of APGAS_CORES, read back from
/proc/<pid>/status and /proc/<pid>/task/<tid>/status (docs/guides/pinning.md).  The
machine has two cores at least: the tests use the first two it allows."""

from __future__ import annotations

import os
import socket

import pytest
from conftest import env_for, run_program

pytestmark = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and two usable cores")

HOST = socket.gethostname()  # the host of every place without NODE_FILE (and under mpiexec)


def _cores() -> tuple[int, int]:
    c0, c1 = sorted(os.sched_getaffinity(0))[:2]
    return c0, c1


def _one_line_error(stderr: str, start: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1 and lines[0].startswith(start), stderr
    return lines[0]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["spawn", "mpiexec"])
def test_two_places_of_one_host_take_one_core_each(mode):
    c0, c1 = _cores()
    env = env_for(2, APGAS_PLACES_PER_HOST="2", APGAS_CORES=f"{HOST}={c0},{c1}")
    r = run_program("pinned.py", 2, mode, timeout=90, env=env)
    assert r.returncode == 0, r.stderr
    places = r.json_lines()[0]["places"]
    assert places["0"]["pid"] != places["1"]["pid"]
    for pid, core in (("0", c0), ("1", c1)):
        assert places[pid]["process"] == str(core), places  # read by place 0 from /proc
        threads = places[pid]["threads"]
        assert len(threads) > 1 and set(threads.values()) == {str(core)}, threads


@pytest.mark.timeout(120)
def test_glb_workers_each_take_one_core_of_the_share():
    c0, c1 = _cores()
    env = env_for(1, APGAS_CORES=f"{HOST}={c0}-{c1}" if c1 == c0 + 1 else f"{HOST}={c0},{c1}")
    r = run_program("pinned.py", 1, "spawn", "--glb", "2", timeout=90, env=env)
    assert r.returncode == 0, r.stderr
    out = r.json_lines()[0]
    assert out["count"] == 4000
    workers = out["workers"]["0"]  # native thread id → its Cpus_allowed_list in process()
    assert len(workers) == 2 and sorted(workers.values()) == sorted([str(c0), str(c1)]), out
    # the place itself (and its other threads) keeps the whole share
    assert out["places"]["0"]["process"] in (f"{c0}-{c1}", f"{c0},{c1}")


@pytest.mark.timeout(120)
def test_glb_workers_unpinned_with_pin_workers_0():
    c0, c1 = _cores()
    share = f"{c0}-{c1}" if c1 == c0 + 1 else f"{c0},{c1}"
    env = env_for(1, APGAS_CORES=f"{HOST}={share}", GLB_PIN_WORKERS="0")
    r = run_program("pinned.py", 1, "spawn", "--glb", "2", timeout=90, env=env)
    assert r.returncode == 0, r.stderr
    assert set(r.json_lines()[0]["workers"]["0"].values()) == {share}


@pytest.mark.timeout(120)
def test_glb_workers_under_mpiexec_share_their_places_core():
    c0, c1 = _cores()
    env = env_for(2, APGAS_CORES=f"{HOST}={c0},{c1}")
    r = run_program("pinned.py", 2, "mpiexec", "--glb", "2", timeout=90, env=env)
    assert r.returncode == 0, r.stderr
    out = r.json_lines()[0]
    assert out["count"] == 4000
    for pid, core in (("0", c0), ("1", c1)):
        assert set(out["workers"][pid].values()) <= {str(core)}, out  # 2 workers, 1 core


@pytest.mark.timeout(120)
def test_a_refused_binding_of_place_0_is_one_line():
    r = run_program("pinned.py", 1, "spawn", timeout=60,
                    env=env_for(1, APGAS_CORES=f"{HOST}=999"))
    assert r.returncode != 0
    line = _one_line_error(r.stderr, f"StartupError: place(0) on host {HOST}: cannot bind "
                                     "to cores 999 (APGAS_CORES)")
    assert "in this process's cpuset (here: " in line


@pytest.mark.timeout(120)
def test_a_refused_binding_of_a_spawned_place_is_one_line():
    c0, _ = _cores()
    env = env_for(2, APGAS_PLACES_PER_HOST="2", APGAS_CORES=f"{HOST}={c0},999")
    r = run_program("pinned.py", 2, "spawn", timeout=90, env=env)
    assert r.returncode != 0
    _one_line_error(r.stderr, f"StartupError: could not start 1 of 1 places: place(1) on "
                              f"host {HOST}: cannot bind to cores 999")


@pytest.mark.timeout(120)
def test_a_host_missing_from_the_cores_stops_the_start():
    r = run_program("pinned.py", 1, "spawn", timeout=60,
                    env=env_for(1, APGAS_CORES="no-such-host.invalid=0"))
    assert r.returncode != 0
    _one_line_error(r.stderr, f"ConfigurationError: place(0) on host {HOST}: the host has "
                              "no cores in APGAS_CORES")


@pytest.mark.timeout(120)
def test_grown_places_pin_to_the_cores_file_and_a_shrink_frees_them(tmp_path):
    c0, c1 = _cores()
    cores_file = tmp_path / "cores"
    cores_file.write_text(f"localhost={c1}\n")
    env = env_for(1, APGAS_CORES=f"{HOST}={c0}", APGAS_CORES_FILE=str(cores_file),
                  APGAS_COMMUNICATOR="schedule",
                  APGAS_SCHEDULE="after 0.3 s grow 1 on localhost; after 1.5 s shrink 1; "
                                 "after 2.5 s grow 1 on localhost; after 3.5 s grow 1 on "
                                 "127.0.1.7")
    r = run_program("pinned.py", 1, "spawn", "--malleable", "4.5", timeout=90, env=env)
    assert r.returncode == 0, r.stderr
    out = r.json_lines()[0]
    # the last grow, to a host with no cores, is refused before the handler hears of it
    assert out["calls"] == [["pre_grow", 1], ["post_grow", 2, [1]], ["pre_shrink", 1],
                            ["post_shrink", 1, [1]], ["pre_grow", 1], ["post_grow", 2, [2]]]
    assert "cannot start a place on host '127.0.1.7': the job is pinned" in r.stderr
    assert out["grown"] == [[1, str(c1)], [2, str(c1)]]  # place 1's core, freed, to place 2
    assert out["places"]["0"]["process"] == str(c0)
    assert sorted(out["places"]) == ["0", "2"]
