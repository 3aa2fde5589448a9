"""The real scheduler (``scheduler/server.py``) on real processes.

* end to end on logical nodes: a malleable UTS job is grown, shrunk for a rigid N-Queens
  job, grown again, and both answers are exact;
* the wire protocol's odd cases against a stand-in job (refused grow, a shrink reply naming a
  node the job does not hold, a refused shrink: the job is treated as rigid);
* the command line: ``serve`` in the background, ``submit``, ``status``, ``cancel``,
  ``shutdown``, and bad input answered with an error while the server runs on;
* a job that overruns its required time (and ignores SIGTERM) is ended, with every process;
* a run on the multi-host test cluster: the scheduler on h3, a job on h1 grown onto h2.

Every test watches the processes it started (by pid, through /proc) and kills what is left
in a ``finally``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    ROOT,
    alive,
    descendants,
    kill_tree,
    shut_down_server,
    wait_decisions,
    wait_gone,
    wait_until,
)

from scheduler import JobSpec
from scheduler.control_client import request
from scheduler.nodes import LocalNodes
from scheduler.server import Server, job_of

PY = sys.executable
UTS_D12 = 66_106_929
NQUEENS_13 = 73_712


# ------------------------------------------------------------------------------ helpers


class PidWatch:
    """Records every process below ``pid`` (sampled every 0.1 s on a thread)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.seen.update(descendants(self.pid))
            time.sleep(0.1)

    def stop(self) -> set[int]:
        self._stop.set()
        self._thread.join(timeout=5)
        self.seen.update(descendants(self.pid))
        return self.seen


def kill_all(pids: set[int] | list[int]) -> None:
    """SIGKILL each pid and its descendants (the test's own processes only)."""
    for pid in pids:
        if alive(pid):
            kill_tree(pid)


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def job_json(path: str | Path) -> dict[str, Any]:
    """The JSON object a benchmark printed (``--json``)."""
    for line in Path(path).read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("{") and '"benchmark"' in line:
            return json.loads(line)
    raise AssertionError(f"no benchmark JSON in {path}:\n{Path(path).read_text()[-2000:]}")


class Serve:
    """``python -m scheduler serve`` in the background, with its control socket and log."""

    def __init__(self, tmp: Path, *args: str, popen: Callable[..., Any] | None = None) -> None:
        self.control = tmp / "control.sock"
        self.log = tmp / "events.jsonl"
        self.run_dir = tmp / "run"
        self.err_path = tmp / "serve.err"
        argv = [PY, "-m", "scheduler", "serve", "--control", str(self.control),
                "--log", str(self.log), "--run-dir", str(self.run_dir), "--interval", "1",
                *args]
        env = dict(os.environ)
        env.pop("APGAS_PLACES", None)
        with open(self.err_path, "wb") as err:
            if popen is None:
                self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                             stdout=err, stderr=err, start_new_session=True)
            else:
                self.proc = popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                  stdout=err, stderr=err)
        self.watch = PidWatch(self.proc.pid)
        wait_until(lambda: self.control.exists() or self.proc.poll() is not None, 30,
                   "the control socket")
        assert self.proc.poll() is None, self.err_path.read_text()

    def ask(self, **message: Any) -> dict[str, Any]:
        return request(self.control, message)

    def events(self, kind: str | None = None, job: int | None = None) -> list[dict[str, Any]]:
        return [e for e in read_events(self.log)
                if (kind is None or e["event"] == kind) and (job is None or e["job"] == job)]

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([PY, "-m", "scheduler", *args, "--control", str(self.control)],
                              cwd=ROOT, input=stdin, capture_output=True, text=True, timeout=60)

    def close(self) -> set[int]:
        """Shut down (kill if it does not end); return every pid seen below the server."""
        shut_down_server(self.proc, self.control)
        seen = self.watch.stop()
        if self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait(timeout=10)
        return seen


def job_spec(name: str, argv: list[str], **kw: Any) -> dict[str, Any]:
    return {"name": name, "command": argv, "required_time_s": 120, **kw}


# ------------------------------------------------------------------------------ end to end


