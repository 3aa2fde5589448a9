"""Priorities and the priority policies (docs/guides/priorities.md): pure code, no process."""

from __future__ import annotations

import json

import pytest

from scheduler.__main__ import main
from scheduler._exceptions import BatchFileError, JobScriptError
from scheduler.algorithms import Grow, RunningJob, Shrink, Start, View, WaitingJob, make
from scheduler.jobs import BatchEntry, JobSpec, load_batch, parse_job_script
from scheduler.metrics import priority_metrics
from scheduler.model import (
    PiecewiseLinearCurve,
    ResizeCostModel,
    RuntimeModel,
    jacobi_placeholder,
)
from scheduler.simulate import SimConfig, Simulator
from scheduler.studies.priority import priority_study
from scheduler.workload import Workload, jacobi_batch


def spec(name: str, lo: int, hi: int, priority: int, required: float = 100.0) -> JobSpec:
    return JobSpec(name=name, job_class="malleable", min_nodes=lo, max_nodes=hi,
                   priority=priority, required_time_s=required, program="p", size=name)


def nodes(count: int, first: int = 1) -> tuple[str, ...]:
    return tuple(f"n{i}" for i in range(first, first + count))


def running(job_id: int, s: JobSpec, held: tuple[str, ...], start: float = 0.0,
            last: float | None = None) -> RunningJob:
    return RunningJob(job_id, s, held, start, malleable_ready=True, last_order_s=last)


# ---------------------------------------------------------------------------- parsing


def test_priority_header_batch_and_default(tmp_path):
    assert parse_job_script("#!/bin/bash\n#NODES 2\n#PRIORITY 5\n").priority == 5
    assert parse_job_script("#NODES 2\n").priority == 3
    (tmp_path / "b.json").write_text(json.dumps(
        [{"name": "a", "nodes": 1, "priority": 1}, {"name": "b", "nodes": 1}]))
    assert [e.spec.priority for e in load_batch(tmp_path / "b.json")] == [1, 3]
    (tmp_path / "b.csv").write_text("name,nodes,priority\na,1,4\nb,1,\n")
    assert [e.spec.priority for e in load_batch(tmp_path / "b.csv")] == [4, 3]


@pytest.mark.parametrize("bad", ["0", "6", "high", "2.5"])
def test_bad_priority_is_a_clear_error(tmp_path, bad):
    with pytest.raises(JobScriptError, match=f"line 2: .*{bad}"):
        parse_job_script(f"#NODES 2\n#PRIORITY {bad}\n")
    (tmp_path / "b.csv").write_text(f"name,nodes,priority\na,1,{bad}\n")
    with pytest.raises(BatchFileError, match=f"data row 1: .*{bad}"):
        load_batch(tmp_path / "b.csv")
    with pytest.raises(ValueError, match="priority"):
        JobSpec(nodes=1, priority=True)


def test_negative_rescale_gap_names_the_value():
    with pytest.raises(ValueError, match="-5"):
        make("elastic-priority", rescale_gap_s=-5)
    with pytest.raises(ValueError, match="-1"):
        make("rigid-min", keep_free=-1)


# --------------------------------------------------------------------- the policies


def test_static_policies_start_sizes_in_priority_order():
    a, b, c = spec("a", 2, 8, 1), spec("b", 4, 16, 5), spec("c", 2, 4, 5)
    waiting = (WaitingJob(1, a, 0.0), WaitingJob(2, b, 1.0), WaitingJob(3, c, 2.0))
    view = View(10.0, nodes(10), (), waiting, 10)
    # b (5, submitted before c), c (5), then a (1)
    assert make("rigid-min").decide(view) == [
        Start(2, nodes(4)), Start(3, nodes(2, 5)), Start(1, nodes(2, 7))]
    # rigid-max: b needs 10 (its 16 capped at the cluster): all of them; c and a then wait
    assert make("rigid-max").decide(view) == [Start(2, nodes(10))]
    assert make("moldable").decide(view) == [Start(2, nodes(10))]
    # one node kept free: b gets 9, nothing else fits
    assert make("moldable", keep_free=1).decide(view) == [Start(2, nodes(9))]


