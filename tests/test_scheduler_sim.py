"""The simulator, the run-time model, the workloads and ``python -m scheduler simulate``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from scheduler import InvalidDecisionError, SimulationError
from scheduler.__main__ import main
from scheduler.algorithms import Grow, Shrink, Start, View, decision_problem
from scheduler.jobs import BatchEntry, JobClass, JobSpec
from scheduler.model import PAPER_MEDIANS, ResizeCostModel, RuntimeModel, ScalingCurve
from scheduler.simulate import SimConfig, Simulator
from scheduler.studies.paper import aggregate, evaluate_paper
from scheduler.workload import (
    PAPER_MIX,
    paper_batch,
    read_swf,
    swf_workload,
    synthetic_swf,
    write_swf,
)

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_SWF = ROOT / "scheduler" / "data" / "sample.swf"
FREE = ResizeCostModel.free()


def entry(name, submit=0.0, **spec) -> BatchEntry:
    spec.setdefault("program", name)
    spec.setdefault("size", 1)
    return BatchEntry(JobSpec(name, **spec), submit)


# -------------------------------------------------------------------------- the model


def test_model_reproduces_the_medians_and_interpolates():
    model = RuntimeModel.paper()
    for (program, size), points in PAPER_MEDIANS.items():
        for n, t in points.items():
            assert model.run_time_s(program, size, n) == pytest.approx(t)
    uts18 = model.curve("uts", 18)
    # s + w/n through (2, 102.9), (4, 56.2): w = 186.8 node-s, s = 9.5 s.
    assert uts18(1) == pytest.approx(9.5 + 186.8)
    assert uts18(8) == pytest.approx(9.5 + 186.8 / 8)
    bc18 = model.curve("bc", 18)  # three points: each interval its own pair
    assert bc18(3) == pytest.approx(175.6 + (341.5 - 175.6) * (1 / 3 - 1 / 4) / (1 / 2 - 1 / 4))
    for curve in (uts18, bc18, model.curve("pi", 600_000_000_000)):
        times = [curve(n) for n in range(1, 33)]
        assert all(a > b for a, b in zip(times, times[1:], strict=False))  # faster with nodes
        assert all(n * t <= (n + 1) * u + 1e-9 for n, (t, u) in
                   enumerate(zip(times, times[1:], strict=False), start=1))  # work grows
    with pytest.raises(KeyError, match="no run-time model"):
        model.curve("uts", 99)


def test_single_point_and_superlinear_curves():
    assert ScalingCurve({4: 100.0}, serial_fraction=0.0)(8) == pytest.approx(50.0)
    assert ScalingCurve({4: 100.0}, serial_fraction=0.1)(8) == pytest.approx(10 + 90 / 2)
    assert ScalingCurve({1: 10.0}, serial_fraction=0.0, floor_s=2.0)(100) == 2.0
    sup = ScalingCurve({2: 100.0, 4: 40.0})  # super-linear: power law through both points
    assert sup(2) == pytest.approx(100.0) and sup(4) == pytest.approx(40.0)
    assert 40.0 < sup(3) < 100.0
    with pytest.raises(ValueError):
        ScalingCurve({})


def test_resize_costs():
    costs = ResizeCostModel()
    assert costs.grow_s(1) == pytest.approx(0.17)
    assert costs.grow_s(2) == pytest.approx(0.37)
    assert costs.grow_s(3) == pytest.approx(0.44)
    assert costs.grow_s(4) == pytest.approx(0.51)
    assert costs.grow_s(6) == pytest.approx(0.65)
    assert costs.shrink_s(1) == pytest.approx(0.005)
    assert costs.shrink_s(4) == pytest.approx(0.02)
    assert ResizeCostModel.java().grow_s(4) == pytest.approx(14.55)
    assert ResizeCostModel.java().shrink_s(3) == pytest.approx(7.41)
    assert FREE.grow_s(5) == FREE.shrink_s(5) == 0.0
    flat = ResizeCostModel.constant(2.5, 0.5)
    assert [flat.grow_s(n) for n in (1, 2, 7)] == [2.5] * 3
    assert [flat.shrink_s(n) for n in (1, 3)] == [0.5] * 2
    with pytest.raises(ValueError, match="grow_points"):
        ResizeCostModel.constant(-1.0, 0.5)


# --------------------------------------------------------------- hand-computed runs


def test_two_rigid_jobs_on_two_nodes():
    model = RuntimeModel({("a", 1): ScalingCurve({2: 100.0}), ("b", 1): ScalingCurve({1: 50.0})})
    entries = [entry("a", nodes=2), entry("b", nodes=1)]
    result = Simulator("fcfs", entries, SimConfig(total_nodes=2), model=model).run()
    a, b = result.records
    assert (a.start_s, a.end_s, a.allotment[0][1]) == (0.0, 100.0, ("n1", "n2"))
    assert (b.start_s, b.end_s, b.allotment[0][1]) == (100.0, 150.0, ("n1",))
    assert result.makespan_s == 150.0
    assert result.utilisation == pytest.approx((2 * 100 + 50) / (2 * 150))
    assert result.mean_wait_s == 50.0
    assert result.mean_turnaround_s == 125.0
    assert result.mean_bounded_slowdown == pytest.approx((1 + 150 / 50) / 2)
    assert result.usage_curve() == [(0.0, 2), (100.0, 1), (150.0, 0)]


def test_ticks_only_start_at_the_next_period():
    model = RuntimeModel({("a", 1): ScalingCurve({1: 20.0})})
    entries = [entry("a", submit=7.0, nodes=1)]
    config = SimConfig(total_nodes=1, run_on_events=False)
    (rec,) = Simulator("fcfs", entries, config, model=model).run().records
    assert (rec.start_s, rec.end_s) == (10.0, 30.0)
    (rec,) = Simulator("fcfs", entries, SimConfig(total_nodes=1), model=model).run().records
    assert (rec.start_s, rec.end_s) == (7.0, 27.0)


def perfect(work_node_s: float) -> ScalingCurve:
    return ScalingCurve({1: work_node_s}, serial_fraction=0.0, floor_s=0.0)


def test_malleable_job_grows_when_ready():
    model = RuntimeModel({("m", 1): perfect(400.0)})
    entries = [entry("m", job_class="malleable", min_nodes=1, max_nodes=4)]
    result = Simulator("malleable", entries, SimConfig(total_nodes=4, costs=FREE),
                       model=model).run()
    (m,) = result.records
    # 1 node for 0.4 s (until APGAS-Ready), then 4 nodes: 0.999 of the work at 100 s a job.
    assert m.allotment == ((0.0, ("n1",)), (0.4, ("n1", "n2", "n3", "n4")), (m.end_s, ()))
    assert m.end_s == pytest.approx(0.4 + 0.999 * 100.0)
    assert m.node_seconds == pytest.approx(400.0)
    assert (m.grows, m.shrinks) == (1, 0)
    assert result.grows_per_malleable_job == 1.0
    # with apgaspy's grow cost for 3 nodes (0.44 s) the job pauses that long
    costly = Simulator("malleable", entries, SimConfig(total_nodes=4), model=model).run()
    assert costly.records[0].end_s == pytest.approx(0.4 + 0.44 + 0.999 * 100.0)


def test_shrink_for_a_rigid_job_then_grow_back_after_cooldown():
    model = RuntimeModel({("m", 1): perfect(400.0), ("r", 1): ScalingCurve({2: 20.0})})
    entries = [entry("m", job_class="malleable", min_nodes=1, max_nodes=4),
               entry("r", submit=30.0, nodes=2)]
    result = Simulator("malleable", entries, SimConfig(total_nodes=4, costs=FREE),
                       model=model).run()
    m, r = result.records
    # grown at 0.4 s; cool-down until 60.4 s; the first tick after is 65 s: shrink by 2,
    # releasing the latest nodes; r starts on them; grow back at the tick at 125 s.
    assert r.start_s == 65.0 and r.end_s == 85.0
    assert r.allotment[0][1] == ("n3", "n4")
    done = 0.4 / 400 + (65.0 - 0.4) * 4 / 400 + (125.0 - 65.0) * 2 / 400
    assert m.allotment == (
        (0.0, ("n1",)),
        (0.4, ("n1", "n2", "n3", "n4")),
        (65.0, ("n1", "n2")),
        (125.0, ("n1", "n2", "n3", "n4")),
        (pytest.approx(125.0 + (1 - done) * 100.0), ()),
    )
    assert (m.shrinks, m.grows) == (1, 2)
    assert result.makespan_s == pytest.approx(125.0 + (1 - done) * 100.0)
    assert result.utilisation == pytest.approx((400.0 + 40.0) / (4 * result.makespan_s))
    assert r.wait_s == 35.0


def test_refused_job_is_counted_not_run():
    model = RuntimeModel({("a", 1): ScalingCurve({1: 10.0}), ("big", 1): ScalingCurve({5: 1.0})})
    result = Simulator("easy", [entry("a", nodes=1), entry("big", nodes=5)],
                       SimConfig(total_nodes=4), model=model).run()
    assert [r.name for r in result.records] == ["a"]
    assert result.refused[0][0] == "big" and "5" in result.refused[0][1]


class _Scripted:
    name = "scripted"

    def __init__(self, answer):
        self.answer = answer

    def decide(self, view: View):
        return self.answer(view)


def test_invalid_decisions_are_refused():
    model = RuntimeModel({("m", 1): perfect(100.0)})
    entries = [entry("m", job_class="malleable", min_nodes=1, max_nodes=2)]
    cfg = SimConfig(total_nodes=2)
    for answer, words in [
        (lambda v: [Start(1, ("n1", "n9"))] if v.waiting else [], "not free"),
        (lambda v: [Start(1, ("n1", "n1"))] if v.waiting else [], "twice"),
        (lambda v: [Start(1, ())] if v.waiting else [], "outside"),
        (lambda v: [Start(1, ("n1",)), Shrink(1, 1)] if v.waiting else [], "not ready"),
        (lambda v: [Start(1, ("n1",)), Grow(1, ("n2",))] if v.waiting else [], "not ready"),
        (lambda v: [Start(2, ("n1",))], "no such waiting job"),
    ]:
        with pytest.raises(InvalidDecisionError, match=words):
            Simulator(_Scripted(answer), entries, cfg, model=model).run()


def test_a_stuck_algorithm_is_reported():
    model = RuntimeModel({("a", 1): ScalingCurve({1: 10.0})})
    with pytest.raises(SimulationError, match="starts nothing"):
        Simulator(_Scripted(lambda v: []), [entry("a", nodes=1)], SimConfig(total_nodes=1),
                  model=model).run()


# ---------------------------------------------------------------------------- workloads


def test_paper_batch_shape_and_determinism():
    batch = paper_batch(43, 40)
    assert len(batch.entries) == 25
    submits = [e.submit_s for e in batch.entries]
    assert submits[:5] == [0.0] * 5 and submits == sorted(submits) and submits[-1] < 600
    malleable = [e for e in batch.entries if e.spec.job_class is JobClass.MALLEABLE]
    assert len(malleable) == 10
    rows = {(r.program, r.size): r for r in PAPER_MIX}
    for e in batch.entries:
        row = rows[(e.spec.program, e.spec.size)]
        if e.spec.is_malleable:
            assert (e.spec.lo, e.spec.hi) == (row.min_nodes, row.max_nodes)
            t = batch.model.run_time_s(e.spec.program, e.spec.size, e.spec.lo)
        else:
            t = batch.model.run_time_s(e.spec.program, e.spec.size, e.spec.nodes)
        assert e.spec.required_time_s == pytest.approx(1.5 * t)
    assert paper_batch(43, 40).entries == batch.entries
    # same jobs and times for every share; malleable sets nested
    rigid = paper_batch(43, 0)
    full = paper_batch(43, 100)
    assert [e.submit_s for e in rigid.entries] == submits
    assert all(e.spec.is_malleable for e in full.entries)
    m20 = {i for i, e in enumerate(paper_batch(43, 20).entries) if e.spec.is_malleable}
    m40 = {i for i, e in enumerate(batch.entries) if e.spec.is_malleable}
    assert len(m20) == 5 and m20 <= m40
    assert paper_batch(44, 40).entries != batch.entries


def test_read_swf_sample():
    jobs = read_swf(SAMPLE_SWF)
    assert [j.number for j in jobs] == [1, 2, 3, 5, 6, 7, 8, 9, 10]  # 4 was cancelled
    seven = next(j for j in jobs if j.number == 7)
    assert (seven.processors, seven.run_s, seven.requested_s) == (8, 200.0, 300.0)
    assert next(j for j in jobs if j.number == 5).requested_s is None


def test_swf_workload_mapping():
    rigid = swf_workload(SAMPLE_SWF, total_nodes=8, cores_per_node=4)
    specs = {e.spec.name: e for e in rigid.entries}
    assert specs["swf1"].submit_s == 0.0 and specs["swf10"].submit_s == 400.0
    assert [specs[f"swf{n}"].spec.nodes for n in (1, 3, 6, 7, 9, 10)] == [2, 4, 3, 2, 8, 1]
    assert specs["swf5"].spec.required_time_s == 60.0  # no requested time: the run time
    assert specs["swf6"].spec.required_time_s == 450.0  # asked 400 s, ran 450 s
    assert rigid.model.run_time_s("swf", 3, 4) == 600.0
    full = swf_workload(SAMPLE_SWF, total_nodes=8, cores_per_node=4, malleable_share=100)
    ranges = {e.spec.name: (e.spec.lo, e.spec.hi, e.spec.job_class) for e in full.entries}
    assert ranges["swf3"] == (2, 8, JobClass.MALLEABLE)
    assert ranges["swf9"] == (4, 8, JobClass.MALLEABLE)  # 2n capped at the cluster size
    assert ranges["swf10"] == (1, 2, JobClass.MALLEABLE)
    result = Simulator("malleable", full, SimConfig(total_nodes=8)).run()
    assert result.jobs == 9 and not result.refused


def test_small_paper_evaluation_and_aggregate():
    ev = evaluate_paper(algorithms=("fcfs", "malleable"), shares=(0, 100), seeds=(43, 44))
    rows = ev.rows()
    assert [(r["algorithm"], r["malleable_share"]) for r in rows] == [
        ("fcfs", 0), ("fcfs", 100), ("malleable", 0), ("malleable", 100)]
    for r in rows:
        assert r["batches"] == 2 and r["jobs"] == 25
        assert 0 < r["utilisation"] <= 1
        assert r["makespan_min_s"] <= r["makespan_s"] <= r["makespan_max_s"]
    assert rows == aggregate(ev.results)
    # same 0 % batches: rigid-only malleable scheduling is EASY and never resizes
    assert rows[2]["shrinks_per_malleable_job"] == rows[2]["grows_per_malleable_job"] == 0


# --------------------------------------------------------------------------------- CLI


def run_cli(*argv: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["simulate", *argv]) == 0
    return json.loads(out.getvalue())


def test_cli_simulate_json_keys():
    report = run_cli("--json", "--quiet", "--batches", "2", "--shares", "0,100")
    assert report["config"]["seeds"] == [43, 44]
    rows = report["rows"]
    assert len(rows) == 8
    assert {(r["algorithm"], r["malleable_share"]) for r in rows} == {
        (a, s) for a in ("fcfs", "backfilling", "easy", "malleable") for s in (0, 100)}
    for key in ("algorithm", "malleable_share", "makespan_s", "utilisation", "mean_wait_s",
                "mean_turnaround_s", "mean_bounded_slowdown", "shrinks_per_malleable_job"):
        assert all(key in r for r in rows)
    assert {"fcfs_0_makespan_s", "malleable_makespan_s", "makespan_reduction",
            "goal_13_percent_met"} <= set(report["summary"])
    assert report["summary"]["malleable_share"] == 100


def test_cli_swf_csv_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    csv_path = tmp_path / "rows.csv"
    report = run_cli("--json", "--quiet", "--swf", str(SAMPLE_SWF), "--cores-per-node", "4",
                     "--nodes", "8", "--swf-malleable-share", "0,100", "--algorithms",
                     "fcfs,malleable", "--csv", str(csv_path), "--plot", str(tmp_path / "png"))
    assert len(report["rows"]) == 4 and report["config"]["batches"] == 1
    assert csv_path.read_text().startswith("algorithm,malleable_share,")
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert "makespan_vs_share.png" in pngs and "gantt_malleable_100.png" in pngs
    assert "utilisation_0.png" in pngs


def test_cli_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["simulate", "--algorithms", "sjf"])
    assert "unknown algorithm" in capsys.readouterr().err


def test_python_dash_m_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", "--json", "--batches", "1",
         "--shares", "0", "--algorithms", "fcfs"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["rows"][0]["algorithm"] == "fcfs"


# ------------------------------------------------------------- event-driven = every tick


def _schedule(result):
    """Every job's start, end and allotment changes (resizes with their times), exactly."""
    return [(r.job_id, r.name, r.submit_s, r.start_s, r.end_s, r.allotment, r.shrinks, r.grows)
            for r in result.records], result.refused


