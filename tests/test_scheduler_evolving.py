"""Evolving jobs, the scheduler's side: the class, the two request policies on hand-checked
snapshots, the evotree demand model, the evolving study's JSON, and the real server's
handling of ``Evolving;Request;1`` / ``Evolving;Release;<host>`` lines over TCP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from conftest import ROOT, wait_decisions, wait_until

from scheduler import JobSpec
from scheduler.algorithms import (
    Grow,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    decision_problem,
    make,
)
from scheduler.evolving_simulation import EvolvingJob, EvoTree, simulate_evolving
from scheduler.jobs import JobClass, parse_job_script
from scheduler.model import ResizeCostModel
from scheduler.nodes import LocalNodes
from scheduler.server import Server, job_of
from scheduler.studies.evolving import evolving_batch, evolving_study

EVO = JobSpec(name="evo", job_class="evolving", min_nodes=1, max_nodes=4, required_time_s=100)
RIGID2 = JobSpec(name="r2", nodes=2, required_time_s=50)


def running(job_id, spec, nodes, *, start_s=0.0, requested=0, last_order_s=None):
    return RunningJob(job_id, spec, tuple(nodes), start_s, malleable_ready=True,
                      last_order_s=last_order_s, requested=requested)


def test_evolving_class_and_decision_rules():
    spec = parse_job_script("#JOB_CLASS evolving\n#MIN_NODES 1\n#MAX_NODES 4\n")
    assert spec.job_class is JobClass.EVOLVING and (spec.lo, spec.hi) == (1, 4)
    # an evolving job may be grown up to its maximum, never shrunk
    assert decision_problem(Grow(1, ("n3",)), spec=EVO, state="running", held=3,
                            takes_orders=True, free={"n3"}) is None
    assert "maximum 4" in decision_problem(Grow(1, ("n3",)), spec=EVO, state="running",
                                           held=4, takes_orders=True, free={"n3"})
    assert decision_problem(Shrink(1, 1), spec=EVO, state="running", held=3,
                            takes_orders=True) == "the job is not malleable"


def test_java_rule_serves_requests_first_one_node_each_with_cooldown():
    # n1-n2 held by job 1 (asked, cooled down), n3 by job 2 (asked 10 s after an order);
    # free: n4, n5.  Queue head: a rigid job of 2.
    view = View(now_s=100.0, free_nodes=("n5", "n4"), running=(
        running(1, EVO, ["n1", "n2"], requested=1, last_order_s=30.0),
        running(2, EVO, ["n3"], requested=1, last_order_s=90.0),
    ), waiting=(WaitingJob(3, RIGID2, 50.0),), total_nodes=5)
    decisions = make("evolving-easy", cooldown_s=60.0).decide(view)
    # job 1 gets n4; job 2 is inside its cool-down; the head cannot start on n5 alone, and
    # nothing else waits
    assert decisions == [Grow(1, ("n4",))]
    assert make("evolving-easy", cooldown_s=60.0).next_change_s(view) == 100.0
    # without the cool-down job 2 gets n5 too
    assert make("evolving-easy", cooldown_s=5.0).decide(view) == [
        Grow(1, ("n4",)), Grow(2, ("n5",))]


def test_smallest_first_policy_order_and_minimum_start():
    view = View(now_s=10.0, free_nodes=("n4", "n5", "n6"), running=(
        running(1, EVO, ["n1", "n2"], requested=1, last_order_s=9.0),
        running(2, EVO, ["n3"], requested=1, last_order_s=9.0),
    ), waiting=(WaitingJob(3, EVO, 5.0),), total_nodes=6)
    decisions = make("evolving-smallest").decide(view)
    # fewest nodes first (job 2, then job 1), no cool-down; the waiting evolving job starts
    # at its minimum (1 node), not at its maximum
    assert decisions == [Grow(2, ("n4",)), Grow(1, ("n5",)), Start(3, ("n6",))]
    # Java's rule under the same snapshot: both inside the cool-down; job 3 takes all 3
    assert make("evolving-easy").decide(view) == [Start(3, ("n4", "n5", "n6"))]


def test_reserve_policy_does_not_delay_the_head():
    # job 1 (evolving, 1 node, expected end 100 s) asks; job 3 (rigid, n3-n4) ends at 50 s;
    # free: n2.  The head needs 3 nodes: at its shadow time (50 s) n2 + n3 + n4 are exactly
    # enough, and job 1 ends later, so granting n2 would delay the head
    rigid3 = JobSpec(name="r3", nodes=3, required_time_s=50)
    busy = (running(1, EVO, ["n1"], requested=1), running(3, RIGID2, ["n3", "n4"]))
    view = View(now_s=10.0, free_nodes=("n2",), running=busy,
                waiting=(WaitingJob(2, rigid3, 5.0),), total_nodes=4)
    assert make("evolving-reserve").decide(view) == []
    assert make("evolving-easy").decide(view) == [Grow(1, ("n2",))]  # Java's rule grants it
    # with n5 free too, the head has one extra node at its shadow time: the grant is made
    view5 = View(now_s=10.0, free_nodes=("n2", "n5"), running=busy, waiting=view.waiting,
                 total_nodes=5)
    assert make("evolving-reserve").decide(view5) == [Grow(1, ("n2",))]
    # with no queue, the grant is free
    empty = View(now_s=10.0, free_nodes=("n2",), running=busy, waiting=(), total_nodes=4)
    assert make("evolving-reserve").decide(empty) == [Grow(1, ("n2",))]


def test_requests_at_maximum_or_not_ready_are_not_served():
    at_max = running(1, EVO, ["n1", "n2", "n3", "n4"], requested=1)
    not_ready = RunningJob(2, EVO, ("n5",), 0.0, malleable_ready=False, requested=1)
    view = View(now_s=100.0, free_nodes=("n6",), running=(at_max, not_ready), waiting=(),
                total_nodes=6)
    for name in ("evolving-easy", "evolving-smallest", "evolving-reserve"):
        assert make(name).decide(view) == []


def test_evotree_demand_model_and_monitor_timeline():
    tree = EvoTree(size=2, g_s=10.0)
    assert tree.phases() == [("tree", 20.0), ("branch", 20.0), ("tree", 20.0)]
    assert tree.run_time_s(2) == 40.0 and tree.run_time_s(1) == 60.0
    # one evolving job 1-2 alone on 2 nodes under Java's rule with no cool-down: it starts on
    # 2 nodes (tree 10 s), holds both into the branch, releases one 10 s after the branch
    # began (idle), asks again when the second tree starts and is served at once
    spec = JobSpec(name="e", job_class="evolving", min_nodes=1, max_nodes=2,
                   required_time_s=100)
    job = EvolvingJob(0, spec, tree, 0.0)
    out = simulate_evolving([job], "evolving-easy", total_nodes=2, cooldown_s=0.0,
                            costs=ResizeCostModel.free())
    assert (job.releases, job.requests, job.requests_served) == (1, 1, 1)
    # tree 0-10 s on 2 nodes; branch 10-30 s; released at 20 s; second tree asks at 30 s,
    # is served at 30 s and runs 10 s on 2 nodes
    assert job.start_s == 0.0 and job.end_s == 40.0
    assert out["makespan_s"] == 40.0
    # rigid form: 2 nodes for 40 s, same end; node-seconds 80 vs 70
    assert job.node_seconds == 70.0
    # with apgaspy's resize times the release at 20 s stops the job 0.005 s: the branch
    # ends in the step 30-31 s (asks at 31 s, one node in that step), and the grant at 31 s
    # stops it 0.17 s: it ends at 41 s, having held 20 + 20 + 10 + 1 + 20 node-seconds
    job = EvolvingJob(0, spec, tree, 0.0)
    simulate_evolving([job], "evolving-easy", total_nodes=2, cooldown_s=0.0)
    assert job.end_s == 41.0 and job.node_seconds == 71.0


def test_evolving_job_gives_back_nodes_below_its_minimum_in_the_branch():
    """The monitor sees loads, not the job's minimum: an evolving job of 2-4 nodes holds
    one node through its sequential branch, as the runtime's monitor and the real scheduler
    do (docs/guides/evolving-scheduling.md)."""
    spec = JobSpec(name="e", job_class="evolving", min_nodes=2, max_nodes=4,
                   required_time_s=100)
    job = EvolvingJob(0, spec, EvoTree(size=2, g_s=10.0), 0.0)
    simulate_evolving([job], "evolving-easy", total_nodes=2, cooldown_s=0.0,
                      costs=ResizeCostModel.free())
    # starts on both nodes (its minimum) and asks for a third at 3 s (none free: pending);
    # tree 0-10 s; in the branch one node is idle from 10 s and released at 20 s (below the
    # minimum; the pending request is dropped); tree 2 asks at 30 s and is served at once,
    # then asks for a third node again at 31 s
    assert (job.releases, job.requests, job.requests_served) == (1, 3, 1)
    assert job.start_s == 0.0 and job.end_s == 40.0
    assert job.node_seconds == 70.0  # 20 + 20 + 10 + 20: one node held from 20 s to 30 s


@pytest.mark.parametrize(("name", "share", "mix", "expected"), [
    ("easy", 0, "rigid", {
        "makespan_s": 1400.0, "mean_turnaround_s": 385.304, "mean_wait_s": 185.304,
        "utilisation": 0.7714285714285715, "requests": 0, "requests_served": 0,
        "releases": 0, "shrinks": 0, "grows": 0}),
    ("evolving-elastic", 60, "mixed", {
        "makespan_s": 905.0, "mean_turnaround_s": 239.904, "mean_wait_s": 25.203999999999997,
        "utilisation": 0.96, "requests": 54, "requests_served": 42, "releases": 24,
        "shrinks": 5, "grows": 8}),
    ("evolving-elastic", 100, "mixed", {
        "makespan_s": 879.0, "mean_turnaround_s": 227.554, "mean_wait_s": 38.70399999999999,
        "utilisation": 0.9163822525597269, "requests": 108, "requests_served": 96,
        "releases": 49, "shrinks": 0, "grows": 0}),
])
def test_the_evolving_study_figures_to_the_last_digit(name, share, mix, expected):
    """Three runs of the evolving study (seed 42) give, unrounded, what the stepped loop that
    simulated evolving jobs before the simulator's evolving mode gave."""
    assert simulate_evolving(evolving_batch(42, share, mix=mix), name,
                             total_nodes=10) == expected