def test_elastic_priority_shrinks_lower_priority_outside_the_gap():
    low = running(1, spec("low", 2, 8, 1), nodes(8), start=0.0)
    mid = running(2, spec("mid", 2, 8, 2), nodes(8, 9), start=0.0)
    new = WaitingJob(3, spec("new", 4, 6, 3), 500.0)
    view = View(500.0, (), (low, mid), (new,), 16)
    # lowest priority first, each to at most its minimum, aiming at new's maximum (6)
    assert make("elastic-priority", rescale_gap_s=180).decide(view) == [Shrink(1, 6)]
    # low within its gap (ordered 100 s ago): mid gives the nodes instead
    low_recent = running(1, low.spec, low.nodes, start=0.0, last=400.0)
    view = View(500.0, (), (low_recent, mid), (new,), 16)
    assert make("elastic-priority", rescale_gap_s=180).decide(view) == [Shrink(2, 6)]
    # a higher-priority running job is never shrunk: not enough, the job waits
    high = running(2, spec("high", 2, 8, 5), nodes(8, 9), start=0.0)
    view = View(500.0, (), (low_recent, high), (new,), 16)
    assert make("elastic-priority", rescale_gap_s=180).decide(view) == []
    # the gap of the recent order ends at 580 s: that is when the answer may change
    assert make("elastic-priority", rescale_gap_s=180).next_change_s(view) == 580.0


def test_elastic_priority_grows_highest_priority_first():
    a = running(1, spec("a", 2, 8, 2), nodes(2), start=0.0)
    b = running(2, spec("b", 2, 8, 4), nodes(2, 3), start=0.0)
    view = View(300.0, nodes(8, 5), (a, b), (), 12)
    assert make("elastic-priority").decide(view) == [Grow(2, nodes(6, 5)), Grow(1, nodes(2, 11))]
    assert make("moldable").decide(view) == []


def _curve_workload(entries):
    model = RuntimeModel({("p", e.spec.size): PiecewiseLinearCurve({1: 100.0, 8: 100.0 / 8})
                          for e in entries})
    return Workload(tuple(entries), model)


def test_elastic_priority_simulated_exact_times():
    """8 nodes, free resizes, run time 100 s / n.  A (priority 1, 2-8) starts alone at 0 on
    8 nodes; B (priority 5, 4-8) comes at 300 s: A is shrunk by 6 (to 2) and B starts as
    soon as the nodes are free (same time: free resize) on 6 nodes."""
    work = _curve_workload([BatchEntry(spec("A", 2, 8, 1), 0.0),
                            BatchEntry(spec("B", 4, 8, 5), 3.0)])
    cfg = SimConfig(total_nodes=8, costs=ResizeCostModel.free(), ready_s=0.0)
    result = Simulator(make("elastic-priority", rescale_gap_s=0), work, cfg).run()
    a, b = result.records
    assert (a.start_s, b.start_s) == (0.0, 3.0)
    assert [len(n) for _, n in a.allotment] == [8, 2, 8, 0]  # shrunk for B, grown after B
    assert [len(n) for _, n in b.allotment][0] == 6
    # within a rescale gap of 180 s A cannot be shrunk: B waits for A's end (12.5 s)
    result = Simulator(make("elastic-priority", rescale_gap_s=180), work, cfg).run()
    a, b = result.records
    assert (a.end_s, b.start_s) == (12.5, 12.5)


def test_resize_costs_per_program_size_in_the_simulator():
    """A job's own resize costs (``SimConfig.job_costs``) replace the common ones: A's
    shrink for B takes A's 2 s, so B starts at 5 s; costs given to B's size leave A's
    shrink free."""
    work = _curve_workload([BatchEntry(spec("A", 2, 8, 1), 0.0),
                            BatchEntry(spec("B", 4, 8, 5), 3.0)])
    slow = ResizeCostModel.constant(2.0, 2.0)
    for key, b_start in ((("p", "A"), 5.0), (("p", "B"), 3.0)):
        cfg = SimConfig(total_nodes=8, costs=ResizeCostModel.free(), ready_s=0.0,
                        job_costs={key: slow})
        a, b = Simulator(make("elastic-priority", rescale_gap_s=0), work, cfg).run().records
        assert (a.start_s, b.start_s) == (0.0, b_start)
        assert [len(n) for _, n in a.allotment][:2] == [8, 2]