def _both_loops(algorithm, workload, config):
    fast = Simulator(algorithm, workload, config).run()
    slow_sim = Simulator(algorithm, workload, config)
    slow_sim._every_tick = True  # the first version's loop: a call at every period
    slow = slow_sim.run()
    return fast, slow


@pytest.mark.parametrize("algorithm", ["fcfs", "backfilling", "easy", "malleable"])
def test_event_driven_schedules_equal_the_every_tick_loop(algorithm, tmp_path):
    trace = synthetic_swf(tmp_path / "t.swf", jobs=60, nodes=16, seed=5, log_run_mu=5.0,
                          log_run_sigma=1.0, mean_interarrival_s=60.0)
    cases = [
        (paper_batch(43, 0), SimConfig()),
        (paper_batch(44, 40), SimConfig(costs=ResizeCostModel.java())),
        (paper_batch(45, 100, required_time_s=800.0), SimConfig()),
        (paper_batch(46, 60, jobs=40), SimConfig(total_nodes=16, cooldown_s=0.0, ready_s=0.0,
                                                 costs=FREE)),
        (paper_batch(47, 80), SimConfig(interval_s=7.0, run_on_events=False)),
        # required times far below the run times: jobs overrun their EASY reservations
        (paper_batch(48, 40, required_time_s=100.0), SimConfig()),
        (paper_batch(49, 0, jobs=80, required_time_s=30.0), SimConfig(total_nodes=24)),
        (swf_workload(SAMPLE_SWF, total_nodes=8, cores_per_node=4, malleable_share=50),
         SimConfig(total_nodes=8)),
        (swf_workload(trace, total_nodes=16, malleable_share=30, seed=2),
         SimConfig(total_nodes=16)),
    ]
    for workload, config in cases:
        fast, slow = _both_loops(algorithm, workload, config)
        assert _schedule(fast) == _schedule(slow)
        assert fast.decide_calls < slow.decide_calls