def test_evolving_batch_shares_and_ranges():
    batch = evolving_batch(42, 50)
    assert len(batch) == 20 and sum(j.spec.job_class is JobClass.EVOLVING for j in batch) == 10
    assert sum(j.submit_s == 0.0 for j in batch) >= 5
    for job in batch:
        if job.spec.job_class is JobClass.EVOLVING:
            assert (job.spec.lo, job.spec.hi) in {(1, 2), (1, 4), (2, 8), (4, 16)}
    rigid = evolving_batch(42, 0)
    assert [j.tree for j in rigid] == [j.tree for j in batch]  # same programs
    with pytest.raises(ValueError, match="0..100"):
        evolving_batch(1, 120)


MALL = JobSpec(name="m", job_class="malleable", min_nodes=1, max_nodes=8, required_time_s=100)
MOLD = JobSpec(name="d", job_class="moldable", min_nodes=1, max_nodes=4, required_time_s=100)


def test_mixed_batch_splits_the_other_jobs_over_three_classes():
    from collections import Counter

    for share, evolving, others in ((40, 8, [4, 4, 4]), (20, 4, [5, 5, 6])):
        mixed = evolving_batch(42, share, mix="mixed")
        counts = Counter(j.spec.job_class for j in mixed)
        assert counts[JobClass.EVOLVING] == evolving
        assert sorted(counts[c] for c in (JobClass.RIGID, JobClass.MOLDABLE,
                                          JobClass.MALLEABLE)) == others
        # the same programs, submission times and evolving jobs as the all-rigid-others batch
        rigid = evolving_batch(42, share)
        assert [(j.tree, j.submit_s) for j in mixed] == [(j.tree, j.submit_s) for j in rigid]
        assert [j.job_id for j in mixed if j.spec.job_class is JobClass.EVOLVING] == [
            j.job_id for j in rigid if j.spec.job_class is JobClass.EVOLVING]
        for job in mixed:
            if job.spec.job_class is not JobClass.RIGID:
                assert (job.spec.lo, job.spec.hi) == {1: (1, 2), 2: (1, 4), 4: (2, 8),
                                                      8: (4, 16)}[job.tree.size]
    with pytest.raises(ValueError, match="mix must be one of rigid, mixed"):
        evolving_batch(42, 40, mix="all")


