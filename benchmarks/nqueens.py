"""N-Queens on GLB: count the placements of N non-attacking queens.

Definition and known answers: docs/reference/benchmark-definitions.md.

    python -m benchmarks.nqueens [-N 14] [--places P] [--json]
"""

from __future__ import annotations

import argparse
from typing import Any

from glb import LongSum, compute_dynamic

from ._cli import Benchmark, Outcome, main, positive_int
from .kernels.nqueens import MAX_N, NQueensBag

KNOWN = {1: 1, 2: 0, 3: 0, 4: 2, 5: 10, 6: 4, 7: 40, 8: 92, 9: 352, 10: 724, 11: 2680,
         12: 14200, 13: 73712, 14: 365596, 15: 2279184, 16: 14772512, 17: 95815104,
         18: 666090624}


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "-N", "--queens", type=positive_int, default=14, dest="queens",
                        help=f"board size (14; at most {MAX_N})")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"n": args.queens}


def _validate(p: dict[str, Any]) -> str | None:
    return f"-N must be at most {MAX_N}" if p["n"] > MAX_N else None


def _compute(p: dict[str, Any], glb: dict[str, Any]) -> Any:
    return compute_dynamic(NQueensBag(p["n"]), LongSum, **glb)


def _outcome(p: dict[str, Any], value: int) -> Outcome:
    expected = KNOWN.get(p["n"])
    return Outcome(value, expected, None if expected is None else value == expected, value,
                   f"{value:,} solutions")


BENCHMARK = Benchmark("nqueens", "N-Queens on bitboards, on GLB", "solutions/s",
                      _arguments, _params, _compute, _outcome, _validate)

if __name__ == "__main__":
    raise SystemExit(main(BENCHMARK))
