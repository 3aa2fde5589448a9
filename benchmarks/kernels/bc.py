"""Betweenness centrality (BC) of an R-MAT graph: the SSCA2 kernel-4 benchmark as a GLB bag.

Definition
----------
The graph is the R-MAT graph of the SSCA2 v2.2 generator (Bader & Madduri, "Design and
implementation of the HPCS graph analysis benchmark on symmetric multiprocessors", HiPC 2005,
and the SSCA2 v2.2 specification; R-MAT: Chakrabarti, Zhan & Faloutsos, "R-MAT: a recursive
model for graph mining", SIAM SDM 2004):

* ``N = 2**scale`` vertices and ``M = 8 * N`` directed edges; ``a = 0.55``, ``b = 0.1``,
  ``c = 0.1``, ``d = 0.25``; seed 2 by default.
* Random numbers: one SplitMix64 stream (gamma ``0x9e3779b97f4a7c15``; ``state += gamma``,
  output ``mix64(state)``, the murmur3 finaliser) whose state starts at the seed.  A double
  is ``(output >>> 11) * 2**-53``.
* For each bit ``ib = 0 .. scale-1`` (weight ``2**ib``), over all ``M`` edges at once: draw
  ``M`` doubles ``r1``; the source bit is 1 where ``r1 > a + b``; draw ``M`` doubles ``r2``;
  the destination bit is 1 where ``r2 > (c / (c + d) if source bit else a / (a + b))``.
* Edges are kept as generated: duplicate edges and self-loops stay, and the out-edges of a
  vertex keep generation order (CSR built by a stable sort on the source).

Betweenness is Brandes' algorithm (Brandes, "A faster algorithm for betweenness centrality",
J. Math. Sociol. 25(2), 2001) from every vertex of the directed multigraph: shortest paths
are counted with edge multiplicity (``sigma[w] += sigma[v]`` once per edge ``v -> w`` with
``dist[w] = dist[v] + 1``, parallel edges included), the dependency is ``delta[v] = sum over
those edges of sigma[v] / sigma[w] * (1 + delta[w])``, and ``BC[v] = sum over sources
s != v of delta_s[v]``: unnormalised, endpoints excluded, float64.  Self-loops never lie on a
shortest path and are dropped by the kernel; sources without other out-edges have all
dependencies zero and are skipped.  The source order does not change the result.

Vectorised layout (the numpy kernel)
------------------------------------
Sources are processed in batches of 32, one bit ("lane") of a ``uint32`` word per vertex
and source, as in multi-source BFS (Then et al., "The more the merrier: efficient
multi-source graph traversal", PVLDB 8(4), 2014).  Per-source state lives in ``(N, 32)``
float64 matrices, flattened: ``key = 32 * vertex + lane``.

1. Forward, level by level, all lanes at once: ``front[v]`` holds the lanes whose BFS
   reached ``v`` at the current level.  The next level is the OR over in-edges ``u -> w`` of
   ``front[u]``, minus the lanes that already visited ``w``: a gather plus
   ``bitwise_or.reduceat`` over all in-edges (CSC), or, while the frontier has few
   out-edges, a push over just those (CSR) with ``bitwise_or.at``.  The word
   ``front[v] & next[w]`` of an edge ``v -> w`` names the lanes for which it is a
   shortest-path (DAG) edge.
2. Those bits are expanded into flat ``(key_v, key_w)`` pairs, edge by edge and lanes
   ascending within an edge: the lowest set bit of every word is isolated with ``w & -w``,
   its lane read from the exponent of its float64 value and its pair written at the edge's
   place, round after round on the words that still have bits, so the work is proportional
   to the number of pairs.  Only DAG pairs are ever materialised (about a quarter of the
   edges reached from a source of the R-MAT graph).
3. ``sigma`` is accumulated per level: ``np.add.at(sigma, key_w, sigma[key_v])``.
4. Backward, levels in reverse, the dependencies are carried as ``psi = (1 + delta) /
   sigma``, which obeys ``psi[v] = 1 / sigma[v] + sum over DAG edges v -> w of psi[w]``
   (divide Brandes' recurrence by ``sigma[v]``): one gather and one ``np.add.at`` per pair,
   no division.  Then ``delta = sigma * (psi - 1 / sigma)``, which is exactly 0 for a vertex
   without DAG children and otherwise Brandes' sum up to rounding (relative error about
   ``1e-16 * (children + 1 / delta)``; far below 1e-9 on these graphs).
5. ``BC[v] += sum over lanes of delta[v, lane]``, each source's own entry excepted.

Vertices are relabelled internally by decreasing degree, and the three ``(N, 32)`` matrices
are reused between batches; both measured as worthwhile (cache lines and page faults).
This kernel lives in :mod:`benchmarks.kernels._bc_numpy`, the generator in
:mod:`benchmarks.kernels.rmat`; this module holds the GLB bag and re-exports both's names.

The compiled kernel
-------------------
``APGAS_KERNELS`` (:mod:`benchmarks.kernels._backend`) chooses this numpy kernel or the
compiled one of :mod:`benchmarks.kernels._bc_numba` (numba; imported only when chosen).
``graph_betweenness``, ``shortest_path_edges``, ``BCBag.process`` and so ``betweenness``
dispatch on it.  The compiled kernel runs the same algorithm on 64 sources a batch (one
``uint64`` word), keeps each level's per-source values packed together (the entries of
``(v, lane)`` reached at depth ``d``, vertex by vertex) so that a level's pairs touch a small
block instead of the whole matrix, lists the DAG pairs once in the forward pass and runs
``sigma`` and ``psi`` over that list (see that module).

Summation order
---------------
Both kernels add up every floating-point sum in the same order, so they give bit-identical
betweenness (the tests check it); the order is part of the definition of this module's
result, not only of one kernel:

* A vertex's DAG neighbours are taken in ascending order of the plan's vertex labels (the
  vertices sorted by decreasing degree, ties by id; out- and in-edges are stored in that
  order, and parallel edges contribute equal terms).  ``sigma[w]``
  adds its parents' ``sigma`` in that order (exact anyway: integers below 2**53), and
  ``psi[v] = ((1 / sigma[v] + psi[w1]) + psi[w2]) + ...`` its children's.
* ``delta = sigma * (psi - 1 / sigma)``, and 0 at the source itself.
* The sources of a call (``graph_betweenness``, or one ``BCBag.process``) are taken in groups
  of 32 consecutive ones; a group's dependencies are summed vertex by vertex, from 0.0, in
  the order of its sources, and that sum is added to the result.

So a result depends on how the sources were grouped (a GLB run's splits and steals), at the
rounding level only, but never on the backend.  For the numpy kernel this order costs the
scattered writes of step 2 (a pair goes to its edge's place, not to the end of its round):
about half again the time of appending the rounds one after the other, as it did before
the compiled kernel; following the rounds' order instead (lowest lanes first) measured 20 %
slower in the compiled kernel, which matters more.

Work measure (``shortest_path_edges``): the shortest-path (DAG) edges summed over all sources,
i.e. the pairs ``(s, edge v -> w)`` with ``dist_s(w) = dist_s(v) + 1``, each parallel edge
counted, self-loops never.  Each is used once forward (``sigma``) and once backward (``psi``),
by this kernel and by Brandes' algorithm as the Java GLB kernel runs it, so the count is the
same for both (31,811,085 at scale 12 and 490,845,036 at scale 14, seed 2; benchmarks/java/Bc.java
counts the same).

Differences from the Java GLB kernel, which runs one BFS per source and follows every
out-edge of every vertex it reaches: 32 (numpy) or 64 (compiled) sources at once in bit
lanes, only DAG edges materialised for the sigma and dependency passes, vertices relabelled
by degree, and the sources without an out-edge other than a self-loop skipped (their
dependencies are all zero and they have no shortest-path edges, so the result and the count
above are unchanged).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from glb import ArraySum, Bag, process_all

from ._backend import register_warm_up
from ._bc_numpy import _plan, _run_sources, graph_betweenness, shortest_path_edges
from .rmat import A, B, C, D, EDGE_FACTOR, GAMMA, Graph, rmat_edges, rmat_graph, splitmix64

__all__ = [
    "A",
    "B",
    "C",
    "D",
    "DEFAULT_WORK_UNITS",
    "EDGE_FACTOR",
    "GAMMA",
    "BCBag",
    "Graph",
    "betweenness",
    "graph_betweenness",
    "rmat_edges",
    "rmat_graph",
    "shortest_path_edges",
    "splitmix64",
    "warm_up",
]

#: Work units (source vertices) per ``BCBag.process`` call: one batch of the compiled kernel
#: (64 lanes), two of the numpy kernel (32 lanes).  Compiled, about 11 ms a call at scale 14
#: and 5.5 ms at scale 13 (one core of the shared development machine, load average 4-5);
#: numpy, about 50 ms at scale 14 and 13 ms at scale 12 (one core of the reference machine).
DEFAULT_WORK_UNITS = 64

# Seed of the fixed source permutation used by BCBag (any value gives the same BC).
_ORDER_SEED = 0x5EED


# --------------------------------------------------------------------------------------
# The GLB bag
# --------------------------------------------------------------------------------------


class BCBag(Bag[ArraySum]):
    """Pending Brandes sources of one graph, as ranges over a fixed shuffled source order.

    The work unit is one source vertex.  The source order is a permutation, shuffled with
    ``order_seed``, of the vertices that have an out-edge other than a self-loop (the
    others have all dependencies zero and are skipped); the bag holds a set of half-open
    index ranges ``[lo, hi)`` into it.  ``process`` takes sources from the front, ``split``
    gives away the back half.  The result is an ``ArraySum`` of a ``float64`` array of shape
    ``(N,)``, to which ``process`` adds the dependencies directly.

    A bag pickles as its ranges, ``order_seed`` and its graph; an R-MAT graph pickles as its
    ``(scale, seed)`` recipe and is regenerated once per process.

    Args:
        graph: the graph.
        ranges: optional integer array of shape ``(k, 2)`` of disjoint ranges into the
            source order; default all of it, ``[[0, S)]`` with ``S`` the number of useful
            sources.
        order_seed: seed of the source shuffle (the BC does not depend on it).

    Raises:
        ValueError: ``ranges`` malformed, overlapping or outside ``[0, S)``.
    """

    def __init__(
        self,
        graph: Graph,
        ranges: npt.ArrayLike | None = None,
        order_seed: int = _ORDER_SEED,
    ) -> None:
        self.graph = graph
        self.order_seed = int(order_seed)
        total = len(_plan(graph).sources)
        if ranges is None:
            r = np.array([[0, total]], dtype=np.int64) if total else np.zeros((0, 2), np.int64)
        else:
            r = np.array(ranges, dtype=np.int64).reshape(-1, 2)
            if np.any(r[:, 0] > r[:, 1]) or np.any(r < 0) or np.any(r > total):
                raise ValueError(f"ranges must satisfy 0 <= lo <= hi <= {total}")
            r = r[r[:, 1] > r[:, 0]]
            by_lo = r[np.argsort(r[:, 0], kind="stable")]
            if np.any(by_lo[1:, 0] < by_lo[:-1, 1]):
                raise ValueError("ranges overlap")
        self._ranges = r

    @classmethod
    def for_rmat(cls, scale: int, seed: int = 2) -> BCBag:
        """A bag with all sources of ``rmat_graph(scale, seed)``.

        Raises:
            ValueError: ``scale`` is not an integer in 1..30.
        """
        return cls(rmat_graph(scale, seed))

    def share(self, index: int, count: int) -> BCBag:
        """A new bag with share ``index`` of ``count`` equal shares of this bag's sources
        (for ``glb.compute_static``; the shares of 0..count-1 partition the sources).

        Raises:
            ValueError: not ``0 <= index < count``.
        """
        if not 0 <= index < count:
            raise ValueError(f"share {index} of {count} does not exist")
        total = self.pending()
        lo, hi = total * index // count, total * (index + 1) // count
        idx = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in self._ranges] or
                             [np.zeros(0, np.int64)])[lo:hi]
        runs = np.split(idx, np.nonzero(np.diff(idx) != 1)[0] + 1) if len(idx) else []
        return BCBag(self.graph, [[r[0], r[-1] + 1] for r in runs] or np.zeros((0, 2)),
                     self.order_seed)

    def pending(self) -> int:
        """Number of sources not yet processed."""
        return int((self._ranges[:, 1] - self._ranges[:, 0]).sum())

    def _take_front(self, n: int) -> np.ndarray:
        """Remove up to ``n`` source indices from the front; return them (int64)."""
        parts = []
        r = self._ranges
        i = 0
        while n > 0 and i < len(r):
            lo, hi = int(r[i, 0]), int(r[i, 1])
            k = min(n, hi - lo)
            parts.append(np.arange(lo, lo + k, dtype=np.int64))
            n -= k
            if k < hi - lo:
                r[i, 0] = lo + k
            else:
                i += 1
        self._ranges = r[i:]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def process(self, n: int, result: ArraySum) -> None:
        """Run Brandes from up to ``n`` pending sources, adding into ``result.array``.

        Sources run in batches of 32 (numpy) or 64 (compiled kernel), one bit lane each, so
        ``n`` a multiple of 64 keeps every lane busy; see ``DEFAULT_WORK_UNITS``.  Both
        backends give the same bits for the same calls (module docstring, "Summation
        order"), so a bag may be continued by a place of the other backend.

        Args:
            n: number of sources (>= 1).
            result: ``ArraySum`` of a ``float64`` array of shape ``(N,)``.

        Raises:
            ValueError: ``n`` < 1 or ``result.array`` of the wrong shape or dtype.
        """
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        arr = result.array
        if arr.shape != (self.graph.N,) or arr.dtype != np.float64:
            raise ValueError(f"result must be float64 of shape ({self.graph.N},)")
        p = _plan(self.graph)
        idx = self._take_front(n)
        _run_sources(p, p.order(self.order_seed)[idx], arr)

    def split(self, take_all: bool) -> BCBag | None:
        """Give the back ``pending() // 2`` sources (all of a 1-source bag if ``take_all``)."""
        total = self.pending()
        give = total // 2
        if give == 0:
            if not (take_all and total > 0):
                return None
            give = total
        # Cut the ranges at ``total - give`` sources from the front.
        r = self._ranges
        ends = np.cumsum(r[:, 1] - r[:, 0])
        cut = total - give
        # Range i holds the cut (cut < total, so i < len(r)); it goes to both sides.
        i = int(np.searchsorted(ends, cut, side="right"))
        split_at = int(r[i, 0]) + cut - (int(ends[i - 1]) if i > 0 else 0)
        keep = r[: i + 1].copy()
        loot = r[i:].copy()
        keep[-1, 1] = split_at
        loot[0, 0] = split_at
        self._ranges = keep[keep[:, 1] > keep[:, 0]]
        return BCBag(self.graph, loot, self.order_seed)

    def merge(self, other: Bag[ArraySum]) -> None:
        """Append ``other``'s ranges (``other``: a ``BCBag`` of an equal graph and seed).

        Raises:
            TypeError: ``other`` is not a ``BCBag``.
            ValueError: ``other`` is for another graph or source order, or shares sources.
        """
        if not isinstance(other, BCBag):
            raise TypeError(f"cannot merge {type(other).__name__} into BCBag")
        if other.order_seed != self.order_seed or not _same_graph(self.graph, other.graph):
            raise ValueError("cannot merge bags of different graphs or source orders")
        r = np.concatenate([self._ranges, other._ranges])
        r = r[np.argsort(r[:, 0], kind="stable")]
        if np.any(r[1:, 0] < r[:-1, 1]):
            raise ValueError("cannot merge bags that share sources")
        # Coalesce touching ranges so a bag stays a few ranges long.
        if len(r) > 1:
            starts = np.ones(len(r), dtype=bool)
            starts[1:] = r[1:, 0] != r[:-1, 1]
            group = np.cumsum(starts) - 1
            hi = np.zeros(int(group[-1]) + 1, dtype=np.int64)
            np.maximum.at(hi, group, r[:, 1])
            r = np.stack([r[starts, 0], hi], axis=1)
        self._ranges = r
        other._ranges = np.zeros((0, 2), dtype=np.int64)

    def is_empty(self) -> bool:
        """True when no source is pending."""
        return len(self._ranges) == 0

    def is_splittable(self) -> bool:
        """True with at least 2 pending sources."""
        return self.pending() >= 2

    def __getstate__(self) -> tuple[Graph, int, np.ndarray]:
        return (self.graph, self.order_seed, self._ranges)

    def __setstate__(self, state: tuple[Graph, int, np.ndarray]) -> None:
        self.graph, self.order_seed, self._ranges = state

    def __repr__(self) -> str:
        return f"BCBag({self.graph!r}, pending={self.pending()}, ranges={len(self._ranges)})"


def _same_graph(g: Graph, h: Graph) -> bool:
    if g is h:
        return True
    if g.recipe is not None or h.recipe is not None:
        return g.recipe == h.recipe
    return bool(
        g.N == h.N and np.array_equal(g.offsets, h.offsets) and np.array_equal(g.targets, h.targets)
    )


def betweenness(scale: int, seed: int = 2) -> np.ndarray:
    """BC of ``rmat_graph(scale, seed)``: one ``BCBag`` run to the end with ``process_all``.

    Args:
        scale: log2 of the number of vertices, 1..30.
        seed: generator seed (default 2).

    Returns:
        ``float64`` array of shape ``(2**scale,)``.

    Raises:
        ValueError: ``scale`` is not an integer in 1..30.
    """
    graph = rmat_graph(scale, seed)
    result = ArraySum(graph.N)
    process_all(BCBag(graph), result, DEFAULT_WORK_UNITS)
    return result.array


@register_warm_up
def warm_up() -> None:
    """Compile, or load from numba's cache, the compiled BC kernel (a tiny graph, the
    argument types of real use); see :func:`benchmarks.kernels.warm_up`.  Requires the numba
    backend."""
    graph = Graph.from_edges(4, [0, 0, 1, 2, 3, 3], [1, 2, 3, 3, 0, 3])
    graph_betweenness(graph)
    shortest_path_edges(graph)
