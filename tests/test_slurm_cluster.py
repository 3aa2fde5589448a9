"""Self-checks of the local Slurm test cluster (``cluster.slurm``).

They need root and the Debian Slurm, munge and MariaDB packages, and skip without them.  One
cluster (4 nodes, accounting) serves the session; the stop checks start clusters of their own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster import slurm

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent  # the environment the tests run in
MPIEXEC = str(VENV_BIN / "mpiexec")
PYTHON = str(VENV_BIN / "python")
Cluster = slurm.SlurmCluster
GRANTED = re.compile(r"Granted job allocation (\d+)")

# One write per rank, so that Hydra's forwarding of several ranks' output cannot interleave.
MPI_HELLO = """\
import json, os
from mpi4py import MPI
c = MPI.COMM_WORLD
line = {"rank": c.rank, "size": c.size, "node": os.environ.get("SLURMD_NODENAME"),
        "job": os.environ.get("SLURM_JOB_ID"), "sum": c.allreduce(c.rank + 1)}
os.write(1, (json.dumps(line) + "\\n").encode())
"""

MPI_SPAWN = """\
import json, os, sys
from mpi4py import MPI
parent = MPI.Comm.Get_parent()
role = "parent" if parent == MPI.COMM_NULL else "child"
if role == "parent":
    info = MPI.Info.Create()
    info.Set("host", sys.argv[1])
    inter = MPI.COMM_SELF.Spawn(sys.executable, [sys.argv[0]], maxprocs=1, info=info)
else:
    inter = parent
line = {"role": role, "node": os.environ.get("SLURMD_NODENAME"),
        "step": os.environ.get("SLURM_STEP_ID")}
os.write(1, (json.dumps(line) + "\\n").encode())
inter.Disconnect()
"""


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def allocate(cluster: Cluster, *args: str) -> int:
    """``salloc --no-shell ARGS``; the new job's id."""
    res = cluster.run("salloc", "--no-shell", *args, timeout=30)
    match = GRANTED.search(res.stderr)
    assert match, res.stderr
    return int(match.group(1))


def job_nodes(cluster: Cluster, job: int) -> tuple[int, str]:
    """(node count, node list) of a pending or running job, from squeue."""
    out = cluster.run("squeue", "-h", "-j", str(job), "-o", "%D %N").stdout.split()
    return int(out[0]), out[1] if len(out) > 1 else ""


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def marked(workdir: Path) -> list[int]:
    """Pids of processes that carry the cluster's environment marker."""
    return slurm._marked_pids(workdir)


@pytest.mark.timeout(120)
def test_unavailable_says_none_here_or_why() -> None:
    reason = slurm.unavailable()
    assert reason is None or isinstance(reason, str) and reason


@pytest.mark.timeout(120)
def test_sinfo_lists_four_idle_nodes(slurm_cluster: Cluster) -> None:  # noqa: F811
    out = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %t").stdout
    assert sorted(out.split("\n")[:-1]) == [f"n{i} idle" for i in range(1, 5)]
    assert slurm_cluster.env["SLURM_CONF"] == str(slurm_cluster.workdir / "slurm.conf")
    assert 0 < slurm_cluster.setup_seconds < 60
    print(f"set-up took {slurm_cluster.setup_seconds:.2f} s")


@pytest.mark.timeout(120)
def test_srun_runs_on_four_distinct_nodes(slurm_cluster: Cluster) -> None:  # noqa: F811
    out = slurm_cluster.run("srun", "-N4", "-l", "printenv", "SLURMD_NODENAME").stdout
    names = sorted(line.split(":", 1)[1].strip() for line in out.splitlines())
    assert names == ["n1", "n2", "n3", "n4"]


@pytest.mark.timeout(120)
def test_accounting_knows_the_cluster(slurm_cluster: Cluster) -> None:  # noqa: F811
    out = slurm_cluster.run("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster").stdout
    assert out.split() == ["apgaspy"]


@pytest.mark.timeout(120)
def test_mpiexec_inside_salloc_uses_the_allocation(slurm_cluster: Cluster) -> None:  # noqa: F811
    # Hydra reads the allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE) and starts its
    # proxies with srun; nothing else is needed in the environment.  Nodes are whole (2 CPUs
    # each): without --ntasks-per-node=1 (or mpiexec -ppn 1) both ranks would go to n1.
    res = slurm_cluster.run("salloc", "-N", "2", "--ntasks-per-node=1", MPIEXEC, "-n", "2",
                            PYTHON, "-c", MPI_HELLO, timeout=90, check=False)
    assert res.returncode == 0, res.stderr
    lines = sorted(json_lines(res.stdout), key=lambda d: d["rank"])
    assert [d["rank"] for d in lines] == [0, 1]
    assert {d["size"] for d in lines} == {2} and {d["sum"] for d in lines} == {3}
    assert sorted(d["node"] for d in lines) == ["n1", "n2"]
    assert len({d["job"] for d in lines}) == 1


