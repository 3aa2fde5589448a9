"""What the scheduler's journal costs, and how fast a restart resumes from it.

::

    python -m benchmarks.scheduler_journal [--jobs 1000] [--nodes 4] [--rounds 2]
                                           [--out benchmarks/results]

Each round runs, in a fresh process each and alternating, the real scheduler
(:class:`scheduler.server.Server`, EASY, logical nodes) *with* a journal (a state directory)
and *without* one, on ``--jobs`` one-node jobs ``true`` submitted at once; it checks that every
job ended ``done`` (and, with the journal, that the journal says so for every job), and
records the throughput (jobs/s from the first submission to the last end), the scheduler's
own CPU time (user + system of its process, the jobs' excluded) and the journal's size.

Then recovery: a journal holding ``--jobs`` waiting jobs (submitted to a server that never
started, then detached) is opened by a new server, whose :meth:`~scheduler.server.Server.start`
is timed (the ``recovered`` event's own figure too); and the same for the journal of the
finished run.

The JSON goes to ``<out>/scheduler_journal.json`` with the machine it ran on.  Figures taken
on a loaded 2-core machine are noisy: compare the two variants as the ratio within a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "one_run", "recovery_time"]


def _server(run_dir: Path, state_dir: Path | None, nodes: int) -> Any:
    from scheduler.algorithms import make
    from scheduler.nodes import LocalNodes
    from scheduler.server import Server

    return Server(LocalNodes(nodes), make("easy"), port=0, run_dir=run_dir,
                  state_dir=state_dir, interval_s=1.0, grace_s=1.0)


def one_run(jobs: int, nodes: int, journal: bool) -> dict[str, Any]:
    """One scheduler run of ``jobs`` ``true`` jobs on ``nodes`` logical nodes, with or
    without a journal; returns the figures (module docstring).

    Raises:
        AssertionError: a job did not end ``done``, or the journal disagrees.
    """
    from scheduler.jobs import BatchEntry, JobSpec
    from scheduler.journal import Journal

    with tempfile.TemporaryDirectory(prefix="apgaspy-journal-bench-") as tmp:
        run_dir = Path(tmp) / "run"
        state_dir = Path(tmp) / "state" if journal else None
        server = _server(run_dir, state_dir, nodes)
        server.start()
        cpu0 = os.times()
        t0 = time.perf_counter()
        spec = JobSpec(name="t", nodes=1, required_time_s=60, command=("true",))
        ids, refused = server.submit_batch([BatchEntry(spec, 0.0)] * jobs)
        submitted = time.perf_counter() - t0
        assert len(ids) == jobs and not refused
        while not server.all_done():
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        cpu1 = os.times()
        states = [j["state"] for j in server.status()["jobs"]]
        server.shutdown()
        assert states == ["done"] * jobs, f"not all done: {sorted(set(states))}"
        out: dict[str, Any] = {
            "journal": journal, "jobs": jobs, "nodes": nodes,
            "seconds": round(wall, 3), "submit_seconds": round(submitted, 3),
            "jobs_per_s": round(jobs / wall, 2),
            "scheduler_cpu_s": round((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
                                     3),
        }
        if state_dir is not None:
            j = Journal(state_dir, readonly=True)
            rows = j.rows()
            j.close()
            assert [r.state for r in rows] == ["done"] * jobs
            out["journal_bytes"] = sum(p.stat().st_size for p in state_dir.iterdir()
                                       if p.name.startswith("journal"))
            start = time.perf_counter()
            again = _server(run_dir, state_dir, nodes)
            again.start()
            out["recovery_s_finished"] = round(time.perf_counter() - start, 4)
            again.shutdown()
        return out


def recovery_time(jobs: int, nodes: int) -> dict[str, Any]:
    """Seconds for a new server's ``start`` on a journal of ``jobs`` waiting jobs."""
    from scheduler.jobs import JobSpec

    with tempfile.TemporaryDirectory(prefix="apgaspy-journal-bench-") as tmp:
        run_dir, state_dir = Path(tmp) / "run", Path(tmp) / "state"
        first = _server(run_dir, state_dir, nodes)
        spec = JobSpec(name="w", nodes=1, required_time_s=60, command=("true",))
        for _ in range(jobs):
            first.submit(spec)
        first.detach()  # as after a crash: the jobs stay journaled as waiting
        t0 = time.perf_counter()
        server = _server(run_dir, state_dir, nodes)
        server.start()
        seconds = time.perf_counter() - t0
        recovered = next(e for e in server.events if e["event"] == "recovered")
        queued = sum(1 for j in server.status()["jobs"] if j["state"] in ("waiting",
                                                                          "running", "done"))
        server.shutdown()
        assert recovered["queued"] == jobs and queued == jobs
        return {"jobs": jobs, "start_s": round(seconds, 4),
                "recover_s": recovered["seconds"]}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (module docstring); returns 0."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scheduler_journal",
        description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--one", choices=("journal", "none", "recovery"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        result = (recovery_time(args.jobs, args.nodes) if args.one == "recovery" else
                  one_run(args.jobs, args.nodes, args.one == "journal"))
        print(json.dumps(result))
        return 0
    from benchmarks._results import write_result

    def child(kind: str) -> dict[str, Any]:
        out = subprocess.run([sys.executable, "-m", "benchmarks.scheduler_journal",
                              "--one", kind, "--jobs", str(args.jobs), "--nodes",
                              str(args.nodes)], capture_output=True, text=True, check=True,
                             timeout=1800)
        return dict(json.loads(out.stdout.strip().splitlines()[-1]))

    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for kind in (("journal", "none") if r % 2 == 0 else ("none", "journal")):
            runs.append(child(kind))
            print(json.dumps(runs[-1]), flush=True)
    recovery = child("recovery")
    print(json.dumps(recovery), flush=True)

    def med(journal: bool, key: str) -> float:
        return statistics.median(x[key] for x in runs if x["journal"] is journal)

    summary = {
        "jobs_per_s_journal": med(True, "jobs_per_s"),
        "jobs_per_s_none": med(False, "jobs_per_s"),
        "cpu_s_journal": med(True, "scheduler_cpu_s"),
        "cpu_s_none": med(False, "scheduler_cpu_s"),
        "journal_bytes": int(med(True, "journal_bytes")),
        "recovery_s_waiting": recovery["start_s"],
        "recovery_s_finished": med(True, "recovery_s_finished"),
    }
    summary["throughput_ratio"] = round(summary["jobs_per_s_journal"]
                                        / summary["jobs_per_s_none"], 3)
    path = write_result("scheduler_journal", {"runs": runs, "recovery": recovery,
                                              "summary": summary}, args.out)
    print(json.dumps(summary, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
