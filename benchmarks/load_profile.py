"""What the jobs' load reports say: duty cycle, bytes/s per core, memory per core, GIL share.

    python -m benchmarks.load_profile [--places 2] [--interval 0.5] [--no-write]

Runs Pi, UTS, BC and Jacobi (and Jacobi with ``--pause``, a job that mostly waits) one after
the other, each on ``--places`` places of this machine, pointed at a stand-in scheduler
(:class:`communicators.testing.SchedulerEndpoint`) with ``APGAS_LOAD_INTERVAL`` set to
``--interval``: each job's ``APGAS-Load`` lines (docs/reference/protocol.md) are collected,
and their median figures written, per core (the job holds places x ``APGAS_THREADS`` = places
cores here), with the measured profile the scheduler's default thresholds give
(:func:`scheduler.resources.measured_profile`).  These figures justify those defaults
(docs/guides/scheduler.md, "Duty cycle and measured profile").  About a minute on 2 cores;
results: ``benchmarks/results/load_profile.json``.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from apgaspy.wire.protocol import LOAD, parse_load, parse_notification
from communicators.testing import SchedulerEndpoint
from scheduler.resources import ProfileThresholds, measured_profile

from ._results import write_result

ROOT = Path(__file__).resolve().parent.parent

#: name -> the job's command line after ``python -m`` (smoke sizes: a few seconds each).
JOBS: dict[str, list[str]] = {
    "pi": ["benchmarks.pi", "-n", "4e8"],
    "uts": ["benchmarks.uts", "-d", "13"],
    "bc": ["benchmarks.bc", "-n", "13"],
    "jacobi": ["benchmarks.jacobi", "-n", "1024", "-i", "1500"],
    "jacobi-paused": ["benchmarks.jacobi", "-n", "256", "-i", "200", "--pause", "0.2"],
}


def run_job(argv: list[str], places: int, interval: float,
            timeout: float = 180.0) -> tuple[list[str], float]:
    """Run one job against a stand-in scheduler; returns its ``APGAS-Load`` messages and
    its wall seconds.

    Raises:
        RuntimeError: the job failed or ran past ``timeout`` seconds.
    """
    endpoint = SchedulerEndpoint()
    env = {**os.environ, **endpoint.env(), "APGAS_PLACES": str(places),
           "APGAS_LOAD_INTERVAL": str(interval), "PYTHONPATH": str(ROOT)}
    env.pop("SCHEDULER_KEY_FILE", None)
    env.pop("SCHEDULER_KEY", None)
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{' '.join(argv)} ran past {timeout} s") from None
    finally:
        wall = time.monotonic() - t0
        endpoint.close()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    lines = []
    while True:
        try:
            lines.append(endpoint.notifications.get_nowait()[1])
        except queue.Empty:
            break
    return [m for m, _ in map(parse_notification, lines) if m.startswith(LOAD)], wall


def summarize(messages: list[str], cores: int) -> dict[str, Any]:
    """The median figures of a job's load messages, per core where it says so."""
    reports = [parse_load(m) for m in messages]
    if not reports:
        return {"reports": 0}
    med = statistics.median
    gils = [r.gil for r in reports if r.gil is not None]
    rss = [r.rss_bytes for r in reports if r.rss_bytes is not None]
    out = {"reports": len(reports), "duty": round(med(r.duty for r in reports), 3),
           "duty_max": round(max(r.duty for r in reports), 3),
           "bytes_per_s_per_core": round(med(r.bytes_per_s for r in reports) / cores),
           "bytes_per_s_per_core_max": round(max(r.bytes_per_s for r in reports) / cores),
           "rss_bytes_per_core": int(med(rss) / cores) if rss else None,
           "gil": round(med(gils), 3) if gils else None}
    last = reports[len(reports) // 2]
    out["measured_profile"] = measured_profile(last, cores, ProfileThresholds())
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_profile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--places", type=int, default=2, help="places of each job (2)")
    parser.add_argument("--interval", type=float, default=0.5,
                        help="APGAS_LOAD_INTERVAL of the jobs, seconds (0.5)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    for name, job in JOBS.items():
        messages, wall = run_job(job, args.places, args.interval)
        results[name] = {"command": " ".join(job), "wall_s": round(wall, 2),
                         **summarize(messages, args.places)}
        print(f"{name:14} {results[name]}", flush=True)
    thresholds = ProfileThresholds()
    data = {"places": args.places, "interval_s": args.interval,
            "thresholds": {"network_bytes_per_s_per_core": thresholds.network_bytes_per_s,
                           "memory_bytes_per_core": thresholds.memory_bytes},
            "jobs": results}
    if not args.no_write:
        print(f"written {write_result('load_profile', data)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
