"""GLB's betweenness centrality of a simple graph (no self-loop, no edge twice), for a test that
compares it with networkx.

    python glb_bc_simple.py <scale>

The graph is the R-MAT graph of ``scale`` (seed 2) with its self-loops and duplicate edges
dropped; the bag spreads its sources over every place by stealing (``compute_dynamic``).
Prints one JSON line: the number of vertices, the graph's edges, GLB's centrality of every
vertex and how many places processed sources.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

from apgaspy import run  # noqa: E402
from benchmarks.kernels.bc import BCBag, Graph, rmat_edges  # noqa: E402
from glb import ArraySum, compute_dynamic  # noqa: E402


class Zeros:
    """result_factory: an empty ArraySum of ``n`` floats (picklable)."""

    def __init__(self, n):
        self.n = n

    def __call__(self):
        return ArraySum(self.n)


def main():
    scale = int(sys.argv[1])
    n = 2 ** scale
    src, dst = rmat_edges(scale, 2)
    edges = sorted({(u, v) for u, v in zip(src.tolist(), dst.tolist(), strict=True) if u != v})
    graph = Graph.from_edges(n, np.array([u for u, _ in edges], dtype=np.int64),
                             np.array([v for _, v in edges], dtype=np.int64))
    res = compute_dynamic(BCBag(graph), Zeros(n), n=4)
    print(json.dumps({"n": n, "edges": edges, "bc": res.value.tolist(),
                      "busy_places": sum(1 for s in res.log if s.process_calls > 0)}),
          flush=True)


if __name__ == "__main__":
    run(main)
