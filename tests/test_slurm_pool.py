"""The Slurm pool (``python -m scheduler serve --slurm-pool MIN:MAX``, ``scheduler/slurm_pool.py``,
``scheduler/slurm_pool_keeper.py``) on a real Slurm 22.05 shared with another user.

The scheduler holds each node through a placeholder Slurm job (``apgaspy-pool``) and runs
its jobs there as steps.  A second user, made here (``useradd``, removed at the end),
submits straight to Slurm with ``sbatch`` at the same time: from ``squeue``'s node lists,
no node is ever both a placeholder's and that user's, every node in the scheduler's pool is
one its placeholders hold, and held + pending never exceed MAX.  The pool grows for a job
that waits (one node taken by the other user, so a placeholder pends until that user's jobs
go), and gives each idle node back: its placeholder leaves ``squeue`` within the idle
setting + 2 s.  An external ``scancel`` of a placeholder takes its node out of the pool (its
job ends), the scheduler runs on and ``status`` says what happened; a scheduler killed and
started again on the same state directory adopts the placeholders still running and
cancels none.  A slurmctld stopped (SIGSTOP) while a job's step runs: the job ends exact,
``status`` shows the failures and the backoff, retries wait their backoff, and the pool
grows again once the controller runs.  Without Slurm: a bad ``--slurm-pool`` is one line
and exit status 2.

The scheduler runs as tests/slurm_serve.py starts it on the test cluster (:class:`PoolServe`:
the name service for the cluster's node names, the process marker).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, wait_until
from slurm_serve import PoolServe

from scheduler.server import job_of
from scheduler.slurm_pool import _left_s, pool_range, walltime

PY = sys.executable
#: How long a placeholder may take to run: Slurm's own start (about 2-3 s here), which in a
#: full suite on 2 busy cores, after the Slurm-mode tests, has taken over 20 s.  Waiting
#: longer costs nothing when Slurm is quick.
SLURM_START_S = 60


def queue(cluster: Any) -> list[tuple[int, str, str, str, list[str]]]:
    """``squeue``'s jobs: (id, user, name, state, nodes)."""
    out = cluster.run("squeue", "-h", "-o", "%i|%u|%j|%T|%N", check=False).stdout
    rows = []
    for line in out.splitlines():
        job, user, name, state, hosts = line.strip().split("|")
        nodes = cluster.run("scontrol", "show", "hostnames", hosts).stdout.split() \
            if hosts else []
        rows.append((int(job), user, name, state, nodes))
    return rows


def placeholders(cluster: Any) -> list[tuple[int, str, list[str]]]:
    """Our placeholders in squeue: (id, state, nodes)."""
    return [(j, s, n) for j, u, name, s, n in queue(cluster)
            if u == "root" and name == "apgaspy-pool"]


def check_apart(cluster: Any, serve: PoolServe, user: str, max_nodes: int) -> None:
    """No node is both a placeholder's and ``user``'s; the pool's nodes are placeholders'
    nodes; held + pending <= MAX."""
    rows = queue(cluster)
    ours = {n for j, u, name, s, ns in rows if name == "apgaspy-pool" for n in ns}
    theirs = {n for j, u, name, s, ns in rows if u == user for n in ns}
    assert not ours & theirs, rows
    assert len([r for r in rows if r[2] == "apgaspy-pool"]) <= max_nodes, rows
    serving = {n["name"] for n in serve.status()["nodes"] if n["state"] in ("free", "busy")}
    assert serving <= ours, (serving, rows)


@pytest.fixture
def other_user() -> Any:
    """A second user of the cluster (made here, removed after)."""
    name = f"appool{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True, timeout=30)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], check=False, timeout=30)


