"""W workers a place against places of one worker: efficiency, the GIL, memory and a grow.

    python -m benchmarks.workers [--configs 1x1,2x1,1x2] [--repeats 3] [--small]
                                 [--benchmarks uts,bc,pi,nqueens] [--size uts=14,bc=14]
                                 [--no-grow] [--label NAME] [--no-write]

A configuration ``PxW`` runs ``python -m benchmarks.<name> --json --places P --workers W``
(P places of W worker threads each: P·W cores).  For each benchmark, interleaved over
``--repeats`` rounds (the sequential kernel, then every configuration, then again), medians
kept, with ``T_seq`` the sequential kernel's time (``glb.process_all``, no places), ``T`` a
configuration's computation time and ``c = P·W`` its cores:

    efficiency         = T_seq / (c · T)
    efficiency_vs_1x1  = T_1x1 / (c · T)
    efficiency_vs_co_run = T_co / (c · T)

and, as :mod:`benchmarks.scaling` computes it, ``efficiency_uncontended = A_seq / A``: the
same with the time the threads waited for a CPU taken out (``A`` counts W times ``T`` per
place, less the run delays of all its workers; Linux only), which on a machine shared with
other work is the figure to compare.

``T_co`` is the mean time of ``c`` copies of the sequential kernel run at the same moment in
separate processes (:class:`benchmarks.scaling.CoRun`): what the cores cost each other with
no communication and no load balancing.  The goal of a node-sized place is that ``1x2``
reaches the efficiency of ``2x1``.

**The GIL.**  Every worker reports the share of its processing loop it held the GIL
(``glb.WorkerStats.gil_share``: the time outside compiled kernels called through
``glb.nogil_call``).  W workers with a share ``g`` each keep the GIL busy ``W·g`` of the time,
so about ``1/g`` workers fit before they queue on it: ``predicted_workers`` (from the mean
share over the workers of the runs with W ≥ 2).  N-Queens has no compiled kernel (numpy only):
its workers hold the GIL most of the time and W > 1 does not speed it up.

**Memory.**  While a run goes on, the proportional set size (PSS, Linux) of its processes is
sampled every 0.1 s (psutil); ``pss_peak_mb`` is the peak of their sum, ``pss_per_core_mb`` that
over ``c``: what a core costs as one more place against one more worker.

**A grow.**  One ``1x2`` run per benchmark, at the default size (``--small`` runs are too
short for it), is grown by one 2-worker place 0.1 s into the computation
(``APGAS_COMMUNICATOR=schedule``): ``grow_to_busy_s`` is the time from the order (the
handler's ``pre_grow``) to the moment both workers of the new place had begun work
(``first_work_at`` of each; ``None`` when the run ended before both had work).

Results: ``benchmarks/results/workers[-LABEL].json`` with the machine (its vector ISA
included).  ``--small`` takes sizes that run in a minute or so on a loaded 2-core machine (UTS
d = 12, BC scale 12, Pi 2·10^9, N-Queens 14); the default sizes are those of
:data:`benchmarks.scaling.COMPILED_SIZES` (UTS d = 14, BC 14, Pi 10^10, N-Queens 16).
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
from typing import Any

from ._cli import ENVIRONMENT_HELP, positive_int
from ._results import write_result
from .scaling import (
    ROOT,
    CoRun,
    default_size,
    load_average,
    median_known,
    parse_sizes,
    sequential,
    sequential_run,
)
from .scaling import glb_run as run_figures

SMALL_SIZES = {"uts": 12, "bc": 12, "pi": 2 * 10**9, "nqueens": 14}
"""``--small``: sizes for a loaded machine (compiled kernels)."""

NOTE = ("Workers of a place share one GIL: W > 1 speeds up only bags whose kernels release "
        "it (the compiled UTS, BC and Pi kernels). N-Queens runs numpy only, and pure-Python "
        "or numpy bags in general hold the GIL most of the time: correct with W > 1, but "
        "not expected to run faster than with W = 1; use places for them.")
"""Printed with every run and kept in its results."""

GROW_AFTER_S = 0.1
"""Seconds into the computation at which the grow run adds its place."""


def configs(text: str) -> list[tuple[int, int]]:
    """``"1x1,2x1,1x2"`` → ``[(1, 1), (2, 1), (1, 2)]`` (places, workers).

    Raises:
        argparse.ArgumentTypeError: an item that is not ``<places>x<workers>`` of positive
            integers.
    """
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        p, sep, w = item.partition("x")
        if not (sep and p.isdigit() and w.isdigit() and int(p) > 0 and int(w) > 0):
            raise argparse.ArgumentTypeError(
                f"expected <places>x<workers> such as 1x2, got {item!r}")
        out.append((int(p), int(w)))
    if not out:
        raise argparse.ArgumentTypeError("no configuration given")
    return out


def _tree_pss(pid: int) -> int:
    """Bytes of PSS of process ``pid`` and its descendants (0 for those already gone)."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except (psutil.Error, AttributeError):
            pass
    return total


