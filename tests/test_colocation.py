"""Co-location by duty cycle, without processes (docs/guides/colocation.md): the
``#COLOCATE`` directive, the shared-core ledger, what a policy may share, the rigid job's
required-time guard, the beta model (Xie 2026) and the simulator with and without it.

The real-process tests are in tests/test_colocation_real.py.
"""

from __future__ import annotations

import json
import math

import pytest

from scheduler import JobScriptError, JobSpec, make
from scheduler import colocation as co
from scheduler.algorithms.base import FreeNodes, View, WaitingJob
from scheduler.jobs import BatchEntry, JobClass, parse_job_script
from scheduler.model import RuntimeModel, ScalingCurve
from scheduler.resources import CoreLedger, ResourceGraph
from scheduler.simulate import SimConfig, Simulator

# ------------------------------------------------------------------------------ directive


def test_colocate_directive_and_its_refusal():
    assert parse_job_script("#CORES 2\n#COLOCATE yes\n").colocate is True
    assert parse_job_script("#CORES 2\n#COLOCATE No\n").colocate is False
    assert parse_job_script("#CORES 2\n").colocate is False  # default: never shared
    with pytest.raises(JobScriptError) as err:
        parse_job_script("#!/bin/sh\n#CORES 2\n#COLOCATE maybe\n")
    message = str(err.value)
    assert message.startswith("line 3: ") and "'yes' or 'no'" in message
    assert "\n" not in message


# --------------------------------------------------------------------------------- model


def test_beta_model_matches_the_paper():
    # N=2 jobs of duty 0.5 on the same cores: rho_1 = 0.5, rho_2 = 1.0
    assert co.slowdown(0.524, 1.0, 0.5) == pytest.approx(1.262)
    assert co.slowdown(0.524, 0.3, 0.3) == 1.0
    # the paper's throughput at N=2 (1.77x) is 2 / (1 + beta (rho_2 - rho_1)) with beta from
    # N=2 (0.773) and rho_2 - rho_1 = 0.3
    assert 2 / co.slowdown(0.773, 0.6, 0.3) == pytest.approx(1.62, abs=0.01)
    assert co.load(3, 2 * 0.5, 1, 2) == pytest.approx(1.5)  # N R / (M C)
    for bad in [(-0.1, 1.0, 0.5), (math.nan, 1.0, 0.5), (0.5, 0.2, 0.5), (0.5, -1.0, 0.0)]:
        with pytest.raises(ValueError):
            co.slowdown(*bad)
    with pytest.raises(ValueError):
        co.load(1, 1.0, 0, 2)


def test_beta_comes_from_the_results_file_or_the_paper(tmp_path):
    assert co.read_beta(tmp_path / "none.json") == (0.524, "Xie 2026 (all points)")
    path = tmp_path / "colocation.json"
    path.write_text(json.dumps({"beta": 0.61, "beta_source": "fit of 6 runs"}))
    assert co.read_beta(path) == (0.61, "colocation.json: fit of 6 runs")
    path.write_text(json.dumps({"beta": -1}))
    assert co.read_beta(path)[0] == 0.524


# -------------------------------------------------------------------------------- ledger


def _ledger() -> CoreLedger:
    return CoreLedger(ResourceGraph.counted({"n1": 2, "n2": 2}), {"n1", "n2"})


def test_a_shared_core_is_freed_only_when_its_last_job_leaves():
    ledger = _ledger()
    ledger.take("a", "n1", 2)
    assert ledger.share("b", "n1", [0, 1]) == (0, 1)
    assert ledger.users("n1", 0) == ["a", "b"] and ledger.cores_of("b") == {"n1": (0, 1)}
    with pytest.raises(ValueError):
        ledger.share("b", "n1", [0])  # b holds it already
    with pytest.raises(ValueError):
        ledger.share("c", "n2", [0])  # nobody holds it: take it, not share it
    assert ledger.give_all("a") == []  # b still computes there
    assert "n1" not in ledger.whole and ledger.free_counts() == {"n2": 2}
    assert ledger.users("n1", 1) == ["b"] and ledger.shared == {}
    assert ledger.give_all("b") == ["n1"]
    assert ledger.whole == {"n1", "n2"}


