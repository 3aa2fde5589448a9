"""Malleability on several hosts and under Slurm: start-up, grow and shrink times.

    python -m benchmarks.cluster [--repeats 3] [--no-slurm] [--no-hosts]

Needs root and the packages of the test clusters (``openssh-server``, ``slurm-wlm``,
``munge``; see ``tests/cluster/``), which it starts and stops itself:

* **hosts**: 4 network-namespace hosts with their own address, hostname and sshd, reached
  by real ssh.  The malleable job (``benchmarks/_malleable_job.py``) starts on h1, the
  scheduler runs on h4 (orders and notifications over TCP between the hosts); grows add
  remote hosts h2 (1) and h2, h3 (2); shrinks release them.  Also timed: start-up of a job
  whose places span h1-h3, embedded (``NODE_FILE``) and under ``mpiexec``.
* **slurm**: a local Slurm 22.05 with 4 nodes (no accounting); the job runs inside
  ``salloc -w n1,n2,n3`` with one place; grows add nodes n2 (1) and n2, n3 (2) by
  ``srun`` steps, shrinks release them.

Each figure is the median of ``--repeats`` runs, as in ``benchmarks/malleability.py``, whose
one-host figures are the comparison (same job, same handler, same orders).  Results:
``benchmarks/results/cluster.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from communicators.testing import SchedulerEndpoint

from ._results import write_result
from .malleability import measure_orders, summarize
from .references import pick

TESTS = Path(__file__).resolve().parent.parent / "tests"
SIZES = (1, 2)
PORT = 8081


def _cluster_modules() -> tuple[Any, Any]:
    sys.path.insert(0, str(TESTS))
    from cluster import netns, slurm

    return netns, slurm


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("APGAS_PLACES", "UCX_", "SLURM_", "HYDRA_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _job(argv_env: tuple[list[str], dict[str, str]], popen: Any) -> subprocess.Popen[str]:
    argv, env = argv_env
    return popen(argv, env=env, cwd=str(TESTS.parent), stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, text=True)


def _hosts(netns: Any, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with netns.start_cluster(4, prefix="apgb") as cluster:
        out["setup_s"] = cluster.setup_seconds
        h1, h4 = cluster.host("h1"), cluster.host("h4")
        tmp = Path(cluster.tmpdir)
        (tmp / "n1").write_text("h1\n")
        (tmp / "n3").write_text("h1\nh2\nh3\n")
        job = [sys.executable, "-m", "benchmarks._malleable_job"]
        runs, starts, mpi_starts = [], [], []
        for _ in range(repeats):
            sched = h4.call(SchedulerEndpoint, PORT, h4.address)
            try:
                base = _env(**sched.env(), HYDRA_LAUNCHER_EXEC=cluster.ssh)
                fresh = iter(["h2", "h2", "h3"])
                runs.append(measure_orders(
                    lambda b=base: _job((job, {**b, "NODE_FILE": str(tmp / "n1")}), h1.popen),
                    sched, (h1.address, PORT), lambda n, f=fresh: [next(f) for _ in range(n)],
                    SIZES, send=lambda j, line, s=sched: h4.call(s.order, j, line, 60)))
                starts.append(measure_orders(
                    lambda b=base: _job((job, {**b, "NODE_FILE": str(tmp / "n3")}), h1.popen),
                    sched, (h1.address, PORT), lambda n: [], ())["ready_s"])
                mpi = [str(Path(sys.executable).parent / "mpiexec"), "-launcher-exec",
                       cluster.ssh, "-hosts", "h1,h2,h3", "-n", "3", *job]
                mpi_starts.append(measure_orders(
                    lambda b=base, m=mpi: _job((m, {**{k: v for k, v in b.items()
                                                       if k != "HYDRA_LAUNCHER_EXEC"},
                                                    "NODE_FILE": str(tmp / "n3")}), h1.popen),
                    sched, (h1.address, PORT), lambda n: [], ())["ready_s"])
            finally:
                sched.close()
        print("hosts (job on h1, scheduler on h4, grow onto h2, h3):")
        out["median"] = summarize(runs, SIZES)
        out["median"]["ready_3_hosts_embedded_s"] = statistics.median(starts)
        out["median"]["ready_3_hosts_mpiexec_s"] = statistics.median(mpi_starts)
        print(f"ready, 3 hosts: embedded {statistics.median(starts):.3f} s, "
              f"mpiexec {statistics.median(mpi_starts):.3f} s")
        out["runs"] = runs
    return out


def _slurm(slurm: Any, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, slurm.start_slurm(accounting=False) as cluster:
        out["setup_s"] = cluster.setup_seconds
        node_file = Path(tmp) / "nodes"
        node_file.write_text("127.0.1.1\n")
        runs = []
        for _ in range(repeats):
            sched = SchedulerEndpoint()
            try:
                env = cluster.environ(**_env(**sched.env(), NODE_FILE=str(node_file),
                                             APGAS_PLACES="1"))
                argv = ["salloc", "-w", "n1,n2,n3", sys.executable, "-m",
                        "benchmarks._malleable_job"]
                fresh = iter(["n2", "n2", "n3"])
                runs.append(measure_orders(
                    lambda e=env, a=argv: _job((a, e), subprocess.Popen), sched,
                    ("127.0.1.1", sched.port), lambda n, f=fresh: [next(f) for _ in range(n)],
                    SIZES))
            finally:
                sched.close()
            time.sleep(1.0)  # Slurm frees the nodes of the ended allocation
        print("slurm (salloc -w n1,n2,n3, one place, grow onto n2, n3):")
        out["median"] = summarize(runs, SIZES)
        out["runs"] = runs
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the measurements, print tables, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs to take the median of")
    parser.add_argument("--no-hosts", action="store_true", help="skip the multi-host cluster")
    parser.add_argument("--no-slurm", action="store_true", help="skip Slurm")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    netns, slurm = _cluster_modules()
    result: dict[str, Any] = {"params": vars(args),
                              **pick("java_apgas_ready", "java_apgas_grow", "java_apgas_shrink")}
    if not args.no_hosts:
        reason = netns.unavailable()
        if reason:
            parser.error(f"no multi-host cluster here: {reason} (use --no-hosts)")
        result["hosts"] = _hosts(netns, args.repeats)
    if not args.no_slurm:
        reason = slurm.unavailable()
        if reason:
            parser.error(f"no Slurm here: {reason} (use --no-slurm)")
        result["slurm"] = _slurm(slurm, args.repeats)
    if not args.no_write:
        print(f"wrote {write_result('cluster', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