@pytest.mark.timeout(150)
def test_pool_grows_shares_the_partition_and_gives_idle_nodes_back(slurm_cluster, tmp_path,
                                                                 other_user):
    cluster = slurm_cluster
    serve = PoolServe(cluster, tmp_path, "1:3", "--pool-wait", "1", "--pool-idle", "2")
    try:
        # The other user takes two nodes straight from Slurm, while the pool's MIN
        # placeholder starts (4 nodes: room for all three).
        theirs = []
        for _ in range(2):
            res = subprocess.run(["runuser", "-u", other_user, "--", "sbatch", "--parsable",
                                  "-N", "1", "--exclusive", "--chdir=/tmp", "-o", "/dev/null",
                                  "--wrap", "sleep 60"], env=cluster.environ(),
                                 capture_output=True, text=True, timeout=30)
            assert res.returncode == 0, res.stderr
            theirs.append(res.stdout.strip().split(";")[0])
        wait_until(lambda: sum(1 for r in queue(cluster) if r[1] == other_user
                               and r[3] == "RUNNING") == 2, 20, "the other user's jobs")
        wait_until(lambda: serve.slurm()["held"] == 1, SLURM_START_S, "MIN placeholders running")
        # A 2-node job: the pool asks for one more node, the only one left.
        t_submit = time.monotonic()
        two = serve.submit("two", ["sh", "-c", "echo $SLURMD_NODENAME; sleep 2"], nodes=2)
        wait_until(lambda: serve.slurm()["held"] == 2, SLURM_START_S,
                   "a second placeholder running")
        t_held = time.monotonic()
        wait_until(lambda: job_of(serve.status(), two)["state"] == "running", 10, "its start")
        t_start = time.monotonic()
        check_apart(cluster, serve, other_user, 3)
        # A 3-node job: its third placeholder pends while the other user holds the rest.
        three = serve.submit("three", ["sleep", "1"], nodes=3)
        wait_until(lambda: serve.slurm()["pending"] == 1, 20, "a pending placeholder")
        assert [s for _, s, _ in placeholders(cluster)].count("PENDING") == 1
        check_apart(cluster, serve, other_user, 3)
        assert job_of(serve.status(), three)["state"] == "waiting"
        cluster.run("scancel", *theirs)  # the other user's jobs go: the pool gets the node
        wait_until(lambda: job_of(serve.status(), three)["state"] == "done", 40, "3-node job")
        check_apart(cluster, serve, other_user, 3)
        st = serve.status()
        assert job_of(st, two)["state"] == "done"
        start = [ev for ev in serve.events("start") if ev["job"] == two][0]
        out = (serve.status()["run_dir"] + f"/job-{two}.out")
        assert Path(out).read_text().split() == [start["nodes"][0]]  # a step on its node
        # Idle nodes go back, down to MIN; each placeholder leaves squeue within 2 + 2 s.
        t_idle = time.monotonic()
        wait_until(lambda: len(placeholders(cluster)) == 1, 2 + 2, "idle nodes given back")
        t_back = time.monotonic()
        assert serve.slurm()["held"] == 1 and serve.proc.poll() is None
        gone = [n["name"] for n in serve.status()["nodes"] if n["state"] == "gone"]
        assert len(gone) == 2, serve.status()["nodes"]
        # Smoke figures (printed with -s; docs/guides/scheduler.md quotes them as such).
        t = {k: [ev["t"] for ev in serve.events(k) if ev.get("job") in (None, two)]
             for k in ("queue", "pool_request", "pool_node_joined", "start")}
        asked = [x for x in t["pool_request"] if x >= t["queue"][0]][0]
        print(json.dumps({"submit_to_request_s": round(asked - t["queue"][0], 2),
                          "request_to_node_in_pool_s": round(
                              [x for x in t["pool_node_joined"] if x >= asked][0] - asked, 2),
                          "request_to_job_start_s": round(t["start"][0] - asked, 2),
                          "submit_to_running_seen_s": round(t_start - t_submit, 2),
                          "placeholder_seen_s": round(t_held - t_submit, 2),
                          "idle_setting_s": 2,
                          "idle_to_out_of_squeue_s": round(t_back - t_idle, 2)}))
        serve.close()
        assert serve.proc.returncode == 0, serve.err_path.read_text()
        wait_until(lambda: not placeholders(cluster), 10, "no placeholder after shutdown")
    finally:
        serve.close()
        cluster.run("scancel", "-u", other_user, check=False)