# --------------------------------------------------------------- hand-checked schedules

# 4 one-core nodes; requested time = run time.  Job 1 (3 nodes, 0-100 s) leaves one node;
# job 2 (4 nodes) blocks at 10 s with a reservation at 100 s and no extra node; job 3
# (1 node, 60 s, submitted at 20 s) ends by 100 s; job 4 (1 node, 200 s, submitted at 30 s)
# would not.
HAND_SWF = """\
1   0 -1 100 3 -1 -1 3 100 -1 1 1 1 1 1 -1 -1 -1
2  10 -1  50 4 -1 -1 4  50 -1 1 1 1 1 1 -1 -1 -1
3  20 -1  60 1 -1 -1 1  60 -1 1 1 1 1 1 -1 -1 -1
4  30 -1 200 1 -1 -1 1 200 -1 1 1 1 1 1 -1 -1 -1
"""
HAND_STARTS = {
    # FCFS: job 2 blocks the queue until job 1 ends; 3 and 4 start when job 2 ends.
    "fcfs": {1: 0.0, 2: 100.0, 3: 150.0, 4: 150.0},
    # Backfilling: 3 at once, 4 on the node 3 frees at 80 s, so job 2 waits for job 4 (280 s).
    "backfilling": {1: 0.0, 2: 280.0, 3: 20.0, 4: 80.0},
    # EASY: 3 ends by the reservation (20 + 60 <= 100) and starts; 4 would delay job 2 and
    # waits; job 2 starts at its reservation, as soon as it fits; 4 after it.
    "easy": {1: 0.0, 2: 100.0, 3: 20.0, 4: 150.0},
}


