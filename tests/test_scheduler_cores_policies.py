"""Cores in the policies that reserve and preempt: EASY's reservation counted in cores, the
priority policies' starts and shrinks in cores, and the journal's record of a job's cores
(scheduler/algorithms/cores.py, docs/guides/scheduler.md "Cores and shapes").

Every schedule here is worked out by hand (the comments give the reasoning), on nodes of 4
cores, with run times equal to the required times (``ScalingCurve({1: t}, 1.0)`` is ``t`` on
any node count).
"""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import old_journal

from scheduler.algorithms import make
from scheduler.algorithms.base import RunningJob, Shrink, Start, View, WaitingJob
from scheduler.algorithms.priority import ElasticPriority, ElasticPriorityEasy
from scheduler.jobs import BatchEntry, JobSpec
from scheduler.journal import JOURNAL_NAME, Journal, JobRow
from scheduler.model import RuntimeModel, ScalingCurve
from scheduler.resources import CoreLedger, ResourceGraph
from scheduler.simulate import SimConfig, Simulator

SIZES = (("n1", 4), ("n2", 4), ("n3", 4))


def _run(algorithm, jobs, nodes=2, **options):
    """Simulate ``jobs`` (name, seconds, submit s, JobSpec fields) on ``nodes`` nodes of 4
    cores; name -> (start s, first nodes, cores at start, shrinks)."""
    model, entries = RuntimeModel(), []
    for name, seconds, submit_s, fields in jobs:
        model.add(name, 1, ScalingCurve({1: seconds}, 1.0))
        entries.append(BatchEntry(JobSpec(name=name, program=name, size=1,
                                          required_time_s=seconds, **fields), submit_s))
    config = SimConfig(total_nodes=nodes, cores_per_node=4, node_names=tuple(
        f"n{i}" for i in range(1, nodes + 1)), algorithm_options=options)
    result = Simulator(algorithm, entries, config, model=model).run()
    return {r.name: (r.start_s, r.allotment[0][1], r.cores, r.shrinks) for r in result.records}


# ------------------------------------------------------------------------------ EASY


def test_a_core_job_backfills_on_cores_the_head_will_not_need():
    # a packs n1 (4 cores), b takes n2's cores 0-1; the head c (4 cores, packed) needs a
    # whole node's cores: both end at 100, so its shadow time is 100, when it packs n1.
    # d (1 core, 200 s)
    # ends after the shadow but uses a core of n2 the head will not need: it starts at 0
    # (at 100 n1 has 4 free cores, n2 3).  Counted in whole nodes it was held back until
    # 100.
    got = _run("easy", [("a", 100, 0, dict(cores=4, profile="network")),
                        ("b", 100, 0, dict(cores=2, profile="network")),
                        ("c", 30, 0, dict(cores=4, profile="network")),
                        ("d", 200, 0, dict(cores=1))])
    assert got == {"a": (0.0, ("n1",), (("n1", (0, 1, 2, 3)),), 0),
                   "b": (0.0, ("n2",), (("n2", (0, 1)),), 0),
                   "c": (100.0, ("n1",), (("n1", (0, 1, 2, 3)),), 0),
                   "d": (0.0, ("n2",), (("n2", (2,)),), 0)}


def test_a_node_head_waits_for_every_core_of_a_node():
    # a (100 s) and b (10 s) share n1.  The node head h needs both nodes whole: n1 is whole
    # at 100, not at 10 when b ends (a still holds two cores), so the shadow time is 100
    # and e (a node job of 60 s) starts at once on n2.  Counting b's end as a whole node
    # put the shadow at 10 and held e back until then.
    got = _run("easy", [("a", 100, 0, dict(cores=2, profile="network")),
                        ("b", 10, 0, dict(cores=2, profile="network")),
                        ("h", 50, 0, dict(nodes=2)),
                        ("e", 60, 0, dict(nodes=1))])
    assert got == {"a": (0.0, ("n1",), (("n1", (0, 1)),), 0),
                   "b": (0.0, ("n1",), (("n1", (2, 3)),), 0),
                   "h": (100.0, ("n1", "n2"), (), 0),
                   "e": (0.0, ("n2",), (), 0)}


def test_a_node_job_is_not_backfilled_onto_cores_the_head_needs():
    # The head c asks for all 8 cores (node range 1-8, so its minimum is 1 "node").  At 20
    # n2 is free; c's shadow time is 100 (a's end) and it needs n2 then.  d (a node, 200 s)
    # would take n2 past 100: it waits, c starts at 100 and d after it, at 130.  Counted in
    # nodes, c needed one node, n2 was "extra": d started at 20 and c waited until 220.
    got = _run("easy", [("a", 100, 0, dict(nodes=1)),
                        ("b", 20, 0, dict(nodes=1)),
                        ("c", 30, 0, dict(cores=8)),
                        ("d", 200, 0, dict(nodes=1))])
    both = (("n1", (0, 1, 2, 3)), ("n2", (0, 1, 2, 3)))
    assert got == {"a": (0.0, ("n1",), (), 0), "b": (0.0, ("n2",), (), 0),
                   "c": (100.0, ("n1", "n2"), both, 0), "d": (130.0, ("n1",), (), 0)}


