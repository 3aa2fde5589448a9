"""One Jacobi job of the co-location study, started together with its co-located copies.

    python -m benchmarks._colocation_job --grid N --iterations K --batch B --pause S --places P

The real distributed Jacobi solver of :mod:`benchmarks.jacobi` (its :class:`Solver`, the same
steps, halos and SHA-256), run by :mod:`benchmarks.colocation` with a start barrier and its
own CPU accounting::

    harness                          this job (place 0)              places 1 .. P-1
      │ start N copies ─────────────▶ start places, set up blocks
      │ ◀──────────────── "ready" ──  (stdout line)
      │ all N ready: "go" ──────────▶ (stdin line)
      │                               CPU seconds of every place ──▶ psutil, at each place
      │                               the K iterations (--pause S after every step)
      │                               CPU seconds of every place ──▶ psutil, at each place
      │                               gather the grid, SHA-256
      │ ◀──────────── one JSON line ──

The barrier keeps start-up (interpreter, places, the kernel's loading: all CPU-bound) out of
the measured window, so that N copies compute over the same interval.  The report gives the
window in wall-clock seconds (``time.time()``, comparable across the copies of one machine),
each place's CPU seconds in the window (user + system of all its threads,
``psutil.Process().cpu_times()``) and the cores each place is pinned to
(``os.sched_getaffinity``, set by ``APGAS_CORES``: docs/guides/pinning.md).  The job's *duty
cycle* is its CPU seconds over (window × the cores its places are pinned to, counted once).

``--pause S`` is where the job waits: a sleep at place 0 after every step, an emulated
I/O phase (a checkpoint or an instrument the job waits for), during which every place idles.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

import psutil

from apgaspy import at, places, run

from ._cli import positive_int
from .jacobi import Solver
from .kernels.jacobi import checksum

__all__ = ["main"]


def _place_facts() -> tuple[float, list[int]]:
    """At a place: its CPU seconds so far (user + system, every thread) and its cores."""
    cpu = psutil.Process().cpu_times()
    return cpu.user + cpu.system, sorted(os.sched_getaffinity(0))


def _job(p: dict[str, Any]) -> dict[str, Any]:
    solver = Solver(p["grid"], p["iterations"], p["batch"], p["pause"])
    ids = [pl.id for pl in places()]
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return {"error": "the harness did not say go"}
    t0 = time.time()
    before = [at(i, _place_facts) for i in ids]
    solver.compute()
    after = [at(i, _place_facts) for i in ids]
    t1 = time.time()
    digest = checksum(solver.gather())
    cpu = [b[0] - a[0] for a, b in zip(before, after, strict=True)]
    cores = sorted({c for _, cs in after for c in cs})
    wall = t1 - t0
    return {"result": digest, "start": t0, "end": t1, "wall_s": wall, "steps": solver.steps,
            "cpu_s": sum(cpu), "place_cpu_s": cpu, "place_cores": [cs for _, cs in after],
            "cores": cores,
            "duty": sum(cpu) / (wall * len(cores)) if wall > 0 else None}


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run one job (barrier on stdin), print its JSON report; 2: bad input."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._colocation_job",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=positive_int, required=True)
    parser.add_argument("--iterations", type=positive_int, required=True)
    parser.add_argument("--batch", type=positive_int, required=True)
    parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--places", type=positive_int, required=True)
    args = parser.parse_args(argv)
    if args.pause < 0 or args.grid < args.places + 2:
        parser.error("--pause must be >= 0 and --grid at least --places + 2")
    report = run(_job, vars(args), places=args.places)
    print(json.dumps(report), flush=True)
    return 1 if "error" in report else 0


if __name__ == "__main__":
    from benchmarks._colocation_job import main as _main

    raise SystemExit(_main())