@pytest.mark.parametrize("algorithm", sorted(HAND_STARTS))
def test_hand_checked_start_times(algorithm, tmp_path):
    trace = tmp_path / "hand.swf"
    trace.write_text(HAND_SWF)
    result = Simulator(algorithm, swf_workload(trace, total_nodes=4),
                       SimConfig(total_nodes=4)).run()
    assert {r.size: r.start_s for r in result.records} == HAND_STARTS[algorithm]


def test_easy_audit_finds_no_departure_here_and_catches_a_held_head(tmp_path):
    from benchmarks.accasim_compare import AuditJob, easy_audit

    trace = synthetic_swf(tmp_path / "t.swf", jobs=300, nodes=32, seed=3,
                          mean_interarrival_s=1500.0)
    result = Simulator("easy", swf_workload(trace, total_nodes=32),
                       SimConfig(total_nodes=32)).run()
    swf = {j.number: j for j in read_swf(trace)}
    jobs = [AuditJob(r.size, r.submit_s, r.start_s, r.end_s, swf[r.size].processors,
                     r.required_s) for r in result.records]
    departures, shadows = easy_audit(jobs, 32)
    assert departures == []
    assert shadows and all(next(j.start for j in jobs if j.number == n) <= s
                           for n, s in shadows.items())
    # The hand trace with job 2 held back to 150 s although it fits at 100 s.
    held = [AuditJob(1, 0, 0, 100, 3, 100), AuditJob(2, 10, 150, 200, 4, 50),
            AuditJob(3, 20, 20, 80, 1, 60), AuditJob(4, 30, 200, 400, 1, 200)]
    departures, shadows = easy_audit(held, 4)
    assert [(d.time, d.kind, d.jobs, d.head) for d in departures] == [
        (100, "head_held", (2,), 4)]
    assert shadows == {2: 100, 4: 150}  # 4 waits for job 2, and starts at 200 s, past 150 s
    # Backfilling's schedule of it: job 4 at 80 s takes the node job 2 has reserved.
    starts = HAND_STARTS["backfilling"]
    broken = [AuditJob(j.number, j.submit, starts[j.number], starts[j.number] + j.end - j.start,
                       j.size, j.requested) for j in held]
    departures, shadows = easy_audit(broken, 4)
    assert [(d.time, d.kind, d.jobs, d.head, d.shadow) for d in departures] == [
        (80, "reservation_broken", (4,), 2, 100)]
    assert shadows == {2: 100}  # and job 2 starts at 280 s, past it


