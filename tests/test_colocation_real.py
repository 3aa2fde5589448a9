"""Co-location on real processes (docs/guides/colocation.md):

* two idle Jacobi jobs (``#CORES_PER_NODE 2`` on one node, ``#COLOCATE yes``, ``--pause``)
  share the one logical node of ``serve --nodes 1 --cores-per-node 2 --colocate-bound 1.0``:
  the second starts on the first one's cores once the first has reported its duty cycle,
  both see the same CPUs in ``APGAS_CORES``, the status shows the shared cores, each job's
  load lines count as its own though both send from the node's address, and both answers
  are exact.  The jobs are malleable of one node under the malleable policy (a job run as
  rigid, ``ELASTIC=rigid``, reports its load too: tests/test_shared_node.py);
* a co-located malleable job whose duty cycle rises is separated: grown onto the cores of
  an idle job while its own load is low (``tests/programs/load_lines.py`` sends the load
  lines it is told to), it is shrunk off them by name once its load lines say 0.9 and no
  free cores exist;
* with free cores (a node added meanwhile) it is moved instead: grown onto the new node,
  then shrunk off the shared one by name; its processes there are gone and its answer,
  computed on its places after the move, is exact;
* a rigid ``#COLOCATE yes`` job that the beta model says sharing would make late (its time
  alone unknown: half its required time) is kept off the shared cores: it waits for the
  idle job to end, then runs alone within its required time.

Every test ends the processes it started (by pid) and leaves none behind.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, alive, descendants, wait_until
from test_scheduler_real import Serve, kill_all

from apgaspy.wire.cores import parse_cores_env
from scheduler import JobClass, JobSpec, make
from scheduler import colocation as co
from scheduler.nodes import LocalNodes
from scheduler.server import Server, job_of

PY = sys.executable
N1, N2, N3 = "127.0.1.1", "127.0.1.2", "127.0.1.3"
LOAD_LINES = str(Path(ROOT) / "tests" / "programs" / "load_lines.py")


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.startswith("{")]


@pytest.mark.timeout(120)
def test_two_idle_jacobi_jobs_share_one_node_and_stay_exact(tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.sh").write_text(
            f"#JOB_NAME {name}\n#JOB_CLASS malleable\n#NODES 1\n#CORES_PER_NODE 2\n"
            "#COLOCATE yes\n#REQUIRED_TIME 90s\n"
            "echo APGAS_CORES=$APGAS_CORES\n"
            "exec python -m benchmarks.jacobi -n 64 -i 96 --pause 0.3 --verify --json\n")
    (tmp_path / "bad.sh").write_text("#CORES 2\n#COLOCATE sometimes\nsleep 1\n")
    # 12 steps of 8 iterations, 0.3 s apart: a runs about 3.6 s, long past b's start
    # (a's first load line after 0.5 s, then one decision: --interval 0.5)
    serve = Serve(tmp_path, "--nodes", "1", "--cores-per-node", "2", "--port", "0",
                  "--interval", "0.5", "--algorithm", "malleable", "--colocate-bound", "1.0",
                  "--env", "APGAS_LOAD_INTERVAL=0.5")
    try:
        res = serve.cli("submit", str(tmp_path / "bad.sh"))
        assert res.returncode == 1 and "line 2: #COLOCATE is 'yes' or 'no'" in res.stderr
        assert res.stderr.strip().count("\n") == 0, res.stderr
        for name in ("a", "b"):
            assert serve.cli("submit", str(tmp_path / f"{name}.sh")).returncode == 0
        wait_until(lambda: len(serve.events("start")) == 2, 60, "b to join a")
        shared = serve.ask(op="status")["colocation"]
        assert shared["bound"] == 1.0 and shared["beta_source"]
        assert {(c["node"], c["core"]): c["jobs"] for c in shared["shared"]} == {
            (N1, 0): [1, 2], (N1, 1): [1, 2]}
        table = serve.cli("status").stdout
        assert f"jobs 1,2 share {N1}:0 {N1}:1" in table and "0 separations" in table
        wait_until(lambda: len(serve.events("end")) == 2, 90, "both jobs")
        starts = {e["job"]: e for e in serve.events("start")}
        ends = {e["job"]: e for e in serve.events("end")}
        assert starts[2]["t"] < ends[1]["t"]  # they ran at the same time
        assert starts[1]["cores"] == starts[2]["cores"] == {N1: [0, 1]}
        cores = []
        for job in (1, 2):
            out = serve.run_dir / f"job-{job}.out"
            cores.append(parse_cores_env(out.read_text().split("APGAS_CORES=")[1].split()[0]))
            report = json_lines(out)[-1]
            assert report["correct"] is True and ends[job]["state"] == "done"
        assert cores[0] == cores[1]  # overlapping APGAS_CORES: the same CPUs
        assert [e for e in serve.events("profile_measured")
                if e["job"] == 1]  # its lines were its own, not b's
        assert not serve.events("line_refused")
        st = serve.ask(op="status")
        assert st["colocation"]["shared"] == [] and st["nodes"][0]["free_cores"] == 2
    finally:
        seen = serve.close()
        kill_all(seen)


@pytest.mark.timeout(120)
def test_a_colocated_job_whose_duty_rises_is_separated(tmp_path, monkeypatch):
    monkeypatch.delenv("APGAS_PLACES", raising=False)
    server = Server(LocalNodes(2, cores_per_node=2), make("malleable", cooldown_s=0.0),
                    port=0, run_dir=tmp_path / "run", log_path=tmp_path / "events.jsonl",
                    interval_s=0.5, grace_s=1.0, colocate_bound=1.0,
                    job_env={"APGAS_LOAD_INTERVAL": "0"})
    server.start()
    try:
        # a: idle (0.3) on N1; m starts on the free N2, grows onto a's cores when
        # measured at 0.2 (0.3 + 0.2 <= 1), then reports 0.9: 1.2 on N1, separated
        server.submit(JobSpec(name="a", job_class=JobClass.MALLEABLE, nodes=1, min_nodes=1,
                              max_nodes=1, cores_per_node=2, colocate=True,
                              required_time_s=90, command=(PY, LOAD_LINES, "0.3", "0.3", "40")))
        wait_until(lambda: server.status()["jobs"][0]["state"] == "running", 30, "a")
        m = server.submit(JobSpec(name="m", job_class=JobClass.MALLEABLE, min_nodes=1,
                                  max_nodes=2, cores_per_node=2, colocate=True,
                                  required_time_s=90,
                                  command=(PY, LOAD_LINES, "0.2", "0.9", "40")))
        events = server.events

        def seen(kind: str) -> list[dict[str, Any]]:
            return [e for e in list(events) if e["event"] == kind and e["job"] == m]

        wait_until(lambda: seen("shrink_done"), 90, "m grown onto N1 and separated")
        assert seen("start")[0]["nodes"] == [N2]
        assert seen("grow_order")[0]["nodes"] == [N2, N1]
        assert seen("shrink_done")[0]["released"] == [N1]
        assert seen("shrink_order")[0]["wanted"] == [N1]  # by name
        separate = seen("colocation_separate")
        assert len(separate) == 1 and separate[0]["node"] == N1
        assert separate[0]["duty_sum"] == pytest.approx(1.2, abs=0.01)
        assert server.status()["colocation"]["separations"] == 1
        wait_until(lambda: not [j for j in server.status()["jobs"]
                                if j["id"] == m and j["state"] == "running"], 30, "m's end")
        out = json_lines(Path(server.status()["jobs"][1]["stdout"]))
        assert out[-1]["places"] == 1 and out[-1]["separated"] and out[-1]["correct"]
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


def _server(tmp_path: Path, nodes: int, bound: float, cooldown_s: float) -> Server:
    server = Server(LocalNodes(nodes, cores_per_node=2), make("malleable", cooldown_s=cooldown_s),
                    port=0, run_dir=tmp_path / "run", log_path=tmp_path / "events.jsonl",
                    interval_s=0.5, grace_s=1.0, colocate_bound=bound,
                    job_env={"APGAS_LOAD_INTERVAL": "0"})
    server.start()
    return server


def _idle(server: Server, seconds: float) -> int:
    """a: a malleable job of one node (2 cores) that reports a duty cycle of 0.3."""
    a = server.submit(JobSpec(name="a", job_class=JobClass.MALLEABLE, nodes=1, min_nodes=1,
                              max_nodes=1, cores_per_node=2, colocate=True,
                              required_time_s=90,
                              command=(PY, LOAD_LINES, "0.3", "0.3", str(seconds))))
    wait_until(lambda: job_of(server.status(), a)["state"] == "running", 30, "a")
    return a


@pytest.mark.timeout(120)
def test_a_colocated_job_whose_duty_rises_is_moved_onto_free_cores(tmp_path, monkeypatch):
    """2 nodes: m starts on N2 and grows beside a onto N1 (the policy's cool-down of 1000 s
    then keeps it from growing by itself); N3 is added, m's load rises to 0.9 (1.2 on N1):
    it is grown onto N3, then shrunk off N1 by name."""
    monkeypatch.delenv("APGAS_PLACES", raising=False)
    server = _server(tmp_path, 2, 1.0, 1000.0)
    go = tmp_path / "go"
    pid = None
    try:
        _idle(server, 40)
        m = server.submit(JobSpec(name="m", job_class=JobClass.MALLEABLE, min_nodes=1,
                                  max_nodes=3, cores_per_node=2, colocate=True,
                                  required_time_s=90,
                                  command=(PY, LOAD_LINES, "0.2", "0.9", "40", str(go))))

        def seen(kind: str) -> list[dict[str, Any]]:
            return [e for e in list(server.events) if e["event"] == kind and e["job"] == m]

        wait_until(lambda: seen("grow_done"), 60, "m grown beside a onto N1")
        assert seen("start")[0]["nodes"] == [N2] and seen("grow_done")[0]["added"] == [N1]
        pid = job_of(server.status(), m)["pid"]
        on_n1 = set(descendants(pid))
        server.node_add([N3])
        go.touch()
        wait_until(lambda: seen("shrink_done"), 60, "m moved onto N3 and off N1")
        move, = seen("colocation_move")
        assert move["node"] == N1 and move["to"] == N3
        assert move["duty_sum"] == pytest.approx(1.2, abs=0.01)
        assert seen("grow_order")[-1]["added"] == [N3]
        separate, = seen("colocation_separate")
        assert separate["node"] == N1 and separate["moved_to"] == N3
        assert seen("shrink_order")[0]["wanted"] == [N1]
        assert seen("shrink_done")[0]["released"] == [N1]
        gone = on_n1 - set(descendants(pid))
        assert gone and not [p for p in gone if alive(p)]  # its places on N1 ended
        status = server.status()
        assert job_of(status, m)["nodes"] == [N2, N3]
        assert status["colocation"]["moves"] == 1 and status["colocation"]["separations"] == 1
        assert status["colocation"]["shared"] == []
        go.unlink()
        wait_until(lambda: job_of(server.status(), m)["state"] != "running", 30, "m's end")
        job = job_of(server.status(), m)
        out = json_lines(Path(job["stdout"]))[-1]
        assert job["state"] == "done" and out["places"] == 2 and out["correct"] is True
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(120)
def test_a_rigid_job_that_sharing_would_make_late_waits_for_free_cores(tmp_path, monkeypatch):
    """1 node, bound 2.0: r (``#CORES 2``, rigid, 20 s required, never measured) beside a
    (0.3) would run 1 + beta x 2.0 times its time alone, assumed 10 s (half of 20 s): past
    20 s for any beta above 0.5.  It waits for a's end, then runs alone."""
    monkeypatch.delenv("APGAS_PLACES", raising=False)
    server = _server(tmp_path, 1, 2.0, 0.0)
    try:
        beta = server.status()["colocation"]["beta"]
        assert not co.newcomer_fits(20.0, None, None, 2.0, beta)  # the path under test
        a = _idle(server, 3)
        r = server.submit(JobSpec(name="r", cores=2, colocate=True, required_time_s=20,
                                  command=(PY, "-c", "pass")))
        wait_until(lambda: job_of(server.status(), r)["state"]
                   not in ("pending", "waiting", "running"), 60, "r's end")
        events = list(server.events)
        guard = [e for e in events if e["event"] == "colocation_guard" and e["job"] == r]
        # logged only while a's cores had room: without the guard r would have joined a
        assert len(guard) == 1 and guard[0]["alone_s"] == 10.0
        assert guard[0]["factor"] == pytest.approx(1 + 2.0 * beta, abs=0.001)
        start = next(e for e in events if e["event"] == "start" and e["job"] == r)
        end_a = next(e for e in events if e["event"] == "end" and e["job"] == a)
        end_r = next(e for e in events if e["event"] == "end" and e["job"] == r)
        assert start["t"] >= end_a["t"] and start["cores"] == {N1: [0, 1]}
        assert end_r["state"] == "done" and end_r["t"] - start["t"] <= 20.0
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
