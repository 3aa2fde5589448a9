"""Single-core kernel throughput against the Java GLB kernels (SPEC.md §4).

    python -m benchmarks.kernels_speed [--repeats 3] [--quick]

Runs each kernel sequentially in this process (``glb.process_all`` on one bag, no places), the
median and best of ``--repeats`` runs, and compares with the Java GLB figures measured on this
project's 2-core machine (OpenJDK 17, warm JIT, median of 3).  Results:
``benchmarks/results/kernels.json``.  ``--quick`` skips the long BC scale 14 and N-Queens 14.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from ._cli import positive_int
from ._results import write_result

# Java GLB on this machine (SPEC.md §4): seconds, or nodes/s for UTS
JAVA = {
    "uts_d11": {"throughput": 34e6, "unit": "nodes/s"},
    "nqueens_12": {"seconds": 0.66},
    "nqueens_13": {"seconds": 3.4},
    "nqueens_14": {"seconds": 25.6},
    "bc_12": {"seconds": 1.32},
    "bc_14": {"seconds": 24.7},
    "pi_1e8": {"seconds": 0.78},
}
# The targets, as the ratio ours/Java's speed must reach
TARGET_SPEEDUP = {"uts_d11": 0.5, "nqueens_13": 5.0, "bc_12": 1.0, "bc_14": 1.0, "pi_1e8": 1.0}


def _cases(quick: bool) -> dict[str, tuple[Callable[[], Any], Any, float]]:
    """name -> (run, expected result or None, work for the throughput)."""
    from .kernels.bc import betweenness, rmat_graph
    from .kernels.nqueens import count_solutions
    from .kernels.pi import estimate_pi
    from .kernels.uts import count_nodes

    cases: dict[str, tuple[Callable[[], Any], Any, float]] = {
        "uts_d11": (lambda: count_nodes(19, 11), 16_526_523, 16_526_523),
        "nqueens_12": (lambda: count_solutions(12), 14_200, 14_200),
        "nqueens_13": (lambda: count_solutions(13), 73_712, 73_712),
        "bc_12": (lambda: betweenness(12), None, 4096 * 32768),  # checked by the tests
        "pi_1e8": (lambda: estimate_pi(10**8)[1], 78_538_588, 1e8),
    }
    if not quick:
        cases["nqueens_14"] = (lambda: count_solutions(14), 365_596, 365_596)
        cases["bc_14"] = (lambda: betweenness(14), None, 16384 * 131072)
    for scale in (12, 14):
        rmat_graph(scale)  # graph generation is not part of the kernel time
    return cases


def measure(repeats: int, quick: bool) -> dict[str, Any]:
    """Time every kernel; returns name -> figures (seconds, throughput, ratio to Java)."""
    out: dict[str, Any] = {}
    for name, (fn, expected, work) in _cases(quick).items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            got = fn()
            times.append(time.perf_counter() - t)
            if expected is not None and got != expected:
                raise RuntimeError(f"{name}: wrong result {got!r}, expected {expected!r}")
        med, best = statistics.median(times), min(times)
        java = JAVA[name]
        java_s = java.get("seconds") or work / java["throughput"]
        out[name] = {
            "median_s": med, "best_s": best, "runs_s": times,
            "throughput_median": work / med,
            "java_s": java_s,
            "speedup_vs_java_median": java_s / med,
            "target_speedup": TARGET_SPEEDUP.get(name),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs per kernel")
    parser.add_argument("--quick", action="store_true", help="skip BC 14 and N-Queens 14")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    figures = measure(args.repeats, args.quick)
    print(f"{'kernel':12}{'median s':>10}{'best s':>10}{'Java s':>10}{'x Java':>9}{'target':>8}")
    for name, f in figures.items():
        target = f"{f['target_speedup']:g}" if f["target_speedup"] else "-"
        print(f"{name:12}{f['median_s']:10.3f}{f['best_s']:10.3f}{f['java_s']:10.3f}"
              f"{f['speedup_vs_java_median']:9.2f}{target:>8}")
    if not args.no_write:
        path = write_result("kernels", {"params": vars(args), "kernels": figures,
                                        "java_reference": JAVA})
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