# ----------------------------------------------------------------- one decision check


def test_decision_problem_is_the_one_check():
    rigid = JobSpec("r", nodes=2)
    mall = JobSpec("m", job_class="malleable", min_nodes=1, max_nodes=3)
    free = {"n3", "n4"}
    assert decision_problem(Start(1, ("n3", "n4")), spec=rigid, state="waiting",
                            free=free) is None
    assert decision_problem(Start(1, ("n3",)), spec=rigid, state="waiting",
                            free=free) == "1 nodes outside 2-2"
    assert decision_problem(Start(1, ("n3", "n1")), spec=rigid, state="waiting",
                            free=free) == "nodes not free: ['n1']"
    assert decision_problem(Start(1, ("n3", "n3")), spec=rigid, state="waiting",
                            free=free) == "names a node twice: ['n3', 'n3']"
    assert decision_problem(Start(1, ("n3", "n4")), spec=rigid, state="running",
                            free=free) == "no such waiting job"
    assert decision_problem(Shrink(1, 1), spec=rigid, state="running", held=2,
                            takes_orders=True) == "the job is not malleable"
    assert decision_problem(Shrink(1, 1), spec=mall, state="running", held=2,
                            takes_orders=False).startswith("the job is not ready for orders")
    assert decision_problem(Shrink(1, 1), spec=mall, state="running", held=2,
                            takes_orders=True) is None
    assert decision_problem(Shrink(1, 2), spec=mall, state="running", held=2,
                            takes_orders=True) == "cannot shrink 2 nodes by 2 (minimum 1)"
    assert decision_problem(Grow(1, ("n3",)), spec=mall, state="running", held=2,
                            takes_orders=True, free=free) is None
    assert decision_problem(Grow(1, ("n3", "n4")), spec=mall, state="running", held=2,
                            takes_orders=True, free=free) == "cannot grow 2 nodes by 2 (maximum 3)"
    assert decision_problem(Grow(1, ()), spec=mall, state="running", held=2,
                            takes_orders=True, free=free) == "cannot grow by no node"
    assert decision_problem(Grow(9, ("n3",)), spec=None, state=None) == "no such running job"
    assert decision_problem("start", spec=None, state=None) == "not a decision: 'start'"