def test_a_restart_adopts_co_located_jobs_on_the_cores_they_shared():
    ledger = _ledger()
    ledger.adopt("a", {"n1": [0, 1]})
    with pytest.raises(ValueError):
        ledger.adopt("b", {"n1": [0, 1]})  # an exclusive job never joins a held core
    ledger.adopt("b", {"n1": [0, 1], "n2": [0]}, shared=True)
    assert ledger.users("n1", 0) == ["a", "b"] and ledger.cores_of("b") == {"n1": (0, 1),
                                                                            "n2": (0,)}
    assert ledger.free_counts() == {"n2": 1}
    with pytest.raises(ValueError):
        ledger.adopt("c", {"n2": [1, 1]}, shared=True)  # a core twice
    assert ledger.give_all("a") == [] and ledger.users("n1", 1) == ["b"]


def _occ(duty, colocate=True, **kw) -> co.Occupant:
    return co.Occupant(duty=duty, colocate=colocate, **kw)


def test_what_a_newcomer_may_share():
    ledger = _ledger()
    ledger.take("a", "n1", 2)
    ledger.take("x", "n2", 2)
    roomy = {"a": _occ(0.3, rigid=False), "x": _occ(0.1, colocate=False)}
    assert co.shareable(ledger, roomy, 1.0, 0.524) == {"n1": 2}  # x never shares
    assert co.shareable(ledger, {**roomy, "a": _occ(None, rigid=False)}, 1.0, 0.524) == {}
    assert co.shareable(ledger, {**roomy, "a": _occ(1.0, rigid=False)}, 1.0, 0.524) == {}
    co.acquire_colocated(ledger, "b", ["n1"], [2], roomy, 1.0, 0.524)
    both = {**roomy, "b": _occ(0.3, rigid=False)}
    assert co.shareable(ledger, both, 1.0, 0.524) == {"n1": 2}  # 0.6 < 1.0
    assert co.overloaded(ledger, both, 1.0) == []
    busy = {**both, "b": _occ(0.9, rigid=False)}
    assert co.overloaded(ledger, busy, 1.0) == [("n1", 0, ("a", "b"), pytest.approx(1.2)),
                                                 ("n1", 1, ("a", "b"), pytest.approx(1.2))]
    assert co.job_factor(ledger, "a", both, 0.5) == pytest.approx(1.15)  # 1 + 0.5 (0.6 - 0.3)
    assert co.job_factor(ledger, "x", both, 0.5) == 1.0


def test_a_rigid_job_is_not_slowed_past_its_required_time():
    ledger = _ledger()
    ledger.take("r", "n1", 2)
    # 10 s left alone at duty 0.2: the worst the bound allows is rho 1.0, a factor of
    # 1 + 0.5 (1.0 - 0.2) = 1.4, so 14 s more
    tight = {"r": _occ(0.2, required_s=20.0, elapsed_s=7.0, alone_left_s=10.0)}
    loose = {"r": _occ(0.2, required_s=22.0, elapsed_s=7.0, alone_left_s=10.0)}
    assert co.shareable(ledger, tight, 1.0, 0.5) == {}
    assert co.shareable(ledger, loose, 1.0, 0.5) == {"n1": 2}
    assert co.rigid_fits(21.0, 7.0, 10.0, 1.4) and not co.rigid_fits(20.9, 7.0, 10.0, 1.4)
    # unknown time alone: half the required time (co.ASSUMED_ALONE_SHARE)
    guessed = {"r": _occ(0.2, required_s=60.0, elapsed_s=1.0)}
    assert co.shareable(ledger, guessed, 1.0, 0.5) == {"n1": 2}  # 1 + 29 x 1.4 <= 60
    # a rigid newcomer: alone 10 s at duty 0 -> 1 + 0.5 x 1.0 = 1.5, 15 s; unknown: half
    # its required time, so it fits exactly when beta x (bound - duty) <= 1
    assert co.newcomer_fits(15.0, 10.0, None, 1.0, 0.5)
    assert not co.newcomer_fits(14.9, 10.0, None, 1.0, 0.5)
    assert co.newcomer_fits(20.0, None, None, 1.0, 1.0)
    assert not co.newcomer_fits(20.0, None, None, 1.0, 1.05)
    assert co.newcomer_fits(20.0, None, 0.3, 1.0, 1.05)  # its name's duty: 1.735 <= 2


