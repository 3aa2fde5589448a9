"""The granularity-and-affinity study's pieces (docs/benchmarks.md, "Granularity and
affinity"): the contention model, the placement and socket switches, the scenarios in the
simulator, and ``serve --no-pin`` on real processes (one test).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT, wait_until

from scheduler import JobSpec, make
from scheduler.contention import ContentionModel, KindFactors, Layout, grow, layout_of
from scheduler.jobs import BatchEntry
from scheduler.nodes import LocalNodes
from scheduler.resources import CoreLedger, ResourceGraph, first_fit_cores, shape
from scheduler.server import Server, job_of
from scheduler.studies.granularity import SCENARIOS, experiment2, run_scenario

N1 = "127.0.1.1"
SHAPE = str(Path(ROOT) / "tests" / "programs" / "shape.py")

MODEL = ContentionModel({
    "cpu": KindFactors(shape2=1.5, unpinned=1.2),
    "memory": KindFactors(unpinned=1.2, straddle=1.1, memory=True),
    "network": KindFactors(shape2=0.5, unpinned=1.2, spread2=1.3, straddle=1.1),
}, socket_saturation=8)


def test_the_factor_of_a_layout():
    # Amdahl growth of a cost, a saving kept at its measured value, 1 at one worker
    assert grow(1.5, 1) == 1.0 and grow(1.5, 16) == 8.5 and grow(3.0, 4) == 4.0
    assert grow(0.5, 16) == 0.5
    alone = Layout(workers=1, nodes=1, pinned=True, shared=False, straddles=False,
                   memory_cores=16)
    assert MODEL.factor("cpu", alone) == 1.0
    assert MODEL.factor("memory", alone) == 2.0  # 16 memory-bound cores, 8 at full speed
    loose = Layout(workers=4, nodes=2, pinned=False, shared=True, straddles=True,
                   memory_cores=0)
    assert MODEL.factor("cpu", loose) == pytest.approx(2.5 * 1.2)
    assert MODEL.factor("network", loose) == pytest.approx(0.5 * 1.2 * 1.3 * 1.1)
    assert MODEL.factor("unknown", loose) == 1.0
    with pytest.raises(ValueError, match="shape2"):
        KindFactors(shape2=0.0)


def test_layout_counts_the_memory_bound_cores_of_its_sockets():
    sockets = {"n1": (0, 0, 1, 1)}
    spec = JobSpec(name="m", cores=2, profile="memory")
    # a memory-bound neighbour on socket 0, a CPU-bound one on socket 1
    others = {1: (True, {"n1": (1,)}), 2: (False, {"n1": (3,)})}
    lay = layout_of(spec, {"n1": (0, 2)}, others, sockets, "core", pinned=False, memory=True)
    assert lay == Layout(workers=1, nodes=1, pinned=False, shared=True, straddles=True,
                         memory_cores=2)
    lay = layout_of(spec, {"n1": (0, 1)}, {}, sockets, "scale", pinned=True, memory=True)
    assert (lay.workers, lay.straddles, lay.shared, lay.memory_cores) == (2, False, False, 2)


def test_first_fit_and_task_groups():
    free = {"n1": 3, "n2": 32, "n3": 32}
    assert first_fit_cores(16, free) == (("n1", 3), ("n2", 13))  # uneven shares
    assert first_fit_cores(16, free, pack=True) == (("n2", 16),)
    assert first_fit_cores(80, free) is None
    assert shape("network", 4, "core") == (4, 1) and shape("network", 4, "granularity") == (1, 4)
    socks = (0,) * 4 + (1,) * 4
    whole: set[str] = {"n1"}
    ledger = CoreLedger(ResourceGraph({"n1": tuple(range(8))}, {"n1": socks}), whole)
    assert ledger.take("a", "n1", 2) == (0, 1)
    assert ledger.take("b", "n1", 4) == (2, 3, 4, 5)  # lowest free: straddles two sockets
    ledger.give("b", "n1")
    assert ledger.take("b", "n1", 4, group=True) == (4, 5, 6, 7)  # the socket that holds 4
    ledger.give("b", "n1")
    assert ledger.take("c", "n1", 2, group=True) == (4, 5)  # groups apart: the emptier socket
    assert ledger.take("d", "n1", 2, group=True) == (2, 3)  # a tie: the lowest socket
    with pytest.raises(ValueError, match="placement"):
        make("fcfs", placement="anywhere")


def test_the_scenarios_in_the_simulator():
    # two memory-bound jobs of 16 cores on 1 node of 32 (2 sockets): first fit puts the first
    # on socket 0 (16 memory-bound cores there: factor 2); the second, unpinned beside it,
    # 1.2 x 2; spread over 2 nodes with task groups, each socket holds 8 (factor 1)
    entries = [BatchEntry(JobSpec(name=f"m{i}", cores=16, profile="memory", program="memory",
                                  size=16), 0.0) for i in range(2)]
    none = run_scenario(entries, SCENARIOS["none"], MODEL, nodes=2, base_s=100.0)
    assert [j["factor"] for j in none["jobs"]] == [2.0, 2.4]
    assert none["makespan_s"] == pytest.approx(240.0)
    best = run_scenario(entries, SCENARIOS["granularity+groups"], MODEL, nodes=2,
                        base_s=100.0)
    assert [j["factor"] for j in best["jobs"]] == [1.0, 1.0]
    assert best["mean_turnaround_s"] == pytest.approx(100.0)
    # without a model every job runs its base time, whatever the scenario
    for scenario in SCENARIOS.values():
        plain = run_scenario(experiment2(1), scenario, None)
        assert {j["factor"] for j in plain["jobs"]} == {1.0}
        assert all(j["end_s"] - j["start_s"] == pytest.approx(300.0) for j in plain["jobs"])


@pytest.mark.timeout(90)
def test_no_pin_gives_a_job_its_shape_without_cores(tmp_path, monkeypatch):
    monkeypatch.delenv("APGAS_PLACES", raising=False)
    server = Server(LocalNodes(1, cores_per_node=2), make("fcfs"), port=0,
                    run_dir=tmp_path / "run", log_path=tmp_path / "events.jsonl",
                    interval_s=0.5, grace_s=1.0, shape="core", pin=False)
    server.start()
    try:
        job = server.submit(JobSpec(name="net", cores=2, profile="network",
                                    command=(sys.executable, SHAPE), required_time_s=60))
        wait_until(server.all_done, 60, "the job")
        assert job_of(server.status(), job)["state"] == "done"
        assert server.status()["pin"] is False
        first = json.loads((server.run_dir / f"job-{job}.out").read_text().splitlines()[0])
        assert first["env"]["APGAS_CORES"] is None and first["cores"] is None
        assert (first["env"]["APGAS_PLACES_PER_HOST"], first["env"]["GLB_WORKERS"]) == ("2", "1")
        assert first["places"] == {N1: 2}  # a place a core, network or not
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


def test_the_fit_takes_ratios_of_medians_and_states_its_sources():
    from benchmarks.granularity import fit

    def runs(*seconds):
        return [{"seconds": s, "wall_s": s + 1.0, "correct": True, "places": 1} for s in seconds]

    raw = {"network": {"2x1": runs(1.0, 9.0, 1.2), "1x2": runs(0.3, 0.3, 0.2),
                       "1x1": runs(2.0), "corun_pinned": runs(2.0, 2.0),
                       "corun_unpinned": runs(3.0, 2.0, 3.0, 3.0)},
           "memory": {"2x1": runs(1.0), "1x2": runs(2.0), "1x1": runs(1.0),
                      "corun_pinned": runs(1.0), "corun_unpinned": runs(1.0)}}
    model, table = fit(raw)
    assert model.kinds["network"].shape2 == pytest.approx(0.3 / 1.2)  # medians: a slow run out
    assert model.kinds["network"].unpinned == pytest.approx(1.5)
    assert model.kinds["memory"].memory and not model.kinds["network"].memory
    assert table["kinds"]["memory"]["shape2"] == 2.0
    assert {"shape2", "unpinned", "straddle", "socket_saturation", "spread2"} <= set(
        model.sources)
    assert all(model.sources[k].startswith("assumed") for k in ("straddle", "socket_saturation"))