def test_aging_orders_and_smith_rank():
    """Priority order with aging: a priority-1 job submitted more than 4 aging steps before
    a priority-5 one outranks it.  Smith order: a short job passes a long one of higher
    priority."""
    old = WaitingJob(1, spec("old", 4, 4, 1), 0.0)
    new = WaitingJob(2, spec("new", 4, 4, 5), 2401.0)
    view = View(2500.0, nodes(4), (), (old, new), 4)
    assert make("elastic-priority", rescale_gap_s=0).decide(view) == [Start(2, nodes(4))]
    easy = make("elastic-priority-easy", aging_s=600, order="priority")
    assert easy.decide(view) == [Start(1, nodes(4))]
    new = WaitingJob(2, spec("new", 4, 4, 5), 2399.0)
    assert easy.decide(View(2500.0, nodes(4), (), (old, new), 4)) == [Start(2, nodes(4))]
    short = WaitingJob(1, spec("short", 4, 4, 2, required=10.0), 0.0)
    long = WaitingJob(2, spec("long", 4, 4, 5, required=1000.0), 0.0)
    view = View(0.0, nodes(4), (), (long, short), 4)
    assert make("elastic-priority-easy").decide(view) == [Start(1, nodes(4))]
    assert make("elastic-priority").decide(view) == [Start(2, nodes(4))]
    with pytest.raises(ValueError, match="exclude each other"):
        make("elastic-priority-easy", grow_first=True, shrink=True)


def test_aging_bounds_a_priority_1_wait_in_simulation():
    """4 nodes; a priority-1 job (submitted at 1 s) and a stream of priority-5 jobs, one
    every 100 s from 0 to 6000 s, each needing the whole cluster for 100 s.  Without aging
    the priority-1 job runs after the stream; with aging (600 s a step, priority order) it
    outranks every job submitted after 1 + 4 * 600 s, so it starts by 2401 + 100 s."""
    curve = PiecewiseLinearCurve({4: 100.0})
    entries = [BatchEntry(spec("low", 4, 4, 1, required=100.0), 1.0)]
    entries += [BatchEntry(spec(f"h{i}", 4, 4, 5, required=100.0), 100.0 * i)
                for i in range(61)]
    model = RuntimeModel({("p", e.spec.size): curve for e in entries})
    work = Workload(tuple(entries), model)
    cfg = SimConfig(total_nodes=4, costs=ResizeCostModel.free(), ready_s=0.0)

    def low_start(algorithm):
        records = Simulator(algorithm, work, cfg).run().records
        return next(r.start_s for r in records if r.name == "low")

    assert low_start(make("elastic-priority")) == 6100.0
    start = low_start(make("elastic-priority-easy", aging_s=600, order="priority"))
    assert 2401.0 <= start <= 2501.0
    # EASY: behind a blocked head, a job that would delay its reservation does not start
    big = running(3, spec("big", 4, 4, 5, required=50.0), nodes(4, 1), start=0.0)
    head = WaitingJob(4, spec("head", 8, 8, 5), 0.0)
    late = WaitingJob(5, spec("late", 2, 2, 2, required=500.0), 10.0)
    short = WaitingJob(6, spec("short", 2, 2, 2, required=20.0), 10.0)
    view = View(20.0, nodes(4, 5), (big,), (head, late, short), 8)
    assert make("elastic-priority-easy", aging_s=600).decide(view) == [Start(6, nodes(2, 5))]
    assert make("elastic-priority").decide(view) == [Start(5, nodes(2, 5)),
                                                      Start(6, nodes(2, 7))]


def test_ours_shrinks_a_running_job_ranked_far_below_the_head():
    """8 nodes held by A (priority 1, 2-8 nodes, 20,000 node-seconds asked, 4,000 used);
    B (priority 5, 4 nodes, 400 node-seconds asked) arrives.  B's rank, log2(5/400), is
    more than 2 steps above A's, log2(1/16000): A is shrunk by 4 for B.  With a margin of
    10 steps A is left alone and B waits."""
    a = running(1, spec("A", 2, 8, 1, required=10_000.0), nodes(8), start=0.0)
    b = WaitingJob(2, spec("B", 4, 4, 5, required=100.0), 500.0)
    view = View(500.0, (), (a,), (b,), 8)
    assert make("elastic-priority-easy").decide(view) == [Shrink(1, 4)]
    assert make("elastic-priority-easy", shrink_margin=10).decide(view) == []
    with pytest.raises(ValueError, match="shrink_margin.*-1"):
        make("elastic-priority-easy", shrink_margin=-1)


