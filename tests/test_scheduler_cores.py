"""The resource graph without processes: nodes and their cores, placement by profile, the
shape of a job, the ledger, the directives, the policies' and the simulator's core model
(scheduler/resources.py, docs/guides/scheduler.md "Cores and shapes")."""

from __future__ import annotations

import pytest

from scheduler import JobScriptError, JobSpec
from scheduler.algorithms import make
from scheduler.algorithms.base import FreeNodes, Grow, Start, View, WaitingJob
from scheduler.algorithms.decisions import decision_problem
from scheduler.jobs import BatchEntry, parse_job_script
from scheduler.model import RuntimeModel, ScalingCurve
from scheduler.nodes import LocalNodes, cores_option
from scheduler.resources import (
    CoreLedger,
    ResourceGraph,
    cores_refusal,
    local_graph,
    machine_sockets,
    nodes_for_cores,
    parse_profile,
    shape,
    start_counts,
)
from scheduler.simulate import SimConfig, Simulator
from scheduler.slurm_mode import node_cpus
from scheduler.workload import swf_workload

N = ("127.0.1.1", "127.0.1.2", "127.0.1.3")


# ------------------------------------------------------------------------------ the graph


def test_logical_cores_map_onto_the_machine_round_robin():
    graph, note = local_graph(N, 4, cpu_count=16, sockets={})
    assert graph.cpus == {"127.0.1.1": (0, 1, 2, 3), "127.0.1.2": (4, 5, 6, 7),
                          "127.0.1.3": (8, 9, 10, 11)}
    assert note is None and graph.total_cores == 12 and not graph.slots
    over, note = local_graph(N, 4, cpu_count=6, sockets={})
    assert over.cpus["127.0.1.2"] == (4, 5, 0, 1)  # (k*C + j) mod 6
    assert over.cpus["127.0.1.3"] == (2, 3, 4, 5)
    assert "oversubscribed" in note and "12 cores on 6 CPUs" in note


def test_without_a_count_each_node_is_one_slot():
    graph, note = local_graph(N, None)
    assert graph.slots and graph.sizes() == dict.fromkeys(N, 1) and note is None
    assert LocalNodes(2).graph is None
    nodes = LocalNodes(2, cores_per_node=3)
    assert nodes.graph is not None and nodes.graph.sizes() == {"127.0.1.1": 3, "127.0.1.2": 3}
    with pytest.raises(ValueError, match="at least 1"):
        local_graph(N, 0)


def test_sockets_come_from_sysfs(tmp_path):
    for cpu, package in ((0, 0), (1, 0), (2, 1), (3, 1)):
        top = tmp_path / f"cpu{cpu}" / "topology"
        top.mkdir(parents=True)
        (top / "physical_package_id").write_text(f"{package}\n")
    (tmp_path / "cpufreq").mkdir()  # not a CPU
    sockets = machine_sockets(str(tmp_path))
    assert sockets == {0: 0, 1: 0, 2: 1, 3: 1}
    graph, _ = local_graph(N[:2], 2, cpu_count=4, sockets=sockets)
    assert graph.sockets == {"127.0.1.1": (0, 0), "127.0.1.2": (1, 1)}
    assert machine_sockets(str(tmp_path / "absent")) == {}


def test_remote_counts_ssh_option_and_slurm_cputot():
    assert cores_option("auto") == "auto" and cores_option("8") == 8
    for bad in ("0", "x", "-2"):
        with pytest.raises(ValueError, match="cores-per-node"):
            cores_option(bad)
    text = ("NodeName=c1 Arch=x86_64 CoresPerSocket=4 CPUAlloc=0 CPUTot=8 State=IDLE\n"
            "NodeName=c2 CPUTot=48 State=IDLE\n\nNodeName=c3 CPUTot=0\n")
    assert node_cpus(text) == {"c1": 8, "c2": 48}
    graph = ResourceGraph.counted(node_cpus(text))
    assert graph.cpus["c1"] == tuple(range(8)) and graph.total_cores == 56


# ------------------------------------------------------------------- placement and shape


def test_network_jobs_pack_and_cpu_jobs_spread():
    free = {"a": 4, "b": 4, "c": 4}
    assert nodes_for_cores(4, free, "network") == (("a", 4),)
    assert nodes_for_cores(4, free, "cpu") == (("a", 2), ("b", 2))  # 3 does not divide 4
    assert nodes_for_cores(3, free, "memory") == (("a", 1), ("b", 1), ("c", 1))
    assert nodes_for_cores(6, free, "network") == (("a", 3), ("b", 3))
    # best fit: the fullest node with room first, whole nodes kept
    assert nodes_for_cores(2, {"a": 4, "b": 2, "c": 4}, "network") == (("b", 2),)
    assert nodes_for_cores(5, free, "cpu") is None  # 5 = 5 x 1 needs 5 nodes
    assert nodes_for_cores(9, free, "cpu") == (("a", 3), ("b", 3), ("c", 3))
    assert nodes_for_cores(13, free, "cpu") is None