@pytest.mark.timeout(120)
def test_real_mode_grows_and_shrinks_a_malleable_job(tmp_path):
    """3 logical nodes: a malleable UTS d=12 (1-3) starts on 1 node and is grown onto the 2
    idle ones; a rigid N-Queens 13 (2 nodes) arrives, the server shrinks UTS by 2 to start
    it, then grows UTS again when it ends.  Exact answers, the orders in the job's output and
    in the event log, every node free at the end, no process left."""
    serve = Serve(tmp_path, "--nodes", "3", "--port", "0", "--cooldown", "0")
    try:
        uts = serve.ask(op="submit", job=job_spec(
            "uts12", [PY, "-m", "benchmarks.uts", "-d", "12", "--json"],
            job_class="malleable", min_nodes=1, max_nodes=3))["jobs"][0]
        wait_until(lambda: serve.events("grow_done", uts), 30, "the first grow")
        nq = serve.ask(op="submit", job=job_spec(
            "nq13", [PY, "-m", "benchmarks.nqueens", "-n", "13", "--json"],
            job_class="rigid", nodes=2))["jobs"][0]
        wait_until(lambda: all(j["state"] not in ("waiting", "running", "pending")
                               for j in serve.ask(op="status")["jobs"]), 60, "both jobs")
        st = serve.ask(op="status")
        u, n = job_of(st, uts), job_of(st, nq)
        assert u["state"] == "done" and n["state"] == "done", st
        assert all(node["job"] is None for node in st["nodes"]) and st["free"] == 3

        ures, nres = job_json(u["stdout"]), job_json(n["stdout"])
        assert ures["result"] == UTS_D12 and ures["correct"] is True
        assert nres["result"] == NQUEENS_13 and nres["correct"] is True
        kinds = [kind for kind, _ in ures["orders"]]
        assert kinds[:2] == ["grow", "shrink"], ures["orders"]
        assert ures["orders"][0] == ["grow", [1, 2]] and ures["orders"][1] == ["shrink", [1, 2]]
        assert u["shrinks"] >= 1 and u["grows"] >= 1
        assert [k for k, _ in u["orders"]][:2] == ["grow", "shrink"]  # as the server saw it

        # The event log: ready, grow onto the idle nodes, shrink by 2 when N-Queens arrives,
        # N-Queens on the released nodes, the nodes back in the pool at the end.
        assert serve.events("ready", uts)
        assert not serve.events("ready", nq)  # a rigid job's APGAS-Ready is ignored
        grow = serve.events("grow_done", uts)[0]
        assert grow["added"] == ["127.0.1.2", "127.0.1.3"]
        shrink = serve.events("shrink_done", uts)[0]
        assert sorted(shrink["released"]) == ["127.0.1.2", "127.0.1.3"]
        start_nq = serve.events("start", nq)[0]
        assert sorted(start_nq["nodes"]) == sorted(shrink["released"])
        assert start_nq["t"] >= shrink["t"]
        assert serve.events("queue", nq)[0]["t"] <= serve.events("shrink_order", uts)[0]["t"]
        assert any(e["fields"][0] == "shrinkTimeAPGAS" for e in serve.events("timing", uts))
        ends = {e["job"]: e for e in serve.events("end")}
        assert ends[uts]["state"] == ends[nq]["state"] == "done"
        env_lines = (serve.run_dir / f"job-{uts}.nodes").read_text().split()
        assert env_lines == ["127.0.1.1"]
    finally:
        seen = serve.close()
        kill_all(seen)
    assert serve.proc.returncode == 0, serve.err_path.read_text()
    assert len(seen) >= 3  # the jobs and their places were seen
    assert wait_gone(sorted(seen), 10) == [], "processes left"
    assert not serve.control.exists()


# ------------------------------------------------------------------------------ odd orders