def test_ours_grows_a_running_job_that_is_nearly_done_before_starting_a_long_one():
    """C (priority 1, 2-4 nodes) has used more node-seconds than it asked: its rank is
    log2(1/10), above D's log2(5/2000) (priority 5, long).  Ours gives the 2 free nodes to
    C; elastic-priority serves the queue first and starts D."""
    c = running(1, spec("C", 2, 4, 1, required=100.0), nodes(2), start=0.0)
    d = WaitingJob(2, spec("D", 2, 2, 5, required=1000.0), 100.0)
    view = View(190.0, nodes(2, 3), (c,), (d,), 4)
    assert make("elastic-priority-easy").decide(view) == [Grow(1, nodes(2, 3))]
    assert make("elastic-priority").decide(view) == [Start(2, nodes(2, 3))]


def test_ours_in_priority_order_skips_no_call_that_matters():
    """With ``order="priority"`` ours reports when a waiting job's aged rank passes a
    running job's (plus the shrink margin): the event-driven simulation equals a call every
    period.  Seed 1 at a submission gap of 90 s and a rescale gap of 0 s has a priority-4
    job arriving while a priority-2 job holds 63 nodes: exactly 2 + 2 steps, a tie that
    breaks one tick later (a shrink at 455 s, which a wake-up strictly after ``now``
    missed: it came at 540 s)."""
    model = jacobi_placeholder()
    config = SimConfig(total_nodes=64, costs=model.costs)

    def schedule(result):
        return [(r.name, r.start_s, r.end_s, r.allotment) for r in result.records]

    for seed, gap, rescale_gap in ((1, 90.0, 0.0), (2, 0.0, 180.0), (3, 30.0, 600.0)):
        work = jacobi_batch(seed, submission_gap_s=gap, model=model)
        easy = make("elastic-priority-easy", rescale_gap_s=rescale_gap, keep_free=1,
                    order="priority")
        fast = Simulator(easy, work, config).run()
        slow = Simulator(easy, work, config)
        slow._every_tick = True  # the reference loop: a call at every period
        assert schedule(fast) == schedule(slow.run())
        if seed == 1:
            shrunk = next(r for r in fast.records if r.name == "jacobi_xlarge_4")
            # shrunk by 8 at 455 s, the nodes back after the 3-s rescale cost
            assert [(t, len(n)) for t, n in shrunk.allotment[1:2]] == [(458.0, 55)]


# -------------------------------------------------------------------------- the study


def test_priority_metrics_are_weighted_by_priority():
    work = _curve_workload([BatchEntry(spec("A", 8, 8, 1), 0.0),
                            BatchEntry(spec("B", 8, 8, 3), 0.0)])
    cfg = SimConfig(total_nodes=8, costs=ResizeCostModel.free(), ready_s=0.0)
    result = Simulator(make("rigid-max"), work, cfg).run()
    m = priority_metrics(result.records, 8)
    # B (priority 3) runs 0-12.5, A 12.5-25
    assert m["total_time_s"] == 25.0 and m["utilisation"] == 1.0
    assert m["weighted_mean_response_s"] == pytest.approx(12.5 * 1 / 4)
    assert m["weighted_mean_completion_s"] == pytest.approx((25 * 1 + 12.5 * 3) / 4)
    assert m["max_wait_priority1_s"] == 12.5


def test_jacobi_batch_is_seeded():
    one, two = jacobi_batch(7, submission_gap_s=60), jacobi_batch(7, submission_gap_s=60)
    assert [e.spec for e in one.entries] == [e.spec for e in two.entries]
    assert [e.submit_s for e in one.entries] == [60.0 * i for i in range(16)]
    assert {e.spec.size for e in one.entries} <= {"small", "medium", "large", "xlarge"}


