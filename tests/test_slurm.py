"""apgaspy under a real Slurm (Debian's slurm-wlm 22.05, 4 nodes n1..n4 on this machine,
``tests/cluster/slurm.py``): the launches inside an allocation, and grow and shrink onto
nodes of the allocation.

Every node of this test cluster is this machine, so where a place runs is read from the
``SLURMD_NODENAME`` that Slurm gives the processes of a job step on that node.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from conftest import BIN, PROGRAMS, ROOT, Result, alive, kill_tree

PY = sys.executable
MPIEXEC = str(BIN / "mpiexec")


def slurm_run(cluster, argv, timeout=90.0, stdin=None, **extra) -> Result:
    """Run a Slurm client command (``salloc ...``) to its end, killed after ``timeout`` s."""
    env = cluster.environ(PATH=f"{BIN}:/usr/bin:/bin", APGAS_START_TIMEOUT="30")
    env.pop("APGAS_PLACES", None)
    env.update(extra)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        cluster.run("scancel", "--partition", cluster.partition, check=False)
        pytest.fail(f"{argv} did not end within {timeout} s\n{out}\n{err}")
    return Result(proc.returncode, out, err)


def placed(result: Result) -> dict[int, list]:
    assert result.returncode == 0, result.stderr
    (obj,) = [o for o in result.json_lines() if "places" in o]
    return {int(k): v for k, v in obj["places"].items()}


def slurm_node(pid: int) -> str | None:
    """The Slurm node a process of this machine runs on (its SLURMD_NODENAME)."""
    with open(f"/proc/{pid}/environ", "rb") as fh:
        for item in fh.read().split(b"\0"):
            if item.startswith(b"SLURMD_NODENAME="):
                return item.split(b"=", 1)[1].decode()
    return None


def gone(pids, timeout=10.0):
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def batch_end(cluster, job_id: str, timeout: float = 90.0) -> tuple[str, str]:
    """Wait for the end of batch job ``job_id``; its final ``(JobState, ExitCode)``.

    Polls ``scontrol show job`` every 0.1 s (the record stays ``MinJobAge`` = 10 s after the
    end): ``sbatch --wait`` would tell the same (its exit status is the job's) but polls
    after 2 s and then every 8 s, so a job of 3 s cost 10 s.  Fails the test after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        out = cluster.run("scontrol", "-o", "show", "job", job_id, timeout=10).stdout
        fields = dict(w.split("=", 1) for w in out.split() if "=" in w)
        if fields["JobState"] not in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
            return fields["JobState"], fields["ExitCode"]
        if time.monotonic() > deadline:
            cluster.run("scancel", job_id, check=False)
            pytest.fail(f"batch job {job_id} did not end within {timeout} s: {out}")
        time.sleep(0.1)


@pytest.mark.timeout(240)
def test_launches_inside_an_allocation(slurm_cluster, tmp_path):
    """The embedded default (it used to hang: places were spawned with host 'localhost',
    which srun refuses), mpiexec, srun and a batch script: one place per node."""
    where = str(PROGRAMS / "where.py")
    cases = {
        "embedded": ["salloc", "-w", "n1,n2,n3", PY, where],
        "mpiexec": ["salloc", "-w", "n1,n2,n3", "--ntasks-per-node=1", MPIEXEC, "-n", "3", PY,
                    where],
        "srun": ["salloc", "-w", "n1,n2,n3", "srun", "--mpi=pmi2", PY, where],
    }
    for name, argv in cases.items():
        # every node idle again first: an allocation asked for while the last one's nodes
        # are still completing waits for one of slurmctld's later scheduling passes
        slurm_cluster.settle()
        res = slurm_run(slurm_cluster, argv)
        nodes = {p: w[3] for p, w in placed(res).items()}
        if name == "embedded":  # place 0 runs in salloc's shell, outside any job step
            assert nodes == {0: None, 1: "n2", 2: "n3"}, (name, nodes)
        else:
            assert nodes == {0: "n1", 1: "n2", 2: "n3"}, (name, nodes)
        assert gone([w[1] for w in placed(res).values()]), name

    out = tmp_path / "uts.out"
    slurm_cluster.settle()
    res = slurm_run(slurm_cluster, ["sbatch", "-N", "2", "--parsable", "-o", str(out),
                                    "--wrap", f"{PY} -m benchmarks.uts --depth 10 --json"])
    assert res.returncode == 0, res.stderr
    assert batch_end(slurm_cluster, res.stdout.strip().split(";")[0]) == ("COMPLETED", "0:0")
    batch = Result(0, out.read_text(), "")
    (uts,) = [o for o in batch.json_lines() if o.get("benchmark") == "uts"]
    assert uts["result"] == 4_130_071 and uts["correct"] and uts["places"] == 2


@pytest.mark.timeout(240)
@pytest.mark.parametrize("mode", ["embedded", "mpiexec"])
def test_grow_onto_a_node_of_the_allocation_and_shrink_back(slurm_cluster, mode):
    """Grow onto n2 (n3 for mpiexec), a refused grow onto n4 (outside the allocation:
    MPI_Comm_spawn would hang), shrink back; exact place lists, the place's process on its
    node, gone after the shrink."""
    if mode == "embedded":
        argv = ["salloc", "-w", "n1,n2", PY, str(PROGRAMS / "malleable.py")]
        target, extra = "n2", {"APGAS_PLACES": "1"}
    else:
        argv = ["salloc", "-w", "n1,n2,n3", "--ntasks-per-node=1", MPIEXEC, "-n", "2", PY,
                str(PROGRAMS / "malleable.py")]
        target, extra = "n3", {"SLURM_OVERLAP": "1"}
    # the orders run one at a time, each after the one before it is done: 0.5 s apart
    # is enough (2 s apart checked the same)
    schedule = f"after 0.5 s grow 1 on {target}; after 1 s grow 1 on n4; after 1.5 s shrink 1"
    env = slurm_cluster.environ(PATH=f"{BIN}:/usr/bin:/bin", APGAS_START_TIMEOUT="30",
                                APGAS_COMMUNICATOR="schedule", APGAS_SCHEDULE=schedule,
                                PYTHONUNBUFFERED="1", **extra)
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, bufsize=1)
    try:
        events = {}
        deadline = time.monotonic() + 60
        while "post_shrink" not in events:
            assert time.monotonic() < deadline, events
            line = proc.stdout.readline()
            assert line, f"the job ended early: {proc.stderr.read()}"
            if line.startswith("{"):
                ev = json.loads(line)
                events[ev["event"]] = ev
                if ev["event"] == "post_grow":
                    (pid,) = ev["added"].values()
                    assert slurm_node(pid) == target
        out, err = proc.communicate("stop\n", timeout=60)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.communicate()
    first = 1 if mode == "embedded" else 2
    grown = events["post_grow"]
    assert list(grown["added"]) == [str(first)]
    assert all(v == list(range(first + 1)) for v in grown["views"].values())
    assert events["post_shrink"]["removed"] == [first]
    assert gone([grown["added"][str(first)]])
    assert "cannot start a place on 'n4': it is not a node of Slurm job" in err, err
    assert proc.returncode == 0, err
    report = [json.loads(line) for line in out.splitlines() if '"report"' in line][0]
    assert report["views"] == {str(p): list(range(first)) for p in range(first)}


@pytest.mark.timeout(240)
def test_glb_is_exact_with_a_grow_and_a_shrink_inside_an_allocation(slurm_cluster):
    """UTS (GLB work stealing) grown onto n2 and shrunk back while it computes.  Depth 13
    (numpy kernels, several seconds on two places): at depth 12 a quiet machine was done
    before the shrink at 1.5 s."""
    res = slurm_run(slurm_cluster, ["salloc", "-w", "n1,n2", PY, "-m", "benchmarks.uts",
                                    "--depth", "13", "--json"],
                    APGAS_PLACES="1", APGAS_COMMUNICATOR="schedule",
                    APGAS_SCHEDULE="after 0.3 s grow 1 on n2; after 1.5 s shrink 1")
    assert res.returncode == 0, res.stderr
    (uts,) = [o for o in res.json_lines() if o.get("benchmark") == "uts"]
    assert uts["result"] == 264_459_392 and uts["correct"]
    assert uts["orders"] == [["grow", [1]], ["shrink", [1]]], uts["orders"]