def test_separation_moves_a_job_onto_free_cores_then_names_the_shared_node():
    ledger = CoreLedger(ResourceGraph.counted({"n1": 2, "n2": 2, "n3": 2}), {"n1", "n2", "n3"})
    ledger.take("a", "n1", 2)
    ledger.take("m", "n2", 2)
    ledger.share("m", "n1", (0, 1))
    occ = {"a": _occ(0.3, rigid=False), "m": _occ(0.9, rigid=False)}
    m = co.Mover(("n2", "n1"), 1, 3, 2, True)
    steps = co.separations(ledger, occ, 1.0, {"a": co.Mover(("n1",), 1, 1, 2, True), "m": m},
                           {})
    assert [(s.action, s.job, s.node, s.core, s.target) for s in steps] == [
        ("grow", "m", "n1", 0, "n3")]  # one step for both cores of n1
    # the grow failed (m does not hold n3): not moved again, shrunk off n1
    failed = co.Mover(("n2", "n1"), 1, 3, 2, True, may_move=False)
    steps = co.separations(ledger, occ, 1.0, {"m": failed}, {"m": ("n1", "n3")})
    assert [(s.action, s.node, s.target) for s in steps] == [("shrink", "n1", None)]
    # the grow done (m holds n3 too): the named shrink off n1, wherever n1 is in its list
    ledger.take("m", "n3", 2)
    moved = co.Mover(("n2", "n1", "n3"), 1, 3, 2, True)
    steps = co.separations(ledger, occ, 1.0, {"m": moved}, {"m": ("n1", "n3")})
    assert [(s.action, s.job, s.node, s.target) for s in steps] == [("shrink", "m", "n1", "n3")]
    busy = co.Mover(("n2", "n1", "n3"), 1, 3, 2, False, busy=True)
    assert co.separations(ledger, occ, 1.0, {"m": busy}, {"m": ("n1", "n3")}) == []
    # no free cores: shrunk off n1 (not its last node), above its minimum only
    full = co.Mover(("n2", "n1", "n3"), 1, 4, 2, True)
    steps = co.separations(ledger, occ, 1.0, {"m": full}, {})
    assert [(s.action, s.node, s.target) for s in steps] == [("shrink", "n1", None)]
    at_min = co.Mover(("n2", "n1", "n3"), 3, 4, 2, True)
    assert [s.action for s in co.separations(ledger, occ, 1.0, {"m": at_min}, {})] == [
        "overload", "overload"]
    # never its first node; a keyless job only off its last node; nothing while it is busy
    first = co.Mover(("n1", "n2", "n3"), 1, 4, 2, True)
    keyless = co.Mover(("n2", "n1", "n3"), 1, 4, 2, True, named=False)
    for mv in (first, keyless):
        assert {s.action for s in co.separations(ledger, occ, 1.0, {"m": mv}, {})} == {
            "overload"}
    assert co.separations(ledger, occ, 1.0, {"m": busy}, {}) == []


# -------------------------------------------------------------------------------- policy


def test_only_a_colocating_job_is_placed_on_shareable_cores():
    spec_yes = JobSpec(name="y", cores=2, profile="network", colocate=True)
    spec_no = JobSpec(name="n", cores=2, profile="network")
    for spec, expected in [(spec_yes, (("n1",), (2,))), (spec_no, None)]:
        pool = FreeNodes((), (), (("n1", 2),))
        assert pool.place(spec, lambda s, free: None) == expected
    view = View(0.0, (), (), (WaitingJob(1, spec_no, 0.0), WaitingJob(2, spec_yes, 0.0)),
                1, (), shareable_cores=(("n1", 2),))
    assert [d.job_id for d in make("easy").decide(view)] == [2]  # backfilled beside


# ----------------------------------------------------------------------------- simulator


def _batch(colocate: bool) -> tuple[list[BatchEntry], RuntimeModel]:
    model = RuntimeModel()
    model.add("jacobi", "s", ScalingCurve({1: 10.0}, 0.0))
    model.add("glb", "s", ScalingCurve({1: 10.0}, 0.0))
    jobs = [JobSpec(name=f"j{i}", cores=2, program="jacobi", size="s", required_time_s=60,
                    colocate=colocate) for i in range(3)]
    jobs += [JobSpec(name="g", cores=2, program="glb", size="s", required_time_s=60)]
    return [BatchEntry(s, 0.0) for s in jobs], model