def test_study_json_fields(capsys):
    code = main(["simulate", "--study", "priority", "--batches", "1", "--json", "--quiet"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    fields = {"policy", "sweep", "submission_gap_s", "rescale_gap_s", "total_time_s",
              "utilisation", "weighted_mean_response_s", "weighted_mean_completion_s",
              "max_wait_priority1_s"}
    assert all(fields <= set(r) for r in rows)
    assert len(rows) == 5 * (11 + 11 + 1)  # 1 batch: less work than the paper's, no loaded row
    assert {r["policy"] for r in rows} == {"rigid-min", "rigid-max", "moldable",
                                           "elastic-priority", "elastic-priority-easy"}


def test_ours_beats_elastic_priority_on_weighted_completion():
    """20 batches at the paper's point (submission gap 90 s, rescale gap 180 s): ours'
    weighted mean completion is 212.5 s against elastic-priority's 235.5 s (100 batches:
    242.3 s against 270.2 s, docs/guides/priorities.md)."""
    rows = priority_study(batches=20, submission_gaps_s=(), rescale_gaps_s=(),
                          policies=("elastic-priority", "elastic-priority-easy"))
    table = [r for r in rows if r["sweep"] == "table"]
    paper, ours = (r["weighted_mean_completion_s"] for r in table)
    assert ours < 0.92 * paper
    assert all(r["max_wait_priority1_s"] < 600 for r in table)


def test_loaded_rows_average_the_batches_with_enough_work():
    """``table_loaded`` averages the batches asking at least ``loaded_node_s`` node-seconds
    at their minimum: with 0 that is every batch (the rows equal ``table``'s), with more
    than any batch asks there is no such row."""
    def study(threshold):
        return priority_study(batches=3, submission_gaps_s=(), rescale_gaps_s=(),
                              policies=("rigid-min",), loaded_node_s=threshold)

    table, loaded = study(0.0)
    assert (table["sweep"], loaded["sweep"]) == ("table", "table_loaded")
    assert {**loaded, "sweep": "table"} == table
    assert [r["sweep"] for r in study(1e9)] == ["table"]
    # seeds 1-3 ask 44,992, 79,144 and 68,387 node-seconds at their minimum (placeholder)
    assert [r["batches"] for r in study(70_000.0)] == [3, 1]


def test_study_plot_draws_both_sweeps(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "png"
    code = main(["simulate", "--study", "priority", "--batches", "1", "--quiet",
                 "--plot", str(out)])
    assert code == 0
    drawn = sorted(p.name for p in out.iterdir())
    assert drawn == ["priority_rescale_gap.png", "priority_submission_gap.png"]
    assert all((out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in drawn)


def test_study_rejects_negative_gap():
    with pytest.raises(ValueError, match="-1"):
        priority_study(batches=1, rescale_gaps_s=(-1.0,), submission_gaps_s=())


def test_control_request_carries_the_priority(tmp_path):
    """The control request's ``priority`` replaces the script's #PRIORITY; a bad one is a
    clear refusal (an in-process server that is never started: no job runs)."""
    from scheduler.control_server import handle_request
    from scheduler.nodes import LocalNodes
    from scheduler.server import Server

    server = Server(LocalNodes(2), make("elastic-priority"), port=0, run_dir=tmp_path / "run")
    try:
        script = "#NODES 1\n#PRIORITY 2\ntrue\n"
        one = handle_request(server, {"op": "submit", "text": script, "priority": 5})
        two = handle_request(server, {"op": "submit", "text": script})
        bad = handle_request(server, {"op": "submit", "text": script, "priority": 9})
        assert one["ok"] and two["ok"]
        assert bad == {"ok": False,
                       "error": "job 'job': a priority runs from 1 (lowest) to 5 (highest), "
                                "got 9"}
        assert {i: j.spec.priority for i, j in server._state.jobs.items()} == {1: 5, 2: 2}
    finally:
        server.shutdown()


def test_submit_priority_option_is_checked(capsys):
    with pytest.raises(SystemExit):
        main(["submit", "--priority", "7", "job.sh"])
    assert "got 7" in capsys.readouterr().err
    assert main(["submit", "--priority", "2", "--batch", "jobs.json"]) == 2
    assert "batch file" in capsys.readouterr().err


def test_piecewise_linear_model_and_its_json(tmp_path):
    curve = PiecewiseLinearCurve({2: 40.0, 4: 22.0, 8: 14.0})
    assert [curve(n) for n in (2, 3, 4, 6, 8, 16)] == [40.0, 31.0, 22.0, 18.0, 14.0, 1.0]
    assert curve(1) == 49.0  # the first segment extended (slope -9 s a node)
    from scheduler.model import jacobi_placeholder, load_jacobi_model

    data = jacobi_placeholder().to_json()
    data["jobs"]["small"]["points"] = {"2": 40.0, "4": 22.0, "8": 14.0}
    data["rescale"] = {"grow_points": [[1, 2.0]], "shrink_points": [[1, 1.0], [4, 4.0]]}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    model = load_jacobi_model(str(path))
    assert model.runtime_model().run_time_s("jacobi", "small", 3) == 31.0
    assert (model.costs.grow_s(7), model.costs.shrink_s(2)) == (2.0, 2.0)
    assert model.sim_costs() == {}
    data["jobs"]["large"]["rescale"] = {"grow_points": [[1, 7.0]]}
    path.write_text(json.dumps(data))
    model = load_jacobi_model(str(path))
    large = model.sim_costs()[("jacobi", "large")]
    assert (large.grow_s(3), large.shrink_s(2)) == (7.0, 2.0)  # shrink: the common one
    assert load_jacobi_model(str(path)).to_json() == model.to_json()
    path.write_text(json.dumps(model.to_json()))
    assert load_jacobi_model(str(path)).sim_costs() == model.sim_costs()
    data["jobs"]["large"]["rescale"] = {"grow_points": [[0, 7.0]]}
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="jobs.large.rescale"):
        load_jacobi_model(str(path))
    del data["jobs"]["large"]["rescale"]
    del data["jobs"]["xlarge"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="jobs.xlarge.points"):
        load_jacobi_model(str(path))


def test_jacobi_model_from_the_benchmark_measurements(tmp_path):
    """The Jacobi benchmark's measurement file: the one-place cost per point a step (median
    over grids) and the mean grow/shrink times feed the model."""
    from scheduler.model import jacobi_placeholder, load_jacobi_model

    path = tmp_path / "jacobi_model.json"
    path.write_text(json.dumps({"benchmark": "jacobi_model", "models": [
        {"grid": 1000, "steps": 100, "nodes": [1, 2], "seconds": [0.2, 0.15],
         "grow_s": 1.0, "shrink_s": 0.5},
        {"grid": 2000, "steps": 100, "nodes": [1, 2], "seconds": [1.2, 0.9],
         "grow_s": 2.0, "shrink_s": 1.5},
        {"grid": 1000, "steps": 1000, "nodes": [1], "seconds": [4.0]},
    ]}))
    model = load_jacobi_model(str(path))
    # rates 2, 3 and 4 ns a point: the median is 3 ns
    assert model.curves == jacobi_placeholder(seconds_per_point=3e-9).curves
    assert (model.costs.grow_s(4), model.costs.shrink_s(4)) == (1.5, 1.0)
    # where measured, the time the iterations stand still is the cost
    path.write_text(json.dumps({"benchmark": "jacobi_model", "models": [
        {"grid": 1000, "steps": 100, "nodes": [1, 2], "seconds": [0.2, 0.15],
         "grow_s": 1.0, "shrink_s": 0.5, "grow_pause_s": 0.4, "shrink_pause_s": 0.1},
        {"grid": 2000, "steps": 100, "nodes": [1, 2], "seconds": [1.2, 0.9],
         "grow_s": 2.0, "shrink_s": 1.5},
    ]}))
    model = load_jacobi_model(str(path))
    assert (model.costs.grow_s(4), model.costs.shrink_s(4)) == (1.2, 0.8)
    path.write_text(json.dumps({"models": [{"grid": 10, "steps": 1, "nodes": [2],
                                            "seconds": [1.0]}]}))
    with pytest.raises(ValueError, match="no measurement on 1 place"):
        load_jacobi_model(str(path))
