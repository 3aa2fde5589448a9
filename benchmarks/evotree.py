"""LifelineGLB's synthetic evotree on GLB: a tree, a sequential branch, a tree again.

    python -m benchmarks.evotree -g MS -t TASKS -u PCT -s PLACES [-b BYTES] [--branch N]
        [--mode evotree|tree] [--static] [--places P] [--json]

The workload, its phases and its source (LifelineGLB's ``StartSynthetic``, Posner et al.):
:mod:`benchmarks.kernels.synthetic` and docs/guides/evotree.md.  The result is the exact task
count (``2 × t × s + branch``; ``t × s`` with ``--mode tree``).  Besides the shared report
(docs/guides/glb-bag.md, ``benchmarks/_cli.py``), ``--json`` gives ``evotree``: the phases'
durations and, for each second since the start, the places busy at least half of it
(``busy_places``) and the place-seconds spent in tasks (``busy_seconds``).  Under a
scheduler or ``APGAS_COMMUNICATOR`` the run is malleable, like every GLB benchmark.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from apgaspy import places, run
from glb import compute_dynamic, compute_static

from . import _cli
from ._cli import Benchmark, Outcome, non_negative_int, percent, positive_int, positive_ms
from .kernels.synthetic import (
    SynthBag,
    SynthParams,
    SynthResult,
    begin_run,
    end_run,
)

# the last run's phases, kept at place 0 by _compute for the report (same process as _job)
_LAST: dict[str, Any] = {}


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-g", type=positive_ms, default=50000.0, dest="g",
                        help="ms of CPU time per worker in one tree (50000)")
    parser.add_argument("-t", type=positive_int, default=1_000_000, dest="t",
                        help="tasks per worker in one tree (1000000)")
    parser.add_argument("-u", type=percent, default=20.0, dest="u",
                        help="task duration variance in %% (20)")
    parser.add_argument("-s", type=positive_int, default=None, dest="s",
                        help="places (workers) the trees are sized for (default: the places "
                             "at the start)")
    parser.add_argument("-b", type=non_negative_int, default=0, dest="b",
                        help="ballast bytes per pending task range, carried by stolen work (0)")
    parser.add_argument("--branch", type=positive_int, default=5000,
                        help="tasks of the sequential branch between the trees (5000)")
    parser.add_argument("--mode", choices=("evotree", "tree"), default="evotree",
                        help="evotree: tree, branch, tree; tree: one tree (evotree)")
    parser.add_argument("--seed", type=non_negative_int, default=0,
                        help="seeds the task durations, never the counts (0)")
    parser.add_argument("--sleep", action="store_true",
                        help="tasks wait out their durations (time.sleep) instead of burning "
                             "the CPU: emulates nodes' compute time when many places share a "
                             "few cores (the count and the phases are unchanged)")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--dynamic", dest="static", action="store_false", default=False,
                      help="tree 1 starts at place 0 and spreads by stealing (default)")
    kind.add_argument("--static", dest="static", action="store_true",
                      help="every place starts with its share of tree 1")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"g": args.g, "t": args.t, "u": args.u, "s": args.s, "b": args.b,
            "branch": args.branch, "mode": args.mode, "seed": args.seed,
            "static": args.static, "sleep": bool(args.sleep),
            "resilient": bool(args.resilient)}


def _validate(p: dict[str, Any]) -> str | None:
    if p["resilient"]:
        return ("--resilient: the synthetic benchmark is not resilient (the tree-1 reports "
                "that start the branch would be counted twice after a recovery); leave it out")
    return None


def synth_params(p: dict[str, Any], start_places: int) -> SynthParams:
    """The :class:`SynthParams` of the command line's parameters (``-s`` defaults to the
    places at the start).  Raises ``ValueError`` on a bad value."""
    sp = SynthParams(p["g"], p["t"], p["u"], p["s"] or start_places, p["branch"], p["mode"],
                     p["b"], p["seed"], p.get("sleep", False))
    sp.check()
    return sp


def _compute(p: dict[str, Any], glb: dict[str, Any]) -> Any:
    sp = synth_params(p, len(places()))
    run_id, t0 = begin_run(sp)
    kwargs = dict(glb, resilient=False)  # never resilient, whatever GLB_RESILIENT says
    try:
        if p["static"]:
            res = compute_static(_StaticShare(sp, run_id, t0), SynthResult,
                                 bag_class=SynthBag, **kwargs)
        else:
            res = compute_dynamic(SynthBag.tree1(sp, run_id, t0), SynthResult, **kwargs)
    finally:
        clock = end_run(run_id)
    end = time.time()
    total: SynthResult = res.result
    phases: dict[str, float | None] = {}
    if sp.mode == "evotree" and clock.tree1_end is not None and clock.branch_end is not None:
        phases = {"tree1_s": clock.tree1_end - t0,
                  "branch_s": clock.branch_end - clock.tree1_end,
                  "tree2_s": end - clock.branch_end,
                  "tree1_end_s": clock.tree1_end - t0, "branch_end_s": clock.branch_end - t0}
    else:
        phases = {"tree1_s": end - t0}
    _LAST.clear()
    _LAST.update({"workers": sp.workers, "tree_tasks": sp.tree_tasks,
                  "phases": phases, "total_s": end - t0,
                  "busy_places": total.busy_places(),
                  "busy_seconds": [round(x, 3) for x in total.busy_seconds()]})
    return res


class _StaticShare:
    """compute_static's bag factory: place ``index`` of ``count`` gets its share of tree 1."""

    def __init__(self, sp: SynthParams, run_id: str, t0: float) -> None:
        self.sp, self.run_id, self.t0 = sp, run_id, t0

    def __call__(self, index: int, count: int) -> SynthBag:
        return SynthBag.tree1(self.sp, self.run_id, self.t0, index, count)