FAKE_JOB = r'''
"""A stand-in job: speaks the protocol, replies to orders as FAKE_REPLIES says; ends after
FAKE_SECONDS, or once the file FAKE_END_FILE exists."""
import json, os, socket, sys, time
hosts = [h.strip() for h in open(os.environ["NODE_FILE"]) if h.strip()]
held = list(hosts)
addr, port = hosts[0], int(os.environ["SCHEDULER_PORT"])
sched = (os.environ["SCHEDULER_IP"], port)
replies = [r for r in os.environ.get("FAKE_REPLIES", "").split(";") if r]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((addr, port))
srv.listen(8)
srv.settimeout(0.05)

def notify(msg):
    with socket.create_connection(sched, timeout=5) as s:
        s.sendall(f"{msg}:{addr}\n".encode())

print(json.dumps({"env": {k: os.environ[k] for k in ("NODES", "JOBNAME", "ELASTIC")}}),
      flush=True)
notify("APGAS-Ready")
notify("hello there")
end = time.monotonic() + float(os.environ.get("FAKE_SECONDS", "5"))
end_file = os.environ.get("FAKE_END_FILE")
while time.monotonic() < end and not (end_file and os.path.exists(end_file)):
    try:
        conn, peer = srv.accept()
    except (socket.timeout, TimeoutError):
        continue
    with conn:
        raw = b""
        while not raw.endswith(b"\n"):
            chunk = conn.recv(1024)
            if not chunk:
                break
            raw += chunk
        line = raw.decode()
        reply = replies.pop(0) if replies else "ok"
        print(json.dumps({"order": line, "reply": reply, "peer": peer[0]}), flush=True)
        kind, n, *new = line.split()
        if reply.startswith("ERROR"):
            conn.sendall((reply + "\n").encode())
            continue
        if kind == "grow":
            held += new
        else:
            names = reply[6:].split(",") if reply.startswith("names:") else held[-int(n):]
            conn.sendall("".join(h + "\n" for h in names).encode())
            held = [h for h in held if h not in names]
        notify(f"{kind}TimeAPGAS;{n};1000")
notify("APGAS-Disabled")
'''


@pytest.mark.timeout(90)
def test_refusals_and_odd_replies_of_a_job(tmp_path):
    """A stand-in job on 3 logical nodes (in-process server): a refused grow gives the nodes
    back; a shrink reply naming a node the job does not hold frees only the node it holds
    (the other is logged); a refused shrink marks the job not reachable (rigid from then on,
    no node freed); the waiting rigid job starts when the stand-in ends."""
    fake = tmp_path / "fake_job.py"
    fake.write_text(FAKE_JOB)
    # decisions every 0.5 s; the stand-in runs until the test has seen its last checks (its
    # end file), not for a fixed 7 s: it is alive through the two periods checked below
    end = tmp_path / "end"
    server = Server(LocalNodes(3), _malleable(0.0), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0,
                    job_env={"FAKE_SECONDS": "60", "FAKE_END_FILE": str(end),
                             "FAKE_REPLIES": "ERROR no room;ok;names:127.0.1.9,127.0.1.3;"
                                             "ERROR busy"},
                    plain_lines=["fak?"])  # the stand-in speaks plain Java lines
    server.start()
    try:
        a = server.submit(JobSpec(name="fake", job_class="malleable", min_nodes=1, max_nodes=3,
                                  command=(PY, str(fake)), required_time_s=60))

        def ev(kind: str, job: int | None = None) -> list[dict[str, Any]]:
            return [e for e in list(server.events)
                    if e["event"] == kind and (job is None or e["job"] == job)]

        wait_until(lambda: ev("grow_done", a), 20, "a successful grow")
        failed = ev("grow_failed", a)[0]
        assert "no room" in failed["error"] and failed["returned"] == ["127.0.1.2", "127.0.1.3"]
        b = server.submit(JobSpec(name="rigid2", nodes=2, command=("sleep", "0.5"),
                                  required_time_s=30))
        wait_until(lambda: ev("shrink_failed", a), 20, "the refused shrink")
        unknown = ev("shrink_unknown_node", a)
        assert [e["node"] for e in unknown] == ["127.0.1.9"]
        assert ev("shrink_done", a)[0]["released"] == ["127.0.1.3"]
        st = server.status()
        assert job_of(st, a)["reachable"] is False and job_of(st, a)["nodes"] == [
            "127.0.1.1", "127.0.1.2"]
        assert job_of(st, b)["state"] == "waiting"
        wait_decisions(server, 2)  # two periods: a not-reachable job is never ordered again
        assert len(ev("shrink_order", a)) == 2 and len(ev("grow_order", a)) == 2
        assert job_of(server.status(), a)["state"] == "running"  # it was there to be ordered
        end.touch()
        wait_until(server.all_done, 30, "both jobs")
        assert ev("start", b)[0]["t"] >= ev("end", a)[0]["t"]
        assert ev("notify_undefined", a)[0]["line"] == "hello there:127.0.1.1"
        # the job's last line travels on its own connection: it may be read after its end
        wait_until(lambda: ev("disabled", a), 30, "the job's APGAS-Disabled")

        lines = [json.loads(x) for x in (server.run_dir / f"job-{a}.out").read_text().split(
            "\n") if x.startswith("{")]
        assert lines[0]["env"] == {"NODES": "1", "JOBNAME": str(a), "ELASTIC": "malleable"}
        orders = [x["order"] for x in lines[1:]]
        assert orders == ["grow 2 127.0.1.2 127.0.1.3 \n", "grow 2 127.0.1.2 127.0.1.3 \n",
                          "shrink 2\n", "shrink 1\n"]
        assert all(x["peer"] == "127.0.0.1" for x in lines[1:])  # from SCHEDULER_IP
        assert server.status()["free"] == 3
        assert server.result().jobs == 2
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


