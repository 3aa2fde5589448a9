"""The scheduler's Slurm mode (``python -m scheduler serve --slurm``, ``scheduler/slurm_mode.py``)
on a real Slurm 22.05 (4 nodes n1..n4 on this machine: ``tests/cluster/slurm.py``).

A malleable UTS d=12 and a rigid N-Queens 13 (2 nodes) under the malleable algorithm with a
1 s cool-down: UTS starts on n1 and is grown onto n2-n4, shrunk by 2 when N-Queens arrives,
and (when it is still running after N-Queens) grown again.  After every order the Slurm jobs
``squeue`` shows hold exactly the scheduler's allotment: with ``expand``, the job's own Slurm
job; in fallback mode, the job's Slurm job plus one helper allocation per added node.  Exact
answers, and at the end no Slurm job and no process of the jobs is left.  The expand run
also ends a job that overruns its required time and cancels another: their Slurm jobs go.
Without Slurm: the options that need ``--slurm``, and the fallback launcher's refusals.

The scheduler runs as tests/slurm_serve.py starts it on the test cluster: with a name
service for the cluster's node names (n<k> → 127.0.1.<k>, as a real cluster's resolve) and
the process marker ``SCHEDULER_TEST_MARK``; the test looks for the marker in ``/proc`` at the
end and kills (by pid) only what carries it, or what it saw below the server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, wait_gone, wait_until
from slurm_serve import SlurmServe, marked_pids

from scheduler.server import job_of

PY = sys.executable
UTS_D12 = 66_106_929
NQUEENS_13 = 73_712


# ------------------------------------------------------------------------------ helpers


def slurm_node_of(pid: int) -> str | None:
    """The Slurm node a process runs on (its ``SLURMD_NODENAME``; None outside a step)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"SLURMD_NODENAME="):
                    return item.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return None


class Serve(SlurmServe):
    """``python -m scheduler serve --slurm *options`` (:class:`slurm_serve.SlurmServe`), with a
    1 s order cool-down."""

    def __init__(self, cluster: Any, tmp: Path, *options: str) -> None:
        super().__init__(cluster, tmp, "--slurm", "--cooldown", "1", *options)

    def slurm_ids(self) -> list[int]:
        """Every Slurm job the run made, as far as the event log says."""
        ids: set[int] = set()
        for kind in ("start", "grow_done", "grow_failed"):
            for ev in self.events(kind):
                if ev.get("slurm_job"):
                    ids.add(int(ev["slurm_job"]))
                ids.update(int(v) for v in (ev.get("slurm_helpers") or {}).values())
        return sorted(ids)

    def cleanup(self) -> None:
        """Last resort (``finally``): what a failed run left."""
        ids = [str(i) for i in self.slurm_ids()]
        if ids:
            self.cluster.run("scancel", *ids, check=False)
        self.kill_left()


def squeue(cluster: Any, slurm_job: int) -> tuple[int, list[str]]:
    """(node count, node names) ``squeue`` shows for a Slurm job; (0, []) when not listed."""
    out = cluster.run("squeue", "-h", "-j", str(slurm_job), "-o", "%D %N %T",
                      check=False).stdout.split()
    if not out or not out[0].isdigit():
        return 0, []
    names = cluster.run("scontrol", "show", "hostnames", out[1]).stdout.split() \
        if len(out) > 2 else []
    return int(out[0]), names


def job_json(path: str | Path) -> dict[str, Any]:
    """The JSON object a benchmark printed (``--json``)."""
    for line in Path(path).read_text(errors="replace").splitlines():
        if line.startswith("{") and '"benchmark"' in line:
            return json.loads(line)
    raise AssertionError(f"no benchmark JSON in {path}:\n{Path(path).read_text()[-2000:]}")


def check_holdings(serve: Serve, grow: str, ev: dict[str, Any], first: list[str]) -> None:
    """The Slurm jobs of a scheduler job after an order (event ``ev``) hold exactly its
    allotment, as ``squeue`` shows it now.  ``first``: the nodes it started with."""
    cluster = serve.cluster
    main = int(ev["slurm_job"])
    nodes = list(ev["nodes"])
    count, names = squeue(cluster, main)
    if grow == "expand":
        assert count == len(nodes) and sorted(names) == sorted(nodes), (ev, count, names)
        assert ev["slurm_nodes"] == len(nodes), ev
        return
    # Fallback: the job's Slurm job keeps its first nodes, a helper holds each added one.
    assert count == len(first) and sorted(names) == sorted(first), (ev, count, names)
    status = job_of(serve.ask(op="status"), ev["job"])
    helpers = {n: int(h) for n, h in status["slurm_helpers"].items()}
    assert sorted(helpers) == sorted(set(nodes) - set(first)), (ev, helpers)
    for node, helper in helpers.items():
        assert squeue(cluster, helper) == (1, [node]), (node, helper)