@pytest.mark.parametrize(("profile", "cores", "policy", "expected"), [
    ("cpu", 8, "scale", (1, 8)),
    ("memory", 8, "scale", (1, 8)),
    ("cpu", 8, "granularity", (8, 1)),
    ("memory", 2, "granularity", (2, 1)),
    ("network", 8, "scale", (1, 8)),
    ("network", 8, "granularity", (1, 8)),
])
def test_shape(profile, cores, policy, expected):
    assert shape(profile, cores, policy) == expected


def test_shape_refuses_bad_input():
    with pytest.raises(ValueError, match="profile"):
        shape("gpu", 2)
    with pytest.raises(ValueError, match="shape policy"):
        shape("cpu", 2, "pack")
    with pytest.raises(ValueError, match="at least 1"):
        shape("cpu", 0)


# ------------------------------------------------------------------------------ the ledger


def test_the_ledger_keeps_whole_nodes_in_the_free_set():
    free = set(N)
    ledger = CoreLedger(ResourceGraph.counted(dict.fromkeys(N, 4)), free)
    assert ledger.acquire(1, ["127.0.1.1"], [2]) == (("127.0.1.1", (0, 1)),)
    assert ledger.acquire(2, ["127.0.1.1"], [2]) == (("127.0.1.1", (2, 3)),)
    assert "127.0.1.1" not in free
    assert ledger.free_counts() == {"127.0.1.2": 4, "127.0.1.3": 4}
    ledger.acquire(3, ["127.0.1.2"])  # a node job: the whole node
    assert free == {"127.0.1.3"}
    assert ledger.release(1, ["127.0.1.1"]) == []  # job 2 still uses it
    assert ledger.free_counts() == {"127.0.1.1": 2, "127.0.1.3": 4}
    assert ledger.acquire(4, ["127.0.1.1"], [1]) == (("127.0.1.1", (0,)),)
    assert ledger.cpus_of(4, ["127.0.1.1"]) == {"127.0.1.1": [0]}
    assert ledger.cpus_of(3, ["127.0.1.2"]) == {"127.0.1.2": [0, 1, 2, 3]}
    assert ledger.release(2, ["127.0.1.1"]) == [] and ledger.release(4, ["127.0.1.1"]) == [
        "127.0.1.1"]
    assert ledger.release(3, ["127.0.1.2"]) == ["127.0.1.2"] and free == set(N)
    with pytest.raises(ValueError, match="free cores"):
        ledger.acquire(5, ["127.0.1.1"], [5])


def test_oversubscribed_cores_are_counted_by_index():
    graph, _ = local_graph(N[:1], 4, cpu_count=2, sockets={})
    ledger = CoreLedger(graph, {N[0]})
    ledger.acquire(1, [N[0]], [2])
    ledger.acquire(2, [N[0]], [2])
    assert ledger.cores_of(1) == {N[0]: (0, 1)} and ledger.cores_of(2) == {N[0]: (2, 3)}
    assert ledger.cpus_of(1, [N[0]]) == ledger.cpus_of(2, [N[0]]) == {N[0]: [0, 1]}


# ------------------------------------------------------------------- requests and checks


def test_directives_and_their_refusals():
    spec = parse_job_script("#CORES 6\n#PROFILE Network\n")
    assert (spec.cores, spec.profile, spec.lo, spec.hi, spec.asks_cores) == (6, "network", 1,
                                                                             6, True)
    spec = parse_job_script("#JOB_CLASS malleable\n#MIN_NODES 1\n#MAX_NODES 3\n"
                            "#CORES_PER_NODE 2\n")
    assert (spec.cores_per_node, spec.lo, spec.hi, spec.profile) == (2, 1, 3, "cpu")
    assert not parse_job_script("#NODES 2\n").asks_cores
    for text, match in (("#PROFILE netwrk\n", "did you mean network"),
                        ("#PROFILE io\n", "use network, cpu or memory"),
                        ("#CORE 4\n", "did you mean #CORES"),
                        ("#CORES_PER_NODES 4\n", "#CORES_PER_NODE"),
                        ("#CORES 0\n", "whole number"),
                        ("#CORES two\n", "whole number"),
                        ("#CORES 4\n#NODES 2\n", "any nodes"),
                        ("#CORES 4\n#CORES_PER_NODE 2\n#NODES 2\n", "not both"),
                        ("#CORES 4\n#JOB_CLASS malleable\n#MAX_NODES 2\n", "rigid")):
        with pytest.raises(JobScriptError, match=match):
            parse_job_script(text)
    assert parse_profile("CPU") == "cpu"


def test_too_many_cores_are_refused_in_one_line():
    sizes = {"a": 4, "b": 4}
    assert cores_refusal(JobSpec(name="x", cores=9), sizes) == (
        "job 'x' asks for 9 cores; the cluster has 8")
    assert cores_refusal(JobSpec(name="y", nodes=1, cores_per_node=6), sizes) == (
        "job 'y' asks for 6 cores a node; the largest node has 4")
    assert "needs 3 nodes of 2 cores" in cores_refusal(
        JobSpec(name="z", nodes=3, cores_per_node=2), sizes)
    assert "equal share" in cores_refusal(JobSpec(name="p", cores=7), {"a": 4, "b": 4})
    assert cores_refusal(JobSpec(name="ok", cores=8), sizes) is None
    assert cores_refusal(JobSpec(name="n", nodes=2), sizes) is None