def _malleable(cooldown_s: float) -> Any:
    from scheduler import make

    return make("malleable", cooldown_s=cooldown_s)


# ------------------------------------------------------------------------------ overrun


@pytest.mark.timeout(60)
def test_a_job_that_overruns_is_ended_with_all_its_processes(tmp_path):
    """REQUIRED_TIME 1.5 s; the job ignores SIGTERM and leaves background children: it is
    SIGTERMed at its required time, SIGKILLed after the grace (1 s), and every process of it
    is gone; its nodes go back to the pool."""
    script = tmp_path / "stubborn.sh"
    script.write_text("#!/bin/bash\n#JOB_NAME stubborn\n#NODES 2\n#REQUIRED_TIME 1.5s\n"
                      "trap '' TERM\nsleep 300 & echo $!\nsleep 300 & echo $!\n"
                      f"{PY} -c 'import time; time.sleep(300)' & echo $!\nwait\n")
    server = Server(LocalNodes(2), _malleable(60.0), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=1.0, grace_s=1.0)
    server.start()
    pids: list[int] = []
    try:
        job = server.submit_script(script)
        out = server.run_dir / f"job-{job}.out"
        wait_until(lambda: out.exists() and len(out.read_text().split()) == 3, 10,
                   "the job's children")
        pids = [int(x) for x in out.read_text().split()]
        root = job_of(server.status(), job)["pid"]
        pids.append(root)
        t0 = time.monotonic()
        wait_until(server.all_done, 15, "the job's end")
        st = job_of(server.status(), job)
        assert st["state"] == "killed"
        assert 1.5 <= st["run_s"] < 6, st
        kinds = [e["event"] for e in server.events if e["job"] == job]
        assert kinds.index("overrun") < kinds.index("sigterm") < kinds.index("sigkill") \
            < kinds.index("end"), kinds
        assert set(pids) <= {p for e in server.events if e["event"] == "sigkill"
                             for p in e["pids"]}
        assert wait_gone(pids, 5) == [], "processes of the job left"
        assert time.monotonic() - t0 < 10
        assert server.status()["free"] == 2
    finally:
        server.shutdown()
        kill_all(pids)


# ------------------------------------------------------------------------------ command line