def all_nodes_grantable(cluster: Any) -> bool:
    """True when Slurm grants an allocation of every node at once now (then cancelled).

    Slurm 22.05 keeps charging the cores of nodes that a resized (``expand``) job held for a
    while after that job ended ("unable to update job's core use information due to job
    resizing" in slurmctld's log): ``sinfo`` shows such a node idle, yet an allocation of
    it stays PENDING with reason "Resources" for 10-20 s.  The ``fallback`` case starts just
    after the ``expand`` case, so its first grow came after its job ended (in about one run
    of four, with this session's code and with the code before it alike).
    """
    res = cluster.run("salloc", "--no-shell", f"--nodes={len(cluster.nodes)}", "--exclusive",
                      "--immediate=1", "--job-name=apgaspy-probe", check=False, timeout=30)
    match = re.search(r"Granted job allocation (\d+)", res.stderr + res.stdout)
    if match is None:
        return False
    cluster.run("scancel", match.group(1), check=False)
    wait_until(lambda: not cluster.run("squeue", "-h", "-j", match.group(1), "-o", "%i",
                                       check=False).stdout.strip(), 15, "the probe's end")
    return True


# ------------------------------------------------------------------------------ the test


@pytest.mark.timeout(180)
@pytest.mark.parametrize("grow", ["expand", "fallback"])
def test_slurm_mode_resizes_the_slurm_job_with_the_job(slurm_cluster, tmp_path, grow):
    cluster = slurm_cluster
    wait_until(lambda: all_nodes_grantable(cluster), 90, "Slurm granting every node")
    # decisions every 0.5 s (the grow, the shrink and the grow again each wait for one)
    serve = Serve(slurm_cluster, tmp_path, "--slurm-grow", grow, "--interval", "0.5")
    try:
        st = serve.ask(op="status")
        assert [n["name"] for n in st["nodes"]] == ["n1", "n2", "n3", "n4"]
        assert st["listen"] == "127.0.0.1"

        uts = serve.submit("uts12", [PY, "-m", "benchmarks.uts", "-d", "12", "--json"],
                           job_class="malleable", min_nodes=1, max_nodes=4)
        start = wait_until(lambda: serve.events("start", uts), 30, "UTS's start")[0]
        assert start["nodes"] == ["n1"] and start["slurm_grow"] == grow
        main = int(start["slurm_job"])
        assert squeue(cluster, main)[0] == 1

        # Grow onto the three idle nodes: nothing else can happen before N-Queens comes.
        grown = wait_until(lambda: serve.events("grow_done", uts), 90, "the first grow")[0]
        assert grown["added"] == ["n2", "n3", "n4"] and grown["slurm_job"] == main
        check_holdings(serve, grow, grown, ["n1"])
        # The grow was a signed order; the job's key went through sbatch's environment and
        # is on no command line of this machine, where every node runs.
        key = (serve.run_dir / f"job-{uts}.key").read_text().strip()
        ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True,
                            timeout=10, check=True).stdout
        assert len(key) == 64 and key not in ps
        assert [j["authenticated"] for j in serve.ask(op="status")["jobs"]
                if j["id"] == uts] == [True]
        if grow == "expand":
            # The helper allocation is gone; UTS's places run as steps on their nodes.
            assert {squeue(cluster, int(h))[0] for h in grown["slurm_helpers"].values()} == {0}
            where = {slurm_node_of(p) for p in marked_pids(serve.mark)}
            assert {"n1", "n2", "n3", "n4"} <= where, where
        else:
            # The fallback's launcher starts a command on a node as a step of its helper.
            launcher = serve.run_dir / "slurm-launch"
            env = dict(serve.env, SCHEDULER_SLURM_NODES=str(
                serve.run_dir / f"job-{uts}.slurm-nodes.json"))
            res = subprocess.run([str(launcher), "-x", "n3", "printenv", "SLURMD_NODENAME"],
                                 env=env, capture_output=True, text=True, timeout=30)
            assert res.returncode == 0 and res.stdout.split() == ["n3"], res

        nq = serve.submit("nq13", [PY, "-m", "benchmarks.nqueens", "-n", "13", "--json"],
                          job_class="rigid", nodes=2)
        shrunk = wait_until(lambda: serve.events("shrink_done", uts), 30, "the shrink")[0]
        assert sorted(shrunk["released"]) == ["n3", "n4"] and shrunk["nodes"] == ["n1", "n2"]
        check_holdings(serve, grow, shrunk, ["n1"])
        if grow == "fallback":  # the helpers of n3 and n4 are cancelled
            for node in ("n3", "n4"):
                helper = int(grown["slurm_helpers"][node])
                wait_until(lambda h=helper: squeue(cluster, h)[0] == 0, 10, f"{node} freed")
        nq_start = wait_until(lambda: serve.events("start", nq), 10, "N-Queens's start")[0]
        assert nq_start["nodes"] == ["n3", "n4"]
        assert squeue(cluster, int(nq_start["slurm_job"])) in ((2, ["n3", "n4"]), (2, []))

        def ended() -> bool:
            return all(j["state"] not in ("pending", "waiting", "running")
                       for j in serve.ask(op="status")["jobs"])

        wait_until(ended, 60, "both jobs")
        st = serve.ask(op="status")
        u, n = job_of(st, uts), job_of(st, nq)
        assert u["state"] == "done" and n["state"] == "done", st
        for later in serve.events("grow_done", uts)[1:]:  # grown again after N-Queens
            if grow == "expand":
                assert later["slurm_nodes"] == len(later["nodes"]), later
        ures, nres = job_json(u["stdout"]), job_json(n["stdout"])
        assert ures["result"] == UTS_D12 and ures["correct"] is True
        assert nres["result"] == NQUEENS_13 and nres["correct"] is True
        assert ures["orders"][:2] == [["grow", [1, 2, 3]], ["shrink", [2, 3]]], ures["orders"]
        assert (serve.run_dir / f"job-{uts}.nodes").read_text().split() == ["n1"]

        if grow == "expand":
            # A job that overruns its required time, and a cancelled one: their Slurm jobs
            # are cancelled and their processes end.
            over = serve.submit("over", ["sleep", "60"], nodes=1, required_time_s=2)
            gone = serve.submit("gone", ["sleep", "60"], nodes=1)
            s_gone = wait_until(lambda: serve.events("start", gone), 10, "the start")[0]
            wait_until(lambda: squeue(cluster, int(s_gone["slurm_job"]))[1], 10,
                       "the Slurm job running")
            serve.ask(op="cancel", job=gone)
            wait_until(ended, 30, "the overrun and the cancelled job")
            st = serve.ask(op="status")
            assert job_of(st, over)["state"] == "killed"
            assert job_of(st, gone)["state"] == "cancelled"
            for job in (over, gone):
                slurm_job = int(serve.events("start", job)[0]["slurm_job"])
                wait_until(lambda j=slurm_job: squeue(cluster, j)[0] == 0, 15,
                           f"Slurm job {slurm_job} gone")
        serve.close()
        assert serve.proc.returncode == 0, serve.err_path.read_text()
        wait_until(lambda: not cluster.run("squeue", "-h", "-o", "%i %j %T").stdout.strip(),
                   20, "no Slurm job left")
        assert wait_gone(sorted(serve.seen), 10) == [], "processes left below the server"
        wait_until(lambda: not marked_pids(serve.mark), 15, "no process of the run left")
        assert not serve.control.exists()
    finally:
        serve.close()
        serve.cleanup()


