"""The job-batch evaluation of Finnerty, Posner et al. (2024) in simulation, for the table
of docs/benchmarks.md (the job mix: docs/reference/benchmark-definitions.md).

    python -m benchmarks.scheduling [--batches 10]

Runs ``python -m scheduler simulate`` twice on the paper's job mix (25 jobs, 32 nodes, 10
seeded batches, malleable shares 0-100 %, the four algorithms): once with apgaspy's measured
shrink and grow costs, once with APGAS for Java's (14.55 s a grow, 7.41 s a shrink), so the
effect of the cheaper resizes is seen apart from the algorithm's.  Writes
``benchmarks/results/scheduling.json`` and the charts ``scheduling-makespan.png`` (makespan
and utilisation against the malleable share) and ``scheduling-gantt.png`` (the malleable
algorithm at 100 %, first batch).  The run times of the jobs come from the paper's measured
medians (a model, not a run: see ``scheduler/model.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._results import RESULTS_DIR, write_result
from .references import REFERENCES, pick

PAPER = REFERENCES["paper_batch"]["makespan_s"]


def _simulate(*args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "scheduler", "simulate", "--json", "--quiet",
                          *args], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    """Run both evaluations, write the JSON and the charts; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scheduling",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=10, help="seeded batches (10)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        ours = _simulate("--batches", str(args.batches), "--plot", tmp)
        java = _simulate("--batches", str(args.batches), "--resize-costs", "java")
        shutil.copy(Path(tmp) / "makespan_vs_share.png", RESULTS_DIR / "scheduling-makespan.png")
        shutil.copy(Path(tmp) / "gantt_malleable_100.png", RESULTS_DIR / "scheduling-gantt.png")
    rows = {"apgaspy_costs": ours["rows"], "java_costs": java["rows"]}
    cell = {(r["algorithm"], r["malleable_share"]): r for r in ours["rows"]}
    gain = 1 - cell[("malleable", 100)]["makespan_s"] / cell[("fcfs", 0)]["makespan_s"]
    print(f"malleable at 100 % vs FCFS at 0 %: makespan {100 * gain:.1f} % shorter "
          f"(paper: {100 * (1 - PAPER['malleable']['100'] / PAPER['fcfs']['0']):.1f} %)")
    path = write_result("scheduling", {"params": vars(args), "rows": rows,
                                       "config": ours.get("config"),
                                       **pick("paper_batch")})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