@pytest.mark.timeout(90)
def test_command_line_submit_status_cancel_shutdown(tmp_path):
    sleeper = tmp_path / "sleeper.sh"
    sleeper.write_text("#JOB_CLASS rigid\n#NODES 2\n#REQUIRED_TIME 60s\n"
                       "echo NODES=$NODES JOBNAME=$JOBNAME ELASTIC=$ELASTIC\n"
                       "cat \"$NODE_FILE\"\nsleep 60 & wait\n")
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/bash\n#NODES two\necho hi\n")
    huge = tmp_path / "huge.sh"
    huge.write_text("#NODES 5\necho too big\n")
    serve = Serve(tmp_path, "--nodes", "2", "--port", "0", "--algorithm", "easy")
    try:
        done = serve.cli("submit", str(sleeper))
        assert done.returncode == 0 and done.stdout.startswith("submitted job 1"), done
        wait_until(lambda: job_of(serve.ask(op="status"), 1)["state"] == "running", 10,
                   "job 1 running")
        out = serve.run_dir / "job-1.out"
        wait_until(lambda: out.exists() and "127.0.1.2" in out.read_text(), 10, "its output")
        assert out.read_text().split("\n")[:3] == ["NODES=2 JOBNAME=1 ELASTIC=rigid",
                                                   "127.0.1.1", "127.0.1.2"]

        st = serve.cli("status", "--json")
        assert st.returncode == 0, st.stderr
        data = json.loads(st.stdout)
        assert data["algorithm"] == "easy" and data["free"] == 0
        assert [n["job"] for n in data["nodes"]] == [1, 1]
        (job,) = data["jobs"]
        assert job["state"] == "running" and job["nodes"] == ["127.0.1.1", "127.0.1.2"]
        table = serve.cli("status")
        assert table.returncode == 0 and "127.0.1.1" in table.stdout and "sleeper" in table.stdout

        # Bad input: an error on stderr, exit 1, and the server runs on.
        for args, message in [
            (("cancel", "99"), "no job 99"),
            (("submit", str(bad)), "does not parse"),
            (("submit", str(huge)), "needs 5 nodes; the cluster has 2 nodes"),
            (("submit", str(tmp_path / "missing.sh")), "cannot read"),
        ]:
            res = serve.cli(*args)
            assert res.returncode == 1 and message in res.stderr, (args, res)
        res = serve.cli("cancel", "abc")
        assert res.returncode == 2 and "job id" in res.stderr
        res = serve.cli("submit", "-", stdin="#JOB_NAME inline\n#NODES 1\nsleep 30\n")
        assert res.returncode == 0 and "submitted job 2" in res.stdout, res
        assert job_of(serve.ask(op="status"), 2)["state"] == "waiting"
        assert serve.proc.poll() is None

        root = job_of(serve.ask(op="status"), 1)["pid"]
        children = descendants(root)
        assert children, "the sleeper's child"
        res = serve.cli("cancel", "1")
        assert res.returncode == 0 and "cancelled job 1 (was running)" in res.stdout
        assert wait_gone([root, *children], 10) == []
        wait_until(lambda: job_of(serve.ask(op="status"), 2)["state"] == "running", 10,
                   "job 2 on the freed nodes")
        res = serve.cli("cancel", "1")
        assert res.returncode == 1 and "has ended already (cancelled)" in res.stderr

        res = serve.cli("shutdown")
        assert res.returncode == 0 and "ended jobs [2]" in res.stdout, res
        serve.proc.wait(timeout=20)
        assert serve.proc.returncode == 0
        res = serve.cli("status")
        assert res.returncode == 1 and "no scheduler listens" in res.stderr
        kinds = {e["event"] for e in read_events(serve.log)}
        assert {"server_start", "start", "cancel", "end", "shutdown", "stopped"} <= kinds
    finally:
        seen = serve.close()
        kill_all(seen)
    assert wait_gone(sorted(seen), 10) == []