def test_elastic_shrinks_a_malleable_job_for_a_request_java_never_does():
    # job 1 (evolving, n1) asks; job 2 (malleable, n2-n5) may be ordered; nothing is free
    asking = running(1, EVO, ["n1"], requested=1)
    donor = running(2, MALL, ["n2", "n3", "n4", "n5"])
    view = View(now_s=100.0, free_nodes=(), running=(asking, donor), waiting=(),
                total_nodes=5)
    assert make("evolving-elastic").decide(view) == [Shrink(2, 1)]
    assert make("evolving-easy-malleable").decide(view) == []
    # a donor with only one node more than the asker after the grant is left alone
    small = View(now_s=100.0, free_nodes=(), running=(asking, running(2, MALL, ["n2", "n3"])),
                 waiting=(), total_nodes=3)
    assert make("evolving-elastic").decide(small) == []
    # ... and so is one ordered 5 s ago (10 s gap); 60 s gap: minAgree's cool-down
    recent = View(now_s=100.0, free_nodes=(), running=(
        asking, running(2, MALL, ["n2", "n3", "n4", "n5"], last_order_s=95.0)), waiting=(),
        total_nodes=5)
    assert make("evolving-elastic").decide(recent) == []
    assert make("evolving-elastic", rescale_gap_s=0).decide(recent) == [Shrink(2, 1)]
    # a shrink in flight (job 3 gives back one node) is counted for the request: no other
    # job is shrunk meanwhile
    releasing = RunningJob(3, MALL, ("n6", "n7"), 0.0, malleable_ready=False,
                           last_order_s=99.0, releasing=1)
    inflight = View(now_s=100.0, free_nodes=(), running=(asking, donor, releasing),
                    waiting=(), total_nodes=7)
    assert make("evolving-elastic").decide(inflight) == []


