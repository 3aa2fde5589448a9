"""GLB with W workers a place: exact results with W = 1, 2, 3 on both kernel backends, with
shrinks and grows, a bag that raises in one worker, and the pieces as plain data."""

from __future__ import annotations

import json

import pytest
from conftest import env_for, run_benchmark, run_program
from test_glb import SCHEDULE, _numba_missing

from apgaspy import ConfigurationError
from benchmarks._results import vector_isa
from glb._config import workers_per_place
from glb._gil import MAX_GROWTH, adapt_work_units, nogil_call, nogil_seconds

KERNELS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(
    _numba_missing(), reason="numba is not installed"))]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kernels", KERNELS)
def test_every_bag_exact_with_one_two_and_three_workers(kernels):
    """UTS, N-Queens, BC and Pi on 2 places with W = 1, 2, 3 (3 threads a place and 2 places
    on a 2-core machine: more threads than cores), then a bag that raises in worker 1 or 2 of
    place 0: the computation fails once, with that error, at once, and no worker thread is
    left at any place."""
    r = run_program("glb_workers.py", 2, "spawn", env=env_for(2, APGAS_KERNELS=kernels),
                    timeout=100)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    runs, raising = lines[:-1], lines[-1]
    assert [(x["bag"], x["workers"]) for x in runs] == \
        [(b, w) for b in ("uts", "nqueens", "bc", "pi") for w in (1, 2, 3)]
    for x in runs:
        assert x["correct"] is True and x["kernels"] == kernels, x
        assert x["threads_left"] == {"0": [], "1": []}, x
        for s in x["log"]:
            assert s["workers"] == x["workers"], s
            per = s["per_worker"]
            assert len(per) == (0 if x["workers"] == 1 else x["workers"]), s
            assert not per or sum(p["process_calls"] for p in per) == s["process_calls"], s
            for p in per:
                assert 0 <= p["gil_held_s"] <= p["loop_s"] + 1e-3, p
                assert -1e-3 <= p["gil_held_cpu_s"] <= p["loop_cpu_s"] + 1e-3, p
    for w in (2, 3):  # the other workers did take part
        helped = [p for x in runs if x["workers"] == w for s in x["log"]
                  for p in s["per_worker"][1:] if p["process_calls"] > 0]
        assert helped, w
    assert raising["errors"] == \
        ["ValueError: a bag failed on purpose in a worker of place 0"], raising
    assert raising["seconds"] < 30 and raising["threads_left"] == {"0": [], "1": []}, raising
    assert r.stderr.count("a bag raised ValueError") == 1, r.stderr


@pytest.mark.timeout(240)
@pytest.mark.parametrize("name,args,kernels,workers", [
    pytest.param("uts", ["--depth", "13"], "numba", 3,
                 marks=pytest.mark.skipif(_numba_missing(), reason="numba is not installed")),
    ("nqueens", ["-N", "15"], "numpy", 2),
    pytest.param("bc", ["--scale", "12", "--verify"], "numba", 2,
                 marks=pytest.mark.skipif(_numba_missing(), reason="numba is not installed")),
    ("pi", ["--samples", "1e9"], "numpy", 3),
])
def test_exact_with_workers_through_shrinks_and_grows(name, args, kernels, workers):
    """A released place stops all its workers and hands their work on; new places start
    their workers: the result stays exact."""
    env = env_for(3, APGAS_COMMUNICATOR="schedule", APGAS_SCHEDULE=SCHEDULE,
                  APGAS_KERNELS=kernels)
    r = run_benchmark(name, [*args, "--workers", str(workers)], 3, env=env, timeout=200)
    assert r["correct"] is True, {k: v for k, v in r.items() if k != "result"}
    assert r["glb"]["workers"] == workers
    kinds = [kind for kind, _ in r["orders"]]
    assert "grow" in kinds and "shrink" in kinds, r["orders"]
    released = [s for s in r["log"] if s["released"]]
    assert released and all(s["workers"] == workers for s in r["log"]), r["log"]