@pytest.mark.timeout(30)
def test_serve_refuses_a_taken_port_and_bad_options(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        res = subprocess.run([PY, "-m", "scheduler", "serve", "--nodes", "2", "--port",
                              str(port), "--control", str(tmp_path / "c.sock"), "--run-dir",
                              str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True,
                             timeout=30)
    assert res.returncode == 1 and f"127.0.0.1:{port}" in res.stderr, res.stderr
    for bad in (["--nodes", "0"], ["--nodes", "2", "--hosts", "a,b"], ["--port", "70000"],
                ["--algorithm", "nope"], ["--env", "NOEQUALS"]):
        res = subprocess.run([PY, "-m", "scheduler", "serve", *bad], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert res.returncode == 2 and "error:" in res.stderr, (bad, res.stderr)


# ------------------------------------------------------------------------------ several hosts


def _cluster_pids(cluster) -> dict[str, list[int]]:
    return {h.name: h.pids() for h in cluster.hosts}


@pytest.mark.timeout(150)
def test_on_the_multi_host_cluster(netns_cluster, tmp_path):
    """The scheduler on h3 (``--listen`` its address) with hosts h1, h2 reached by the
    cluster's ssh: a malleable UTS job starts on h1, is grown onto h2 (a signed order) and
    ends correctly; its key came from its owner-only file, and ``ps`` on h1 shows the ssh
    command line without it; nothing is left on any host."""
    cluster = netns_cluster
    h3 = cluster.host("h3")
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps([{
        "name": "uts12", "job_class": "malleable", "min_nodes": 1, "max_nodes": 2,
        "required_time_s": 100, "command": [PY, "-m", "benchmarks.uts", "-d", "12", "--json"],
    }]))
    serve = Serve(tmp_path, "--hosts", "h1,h2", "--ssh", cluster.ssh, "--listen", h3.address,
                  "--port", "8081", "--cooldown", "0",
                  "--env", f"HYDRA_LAUNCHER_EXEC={cluster.ssh}",
                  "--env", "APGAS_START_TIMEOUT=20", popen=h3.popen)
    try:
        res = serve.cli("submit", "--batch", str(batch))
        assert res.returncode == 0, res.stderr
        wait_until(lambda: serve.events("ready", 1) or serve.events("end"), 60, "ready")
        key = (serve.run_dir / "job-1.key").read_text().strip()
        ps = cluster.host("h1").run(["ps", "-ww", "-eo", "args"], timeout=10).stdout
        assert "SCHEDULER_KEY_FILE=" in ps and len(key) == 64 and key not in ps
        wait_until(lambda: serve.events("end"), 90, "the job's end")
        st = serve.ask(op="status")
        job = job_of(st, 1)
        assert job["authenticated"]
        assert job["state"] == "done", (job, Path(job["stdout"]).read_text()[-3000:])
        out = job_json(job["stdout"])
        assert out["result"] == UTS_D12 and out["correct"] is True
        assert out["places"] == 1 and out["places_at_end"] == 2
        assert out["orders"] == [["grow", [1]]]
        assert serve.events("start", 1)[0]["nodes"] == ["h1"]
        assert serve.events("ready", 1)
        assert serve.events("grow_done", 1)[0]["added"] == ["h2"]
        assert st["listen"] == h3.address and st["free"] == 2
    finally:
        serve.close()
        deadline = time.monotonic() + 15
        while any(_cluster_pids(cluster).values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _cluster_pids(cluster)
        for pids in left.values():
            kill_all(pids)
    assert serve.proc.returncode == 0, serve.err_path.read_text()
    assert not any(left.values()), f"processes left on the hosts: {left}"


@pytest.mark.timeout(60)
def test_the_records_of_a_real_run_carry_priority_and_required_time(tmp_path):
    """The records the server hands to the metrics (``Server.records``) keep each job's
    priority and required time: the priority-weighted metrics of a real run weigh by them."""
    from scheduler import make
    from scheduler.metrics import priority_metrics

    server = Server(LocalNodes(2), make("elastic-priority"), port=0, run_dir=tmp_path / "run",
                    interval_s=0.5, grace_s=1.0)
    server.start()
    try:
        for name, priority in (("low", 1), ("high", 5)):
            server.submit(JobSpec(name=name, nodes=2, command=("sleep", "0.5"),
                                  required_time_s=40, priority=priority))
        wait_until(server.all_done, 30, "both jobs")
        records = sorted(server.records(), key=lambda r: r.name)
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
    assert [(r.name, r.priority, r.required_s) for r in records] == [
        ("high", 5, 40), ("low", 1, 40)]
    waits = {r.name: r.start_s - r.submit_s for r in records}
    assert priority_metrics(records, 2)["weighted_mean_response_s"] == pytest.approx(
        (waits["low"] + 5 * waits["high"]) / 6)