# ------------------------------------------------------------------ SWF out, progress


def test_records_as_swf_read_back(tmp_path):
    result = Simulator("easy", swf_workload(SAMPLE_SWF, total_nodes=8, cores_per_node=4),
                       SimConfig(total_nodes=8)).run()
    out = write_swf(result.records, tmp_path / "out.swf", cores_per_node=4, total_nodes=8,
                    notes=["easy"])
    back = {j.number: j for j in read_swf(out)}
    assert sorted(back) == [1, 2, 3, 5, 6, 7, 8, 9, 10]
    fields = {int(line.split()[0]): line.split() for line in out.read_text().splitlines()
              if not line.startswith(";")}
    for rec in result.records:
        job = back[rec.size]
        assert (job.submit_s, job.run_s) == (rec.submit_s, rec.run_s)
        assert float(fields[rec.size][2]) == rec.wait_s
        assert job.requested_s == rec.required_s
    assert back[9].processors == 32 and back[5].processors == 4  # whole nodes of 4 cores
    assert "; Note: easy" in out.read_text()


def test_cli_records_swf_and_progress_counts(tmp_path):
    run_cli("--json", "--quiet", "--swf", str(SAMPLE_SWF), "--cores-per-node", "4",
            "--nodes", "8", "--shares", "0", "--algorithms", "fcfs,easy",
            "--records", str(tmp_path / "r.json"), "--records-swf", str(tmp_path / "swf"))
    assert sorted(p.name for p in (tmp_path / "swf").iterdir()) == ["easy@0.swf", "fcfs@0.swf"]
    records = json.loads((tmp_path / "r.json").read_text())
    easy = {r["size"]: r["start_s"] for r in records["easy@0"]}
    swf_easy = {j.number: j.submit_s for j in read_swf(tmp_path / "swf" / "easy@0.swf")}
    assert set(easy) == set(swf_easy)
    counts = []
    big = paper_batch(43, 40, jobs=700)
    result = Simulator("malleable", big, SimConfig()).run(counts.append)
    assert sum(counts) == 700 == result.jobs and counts[0] == 256