def test_elastic_starts_at_the_minimum_shrinks_for_the_head_and_grows_idle_nodes():
    # a moldable job (1-4) then a malleable one (1-8) on 4 free nodes: both at their minimum
    queue = View(now_s=0.0, free_nodes=("n1", "n2", "n3", "n4"), running=(),
                 waiting=(WaitingJob(1, MOLD, 0.0), WaitingJob(2, MALL, 0.0)), total_nodes=4)
    assert make("evolving-elastic").decide(queue) == [Start(1, ("n1",)), Start(2, ("n2",))]
    # Java's rule + minAgree: the moldable job takes all four, the malleable one waits
    assert make("evolving-easy-malleable").decide(queue) == [
        Start(1, ("n1", "n2", "n3", "n4"))]
    # a rigid head of 3 behind a malleable job on 6 of 6 nodes: shrink it by 3
    head = View(now_s=50.0, free_nodes=(), running=(
        running(2, MALL, ["n1", "n2", "n3", "n4", "n5", "n6"]),),
        waiting=(WaitingJob(3, JobSpec(name="r3", nodes=3, required_time_s=50), 40.0),),
        total_nodes=6)
    assert make("evolving-elastic").decide(head) == [Shrink(2, 3)]
    # no queue, two idle nodes: the malleable job grows onto both
    idle = View(now_s=50.0, free_nodes=("n3", "n2"), running=(running(2, MALL, ["n1"]),),
                waiting=(), total_nodes=3)
    assert make("evolving-elastic").decide(idle) == [Grow(2, ("n2", "n3"))]
    for name, option in (("evolving-elastic", "rescale_gap_s"),
                         ("evolving-elastic", "grant_gap_s"),
                         ("evolving-easy-malleable", "cooldown_s")):
        with pytest.raises(ValueError, match=option):
            make(name, **{option: -1.0})