@pytest.mark.parametrize("algorithm", [
    make("easy"), ElasticPriorityEasy(order="priority", shrink=False)])
def test_a_node_range_backfills_with_as_many_nodes_as_keep_the_reservation(algorithm):
    # n1 is a node job's, n2 has 2 cores of a core job's; both end at 100.  The head h (8
    # cores, spread) needs two whole nodes' cores at 100.  d (2 cores on 1-2 nodes, 200 s)
    # would take n2 and n3: then only n1 has 4 cores at 100.  On n2 alone (the fullest
    # first) it leaves n1 and n3: it starts there with one node.
    running = (RunningJob(1, JobSpec(nodes=1, required_time_s=100), ("n1",), 0.0),
               RunningJob(2, JobSpec(cores=2, required_time_s=100), ("n2",), 0.0))
    waiting = (WaitingJob(3, JobSpec(cores=8, required_time_s=50, priority=5), 0.0),
               WaitingJob(4, JobSpec(job_class="moldable", min_nodes=1, max_nodes=2,
                                     cores_per_node=2, required_time_s=200), 0.0))
    view = View(0.0, ("n3",), running, waiting, 3, (("n2", 2), ("n3", 4)), SIZES)
    assert algorithm.decide(view) == [Start(4, ("n2",), (2,))]


# ------------------------------------------------------------------------- priorities


def test_a_high_priority_core_job_starts_on_shared_cores_without_preempting():
    # M (malleable, 2 cores a node, 1-2 nodes) holds cores 0-1 of both nodes.  C (4 cores,
    # packed, priority 5) comes at 10: no node has 4 free, but two nodes have 2, its equal
    # share: it starts at once on cores 2-3 of each and M is never shrunk.  Counted in
    # whole nodes no node was free: M was shrunk and C waited for the shrink.
    got = _run("elastic-priority",
               [("M", 100, 0, dict(job_class="malleable", min_nodes=1, max_nodes=2,
                                   cores_per_node=2, priority=1)),
                ("C", 30, 10, dict(cores=4, profile="network", priority=5))],
               rescale_gap_s=0)
    assert got == {"M": (0.0, ("n1", "n2"), (("n1", (0, 1)), ("n2", (0, 1))), 0),
                   "C": (10.0, ("n1", "n2"), (("n1", (2, 3)), ("n2", (2, 3))), 0)}


def test_a_high_priority_core_job_takes_the_cores_a_shrink_frees():
    # M (malleable, 4 cores a node, 1-2 nodes) holds both nodes whole.  C (4 cores, packed,
    # priority 5) comes at 10: M gives back its last node, n2 (a shrink of one node takes
    # 0.005 s in the default cost model), and C starts on n2's 4 cores at 10.005.
    got = _run("elastic-priority",
               [("M", 100, 0, dict(job_class="malleable", min_nodes=1, max_nodes=2,
                                   cores_per_node=4, priority=1)),
                ("C", 30, 10, dict(cores=4, profile="network", priority=5))],
               rescale_gap_s=0)
    assert got["C"] == (pytest.approx(10.005), ("n2",), (("n2", (0, 1, 2, 3)),), 0)
    assert got["M"][1:] == (("n1", "n2"), (("n1", (0, 1, 2, 3)), ("n2", (0, 1, 2, 3))), 1)


def _donors(releasing=0):
    malleable = {"job_class": "malleable", "min_nodes": 1, "max_nodes": 2}
    low = RunningJob(1, JobSpec(name="L", cores_per_node=1, priority=1, **malleable),
                     ("n1", "n2"), 0.0, not releasing, releasing=releasing)
    mid = RunningJob(2, JobSpec(name="K", cores_per_node=2, priority=2, **malleable),
                     ("n1", "n3"), 0.0, True)
    rigid = RunningJob(3, JobSpec(name="R", cores=2), ("n2",), 0.0)
    return low, mid, rigid