def test_synthetic_swf_shape(tmp_path):
    a = synthetic_swf(tmp_path / "a.swf", jobs=50, nodes=8, seed=9)
    b = synthetic_swf(tmp_path / "b.swf", jobs=50, nodes=8, seed=9)
    assert a.read_text() == b.read_text()
    jobs = read_swf(a)
    assert [j.number for j in jobs] == list(range(1, 51)) and jobs[0].submit_s == 0
    assert all(1 <= j.processors <= 8 and j.run_s >= 1 for j in jobs)
    assert all(j.run_s <= j.requested_s <= 3 * j.run_s + 1 for j in jobs)
    assert all(x.submit_s <= y.submit_s for x, y in zip(jobs, jobs[1:], strict=False))
    with pytest.raises(ValueError, match="requested_factor"):
        synthetic_swf(tmp_path / "c.swf", jobs=1, requested_factor=(0.5, 1.0))


def test_easy_wakes_when_a_running_job_passes_its_expected_end():
    # 7 nodes.  X (5 nodes) and Y (1 node) overrun their required times (10 s, 100 s); the
    # head H (6 nodes) waits with 1 node free.  Once both are past their expected ends they
    # count as giving back their nodes "now", one release at a time in the order (time,
    # count), and the extra node the head does not need appears: B backfills at 100 s, a
    # tick with no event, which the event-driven loop must not skip.
    model = RuntimeModel({("x", 1): ScalingCurve({5: 1000.0}), ("y", 1): ScalingCurve({1: 1000.0}),
                          ("h", 1): ScalingCurve({6: 50.0}), ("b", 1): ScalingCurve({1: 10.0})})
    entries = [entry("x", nodes=5, required_time_s=10.0),
               entry("y", nodes=1, required_time_s=100.0),
               entry("h", 1.0, nodes=6, required_time_s=50.0),
               entry("b", 2.0, nodes=1, required_time_s=5000.0)]
    config = SimConfig(total_nodes=7)
    fast = Simulator("easy", entries, config, model=model).run()
    slow_sim = Simulator("easy", entries, config, model=model)
    slow_sim._every_tick = True
    assert _schedule(fast) == _schedule(slow_sim.run())
    assert {r.name: r.start_s for r in fast.records} == {
        "x": 0.0, "y": 0.0, "h": 1000.0, "b": 100.0}


@pytest.mark.parametrize("algorithm", ["rigid-min", "rigid-max", "moldable", "elastic-priority",
                                       "elastic-priority-easy"])
def test_priority_policies_event_driven_equal_every_tick(algorithm):
    """The priority policies' ``next_change_s`` (rescale gaps, reservations, aging) skips
    only calls that change nothing: Jacobi batches, loaded and light, with and without a
    gap, give the same schedules as a call at every period."""
    from scheduler.algorithms import make
    from scheduler.model import jacobi_placeholder
    from scheduler.workload import jacobi_batch

    model = jacobi_placeholder()
    config = SimConfig(total_nodes=64, costs=model.costs)
    for seed, gap, rescale_gap in ((1, 0.0, 180.0), (2, 90.0, 0.0), (3, 30.0, 600.0)):
        work = jacobi_batch(seed, submission_gap_s=gap, model=model)
        fast, slow = _both_loops(make(algorithm, rescale_gap_s=rescale_gap, keep_free=1),
                                 work, config)
        assert _schedule(fast) == _schedule(slow)
        assert fast.decide_calls <= slow.decide_calls