@pytest.mark.timeout(120)
def test_comm_spawn_inside_salloc_reaches_another_node(
        slurm_cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    # A child spawned on a node without a Hydra proxy gets a new srun step there; this works
    # without SLURM_OVERLAP.
    script = tmp_path / "spawn.py"
    script.write_text(MPI_SPAWN)
    res = slurm_cluster.run("salloc", "-N", "2", MPIEXEC, "-n", "1", PYTHON, str(script), "n2",
                            timeout=90, check=False)
    assert res.returncode == 0, res.stderr
    lines = {d["role"]: d for d in json_lines(res.stdout)}
    assert lines["parent"]["node"] == "n1" and lines["child"]["node"] == "n2"
    assert lines["parent"]["step"] != lines["child"]["step"]


@pytest.mark.timeout(120)
def test_running_job_shrinks_and_grows(
        slurm_cluster: Cluster, tmp_path: Path) -> None:  # noqa: F811
    def scontrol(*args: str) -> None:
        # scontrol may write slurm_job_<id>_resize.{sh,csh} into its cwd: keep them out.
        subprocess.run(["scontrol", *args], env=slurm_cluster.environ(), cwd=tmp_path,
                       check=True, capture_output=True, text=True, timeout=30)

    job = allocate(slurm_cluster, "-N", "2")
    try:
        assert job_nodes(slurm_cluster, job)[0] == 2
        # Shrink: give the last node back.
        scontrol("update", f"JobId={job}", "NumNodes=1")
        count, kept = job_nodes(slurm_cluster, job)
        assert count == 1
        # Grow: a helper job that depends on expand:<job> takes a node; NumNodes=0 on the
        # helper hands its nodes to the job at once (22.05); NumNodes=ALL on the job is the
        # documented last step and changes nothing more.
        helper = allocate(slurm_cluster, "-N", "1", f"--dependency=expand:{job}")
        helper_count, helper_nodes = job_nodes(slurm_cluster, helper)
        assert helper_count == 1 and helper_nodes != kept
        scontrol("update", f"JobId={helper}", "NumNodes=0")
        assert job_nodes(slurm_cluster, job)[0] == 2
        scontrol("update", f"JobId={job}", "NumNodes=ALL")
        count, nodes = job_nodes(slurm_cluster, job)
        assert count == 2
        # A step on the node the job gave back and got again fails ("Job credential
        # revoked") while its credential is from the same second as the release: retry.
        deadline = time.monotonic() + 15
        while True:
            res = slurm_cluster.run("srun", f"--jobid={job}", "-N2", "-l", "printenv",
                                    "SLURMD_NODENAME", check=False)
            if res.returncode == 0 or time.monotonic() > deadline:
                break
            assert "credential revoked" in res.stderr, res.stderr
            time.sleep(0.5)  # a retry: the refusal has no event to wait for
        assert res.returncode == 0, res.stderr
        out = res.stdout
        names = sorted(line.split(":", 1)[1].strip() for line in out.splitlines())
        assert names == sorted([kept, helper_nodes])
        assert list(tmp_path.iterdir()) == []
    finally:
        slurm_cluster.run("scancel", str(job), check=False)


@pytest.mark.timeout(120)
def test_stop_leaves_no_process() -> None:
    reason = slurm.unavailable()
    if reason is not None:
        pytest.skip(reason)
    cluster = slurm.start_slurm(nodes=2)
    with cluster:
        # A running batch step and an allocation, which stop() must cancel.
        script = cluster.workdir / "sleep.sh"
        script.write_text("#!/bin/sh\nsleep 300\n")
        cluster.run("sbatch", "-N1", "-o", str(cluster.workdir / "sleep.out"), str(script))
        allocate(cluster, "-N", "1")
        deadline = time.monotonic() + 30
        while "R" not in cluster.run("squeue", "-h", "-o", "%t").stdout.split():
            assert time.monotonic() < deadline, "batch job did not start"
            time.sleep(0.1)
        pids = [*cluster.pids.values(), *marked(cluster.workdir)]
        assert len(cluster.pids) == 2 + 2 + 1 + 1  # slurmd x2, slurmctld, dbd, mariadbd, munged
        assert all(running(p) for p in cluster.pids.values())
    assert [p for p in pids if running(p)] == []
    assert marked(cluster.workdir) == []
    assert not cluster.workdir.exists()
    cluster.stop()  # idempotent


# Run by the stale-run check: a subreaper (so that the daemons it adopts are reaped, not left
# as zombies) whose child starts a cluster and is then killed.
STALE_OWNER = """\
import ctypes, json, os, sys, time
sys.path.insert(0, sys.argv[1])
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
if os.fork() == 0:
    from cluster.slurm import start_slurm
    c = start_slurm(nodes=1, accounting=False)
    print(json.dumps([os.getpid(), str(c.workdir), list(c.pids.values())]), flush=True)
    time.sleep(600)  # the cluster's owner runs on until the test kills it
    os._exit(0)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""


@pytest.mark.timeout(120)
def test_remove_stale_kills_the_daemons_of_a_killed_run() -> None:
    reason = slurm.unavailable()
    if reason is not None:
        pytest.skip(reason)
    reaper = subprocess.Popen([sys.executable, "-c", STALE_OWNER, str(ROOT / "tests")],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        owner, workdir, pids = json.loads(reaper.stdout.readline())  # type: ignore[union-attr]
        os.kill(owner, signal.SIGKILL)  # the run dies without stopping its cluster
        deadline = time.monotonic() + 10
        while running(owner) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert pids and all(running(p) for p in pids)
        killed = slurm.remove_stale()
        assert set(pids) <= set(killed)
        assert [p for p in pids if running(p)] == []
        assert marked(Path(workdir)) == []
        assert not Path(workdir).exists()
        reaper.wait(30)  # it ends once it has reaped every daemon
    finally:
        if reaper.poll() is None:
            reaper.kill()
        reaper.wait()