def test_work_units_grow_while_the_gil_is_held_and_shrink_when_calls_are_long():
    # a worker holding the GIL over 1 % of its time doubles its units...
    assert adapt_work_units(100, 100, 0.001, 0.00002, 0.0011, 2) == 200
    # (1/(2W) where that is less: W = 100)
    assert adapt_work_units(100, 100, 0.001, 0.0000075, 0.0011, 100) == 200
    # ... not below that share, nor once calls last 10 ms, nor past MAX_GROWTH times n
    assert adapt_work_units(100, 100, 0.001, 0.00001, 0.0011, 2) == 100
    assert adapt_work_units(100, 100, 0.015, 0.015, 0.015, 2) == 100
    assert adapt_work_units(100 * MAX_GROWTH, 100, 0.001, 0.001, 0.001, 2) == 100 * MAX_GROWTH
    # calls over 40 ms: the units that last 20 ms at that pace, never below the configured n
    assert adapt_work_units(800, 100, 0.08, 0.0, 0.08, 2) == 200
    assert adapt_work_units(800, 100, 1.0, 0.0, 1.0, 2) == 100


def test_nogil_call_counts_its_time_for_the_calling_thread():
    import time

    before = nogil_seconds()
    assert nogil_call(lambda x: time.sleep(0.01) or x + 1, 1) == 2  # a call that takes a moment
    assert nogil_seconds() - before >= 0.009
    with pytest.raises(ZeroDivisionError):
        nogil_call(lambda: 1 / 0)


def test_workers_setting(monkeypatch):
    monkeypatch.delenv("GLB_WORKERS", raising=False)
    assert workers_per_place() == 1
    assert workers_per_place(3) == 3
    monkeypatch.setenv("GLB_WORKERS", "4")
    assert workers_per_place() == 4 and workers_per_place(2) == 2
    import os

    monkeypatch.setenv("APGAS_PLACES_PER_HOST", "1")
    assert workers_per_place(0) == len(os.sched_getaffinity(0))  # a host as one place
    monkeypatch.setenv("GLB_WORKERS", "-1")
    with pytest.raises(ConfigurationError, match="GLB_WORKERS"):
        workers_per_place()


def test_vector_isa_from_cpu_flags():
    x86 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma sha_ni bmi2\n"
    assert vector_isa(x86) == {"avx2": True, "avx512": False, "sha": True,
                               "flags": ["sse4_2", "avx", "avx2", "fma", "bmi2", "sha_ni"]}
    skylake = "flags\t\t: avx2 avx512f avx512bw\n"
    assert vector_isa(skylake)["avx512"] and not vector_isa(skylake)["sha"]
    arm = "Features\t: fp asimd sha1 sha2 sve\n"
    assert vector_isa(arm) == {"avx2": False, "avx512": False, "sha": True,
                               "flags": ["asimd", "sve", "sha1", "sha2"]}


def test_task_load_is_the_busy_share_of_all_workers():
    """The evolving monitor's task load of a place of W workers: their splittable busy time
    over W times the span (one of two workers busy: 50 %)."""
    import time
    from types import SimpleNamespace

    from glb import PlaceStats, WorkerStats
    from glb._worker import Worker

    stats = PlaceStats(0, workers=2, splittable_busy_s=1.0)  # worker 0: busy all along
    place = SimpleNamespace(stats=stats, worker_stats=[WorkerStats(0), WorkerStats(1)],
                            workers=2, _load_mark=(time.perf_counter() - 1.0, 0.0))
    assert Worker.load_percent(place) == pytest.approx(50, abs=2)
    place.worker_stats[1].splittable_busy_s = 0.5
    place._load_mark = (time.perf_counter() - 0.5, 0.0)  # 1.5 s busy in 2 × 0.5 s: at most 100
    assert Worker.load_percent(place) == 100.0