@pytest.mark.timeout(150)
def test_an_external_scancel_is_a_node_failure_and_a_restart_adopts(slurm_cluster, tmp_path):
    cluster = slurm_cluster
    serve = PoolServe(cluster, tmp_path, "2:2", "--pool-wait", "1", "--pool-idle", "60")
    mark = serve.mark
    try:
        wait_until(lambda: serve.slurm()["held"] == 2, SLURM_START_S, "MIN placeholders running")
        job = serve.submit("long", ["sleep", "60"], nodes=1)
        wait_until(lambda: job_of(serve.status(), job)["state"] == "running", 10, "its start")
        node = [ev for ev in serve.events("start") if ev["job"] == job][0]["nodes"][0]
        victim = [p["slurm_job"] for p in serve.slurm()["placeholders"] if p["node"] == node]
        cluster.run("scancel", str(victim[0]))
        # Its node leaves, its job ends, status says why; MIN brings a new placeholder.
        wait_until(lambda: job_of(serve.status(), job)["state"] not in ("running", "waiting"),
                   10, "the job's end")
        lost = wait_until(lambda: serve.slurm()["lost"], 10, "the lost placeholder")[0]
        assert lost["slurm_job"] == victim[0] and lost["node"] == node
        assert lost["state"] == "CANCELLED", lost
        text = subprocess.run([PY, "-m", "scheduler", "status", "--control",
                               str(serve.control)], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout
        assert f"latest {victim[0]} on {node}: CANCELLED" in text, text
        wait_until(lambda: serve.slurm()["held"] == 2, 20, "MIN again")
        after = serve.submit("after", ["true"], nodes=1)  # the scheduler runs on
        wait_until(lambda: job_of(serve.status(), after)["state"] == "done", 20, "a new job")
        # A crash, and a restart on the same state directory: the placeholders are adopted.
        before = sorted(j for j, s, _ in placeholders(cluster))
        serve.kill()
        assert sorted(j for j, s, _ in placeholders(cluster)) == before
        serve = PoolServe(cluster, tmp_path, "2:2", "--pool-wait", "1", "--pool-idle", "60",
                          mark=mark)
        wait_until(lambda: serve.slurm()["held"] == 2, 10, "the placeholders adopted")
        time.sleep(1)  # a few polls: nothing is cancelled, nothing new is asked for
        assert sorted(j for j, s, _ in placeholders(cluster)) == before
        assert sorted(p["slurm_job"] for p in serve.slurm()["placeholders"]) == before
        assert sorted(n["name"] for n in serve.status()["nodes"] if n["state"] == "free") == \
            sorted(n for _, _, ns in placeholders(cluster) for n in ns)
        serve.close()
        assert serve.proc.returncode == 0, serve.err_path.read_text()
        wait_until(lambda: not placeholders(cluster), 10, "no placeholder after shutdown")
    finally:
        serve.close()
        ids = [str(j) for j, _, _ in placeholders(cluster)]
        if ids:
            cluster.run("scancel", *ids, check=False)


@pytest.mark.timeout(120)
def test_a_stopped_slurm_controller_is_waited_out(slurm_cluster, tmp_path):
    """slurmctld stopped (SIGSTOP by its pid) while a job runs: the job goes on and ends
    exact, ``status`` shows the failures, the backoff and the last error while Slurm is
    down, each retry waits its backoff from the failure, and after SIGCONT the keeper polls
    again and grows the pool for a 2-node job.  The scheduler's Slurm commands read a copy
    of slurm.conf with ``MessageTimeout=2`` (the daemons keep 10): a command to a stopped
    controller fails after 2 s, so a stop of about 7 s shows two failures in a row that a
    real outage (or the 30 s command timeout of :class:`scheduler.slurm_pool.SlurmPool`)
    would, without waiting 10 s for each."""
    cluster = slurm_cluster
    conf = tmp_path / "slurm-client.conf"
    conf.write_text(re.sub(r"(?m)^MessageTimeout=\d+$", "MessageTimeout=2",
                           Path(cluster.env["SLURM_CONF"]).read_text()))
    # --pool-poll 1: backoffs of 2 s and 4 s after 1 and 2 failures
    serve = PoolServe(cluster, tmp_path, "1:2", "--pool-wait", "0.5", "--pool-idle", "60",
                      "--pool-poll", "1", env={"SLURM_CONF": str(conf)})
    ctld = cluster.pids["slurmctld"]
    stopped = False
    try:
        wait_until(lambda: serve.slurm()["held"] == 1, SLURM_START_S, "MIN placeholders running")
        uts = serve.submit("uts11", [PY, "-m", "benchmarks.uts", "-d", "11", "--json"], nodes=1)
        wait_until(lambda: job_of(serve.status(), uts)["state"] == "running", 10, "its start")
        # Its step runs (srun asks slurmctld for it: a job started while the controller
        # does not answer fails, docs/guides/scheduler.md).
        wait_until(lambda: any(s.endswith(".0") for s in cluster.run(
            "squeue", "-h", "-s", "-o", "%i").stdout.split()), 20, "its Slurm step")
        os.kill(ctld, signal.SIGSTOP)
        stopped = True
        assert job_of(serve.status(), uts)["state"] == "running"  # it runs on while stopped
        down = wait_until(lambda: (s := serve.slurm())["failures"] >= 1 and s, 10,
                          "a failed Slurm command")
        assert down["last_error"] and down["backoff_s"] == 2 and down["last_error_at"], down
        text = subprocess.run([PY, "-m", "scheduler", "status", "--control",
                               str(serve.control)], cwd=ROOT, capture_output=True, text=True,
                              timeout=30).stdout
        assert re.search(r"Slurm failing \(\d in a row, backoff [24] s\): \S", text), text
        wait_until(lambda: serve.slurm()["failures"] >= 2, 15, "a second failure")
        assert job_of(serve.status(), uts)["state"] in ("running", "done")
        os.kill(ctld, signal.SIGCONT)
        stopped = False
        wait_until(lambda: serve.slurm()["failures"] == 0, 20, "Slurm answering again")
        assert serve.slurm()["last_error"]  # kept, for the record
        errors = [e for e in serve.events("pool_slurm_error") if e["what"] == "squeue"]
        assert len(errors) >= 2, errors
        for a, b in zip(errors, errors[1:], strict=False):
            # the next squeue starts a backoff after the failure and hangs 2 s itself
            assert b["t"] - a["t"] >= a["backoff_s"] + 1, errors
        # The job went on and ended exact; the pool grows again through Slurm.
        wait_until(lambda: job_of(serve.status(), uts)["state"] not in ("waiting", "running"),
                   40, "the UTS job's end")
        job = job_of(serve.status(), uts)
        out = next(json.loads(line) for line in Path(job["stdout"]).read_text().splitlines()
                   if line.startswith("{") and '"benchmark"' in line)
        assert job["state"] == "done" and out["result"] == 16526523 and out["correct"], out
        two = serve.submit("two", ["true"], nodes=2)
        wait_until(lambda: job_of(serve.status(), two)["state"] == "done", 30, "a 2-node job")
        assert serve.slurm()["held"] == 2
        serve.close()
        assert serve.proc.returncode == 0, serve.err_path.read_text()
        wait_until(lambda: not placeholders(cluster), 10, "no placeholder after shutdown")
    finally:
        if stopped:
            os.kill(ctld, signal.SIGCONT)
        serve.close()
        ids = [str(j) for j, _, _ in placeholders(cluster)]
        if ids:
            cluster.run("scancel", *ids, check=False)


@pytest.mark.timeout(120)
def test_bad_pool_settings_are_one_line_and_exit_2():
    assert pool_range("0:4") == (0, 4) and walltime(3661.2) == "1:01:02"
    assert [_left_s(x) for x in ("1-02:03:04", "5:06", "59", "UNLIMITED")] == [
        93784, 306, 59, None]
    for bad in (["3:2"], ["two"], ["1:0"], ["1:2", "--pool-idle", "-1"],
                ["1:2", "--pool-wait", "soon"], ["1:2", "--nodes", "2"]):
        res = subprocess.run([PY, "-m", "scheduler", "serve", "--slurm-pool", *bad], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert res.returncode == 2, (bad, res)
        assert len(res.stderr.strip().splitlines()) == 1, (bad, res.stderr)
        assert res.stderr.startswith("error: "), (bad, res.stderr)
    res = subprocess.run([PY, "-m", "scheduler", "serve", "--pool-idle", "5"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and res.stderr == "error: --pool-idle needs --slurm-pool\n", res
