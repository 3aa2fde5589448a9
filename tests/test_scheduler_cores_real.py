"""Cores, not nodes, on real processes: the scheduler hands out cores of logical nodes and
tells each job its shape (docs/guides/scheduler.md, "Cores and shapes").

* two ``#CORES 2`` jobs share one node of 4 cores, each on its own cores; a node job after
  them gets the whole node as one place of 4 workers; too many cores and a bad profile are
  refused in one line (the command line);
* a CPU-bound job gets one place a node with a worker a core, a network-bound one is packed
  on one node, and under ``--shape granularity`` a CPU-bound job gets a place a core: read
  from the places the apgaspy job really ran (``tests/programs/shape.py``);
* a malleable ``#CORES_PER_NODE`` job keeps its shape when grown and shrunk, and learns the
  cores of its new host from its cores file;
* the simulator and the real scheduler give one small batch the same schedule, core for
  core.

Every test ends the processes it started (by pid) and leaves none behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, wait_until
from test_scheduler_real import Serve, kill_all, read_events

from apgaspy.wire.cores import format_cores_env, format_cpulist, parse_cores_env
from scheduler import JobSpec, make
from scheduler.jobs import BatchEntry
from scheduler.model import RuntimeModel, ScalingCurve
from scheduler.nodes import LocalNodes
from scheduler.server import Server, job_of
from scheduler.simulate import SimConfig, Simulator
from scheduler.slurm_mode import SlurmNodes, node_cpus

PY = sys.executable
SHAPE = str(Path(ROOT) / "tests" / "programs" / "shape.py")
N1, N2 = "127.0.1.1", "127.0.1.2"
CPUS = os.cpu_count() or 1


def cpus_of(node_index: int, cores: list[int], per_node: int) -> list[int]:
    """The machine's CPUs of logical cores ``cores`` of node ``node_index`` (the mapping
    of docs/guides/scheduler.md: ``(k*C + j) mod cpu_count``)."""
    return sorted({(node_index * per_node + j) % CPUS for j in cores})


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]


def key_values(path: Path) -> dict[str, str]:
    return dict(w.split("=", 1) for w in path.read_text().split() if "=" in w)


def _server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nodes: LocalNodes,
            algorithm: Any, **kw: Any) -> Server:
    monkeypatch.delenv("APGAS_PLACES", raising=False)  # the job decides from its shape
    server = Server(nodes, algorithm, port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0, **kw)
    server.start()
    return server


def _events(server: Server, kind: str, job: int | None = None) -> list[dict[str, Any]]:
    return [e for e in list(server.events) if e["event"] == kind
            and (job is None or e["job"] == job)]


# ------------------------------------------------------------------------ the command line


ECHO = "echo APGAS_CORES=$APGAS_CORES PPH=$APGAS_PLACES_PER_HOST W=$GLB_WORKERS\n"


@pytest.mark.timeout(90)
def test_two_core_jobs_share_a_node_on_their_own_cores(tmp_path):
    scripts = {}
    for name, head in (("a", "#CORES 2\n"), ("b", "#CORES 2\n#PROFILE network\n"),
                       ("whole", "#NODES 1\n"), ("big", "#CORES 5\n"),
                       ("typo", "#CORES 1\n#PROFILE netwrk\n")):
        scripts[name] = tmp_path / f"{name}.sh"
        # a and b run until the test has seen them both running (a fixed sleep let them
        # end, and the whole-node job start, before a loaded machine got there)
        hold = f"until [ -e {tmp_path}/go ]; do sleep 0.1; done\n" if name in ("a", "b") else ""
        scripts[name].write_text(f"#JOB_NAME {name}\n{head}#REQUIRED_TIME 60s\n{ECHO}"
                                 f"{hold}")
    serve = Serve(tmp_path, "--nodes", "1", "--cores-per-node", "4", "--port", "0",
                  "--algorithm", "fcfs")
    try:
        note = "oversubscribed" in serve.err_path.read_text()
        assert note == (CPUS < 4)  # said once at start, when 4 cores share fewer CPUs
        for name in ("a", "b", "whole"):
            res = serve.cli("submit", str(scripts[name]))
            assert res.returncode == 0, res.stderr
        # Bad input: one line on stderr each, exit 1, and the server runs on.
        for name, message in (("big", "job 'big' asks for 5 cores; the cluster has 4"),
                              ("typo", "unknown profile 'netwrk' (did you mean network?)")):
            res = serve.cli("submit", str(scripts[name]))
            assert res.returncode == 1 and message in res.stderr, res
            assert res.stderr.strip().count("\n") == 0, res.stderr
        wait_until(lambda: len(serve.events("start")) == 2, 20, "a and b running")
        st = serve.ask(op="status")
        assert st["shape"] == "scale"
        assert st["nodes"] == [{"name": N1, "job": st["nodes"][0]["job"], "state": "busy",
                                "cores": 4, "free_cores": 0}]
        assert job_of(st, 3)["state"] == "waiting"  # the whole node is not free
        (tmp_path / "go").touch()
        wait_until(lambda: len(serve.events("end")) == 3, 40, "the three jobs")
        starts = {e["job"]: e for e in serve.events("start")}
        assert starts[3]["t"] >= max(e["t"] for e in serve.events("end") if e["job"] in (1, 2))
        held = {j: starts[j]["cores"][N1] for j in (1, 2)}
        assert held == {1: [0, 1], 2: [2, 3]}  # disjoint logical cores
        for job in (1, 2):
            env = key_values(serve.run_dir / f"job-{job}.out")
            assert parse_cores_env(env["APGAS_CORES"]) == {N1: cpus_of(0, held[job], 4)}
            assert (env["PPH"], env["W"]) == ("1", "2")  # a place with a worker a core
        if CPUS >= 4:  # real CPUs to spare: the two jobs' CPUs are disjoint too
            assert not set(cpus_of(0, held[1], 4)) & set(cpus_of(0, held[2], 4))
        whole = key_values(serve.run_dir / "job-3.out")
        assert whole["APGAS_CORES"] == format_cores_env({N1: cpus_of(0, [0, 1, 2, 3], 4)})
        assert (whole["PPH"], whole["W"]) == ("1", "4")  # node-as-one-place
        assert "cores" not in starts[3]
        assert serve.ask(op="status")["nodes"][0]["free_cores"] == 4
    finally:
        seen = serve.close()
        kill_all(seen)


# -------------------------------------------------------------------------- shapes


@pytest.mark.timeout(120)
def test_cpu_jobs_spread_a_place_a_node_and_network_jobs_pack(tmp_path, monkeypatch):
    server = _server(tmp_path, monkeypatch, LocalNodes(2, cores_per_node=4), make("fcfs"))
    try:
        cpu = server.submit(JobSpec(name="cpu", cores=4, command=(PY, SHAPE),
                                    required_time_s=60))
        wait_until(server.all_done, 60, "the cpu job")
        # alone on the two nodes too (beside the cpu job, 2 cores a node were all it had)
        net = server.submit(JobSpec(name="net", cores=4, profile="network",
                                    command=(PY, SHAPE), required_time_s=60))
        wait_until(server.all_done, 60, "the network job")
        assert [job_of(server.status(), j)["state"] for j in (cpu, net)] == ["done", "done"]
        spread = json_lines(server.run_dir / f"job-{cpu}.out")[0]
        assert spread["env"]["APGAS_PLACES_PER_HOST"] == "1"
        assert spread["env"]["GLB_WORKERS"] == "2"
        assert spread["places"] == {N1: 1, N2: 1}  # one place a node
        assert set(spread["workers"].values()) == {2}  # a worker a core
        packed = json_lines(server.run_dir / f"job-{net}.out")[0]
        assert packed["env"]["GLB_WORKERS"] == "4" and packed["places"] == {N1: 1}
        assert packed["workers"] == {"0": 4}
        assert packed["cores"] == {N1: cpus_of(0, [0, 1, 2, 3], 4)}
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(120)
def test_granularity_gives_a_cpu_job_a_place_a_core(tmp_path, monkeypatch):
    server = _server(tmp_path, monkeypatch, LocalNodes(2, cores_per_node=2), make("fcfs"),
                     shape="granularity")
    try:
        job = server.submit(JobSpec(name="fine", nodes=1, cores_per_node=2,
                                    command=(PY, SHAPE), required_time_s=60))
        net = server.submit(JobSpec(name="net", cores=2, profile="network",
                                    command=(PY, SHAPE), required_time_s=60))
        wait_until(server.all_done, 90, "both jobs")
        fine = json_lines(server.run_dir / f"job-{job}.out")[0]
        assert (fine["env"]["APGAS_PLACES_PER_HOST"], fine["env"]["GLB_WORKERS"]) == ("2", "1")
        assert fine["places"] == {N1: 2}  # a place a core
        assert set(fine["workers"].values()) == {1}
        packed = json_lines(server.run_dir / f"job-{net}.out")[0]
        assert packed["places"] == {N2: 1} and packed["workers"] == {"0": 2}  # network packs
        st = server.status()
        assert [job_of(st, j)["state"] for j in (job, net)] == ["done", "done"]
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(120)
def test_a_malleable_job_keeps_its_shape_when_grown_and_shrunk(tmp_path, monkeypatch):
    """granularity on nodes of 2 cores: the job (#CORES_PER_NODE 2, 1-2 nodes) runs 2
    places a host; it is grown onto the idle node (2 more places, the new host's cores in
    its cores file), then shrunk by that node for a rigid job."""
    server = _server(tmp_path, monkeypatch, LocalNodes(2, cores_per_node=2),
                     make("malleable", cooldown_s=0.0), shape="granularity")
    try:
        job = server.submit(JobSpec(name="shape", job_class="malleable", min_nodes=1,
                                    max_nodes=2, cores_per_node=2,
                                    command=(PY, SHAPE, "malleable", "14"),
                                    required_time_s=90))
        out = server.run_dir / f"job-{job}.out"
        wait_until(lambda: _events(server, "grow_done", job), 40, "the grow")
        wait_until(lambda: any(e.get("event") == "grown" for e in json_lines(out)), 20,
                   "the job's places after the grow")
        # the job ends after its shrink (shape.py), so the rigid job needs no length and no
        # later grow can rewrite the cores file read here
        rigid = server.submit(JobSpec(name="rigid", nodes=1, command=("sleep", "0.5"),
                                      required_time_s=30))
        wait_until(lambda: _events(server, "shrink_done", job), 40, "the shrink")
        cores_after_shrink = (server.run_dir / f"job-{job}.cores").read_text()
        wait_until(lambda: any(e.get("event") == "shrunk" for e in json_lines(out)), 20,
                   "the job's places after the shrink")
        wait_until(server.all_done, 60, "both jobs")
        lines = json_lines(out)
        first = lines[0]
        grown = next(e for e in lines if e.get("event") == "grown")
        shrunk = next(e for e in lines if e.get("event") == "shrunk")
        assert (first["env"]["APGAS_PLACES_PER_HOST"], first["env"]["GLB_WORKERS"]) == (
            "2", "1")
        assert first["places"] == {N1: 2}
        assert grown["places"] == {N1: 2, N2: 2}  # whole places of the same shape
        assert set(grown["workers"].values()) == {1}
        assert grown["cores"] == {N1: cpus_of(0, [0, 1], 2), N2: cpus_of(1, [0, 1], 2)}
        assert shrunk["places"] == {N1: 2}
        # rewritten once the job's reply named the host it gave back (after its post_shrink)
        assert cores_after_shrink == f"{N1}={format_cpulist(cpus_of(0, [0, 1], 2))}\n"
        st = server.status()
        assert job_of(st, job)["state"] == "done" and job_of(st, rigid)["state"] == "done"
        assert _events(server, "start", rigid)[0]["nodes"] == [N2]
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


# --------------------------------------------------------------- simulated and real agree


@pytest.mark.timeout(90)
def test_simulator_and_real_scheduler_agree_core_for_core(tmp_path, monkeypatch):
    """FCFS on 2 nodes of 4 cores: a (2 cores, 1 s) spreads, b (4 cores, network, 3 s) packs
    as far as the free cores allow, c (a whole node) waits for both, d (3 cores) behind it."""
    batch = [("a", {"cores": 2}, 1.0), ("b", {"cores": 4, "profile": "network"}, 3.0),
             ("c", {"nodes": 1}, 0.5), ("d", {"cores": 3}, 0.5)]
    model = RuntimeModel()
    for name, _, seconds in batch:
        model.add("sleep", name, ScalingCurve({1: seconds}, 0.0))
    entries = [BatchEntry(JobSpec(name=name, program="sleep", size=name, **ask)) for
               name, ask, _ in batch]
    config = SimConfig(total_nodes=2, cores_per_node=4, node_names=(N1, N2))
    simulated = {r.name: (r.allotment[0][1], r.cores)
                 for r in Simulator("fcfs", entries, config, model=model).run().records}

    server = _server(tmp_path, monkeypatch, LocalNodes(2, cores_per_node=4), make("fcfs"))
    try:
        for name, ask, seconds in batch:
            server.submit(JobSpec(name=name, command=("sleep", str(seconds)),
                                  required_time_s=30, **ask))
        wait_until(server.all_done, 60, "the batch")
        real = {r.name: (r.allotment[0][1], r.cores) for r in server.result().records}
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
    assert real == simulated
    assert simulated["a"] == ((N1, N2), ((N1, (0,)), (N2, (0,))))
    assert simulated["d"] == ((N2,), ((N2, (0, 1, 2)),))
    events = read_events(tmp_path / "events.jsonl")
    assert {e["job"] for e in events if e["event"] == "start" and "cores" in e} == {1, 2, 4}


# ------------------------------------------------------------------------------ ssh hosts


@pytest.mark.timeout(90)
def test_ssh_hosts_count_their_cores_with_nproc(netns_cluster):
    """``--cores-per-node auto`` on ssh hosts: each host's ``nproc``, asked over the
    cluster's ssh from h3; a host ssh cannot reach is an error naming it."""
    cluster = netns_cluster
    expected = {h: int(cluster.host(h).run(["nproc"], timeout=20).stdout) for h in ("h1", "h2")}
    code = ("import json, sys; from scheduler.nodes import SshHosts\n"
            "hosts = SshHosts(['h1', 'h2'], ssh=sys.argv[1], cores_per_node='auto')\n"
            "print(json.dumps(hosts.graph.sizes()))\n"
            "try:\n"
            "    SshHosts(['nohost.invalid'], ssh=sys.argv[1], cores_per_node='auto')\n"
            "except OSError as exc:\n"
            "    print(exc)\n")
    res = cluster.host("h3").run([PY, "-c", code, cluster.ssh], timeout=60, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    sizes, error = res.stdout.splitlines()[:2]
    assert json.loads(sizes) == expected
    assert error.startswith("nohost.invalid: nproc over ssh failed")


@pytest.mark.timeout(120)
def test_slurm_nodes_report_their_cputot(slurm_cluster):
    """``--slurm --cores-per-node auto``: each node's cores are Slurm's ``CPUTot``."""
    env = slurm_cluster.environ()
    table = subprocess.run(["scontrol", "show", "node", "-o"], env=env, capture_output=True,
                           text=True, timeout=30, check=True).stdout
    cputot = node_cpus(table)
    nodes = SlurmNodes(env=env, cores_per_node="auto")
    three = SlurmNodes(env=env, cores_per_node=3)
    try:
        assert nodes.graph is not None and nodes.names()
        assert nodes.graph.sizes() == {n: cputot[n] for n in nodes.names()}
        assert three.graph is not None
        assert three.graph.sizes() == dict.fromkeys(nodes.names(), 3)
    finally:
        nodes.close()
        three.close()