def test_mixed_policies_equal_the_evolving_ones_without_malleable_or_moldable_jobs():
    # on batches whose other jobs are rigid the combined policies decide as the evolving ones
    for seed in (42, 43):
        for mixed, alone in (("evolving-elastic", "evolving-smallest"),
                             ("evolving-easy-malleable", "evolving-easy")):
            assert simulate_evolving(evolving_batch(seed, 60), mixed) == simulate_evolving(
                evolving_batch(seed, 60), alone)


def test_a_malleable_job_is_grown_when_it_announces_ready():
    # a malleable job (1-2, evotree -s 2 -g 10) alone on 2 nodes starts on its minimum at 0 s;
    # its APGAS-Ready calls the policy at 1 s, which grows it by one node: tree 1 + 19
    # node-seconds (to 10.5 s), branch 20 s (to 30 s), tree 20 node-seconds on 2 (to 40 s)
    spec = JobSpec(name="m", job_class="malleable", min_nodes=1, max_nodes=2,
                   required_time_s=100)
    for name in ("evolving-elastic", "evolving-easy-malleable"):
        job = EvolvingJob(0, spec, EvoTree(2, 10.0), 0.0)
        out = simulate_evolving([job], name, total_nodes=2, costs=ResizeCostModel.free())
        assert (job.end_s, job.grows, job.shrinks, job.node_seconds) == (40.0, 1, 0, 79.0)
        assert (out["grows"], out["requests"]) == (1, 0)
        # the grow's 0.17 s (apgaspy's) costs one more step
        job = EvolvingJob(0, spec, EvoTree(2, 10.0), 0.0)
        simulate_evolving([job], name, total_nodes=2)
        assert job.end_s == 41.0


def test_study_json_fields_on_a_tiny_run():
    out = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", "--study", "evolving", "--json",
         "--batches", "2", "--shares", "100", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    rows = json.loads(out.stdout)["rows"]
    assert [(r["algorithm"], r["mix"], r["evolving_share"]) for r in rows] == [
        ("all-rigid", "all-rigid", 0), ("evolving-easy", "rigid", 100.0),
        ("evolving-smallest", "rigid", 100.0), ("evolving-reserve", "rigid", 100.0),
        ("evolving-easy-malleable", "mixed", 100.0), ("evolving-elastic", "mixed", 100.0)]
    for r in rows:
        assert {"makespan_s", "mean_turnaround_s", "mean_wait_s", "utilisation"} <= set(r)
        assert 0 < r["utilisation"] <= 1 and r["makespan_s"] > 0
    assert rows[0]["requests"] == 0 and rows[1]["requests_served"] > 0