def _outcome(p: dict[str, Any], value: int) -> Outcome:
    expected = _LAST.get("tree_tasks")
    if expected is not None:
        expected = 2 * expected + p["branch"] if p["mode"] == "evotree" else expected
    return Outcome(value, expected, None if expected is None else value == expected, value,
                   f"{value:,} tasks")


BENCHMARK = Benchmark("evotree", "LifelineGLB's synthetic evotree (tree, sequential branch, "
                      "tree) on GLB", "tasks/s", _arguments, _params, _compute, _outcome,
                      _validate)


def _job(params: dict[str, Any], glb_kwargs: dict[str, Any]) -> dict[str, Any]:
    report = _cli._job(BENCHMARK, params, glb_kwargs)
    report["evotree"] = dict(_LAST)
    return report


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the benchmark, print, and return the exit status (1: wrong count,
    2: bad options, as argparse does)."""
    parser = _cli._parser(BENCHMARK)
    args = parser.parse_args(argv)
    params = _params(args)
    problem = _validate(params)
    if problem:
        parser.error(problem)
    try:
        SynthParams(params["g"], params["t"], params["u"], params["s"] or 1, params["branch"],
                    params["mode"], params["b"], params["seed"]).check()
    except ValueError as exc:
        parser.error(str(exc))
    glb_kwargs = {k: getattr(args, k) for k in ("n", "w", "l", "z", "resilient")}
    report = run(_job, params, glb_kwargs, places=args.places)
    if args.json:
        print(json.dumps(report))
    else:
        evo = report["evotree"]
        verdict = {True: "correct", False: "WRONG", None: "no known answer"}[report["correct"]]
        print(f"evotree {' '.join(f'{k}={v}' for k, v in params.items())}")
        print(f"result: {report['summary']}, expected: {report['expected']:,} ({verdict})")
        print(f"places: {report['places']} (ended on {report['places_at_end']}), "
              f"time: {report['seconds']:.3f} s")
        print("phases: " + ", ".join(f"{k} {v:.2f}" for k, v in evo["phases"].items()))
        print("busy places per second: " + " ".join(str(c) for c in evo["busy_places"]))
    sys.stdout.flush()
    return 1 if report["correct"] is False else 0


if __name__ == "__main__":
    raise SystemExit(main())