# ------------------------------------------------------------------------------ without Slurm


@pytest.mark.timeout(60)
def test_slurm_options_and_the_launcher_without_slurm(tmp_path):
    """Options that need --slurm are refused (exit 2); the fallback launcher parses ssh's
    options and refuses a host that no Slurm job of the job holds and that is not this
    machine (exit 255, as ssh for an unreachable host)."""
    for bad in (["--partition", "test"], ["--slurm-grow", "expand"],
                ["--slurm", "--hosts", "a,b"], ["--slurm-grow", "sideways"]):
        res = subprocess.run([PY, "-m", "scheduler", "serve", *bad], cwd=ROOT,
                             capture_output=True, text=True, timeout=30)
        assert res.returncode == 2 and "error:" in res.stderr, (bad, res.stderr)
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"n1": 7}))
    env = dict(os.environ, SCHEDULER_SLURM_NODES=str(nodes))
    res = subprocess.run([PY, "-m", "scheduler.slurm_helpers_cli", "launch", "-x", "-o",
                          "BatchMode=yes", "no-such-host.invalid", "true"], env=env,
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 255, res
    assert "'no-such-host.invalid' is neither a node" in res.stderr and "n1" in res.stderr
    res = subprocess.run([PY, "-m", "scheduler.slurm_helpers_cli", "launch", "-x", "localhost",
                          "echo", "here"], env=env, capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.split() == ["here"], res
