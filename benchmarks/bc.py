"""Betweenness centrality on GLB: Brandes from every vertex of an R-MAT graph.

Definition and known answers: docs/reference/benchmark-definitions.md.

    python -m benchmarks.bc [--scale 14] [--seed 2] [--static] [--verify] [--places P] [--json]

The result is the list of N betweenness values.  Without a published answer, the check is a
sequential run of the same kernel (``--verify``; automatic for scale ≤ 10).  Throughput is in
edge traversals per second, N·M for the whole computation (as the Java GLB reports it).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from apgaspy import async_at, finish, places
from glb import ArraySum, compute_dynamic, compute_static

from ._cli import Benchmark, Outcome, main, positive_int
from .kernels.bc import BCBag, betweenness, rmat_graph

_AUTO_VERIFY_SCALE = 10


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--scale", type=positive_int, default=14, help="N = 2^scale (14)")
    parser.add_argument("--seed", type=int, default=2, help="generator seed (2)")
    parser.add_argument("--static", action="store_true",
                        help="each place starts with its share of the sources")
    parser.add_argument("--verify", action="store_true",
                        help="compare with a sequential run (default for scale <= 10)")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {"scale": args.scale, "seed": args.seed, "static": args.static,
            "verify": args.verify or args.scale <= _AUTO_VERIFY_SCALE}


def _validate(p: dict[str, Any]) -> str | None:
    if p["seed"] < 0:
        return "--seed must not be negative"
    return "--scale must be at most 30" if p["scale"] > 30 else None


class _Result:
    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self) -> ArraySum:
        return ArraySum(self.n)


class _Share:
    def __init__(self, scale: int, seed: int) -> None:
        self.scale, self.seed = scale, seed

    def __call__(self, index: int, count: int) -> BCBag:
        return BCBag.for_rmat(self.scale, self.seed).share(index, count)


def _build_graph(scale: int, seed: int) -> None:
    """Build the R-MAT graph and its source plan at this place (cached per process)."""
    BCBag.for_rmat(scale, seed)


def _compute(p: dict[str, Any], glb: dict[str, Any]) -> Any:
    graph = rmat_graph(p["scale"], p["seed"])
    factory = _Result(graph.N)
    if p["static"]:
        return compute_static(_Share(p["scale"], p["seed"]), factory, bag_class=BCBag, **glb)
    # Every place builds the graph before the computation starts, as each place of the Java
    # benchmark does: loot unpickles to the cached graph, so a place's first steal does not
    # wait for a graph generation (0.1-0.15 s at scale 14) inside the computation's time.
    with finish():
        for place in places()[1:]:
            async_at(place, _build_graph, p["scale"], p["seed"])
    return compute_dynamic(BCBag(graph), factory, **glb)


def _outcome(p: dict[str, Any], values: np.ndarray) -> Outcome:
    graph = rmat_graph(p["scale"], p["seed"])
    correct = None
    if p["verify"]:
        reference = betweenness(p["scale"], p["seed"])
        correct = bool(np.allclose(values, reference, rtol=1e-9, atol=0.0))
    top = int(np.argmax(values))
    return Outcome(values.tolist(), None, correct, float(graph.N) * float(graph.M),
                   f"{graph.N} values, sum {values.sum():.6g}, max {values[top]:.6g} at "
                   f"vertex {top}")


BENCHMARK = Benchmark("bc", "Betweenness centrality (Brandes) of an R-MAT graph, on GLB",
                      "edges/s", _arguments, _params, _compute, _outcome, _validate)

if __name__ == "__main__":
    raise SystemExit(main(BENCHMARK))