def glb_run(args: list[str], places: int, workers: int,
            extra_env: dict[str, str] | None = None) -> tuple[dict[str, Any], int]:
    """Run one benchmark configuration; its JSON report and the peak PSS (bytes) of its
    processes.

    Raises:
        RuntimeError: the run failed or gave a wrong answer.
    """
    env = {**os.environ, **(extra_env or {})}
    env.pop("APGAS_PLACES", None)
    env.pop("SCHEDULER_PORT", None)
    cmd = [sys.executable, "-m", f"benchmarks.{args[0]}", *args[1:], "--json",
           "--places", str(places), "--workers", str(workers)]
    peak = 0
    # files, not pipes: the process is polled, not read, while it runs (a report is large)
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out_f, stderr=err_f, text=True)
        try:
            deadline = time.monotonic() + 1800
            while proc.poll() is None and time.monotonic() < deadline:
                peak = max(peak, _tree_pss(proc.pid))
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err}")
    report = json.loads(out.strip().splitlines()[-1])
    if report["correct"] is False:
        raise RuntimeError(f"{' '.join(cmd)}: wrong answer")
    return report, peak


def _seconds(report: dict[str, Any]) -> float:
    return float(report["phases"]["compute_s"] + report["phases"]["reduce_s"])


def gil_shares(report: dict[str, Any]) -> list[float]:
    """The GIL-held share of every worker that processed, in a run with W ≥ 2."""
    return [w["gil_share"] for s in report["log"] for w in s.get("per_worker", [])
            if w.get("gil_share") is not None and w["process_calls"] > 0]


def grow_to_busy_s(report: dict[str, Any]) -> float | None:
    """Seconds from the first grow order to both (all) workers of its first new place busy,
    or ``None``."""
    grows = [(t, p) for (kind, p), t in zip(report["orders"], report.get("order_times", []),
                                            strict=False) if kind == "grow"]
    if not grows:
        return None
    began, added = grows[0]
    stats = [s for s in report["log"] if s["place"] == added[0]]
    if not stats or not stats[0]["per_worker"]:
        return None
    starts = [w["first_work_at"] for w in stats[0]["per_worker"]]
    return None if None in starts else max(starts) - began


def measure(names: list[str], points: list[tuple[int, int]], repeats: int,
            sizes: dict[str, int], grow: bool) -> dict[str, Any]:
    """The figures of the module docstring, per benchmark."""
    out: dict[str, Any] = {}
    cores_max = os.cpu_count() or 1
    for name in names:
        args, seq = sequential(name, sizes.get(name))
        seq()  # warm up
        co_counts = sorted({p * w for p, w in points if 2 <= p * w <= cores_max})
        seq_runs: list[float] = []
        seq_available: list[float | None] = []
        co_runs: dict[int, list[float]] = {c: [] for c in co_counts}
        runs: dict[tuple[int, int], list[tuple[dict[str, Any], int]]] = {pt: [] for pt in points}
        co: dict[int, CoRun] = {}
        try:
            for c in co_counts:
                co[c] = CoRun(name, sizes.get(name), c)
            for _ in range(repeats):
                one = sequential_run(seq)
                seq_runs.append(one.seconds)
                seq_available.append(one.available_s)
                for c in co_counts:
                    co_runs[c].append(statistics.fmean(r.seconds for r in co[c].run()))
                for p, w in points:
                    runs[(p, w)].append(glb_run(args, p, w))
        finally:
            for c_run in co.values():
                c_run.close()
        t_seq = statistics.median(seq_runs)
        a_seq = median_known(seq_available)
        entry: dict[str, Any] = {"args": args, "seq_s": t_seq, "seq_runs_s": seq_runs,
                                 "seq_available_s": a_seq}
        t_11 = statistics.median(_seconds(r) for r, _ in runs[(1, 1)]) if (1, 1) in runs \
            else None
        for (p, w), rs in runs.items():
            cores = p * w
            t = statistics.median(_seconds(r) for r, _ in rs)
            shares = [g for r, _ in rs for g in gil_shares(r)]
            pss = statistics.median(m for _, m in rs)
            a = median_known([run_figures(r).available_s for r, _ in rs])
            point: dict[str, Any] = {
                "places": p, "workers": w, "seconds": t, "runs_s": [_seconds(r) for r, _ in rs],
                "efficiency": t_seq / (cores * t),
                "efficiency_vs_1x1": t_11 / (cores * t) if t_11 else None,
                "available_s": a,
                "efficiency_uncontended": a_seq / a if a_seq and a else None,
                "gil_share_mean": statistics.fmean(shares) if shares else None,
                "gil_share_max": max(shares) if shares else None,
                "predicted_workers": (1 / statistics.fmean(shares))
                if shares and statistics.fmean(shares) > 0 else None,
                "work_units": sorted({wk["work_units"] for r, _ in rs for s in r["log"]
                                      for wk in s.get("per_worker", [])}),
                "pss_peak_mb": pss / 2**20,
                "pss_per_core_mb": pss / 2**20 / cores,
            }
            if cores in co_runs:
                t_co = statistics.median(co_runs[cores])
                point.update({"co_run_s": t_co, "co_run_slowdown": t_co / t_seq,
                              "efficiency_vs_co_run": t_co / (cores * t)})
            entry[f"{p}x{w}"] = point
        if grow:
            env = {"APGAS_COMMUNICATOR": "schedule",
                   "APGAS_SCHEDULE": f"after {GROW_AFTER_S} s grow 1 on localhost"}
            grow_args, _ = sequential(name, default_size(name))
            report, _ = glb_run(grow_args, 1, 2, env)
            entry["grow"] = {"from": "1x2", "args": grow_args, "after_s": GROW_AFTER_S,
                             "orders": report["orders"],
                             "grow_to_busy_s": grow_to_busy_s(report),
                             "seconds": _seconds(report)}
        out[name] = entry
        print(_summary(name, entry, points), flush=True)
    return out