def test_the_simulator_colocates_idle_jobs_and_slows_them_by_the_model():
    duty = {"jacobi": 0.3, "glb": 1.0}
    entries, model = _batch(True)
    off = Simulator("fcfs", entries, SimConfig(total_nodes=1, cores_per_node=2, duty=duty),
                    model=model).run()
    on = Simulator("fcfs", entries, SimConfig(total_nodes=1, cores_per_node=2, duty=duty,
                                              colocate_bound=1.0, beta=0.5),
                   model=model).run()
    assert off.colocation is None and off.makespan_s == 40.0
    assert on.colocation == {"bound": 1.0, "beta": 0.5, "beta_source": "given",
                             "separations": 0, "moves": 0, "overloads": 0}
    ends = {r.name: r for r in on.records}
    # j0 alone until j1 joins at the 5 s tick (rho 0.6: factor 1.15), j2 at 10 s (0.9: 1.3)
    assert ends["j1"].start_s == 5.0 and ends["j2"].start_s == 10.0
    # j0: half its work alone by 5 s, 5 s at 11.5 s a run, then the rest at 13 s a run
    assert ends["j0"].end_s == pytest.approx(10 + (0.5 - 5 / 11.5) * 13)
    assert all(r.end_s - r.start_s > 10.0 for r in on.records if r.name != "g")
    assert on.makespan_s <= 0.85 * off.makespan_s
    # a job that does not say yes is never shared, even with the bound on
    no_entries, _ = _batch(False)
    alone = Simulator("fcfs", no_entries, SimConfig(total_nodes=1, cores_per_node=2, duty=duty,
                                                    colocate_bound=1.0), model=model).run()
    assert alone.makespan_s == off.makespan_s


def test_the_simulator_separates_a_malleable_job_whose_duty_is_too_high():
    model = RuntimeModel()
    for name, seconds in [("x", 1.0), ("a", 30.0), ("m", 20.0)]:
        model.add("p", name, ScalingCurve({1: seconds, 2: seconds / 2}, 0.0))
    # x fills n1 so that a (idle) lands on n2; m then spans n1 (free) and n2 (shared)
    entries = [BatchEntry(JobSpec(name="x", cores=2, profile="network", program="p", size="x"),
                          0.0),
               BatchEntry(JobSpec(name="a", cores=2, profile="network", program="p", size="a",
                                  colocate=True, required_time_s=300), 0.0),
               BatchEntry(JobSpec(name="m", job_class=JobClass.MALLEABLE, min_nodes=1,
                                  max_nodes=2, cores_per_node=2, program="p", size="m",
                                  colocate=True), 2.0)]
    config = SimConfig(total_nodes=2, cores_per_node=2, colocate_bound=1.0, beta=0.5,
                       duty={"p": 0.6}, node_names=("n1", "n2"))
    result = Simulator("fcfs", entries, config, model=model).run()
    rec = {r.name: r for r in result.records}
    assert rec["a"].cores == (("n2", (0, 1)),)
    assert rec["m"].allotment[0][1] == ("n1", "n2")  # shared n2 last
    assert rec["m"].shrinks == 1 and rec["m"].allotment[-2][1] == ("n1",)
    assert result.colocation["separations"] == 1 and result.colocation["moves"] == 0


def test_the_simulator_moves_a_job_onto_free_cores_then_off_the_shared_node():
    """x2 holds n3 until 2.2 s, m (ready at 2.4 s) starts at 2.0 s on n1 and beside a on n2
    (1.2 > 1): once ready it grows onto n3, then gives n2 back by name."""
    model = RuntimeModel()
    for name, seconds in [("x", 1.0), ("x2", 2.2), ("a", 30.0), ("m", 20.0)]:
        model.add("p", name, ScalingCurve({1: seconds, 2: seconds / 2, 3: seconds / 3}, 0.0))
    cores = dict(cores=2, profile="network", program="p")
    entries = [BatchEntry(JobSpec(name="x", size="x", **cores), 0.0),
               BatchEntry(JobSpec(name="a", size="a", colocate=True, required_time_s=300,
                                  **cores), 0.0),
               BatchEntry(JobSpec(name="x2", size="x2", **cores), 0.0),
               BatchEntry(JobSpec(name="m", job_class=JobClass.MALLEABLE, min_nodes=1,
                                  max_nodes=3, cores_per_node=2, program="p", size="m",
                                  colocate=True), 2.0)]
    config = SimConfig(total_nodes=3, cores_per_node=2, colocate_bound=1.0, beta=0.5,
                       duty={"p": 0.6}, node_names=("n1", "n2", "n3"))
    result = Simulator("fcfs", entries, config, model=model).run()
    rec = {r.name: r for r in result.records}
    steps = [nodes for _, nodes in rec["m"].allotment]
    assert steps[:3] == [("n1", "n2"), ("n1", "n2", "n3"), ("n1", "n3")]
    assert rec["m"].grows == 1 and rec["m"].shrinks == 1
    assert result.colocation["moves"] == 1 and result.colocation["separations"] == 1
    assert result.colocation["overloads"] == 0  # m could move: no overload counted