def test_study_table_on_a_tiny_run():
    """The default output, a table: one line per row and the count of simulations run
    (all-rigid's 2 batches and evolving-elastic's 2)."""
    out = subprocess.run(
        [sys.executable, "-m", "scheduler", "simulate", "--study", "evolving",
         "--batches", "2", "--shares", "100", "--algorithms", "evolving-elastic", "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.splitlines()
    assert lines[0].split()[:3] == ["algorithm", "mix", "evolving%"]
    assert [line.split()[:3] for line in lines[1:3]] == [
        ["all-rigid", "all-rigid", "0"], ["evolving-elastic", "mixed", "100"]]
    assert lines[3].startswith("4 simulations in ")


def test_study_mixed_rows_resize_malleable_jobs():
    rows = evolving_study(batches=2, shares=(40,), algorithms=("evolving-easy-malleable",
                                                                "evolving-elastic"))
    assert [(r["algorithm"], r["mix"]) for r in rows] == [
        ("all-rigid", "all-rigid"), ("evolving-easy-malleable", "mixed"),
        ("evolving-elastic", "mixed")]
    assert rows[0]["shrinks"] == rows[0]["grows"] == 0
    assert all(r["grows"] > 0 and r["requests_served"] > 0 for r in rows[1:])
    with pytest.raises(ValueError, match="unknown algorithm"):
        evolving_study(batches=1, algorithms=("evolving-fast",))


# ------------------------------------------------------------------------------ real server

def _send(port: int, line: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line.encode() + b"\n")


@pytest.mark.timeout(40)
def test_server_takes_requests_and_releases_over_tcp(tmp_path):
    """An evolving job (2-3 nodes, a plain sleep, started with ELASTIC=evolving) on 4
    logical nodes: a request at its
    maximum, a release of a node it does not hold or of its first node and a malformed line
    are refused (logged, nothing changes), a line for an address where no job ran is dropped
    (counted, not logged); a release frees the
    node at once; a request becomes pending (not served: the job never announced
    APGAS-Ready); a second release drops it and takes the job below its minimum (accepted:
    the runtime's monitor knows loads, not the minimum)."""
    server = Server(LocalNodes(4), make("evolving-easy"), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0)
    server.start()
    try:
        a = server.submit(JobSpec(name="evo", job_class="evolving", min_nodes=2, max_nodes=3,
                                  command=("sh", "-c", "echo ELASTIC=$ELASTIC; exec sleep 30"),
                                  required_time_s=60, auth="plain"))
        wait_until(lambda: job_of(server.status(), a)["state"] == "running", 15, "the start")
        job = job_of(server.status(), a)
        assert job["nodes"] == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        addr = "127.0.1.1"
        out = server.run_dir / f"job-{a}.out"
        wait_until(lambda: out.exists() and "ELASTIC=" in out.read_text(), 10, "its output")
        assert out.read_text().split() == ["ELASTIC=evolving"]

        def refused() -> list[str]:
            return [e["reason"] for e in list(server.events) if e["event"] == "evolving_refused"]

        for line in (f"Evolving;Request;1:{addr}", f"Evolving;Release;127.0.1.4:{addr}",
                     f"Evolving;Release;127.0.1.1:{addr}", f"Evolving;Request;x:{addr}",
                     f"Evolving;Bogus;1:{addr}", "Evolving;Release;127.0.1.2:10.9.9.9"):
            _send(server.port, line)
        wait_until(lambda: len(refused()) == 5, 10, "five refusals")
        # one connection a line: they may be handled in any order
        assert sorted(refused()) == sorted([
            "the job holds 3 nodes, its maximum", "the job does not hold '127.0.1.4'",
            "'127.0.1.1' is the job's first node (its place 0)",
            "a request asks for one node ('1'), got 'x'",
            "undefined evolving message type 'Bogus'"])
        # no job ever ran at 10.9.9.9: the line is counted and dropped, not logged
        wait_until(lambda: server.status()["dropped_lines"] == 1, 10, "the dropped line")
        st = server.status()
        assert job_of(st, a)["nodes"] == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        assert st["free"] == 1

        _send(server.port, f"Evolving;Release;127.0.1.3:{addr}")
        wait_until(lambda: server.status()["free"] == 2, 10, "the release")
        job = job_of(server.status(), a)
        assert job["nodes"] == ["127.0.1.1", "127.0.1.2"] and job["releases"] == 1

        _send(server.port, f"Evolving;Request;1:{addr}")
        wait_until(lambda: job_of(server.status(), a)["requested"] == 1, 10, "the request")
        wait_decisions(server, 2)  # two scheduler periods: not served (no APGAS-Ready)
        job = job_of(server.status(), a)
        assert (job["requests"], job["requests_served"], job["nodes"]) == (
            1, 0, ["127.0.1.1", "127.0.1.2"])

        _send(server.port, f"Evolving;Release;127.0.1.2:{addr}")
        wait_until(lambda: server.status()["free"] == 3, 10, "the second release")
        job = job_of(server.status(), a)
        assert (job["requested"], job["releases"], job["nodes"]) == (0, 2, ["127.0.1.1"])
        assert [e["event"] for e in list(server.events) if e["event"].startswith(
            "evolving_") and e["event"] != "evolving_refused"] == [
            "evolving_release", "evolving_request", "evolving_release"]
        server.cancel(a)
        wait_until(server.all_done, 15, "the cancel")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(60)
def test_server_grants_a_request_with_a_real_grow_order(tmp_path):
    """A stand-in job that speaks the protocol (it announces APGAS-Ready and answers orders)
    is evolving, 1-3 nodes, started on the one node a rigid job leaves free.  Its request
    is pending while no node is free; when the rigid job ends the Java rule (no cool-down
    here) grants one node by a real ``grow 1 <node>`` order; a second request gets the
    third node."""
    from test_scheduler_real import FAKE_JOB, PY

    fake = tmp_path / "fake_job.py"
    fake.write_text(FAKE_JOB)
    server = Server(LocalNodes(3), make("evolving-easy", cooldown_s=0.0), port=0,
                    run_dir=tmp_path / "run", log_path=tmp_path / "events.jsonl",
                    interval_s=0.5, grace_s=1.0, job_env={"FAKE_SECONDS": "10"})
    server.start()
    try:
        r = server.submit(JobSpec(name="rigid", nodes=2, command=("sleep", "2"),
                                  required_time_s=30))
        a = server.submit(JobSpec(name="evo", job_class="evolving", min_nodes=1, max_nodes=3,
                                  command=(PY, str(fake)), required_time_s=60,
                                  auth="plain"))  # the stand-in speaks plain Java lines

        def ev(kind: str) -> list[dict]:
            return [e for e in list(server.events) if e["event"] == kind and e["job"] == a]

        wait_until(lambda: ev("ready"), 15, "APGAS-Ready")
        job = job_of(server.status(), a)
        assert job["nodes"] == ["127.0.1.3"] and job_of(server.status(), r)["state"] == "running"
        _send(server.port, "Evolving;Request;1:127.0.1.3")
        wait_until(lambda: ev("grow_done"), 20, "the first grant")
        assert [e["nodes"] for e in ev("evolving_grant")] == [["127.0.1.1"]]
        assert ev("evolving_grant")[0]["t"] >= [e for e in server.events if e["event"] == "end"
                                                and e["job"] == r][0]["t"]
        _send(server.port, "Evolving;Request;1:127.0.1.3")
        wait_until(lambda: len(ev("grow_done")) == 2, 20, "the second grant")
        job = job_of(server.status(), a)
        assert (job["nodes"], job["requests"], job["requests_served"], job["requested"]) == (
            ["127.0.1.3", "127.0.1.1", "127.0.1.2"], 2, 2, 0)
        orders = [json.loads(x)["order"] for x in (server.run_dir / f"job-{a}.out")
                  .read_text().splitlines() if x.startswith('{"order"')]
        assert orders == ["grow 1 127.0.1.1 \n", "grow 1 127.0.1.2 \n"]
        server.cancel(a)
        wait_until(server.all_done, 20, "the cancel")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(40)
def test_server_under_evolving_elastic_starts_both_elastic_classes_at_their_minimum(tmp_path):
    """Under ``evolving-elastic`` the real server starts a malleable job with
    ``ELASTIC=malleable`` and an evolving one with ``ELASTIC=evolving``, each on its minimum
    (one node of 1-2), leaving two of four nodes free; neither announced APGAS-Ready, so
    neither is grown onto them."""
    server = Server(LocalNodes(4), make("evolving-elastic"), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0)
    server.start()
    try:
        command = ("sh", "-c", "echo ELASTIC=$ELASTIC; exec sleep 30")
        ids = [server.submit(JobSpec(name=f"j-{cls}", job_class=cls, min_nodes=1, max_nodes=2,
                                     command=command, required_time_s=60))
               for cls in ("malleable", "evolving")]
        wait_until(lambda: all(job_of(server.status(), i)["state"] == "running" for i in ids),
                   15, "the starts")
        outs = [server.run_dir / f"job-{i}.out" for i in ids]
        wait_until(lambda: all(o.exists() and "ELASTIC=" in o.read_text() for o in outs), 10,
                   "their output")
        assert [o.read_text().split() for o in outs] == [["ELASTIC=malleable"],
                                                         ["ELASTIC=evolving"]]
        wait_decisions(server, 2)  # two scheduler periods: neither is grown
        st = server.status()
        assert [job_of(st, i)["nodes"] for i in ids] == [["127.0.1.1"], ["127.0.1.2"]]
        assert st["free"] == 2
        for i in ids:
            server.cancel(i)
        wait_until(server.all_done, 15, "the cancels")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
