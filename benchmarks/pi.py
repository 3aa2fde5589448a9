"""Monte-Carlo π on GLB: throw points in the unit square.

Definition: docs/reference/benchmark-definitions.md.

    python -m benchmarks.pi [--samples 1e9] [--seed 0] [--static] [--places P] [--json]

A correct estimate lies within 5 standard errors (1.64/√n) of π; every task has its own
seeded stream, so the estimate is the same whatever the places and the shrinks and grows.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from glb import LongSum, compute_dynamic, compute_static

from ._cli import Benchmark, Outcome, float_count, main
from .kernels.pi import PiBag, standard_error


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--samples", "-s", type=float_count, default=10**9,
                        help="points to throw, e.g. 1e9 (default)")
    parser.add_argument("--seed", type=int, default=0, help="stream seed (0)")
    parser.add_argument("--static", action="store_true",
                        help="each place starts with its share (compute_static)")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"samples": args.samples, "seed": args.seed, "static": args.static}


def _validate(p: dict[str, Any]) -> str | None:
    return "--seed must not be negative" if p["seed"] < 0 else None


def _compute(p: dict[str, Any], glb: dict[str, Any]) -> Any:
    if p["static"]:
        return compute_static(_Share(p["samples"], p["seed"]), LongSum, bag_class=PiBag, **glb)
    return compute_dynamic(PiBag(p["samples"], p["seed"]), LongSum, **glb)


class _Share:
    """Place ``index`` of ``count``: its share of the samples (a PiBag split by task ranges)."""

    def __init__(self, samples: int, seed: int) -> None:
        self.samples, self.seed = samples, seed

    def __call__(self, index: int, count: int) -> PiBag:
        return PiBag.share(self.samples, self.seed, index, count)


def _outcome(p: dict[str, Any], hits: int) -> Outcome:
    estimate = 4.0 * hits / p["samples"]
    error = abs(estimate - math.pi)
    se = standard_error(p["samples"])
    return Outcome(estimate, math.pi, error <= 5 * se, p["samples"],
                   f"pi ~ {estimate:.10f} ({hits:,} hits; off by {error / se:.2f} standard "
                   f"errors)")


BENCHMARK = Benchmark("pi", "Monte-Carlo pi, on GLB", "samples/s",
                      _arguments, _params, _compute, _outcome, _validate)

if __name__ == "__main__":
    raise SystemExit(main(BENCHMARK))
