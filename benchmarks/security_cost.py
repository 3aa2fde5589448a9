"""What the places' security costs: this tree against an earlier one, alternating, in one run.

    python -m benchmarks.security_cost [--before-rev REV | --before DIR] [--rounds 3]
                                       [--places 64] [--no-write]

The earlier tree is a checkout of ``--before DIR``, or of git revision ``--before-rev`` (made
with ``git worktree add`` in a temporary directory and removed afterwards).  Each round runs,
for the earlier tree and then for this one, with the tree first on ``PYTHONPATH``:

* ``python -m benchmarks.runtime --no-write``: ``at`` round trip (µs, median) and empty
  ``async_at`` tasks/s between 2 places (:mod:`benchmarks.runtime`);
* ``python -m benchmarks.runtime_scale --places P --no-write``: seconds until P places are
  started and ready (``ready_s``, embedded start; :mod:`benchmarks.runtime_scale`).

Figures are medians over the rounds, and ``ratio`` is this tree's figure over the earlier
tree's (for tasks/s, the earlier over this one: above 1 means slower either way).  Goal: every
ratio within 1.05.  Results: ``benchmarks/results/security_cost.json``.  On a shared machine
the level of each figure moves between runs; alternating the trees within one run is what
makes the ratio fair.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._results import write_result

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.05

_RTT = re.compile(r"^round trip \(us\)\s+(\d+)", re.M)
_TASKS = re.compile(r"^empty tasks/s\s+(\d+)", re.M)


def _run(tree: Path, argv: list[str], timeout: float) -> str:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.pop("APGAS_PLACES", None)
    done = subprocess.run([sys.executable, *argv], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} in {tree} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def measure(tree: Path, places: int) -> dict[str, float]:
    """One round in ``tree``: ``at_rtt_us``, ``tasks_per_s`` and ``ready_s`` (P places)."""
    out = _run(tree, ["-m", "benchmarks.runtime", "--no-write", "--repeats", "3"], 600)
    rtt, tasks = _RTT.search(out), _TASKS.search(out)
    if rtt is None or tasks is None:
        raise RuntimeError(f"benchmarks.runtime printed no figures:\n{out}")
    scale = _run(tree, ["-m", "benchmarks.runtime_scale", "--places", str(places),
                        "--no-write"], 600)
    ready = re.search(rf"^\s*{places}\s+([\d.]+)", scale, re.M)
    if ready is None:
        raise RuntimeError(f"benchmarks.runtime_scale printed no ready time:\n{scale}")
    return {"at_rtt_us": float(rtt.group(1)), "tasks_per_s": float(tasks.group(1)),
            "ready_s": float(ready.group(1))}


def main(argv: list[str] | None = None) -> int:
    """Measure both trees alternately; print the table, write the JSON; exit status 0."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.security_cost",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the earlier tree")
    parser.add_argument("--before-rev", default="30ebb1a",
                        help="git revision of the earlier tree (30ebb1a: before sealed "
                             "secrets and replay counters)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    parser.add_argument("--places", type=int, default=64, help="places to start (64)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.places < 2:
        parser.error("--rounds must be at least 1 and --places at least 2")
    made = None
    before = args.before
    if before is None:
        made = Path(tempfile.mkdtemp(prefix="apgaspy-before-")) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(made), args.before_rev],
                       cwd=ROOT, check=True, capture_output=True)
        before = made
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    try:
        for i in range(args.rounds):
            for name, tree in (("before", before), ("after", ROOT)):
                runs[name].append(measure(tree, args.places))
                print(f"round {i + 1} {name}: {runs[name][-1]}", flush=True)
    finally:
        if made is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(made)], cwd=ROOT,
                           capture_output=True)
            shutil.rmtree(made.parent, ignore_errors=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
           for name, rs in runs.items()}
    ratio = {"at_rtt_us": med["after"]["at_rtt_us"] / med["before"]["at_rtt_us"],
             "tasks_per_s": med["before"]["tasks_per_s"] / med["after"]["tasks_per_s"],
             "ready_s": med["after"]["ready_s"] / med["before"]["ready_s"]}
    print(f"{'':22}{'before':>12}{'after':>12}{'cost ×':>9}")
    for key, label in (("at_rtt_us", "at round trip (µs)"), ("tasks_per_s", "empty tasks/s"),
                       ("ready_s", f"{args.places} places ready (s)")):
        print(f"{label:22}{med['before'][key]:12.6g}{med['after'][key]:12.6g}"
              f"{ratio[key]:9.3f}")
    met = {k: v <= GOAL for k, v in ratio.items()}
    print("goal (every cost within 1.05x):", "met" if all(met.values()) else "missed")
    if not args.no_write:
        data: dict[str, Any] = {"params": {"rounds": args.rounds, "places": args.places,
                                           "before_rev": None if args.before else
                                           args.before_rev},
                                "runs": runs, "median": med, "cost_ratio": ratio,
                                "goal": GOAL, "met": met}
        print(f"wrote {write_result('security_cost', data)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