def test_shrinks_are_counted_in_cores_and_spare_a_donor_that_makes_no_room():
    # Free: n1 1, n2 1, n3 2.  C needs one node with 4 free cores.  L (priority 1) gives
    # back its last node n2, but R holds 2 cores there: n2 would have 2.  K (priority 2)
    # gives back n3: 2 + 2 = 4, C fits.  So K is shrunk by one node and L is spared; in
    # nodes, one node was needed and the lowest priority (L) was shrunk for nothing.
    low, mid, rigid = _donors()
    head = WaitingJob(4, JobSpec(name="C", nodes=1, cores_per_node=4, priority=5), 50.0)
    view = View(100.0, (), (low, mid, rigid), (head,), 3,
                (("n1", 1), ("n2", 1), ("n3", 2)), SIZES)
    assert ElasticPriority(rescale_gap_s=0).decide(view) == [Shrink(2, 1)]
    # a shrink at its minimum is not asked of K again: K holds 1 node, its minimum
    at_min = RunningJob(2, mid.spec, ("n1",), 0.0, True)
    view = View(100.0, (), (low, at_min, rigid), (head,), 3,
                (("n1", 1), ("n2", 1), ("n3", 4)), SIZES)
    assert ElasticPriority(rescale_gap_s=0).decide(view) == [Start(4, ("n3",), (4,))]


def test_the_malleable_policy_shrinks_for_its_head_in_cores():
    # minAgree shrinks the donor with the largest surplus first (L and K tie at one node:
    # L, the earlier).  L's node makes no room (R holds half of n2), K's does: only K.
    low, mid, rigid = _donors()
    head = WaitingJob(4, JobSpec(name="C", nodes=1, cores_per_node=4), 50.0)
    view = View(100.0, (), (low, mid, rigid), (head,), 3,
                (("n1", 1), ("n2", 1), ("n3", 2)), SIZES)
    assert make("malleable", cooldown_s=0).decide(view) == [Shrink(2, 1)]


def test_cores_coming_from_a_shrink_in_flight_are_kept_for_the_job():
    # L's shrink in flight gives back its core of n2: n2 will have 2 free.  B (2 cores on
    # one node, priority 5) waits for them, and n2's free core is kept for it: A (1 core,
    # priority 1, later in the walk) does not start (n2's core was the only one free).
    low, mid, rigid = _donors(releasing=1)
    other = RunningJob(6, JobSpec(cores=1), ("n1",), 0.0)
    waiting = (WaitingJob(4, JobSpec(nodes=1, cores_per_node=2, priority=5), 0.0),
               WaitingJob(5, JobSpec(cores=1, priority=1), 0.0))
    view = View(100.0, (), (low, mid, rigid, other), waiting, 3, (("n2", 1),), SIZES)
    assert ElasticPriority(rescale_gap_s=0).decide(view) == []
    # without the shrink in flight nothing is coming to n2: K is shrunk for B (its n3
    # will have 2 free) and A takes n2's core
    low = RunningJob(1, low.spec, low.nodes, 0.0, False)
    view = View(100.0, (), (low, mid, rigid, other), waiting, 3, (("n2", 1),), SIZES)
    assert ElasticPriority(rescale_gap_s=0).decide(view) == [Shrink(2, 1),
                                                            Start(5, ("n2",), (1,))]


# ------------------------------------------------------------------------- the journal


def test_the_journal_records_cores_and_an_old_row_still_loads(tmp_path):
    graph = ResourceGraph.counted({"n1": 4})
    free = {"n1"}
    ledger = CoreLedger(graph, free)
    ledger.take(7, "n1", 2)
    ledger.take(8, "n1", 1)
    # the exact cores come back in another ledger (a restarted scheduler's)
    again = CoreLedger(graph, {"n1"})
    again.adopt(8, {"n1": (2,)})
    again.adopt(7, {"n1": (0, 1)})
    assert again.free_counts() == {"n1": 1} and again.cores_of(7) == {"n1": (0, 1)}
    with pytest.raises(ValueError, match="not free"):
        again.adopt(9, {"n1": (1,)})
    row = JobRow(id=1, spec=json.dumps({"name": "x", "cores": 2}), argv=["x"],
                 state="running", user=None, submit_wall=1.0, due_wall=None, queue_seq=1,
                 start_wall=2.0, end_wall=None, nodes=["n1"], allotment=[], elastic=False,
                 ready=False, reachable=True, order_kind=None, shrinks=0, grows=0,
                 address="", pid=None, pid_start=None, returncode=None, ending="",
                 reason=None, files={}, cores={"n1": [0, 1]})
    journal = Journal(tmp_path / "new")
    try:
        journal.put(row)
        assert journal.rows()[0].cores == {"n1": [0, 1]}
    finally:
        journal.close()
    # a journal written before the column existed: its rows load, with no cores
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    # (older than the cores column, and so than the order port column after it)
    old_journal(old, ("cores", "order_port"), "running")
    with sqlite3.connect(old / JOURNAL_NAME) as db:
        db.execute("UPDATE jobs SET nodes = ? WHERE id = 1", (json.dumps(["n1"]),))
    journal = Journal(old)
    try:
        loaded = journal.rows()[0]
        assert loaded.cores == {} and loaded.nodes == ["n1"] and loaded.state == "running"
    finally:
        journal.close()