def _summary(name: str, entry: dict[str, Any], points: list[tuple[int, int]]) -> str:
    parts = [f"{name:8} seq {entry['seq_s']:.3f} s"]
    for p, w in points:
        pt = entry[f"{p}x{w}"]
        text = f"{p}x{w}: {pt['seconds']:.3f} s eff {100 * pt['efficiency']:.0f} %"
        if pt["efficiency_uncontended"] is not None:
            text += f" (uncontended {100 * pt['efficiency_uncontended']:.0f} %)"
        if "efficiency_vs_co_run" in pt:
            text += f" (vs co-run {100 * pt['efficiency_vs_co_run']:.0f} %)"
        if pt["gil_share_mean"] is not None:
            text += (f" GIL {100 * pt['gil_share_mean']:.1f} % -> W~"
                     f"{pt['predicted_workers']:.0f}")
        text += f" PSS/core {pt['pss_per_core_mb']:.0f} MB"
        parts.append(text)
    if "grow" in entry:
        g = entry["grow"]["grow_to_busy_s"]
        parts.append("grow 1x2+1x2: " + ("run ended first" if g is None else
                                         f"order to both workers busy {g:.3f} s"))
    return "\n  ".join(parts)


def main(argv: list[str] | None = None) -> int:
    """Measure, print and write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workers",
                                     description=__doc__.split("\n\n")[0],
                                     epilog=ENVIRONMENT_HELP)
    parser.add_argument("--benchmarks", default="uts,bc,pi,nqueens",
                        help="comma-separated: uts, bc, pi, nqueens (all)")
    parser.add_argument("--configs", type=configs, default=configs("1x1,2x1,1x2"),
                        help="comma-separated <places>x<workers> (1x1,2x1,1x2)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs per point (3)")
    parser.add_argument("--small", action="store_true",
                        help="sizes for a loaded machine: UTS 12, BC 12, Pi 2e9, N-Queens 14")
    parser.add_argument("--size", type=parse_sizes, default={},
                        help="problem sizes, e.g. uts=13,bc=13 (over --small and the defaults)")
    parser.add_argument("--no-grow", action="store_true", help="skip the grow runs")
    parser.add_argument("--label", default="", help="suffix of the result file")
    parser.add_argument("--no-write", action="store_true", help="do not write the file")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.benchmarks.split(",") if n.strip()]
    unknown = [n for n in names if n not in SMALL_SIZES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    sizes = {n: (SMALL_SIZES[n] if args.small else default_size(n)) for n in names}
    sizes.update(args.size)
    load_before = load_average()
    figures = measure(names, args.configs, args.repeats, sizes, not args.no_grow)
    load = {"before": load_before, "after": load_average()}
    print(f"load averages (1, 5, 15 min): before {load['before']}, after {load['after']}")
    print(NOTE)
    if args.no_write:
        return 0
    params = {**vars(args), "configs": [f"{p}x{w}" for p, w in args.configs], "sizes": sizes}
    path = write_result("workers" + (f"-{args.label}" if args.label else ""),
                        {"params": params, "load_average": load, "benchmarks": figures,
                         "note": NOTE})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