def test_the_simulator_keeps_a_rigid_newcomer_off_shared_cores_that_would_make_it_late():
    model = RuntimeModel()
    model.add("p", "a", ScalingCurve({1: 10.0}, 0.0))
    model.add("p", "r", ScalingCurve({1: 4.0}, 0.0))
    for required, shared in [(5.0, False), (6.0, True)]:  # 4 s x 1.35 = 5.4 s
        entries = [BatchEntry(JobSpec(name="a", cores=2, program="p", size="a", colocate=True,
                                      required_time_s=60), 0.0),
                   BatchEntry(JobSpec(name="r", cores=2, program="p", size="r", colocate=True,
                                      required_time_s=required), 1.0)]
        config = SimConfig(total_nodes=1, cores_per_node=2, colocate_bound=1.0, beta=0.5,
                           duty={"p": 0.3})
        rec = {r.name: r for r in Simulator("fcfs", entries, config, model=model).run().records}
        assert (rec["r"].start_s < rec["a"].end_s) is shared
        assert rec["r"].end_s - rec["r"].start_s <= required


def test_the_malleable_policy_grows_a_colocating_job_onto_shared_cores():
    model = RuntimeModel()
    model.add("p", "a", ScalingCurve({1: 40.0}, 0.0))
    model.add("p", "m", ScalingCurve({1: 20.0, 2: 10.0}, 0.0))
    entries = [BatchEntry(JobSpec(name="a", cores=2, profile="network", program="p", size="a",
                                  colocate=True, required_time_s=300), 0.0),
               BatchEntry(JobSpec(name="m", job_class=JobClass.MALLEABLE, min_nodes=1,
                                  max_nodes=2, cores_per_node=2, program="p", size="m",
                                  colocate=True), 1.0)]
    for duty, grown in [(0.3, True), (0.8, False)]:  # a's room is 0.7
        config = SimConfig(total_nodes=2, cores_per_node=2, colocate_bound=1.0, beta=0.5,
                           duty={"p": duty}, node_names=("n1", "n2"), cooldown_s=0.0)
        rec = {r.name: r for r in Simulator("malleable", entries, config, model=model)
               .run().records}
        assert rec["a"].cores == (("n1", (0, 1)),)
        assert rec["m"].cores == (("n2", (0, 1)),)  # free cores before shared ones
        assert (rec["m"].grows == 1) is grown
        if grown:
            assert ("n2", "n1") in [nodes for _, nodes in rec["m"].allotment]


def test_the_real_scheduler_counts_an_unmeasured_job_as_its_name_last_measured(tmp_path):
    from scheduler.job_state import LoadSample
    from scheduler.nodes import LocalNodes
    from scheduler.server import Server
    from scheduler.state import ServerJob

    state = Server(LocalNodes(1, cores_per_node=2), make("fcfs"), port=0,
                   run_dir=tmp_path / "run", colocate_bound=1.0)._state
    jobs = [ServerJob(i, JobSpec(name=name, cores=2, colocate=True), ("true",), 0.0)
            for i, name in [(1, "jacobi"), (2, "jacobi"), (3, "other")]]
    for job in jobs:
        job.start(0.0, ["127.0.1.1"], elastic=True)
        state.jobs[job.job_id] = job
    jobs[0].load = LoadSample(0.25, 0.0, None, None, 0.0)
    duty = {j: o.duty for j, o in state.occupants(1.0).items()}
    assert duty == {1: 0.25, 2: 0.25, 3: None}
    jobs[0].end(2.0, "done")  # its name's figure outlives it
    assert state.occupants(3.0)[2].duty == 0.25
