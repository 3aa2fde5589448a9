"""Jacobi 2D: strong scaling over place counts and the cost of a shrink and a grow, per grid size.

    python -m benchmarks.jacobi_scaling [--grids 1024,2048,4096] [--places 1,2,4]
                                        [--updates 2e9 | --iterations K1,K2,...]
                                        [--repeats 3] [--rescale-repeats 2]
                                        [--node-rate POINTS_PER_S] [--label NAME]

``--node-rate``: every run on emulated nodes of that speed (docs/guides/jacobi.md,
"Emulated nodes"); the model file then also gives ``overhead_s`` per place count (the
process's whole life, timed from here, less the iterations) and the ``node_rate``.

Strong scaling: for each grid size N, ``K = round(updates / (N-2)²)`` iterations (so that every
grid does about the same work), and each place count P runs
``python -m benchmarks.jacobi --grid N --iterations K --places P --json``; the times kept are the
benchmark's ``compute_s`` (the K iterations: the model's time) and ``seconds`` (set-up, which
loads the kernel at every place, plus the iterations, plus gathering the grid at place 0;
place start-up is left out).  Runs are interleaved (P = 1, 2, 4, then again) so that a noisy
neighbour hurts all of them alike; medians are kept.  Every run's checksum must be the same
for a grid, whatever P (checked: ``checksums_agree``).  More places than cores
oversubscribes the machine: those points measure the cost of that, not a speed-up.

Rescale cost: a run on 2 places, ordered by the schedule communicator to grow by one place
and, later, to shrink by one; ``--pause`` keeps it running until both orders are done.  For
each order the benchmark reports ``resume_s``, the time from the handler's ``pre_*`` (the
order's arrival at the program) to the first step after it (waiting for the step under way,
moving rows, and for a grow starting the new place), and ``redistribute_s``, the moving of rows
alone.

Results: ``benchmarks/results/jacobi_scaling[-LABEL].json`` (every run) and
``benchmarks/results/jacobi_model[-LABEL].json``, the run-time and rescale-cost model of a
Jacobi job for the scheduler's simulator, one entry per grid::

    {"grid": N, "steps": K, "nodes": [1, 2, 4], "seconds": [t1, t2, t4],
     "rescale_s": r, "grow_s": g, "shrink_s": s, "grow_pause_s": gp, "shrink_pause_s": sp}

``seconds[i]`` is the median ``compute_s`` of K iterations on ``nodes[i]`` places (interpolate
linearly between node counts, and scale linearly in K); ``grow_s`` and ``shrink_s`` are the
median ``resume_s`` of the grows and shrinks, ``rescale_s`` their mean; ``grow_pause_s`` and
``shrink_pause_s`` the median ``resume_s - wait_s``: the time the iterations stand still,
what a resize costs the job (while it waits for the step under way it still computes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._cli import float_count, place_counts, positive_int
from ._results import write_result

ROOT = Path(__file__).resolve().parent.parent

SCHEDULE = "after 0.5 s grow 1 on localhost; after 3 s shrink 1"
"""The orders of a rescale run (times from the handler's definition)."""


def iterations_for(grid: int, updates: int) -> int:
    """Iterations that make about ``updates`` point updates on an ``grid × grid`` grid (≥ 1)."""
    return max(1, round(updates / (grid - 2) ** 2))


def _jacobi(args: list[str], env: dict[str, str] | None = None,
            timeout: float = 600) -> dict[str, Any]:
    """Run the benchmark with ``--json``; its report plus ``wall_s``, the process's whole life
    (interpreter and place start-up included) seen from here."""
    cmd = [sys.executable, "-m", "benchmarks.jacobi", *args, "--json"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    rep: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    rep["wall_s"] = wall
    return rep


def strong_scaling(grid: int, iterations: int, counts: list[int], repeats: int,
                   node_rate: float = 0.0) -> dict[str, Any]:
    """Run every place count ``repeats`` times, interleaved; medians per count.

    ``node_rate`` > 0: emulated nodes of that many grid points a second (``--node-rate``).

    Returns:
        ``{"grid", "iterations", "node_rate", "runs": [{places, seconds, compute_s, wall_s,
        result, kernels}], "median_s": {P: compute_s}, "median_total_s": {P: seconds},
        "median_wall_s": {P: wall_s}, "median_overhead_s": {P: median of wall_s -
        compute_s}, "checksums_agree": bool}`` (seconds).
    """
    runs = []
    rate = ["--node-rate", repr(node_rate)] if node_rate > 0 else []
    for _ in range(repeats):
        for p in counts:
            rep = _jacobi(["--grid", str(grid), "--iterations", str(iterations),
                           "--places", str(p), *rate])
            runs.append({"places": p, "seconds": rep["seconds"],
                         "compute_s": rep["phases"]["compute_s"], "wall_s": rep["wall_s"],
                         "result": rep["result"], "kernels": rep["kernels"]})
            print(f"grid {grid} K={iterations} P={p}: {rep['phases']['compute_s']:.3f} s "
                  f"computing, {rep['seconds']:.3f} s in all, {rep['wall_s']:.3f} s process",
                  flush=True)

    def med(key: str, p: int) -> float:
        return statistics.median(r[key] for r in runs if r["places"] == p)

    return {"grid": grid, "iterations": iterations, "node_rate": node_rate, "runs": runs,
            "median_s": {p: med("compute_s", p) for p in counts},
            "median_total_s": {p: med("seconds", p) for p in counts},
            "median_wall_s": {p: med("wall_s", p) for p in counts},
            "median_overhead_s": {p: statistics.median(
                r["wall_s"] - r["compute_s"] for r in runs if r["places"] == p)
                for p in counts},
            "checksums_agree": len({r["result"] for r in runs}) == 1}


def rescale_cost(grid: int, repeats: int, steps: int = 140, pause: float = 0.05,
                 batch: int = 8, node_rate: float = 0.0) -> dict[str, Any]:
    """Grow 2 -> 3 then shrink 3 -> 2 places during a run of ``steps`` steps; ``repeats`` runs.

    ``node_rate`` > 0: emulated nodes (``--node-rate``), without ``pause``; the run then has
    the iterations (a whole number of steps, at least 4) that last about 15 s on 2 places,
    so that both orders land mid-run whatever the grid.

    Returns:
        ``{"grid", "runs": [orders of each run], "grow_s", "shrink_s", "grow_pause_s",
        "shrink_pause_s"}``: the medians of :func:`order_medians`.
    """
    env = dict(os.environ, APGAS_COMMUNICATOR="schedule", APGAS_SCHEDULE=SCHEDULE)
    runs = []
    extra = ["--pause", str(pause)]
    if node_rate > 0:
        steps = max(4, math.ceil(15.0 * 2 * node_rate / ((grid - 2) * grid * batch)))
        extra = ["--node-rate", repr(node_rate)]
    for _ in range(repeats):
        rep = _jacobi(["--grid", str(grid), "--iterations", str(steps * batch), "--batch",
                       str(batch), "--places", "2", *extra], env=env)
        runs.append(rep["orders"])
        print(f"grid {grid} rescale: " + ", ".join(
            f"{o['kind']} {o.get('resume_s', float('nan')):.3f} s" for o in rep["orders"]),
            flush=True)

    return {"grid": grid, "schedule": SCHEDULE, "runs": runs, **order_medians(runs)}


def order_medians(runs: list[list[dict[str, Any]]]) -> dict[str, float | None]:
    """The medians of a rescale measurement's orders, per kind (``None``: no such order
    completed mid-run).

    Args:
        runs: per run, its orders as the benchmark reports them (``kind``, ``resume_s``,
            ``wait_s``: seconds).

    Returns:
        ``grow_s``/``shrink_s``: the median ``resume_s`` (from the order's arrival to the
        first step after it); ``grow_pause_s``/``shrink_pause_s``: the median of
        ``resume_s - wait_s``, the time the iterations stand still (during the wait for the
        step under way the job still computes), which is what a resize costs the job.
    """
    out: dict[str, float | None] = {}
    for kind in ("grow", "shrink"):
        done = [o for r in runs for o in r if o["kind"] == kind and "resume_s" in o]
        out[f"{kind}_s"] = statistics.median(o["resume_s"] for o in done) if done else None
        out[f"{kind}_pause_s"] = (statistics.median(o["resume_s"] - o["wait_s"] for o in done)
                                  if done else None)
    return out


def model(scaling: dict[str, Any], rescale: dict[str, Any]) -> dict[str, Any]:
    """The model entry of one grid (format in the module docstring)."""
    nodes = sorted(scaling["median_s"])
    costs = [c for c in (rescale["grow_s"], rescale["shrink_s"]) if c is not None]
    return {"grid": scaling["grid"], "steps": scaling["iterations"], "nodes": nodes,
            "seconds": [scaling["median_s"][p] for p in nodes],
            "overhead_s": [scaling["median_overhead_s"][p] for p in nodes],
            "node_rate": scaling["node_rate"],
            "rescale_s": statistics.mean(costs) if costs else None,
            "grow_s": rescale["grow_s"], "shrink_s": rescale["shrink_s"],
            "grow_pause_s": rescale.get("grow_pause_s"),
            "shrink_pause_s": rescale.get("shrink_pause_s")}


def main(argv: list[str] | None = None) -> int:
    """Measure, write the two result files, print their paths."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.jacobi_scaling",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--grids", default="1024,2048,4096",
                        help="grid sizes (1024,2048,4096)")
    parser.add_argument("--places", default="1,2,4", help="place counts (1,2,4)")
    parser.add_argument("--updates", type=float_count, default=2 * 10**9,
                        help="point updates per scaling run, sets the iterations (2e9)")
    parser.add_argument("--iterations", default="",
                        help="iterations per grid, comma-separated in the order of --grids "
                             "(replaces --updates)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="scaling repeats (3)")
    parser.add_argument("--rescale-repeats", type=int, default=2,
                        help="rescale runs per grid (2; 0: none)")
    parser.add_argument("--node-rate", type=float, default=0.0, metavar="POINTS_PER_S",
                        help="emulated node speed passed to every run (0: none, the real "
                             "machine; docs/guides/jacobi.md)")
    parser.add_argument("--label", default="", help="suffix of the result files")
    args = parser.parse_args(argv)
    counts = place_counts(parser, args.places, 1)
    if not (args.node_rate == 0 or (args.node_rate > 0 and args.node_rate < float("inf"))):
        parser.error(f"--node-rate {args.node_rate}: must be a finite number of grid points "
                     f"a second > 0 (or 0: none)")
    try:
        given = [int(g) for g in args.grids.split(",")]
        grids = sorted(set(given))
    except ValueError:
        parser.error(f"--grids takes integers, got {args.grids!r}")
    iterations = {g: iterations_for(g, args.updates) for g in grids}
    if args.iterations:
        try:
            ks = [int(k) for k in args.iterations.split(",")]
        except ValueError:
            parser.error(f"--iterations takes integers, got {args.iterations!r}")
        if len(ks) != len(given) or min(ks) < 1:
            parser.error(f"--iterations {args.iterations}: one count >= 1 per grid of "
                         f"--grids {args.grids}")
        iterations = dict(zip(given, ks, strict=True))
    if grids[0] < counts[-1] + 2:
        parser.error(f"--grids {grids[0]}: at least {counts[-1] + 2} ({counts[-1]} interior "
                     f"rows, one per place of --places {counts[-1]})")
    _jacobi(["--grid", "16", "--iterations", "2", "--places", "1"])  # compiles the kernel
    scaling, rescale, models = [], [], []
    for g in grids:
        s = strong_scaling(g, iterations[g], counts, args.repeats,
                           args.node_rate)
        r = (rescale_cost(g, args.rescale_repeats, node_rate=args.node_rate)
             if args.rescale_repeats > 0
             else {"grid": g, "runs": [], **order_medians([])})
        scaling.append(s)
        rescale.append(r)
        models.append(model(s, r))
    cores = os.cpu_count()
    note = (f"{cores} cores: runs with more places than cores oversubscribe the machine"
            if cores is not None and counts[-1] > cores else "")
    suffix = f"-{args.label}" if args.label else ""
    if args.node_rate > 0:
        note = (f"emulated nodes of {args.node_rate:g} grid points/s: each place computes "
                f"for real, then waits out the rest of its step; " + note).rstrip("; ")
    p1 = write_result(f"jacobi_scaling{suffix}", {"note": note, "updates": args.updates,
                                                  "node_rate": args.node_rate,
                                                  "scaling": scaling, "rescale": rescale})
    p2 = write_result(f"jacobi_model{suffix}", {
        "format": "one entry per grid: seconds[i] = median time of `steps` iterations on "
                  "nodes[i] places (piecewise linear in the node count, linear in steps); "
                  "overhead_s[i] = median of the whole process's time less the iterations' "
                  "(start-up, set-up, gathering, exit) on nodes[i] places; node_rate = the "
                  "emulated node speed in grid points/s (0: none); "
                  "grow_s/shrink_s = median time from an order's arrival to the resumed "
                  "iterations; rescale_s = their mean; grow_pause_s/shrink_pause_s = median "
                  "time the iterations stand still (grow_s/shrink_s less the wait for the "
                  "step under way)",
        "note": note, "models": models})
    print(p1)
    print(p2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
