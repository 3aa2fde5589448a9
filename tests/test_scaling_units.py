"""The efficiency arithmetic of ``python -m benchmarks.scaling`` on given reports."""

from __future__ import annotations

import time

import pytest

from benchmarks.scaling import Run, glb_run, median_known, sequential_run
from glb import thread_run_delay_s


def _place(delay, cpu, worker_cpu, busy_cpu):
    return {"run_delay_s": delay, "cpu_s": cpu, "worker_cpu_s": worker_cpu,
            "busy_cpu_s": busy_cpu}


def test_a_glb_run_takes_each_workers_wait_for_a_cpu_out_and_counts_other_threads():
    report = {"phases": {"setup_s": 9.0, "compute_s": 2.0, "reduce_s": 0.5},
              "log": [_place(0.5, 2.25, 2.0, 1.75), _place(1.0, 1.5, 1.25, 1.0)]}
    # T = 2.5; A = (2.5 - 0.5) + (2.5 - 1.0) + (2.25 - 2.0) + (1.5 - 1.25) = 4.0
    assert glb_run(report) == Run(2.5, 4.0, 2.75)


def test_without_run_delays_a_glb_run_has_no_uncontended_figure():
    report = {"phases": {"compute_s": 1.0, "reduce_s": 0.0},
              "log": [_place(None, 1.0, 1.0, 1.0), _place(0.25, 1.0, 1.0, 1.0)]}
    assert glb_run(report) == Run(1.0, None, 2.0)
    assert median_known([1.0, None]) is None
    assert median_known([3.0, 1.0, 2.0]) == 2.0


def test_a_sequential_run_on_an_idle_thread_is_mostly_available_time():
    def spin() -> None:
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass

    r = sequential_run(spin)
    assert r.work_cpu_s == pytest.approx(0.2, abs=0.02)
    assert r.seconds >= r.work_cpu_s - 0.01
    if thread_run_delay_s() is not None:
        # what the thread did not wait for a CPU it spent computing (or sleeping: here not)
        assert r.available_s == pytest.approx(r.work_cpu_s, abs=0.05)


def test_a_co_run_needs_two_copies():
    from benchmarks.scaling import CoRun

    with pytest.raises(ValueError, match="at least 2 copies, got 1"):
        CoRun("uts", 6, 1)


@pytest.mark.timeout(120)
def test_a_co_run_times_every_copy_each_round_and_leaves_no_process():
    import psutil

    from benchmarks.scaling import CoRun

    co = CoRun("nqueens", 8, 2)
    pids = [p.pid for p in co._procs]
    try:
        rounds = [co.run(), co.run()]
    finally:
        co.close()
    for runs in rounds:
        assert len(runs) == 2
        assert all(isinstance(r, Run) and r.seconds > 0 and r.work_cpu_s > 0 for r in runs)
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
                   for pid in pids)