def test_the_decision_check_counts_cores():
    spec = JobSpec(cores=4)
    free = {"a": 2, "b": 4}
    ok = Start(1, ("a", "b"), (2, 2))
    assert decision_problem(ok, spec=spec, state="waiting", free={"b"}, free_cores=free) is None
    assert "cores not free: a (2 free, 3 asked)" in decision_problem(
        Start(1, ("a", "b"), (3, 1)), spec=spec, state="waiting", free={"b"}, free_cores=free)
    assert "the job asks for 4" in decision_problem(
        Start(1, ("b",), (3,)), spec=spec, state="waiting", free={"b"}, free_cores=free)
    per = JobSpec(nodes=2, cores_per_node=2)
    assert start_counts(per, ("a", "b"), ()) == ((2, 2), None)  # a policy naming nodes only
    assert "2 a node" in decision_problem(Start(2, ("a", "b"), (2, 1)), spec=per,
                                          state="waiting", free={"b"}, free_cores=free)
    assert "whole nodes" in decision_problem(Start(3, ("b",), (4,)), spec=JobSpec(nodes=1),
                                             state="waiting", free={"b"}, free_cores=free)


# ------------------------------------------------------------------------- the policies


def _view(waiting, free_cores, free_nodes=None):
    free_nodes = free_nodes if free_nodes is not None else tuple(
        n for n, c in free_cores if c == 4)
    return View(0.0, free_nodes, (), tuple(WaitingJob(i, s, 0.0) for i, s in waiting),
                len(free_cores), tuple(free_cores))


@pytest.mark.parametrize("algorithm", ["fcfs", "backfilling", "easy", "malleable"])
def test_policies_share_a_node_between_core_jobs(algorithm):
    view = _view([(1, JobSpec(cores=2)), (2, JobSpec(cores=2, profile="network")),
                  (3, JobSpec(nodes=1))], [("n1", 4)])
    decisions = make(algorithm).decide(view)
    assert decisions == [Start(1, ("n1",), (2,)), Start(2, ("n1",), (2,))]


def test_free_nodes_pool_takes_cores_and_whole_nodes_apart():
    pool = FreeNodes(["n1", "n2"], [("n1", 4), ("n2", 4), ("n3", 1)])
    assert pool.place(JobSpec(cores=1, profile="network"), lambda s, f: 1) == (("n3",), (1,))
    assert pool.place(JobSpec(nodes=1, cores_per_node=3), lambda s, f: 1 if f else None) == (
        ("n1",), (3,))
    assert len(pool) == 1 and pool.take(1) == ("n2",)
    assert pool.free_cores() == {"n1": 1, "n3": 0}


# ------------------------------------------------------------------------- the simulator


def _model():
    model = RuntimeModel()
    model.add("p", 1, ScalingCurve({1: 10.0}, 0.0))
    return model


def test_the_simulator_counts_cores():
    entries = [BatchEntry(JobSpec(name="a", cores=2, program="p", size=1)),
               BatchEntry(JobSpec(name="b", cores=4, profile="network", program="p", size=1)),
               BatchEntry(JobSpec(name="c", nodes=1, program="p", size=1)),
               BatchEntry(JobSpec(name="d", cores=9, program="p", size=1))]
    config = SimConfig(total_nodes=2, cores_per_node=4, node_names=N[:2])
    result = Simulator("fcfs", entries, config, model=_model()).run()
    got = {r.name: (r.start_s, r.cores) for r in result.records}
    assert got == {"a": (0.0, ((N[0], (0,)), (N[1], (0,)))),
                   "b": (0.0, ((N[0], (1, 2)), (N[1], (1, 2)))),
                   "c": (10.0, ())}
    assert [name for name, _ in result.refused] == ["d"]


def test_grow_of_a_cores_per_node_job_takes_its_share():
    spec = JobSpec(name="m", job_class="malleable", min_nodes=1, max_nodes=2, cores_per_node=2,
                   program="p", size=1)
    assert decision_problem(Grow(1, ("b",)), spec=spec, state="running", held=1,
                            takes_orders=True, free={"b"}) is None


def test_swf_jobs_ask_for_their_processors_as_cores(tmp_path):
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 8\n"
                     "1 0 -1 10 2 -1 -1 2 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
                     "2 0 -1 10 6 -1 -1 6 20 -1 1 -1 -1 -1 -1 -1 -1 -1\n")
    workload = swf_workload(trace, total_nodes=2, cores_per_node=4, as_cores=True)
    assert [e.spec.cores for e in workload.entries] == [2, 6]
    result = Simulator("fcfs", workload, SimConfig(total_nodes=2, cores_per_node=4)).run()
    assert {r.name: r.cores for r in result.records} == {
        "swf1": (("n1", (0,)), ("n2", (0,))),
        "swf2": (("n1", (1, 2, 3)), ("n2", (1, 2, 3)))}
    assert all(r.end_s - r.start_s == pytest.approx(10.0) for r in result.records)
