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

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from glb import ArraySum, Bag, nogil_call, process_all

from ._backend import compiled_now, register_warm_up

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

#: R-MAT quadrant probabilities of SSCA2 v2.2.
A, B, C, D = 0.55, 0.1, 0.1, 0.25
#: Edges per vertex.
EDGE_FACTOR = 8
#: SplitMix64 increment (the golden gamma).
GAMMA = 0x9E3779B97F4A7C15

#: Work units (source vertices) per ``BCBag.process`` call: one batch of the compiled kernel
#: (64 lanes), two of the numpy kernel (32 lanes).  Compiled, about 11 ms a call at scale 14
#: and 5.5 ms at scale 13 (one core of the shared development machine, load average 4-5);
#: numpy, about 50 ms at scale 14 and 13 ms at scale 12 (one core of the reference machine).
DEFAULT_WORK_UNITS = 64

# Largest scale accepted.  Vertex ids must fit the int32 targets; already at 2**30 vertices
# the int64 edge list alone needs 128 GiB, so larger requests are refused as absurd.
_MAX_SCALE = 30
# Sources per numpy batch, one bit ("lane") of a uint32 word per vertex.  Measured: 32 lanes
# in uint32 words beat 48 or 64 lanes in uint64 words by 5-15 % at scales 12-14, because the
# (N, lanes) float64 matrices that every DAG pair touches at random stay smaller (cache),
# which outweighs the extra BFS passes per source.  It is also the summation group: both
# kernels add the dependencies of 32 consecutive sources before adding them to the result.
_LANES = 32
_LANE_BITS = 5  # log2(_LANES)
_WORD = np.dtype(np.uint32)
_WORD_LE = _WORD.newbyteorder("<")
# Seed of the fixed source permutation used by BCBag (any value gives the same BC).
_ORDER_SEED = 0x5EED
# A level expands its frontier's out-edges (push) instead of all in-edges (pull) when the
# frontier has fewer than 1/_PUSH_RATIO of the edges; measured crossover.
_PUSH_RATIO = 4
# Lowest-set-bit extraction runs while more words than this are left with bits set; the
# few heavily populated words that remain are unpacked bit by bit (fewer Python rounds).
_BULK_WORDS = 1000
# Bound on the DAG-pair keys kept between the forward and the backward pass of a batch
# (16 bytes per pair; a source has at most one pair per edge): fewer lanes on huge graphs.
_PAIR_BUDGET_BYTES = 512 << 20

_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_U64_MASK = (1 << 64) - 1


# --------------------------------------------------------------------------------------
# Random numbers and the R-MAT generator
# --------------------------------------------------------------------------------------


def splitmix64(seed: int, count: int, start: int = 0) -> np.ndarray:
    """Outputs ``start .. start+count-1`` of the SplitMix64 stream that starts at ``seed``.

    Output ``i`` is ``mix64(seed + (i + 1) * GAMMA mod 2**64)``: the state is advanced
    before it is mixed, and ``mix64`` is the murmur3 64-bit finaliser.

    Args:
        seed: initial state, any Python int (taken modulo 2**64).
        count: number of outputs (>= 0).
        start: index of the first output (>= 0); ``splitmix64(s, n, k)`` equals
            ``splitmix64(s, n + k)[k:]``.

    Returns:
        ``uint64`` array of shape ``(count,)``.

    Raises:
        ValueError: ``count`` or ``start`` is negative.
    """
    if count < 0 or start < 0:
        raise ValueError(f"count and start must be non-negative, got {count}, {start}")
    # Wrap-around uint64 arithmetic is the definition: the scalar base is reduced modulo
    # 2**64 in Python, and the array products wrap (errstate keeps numpy quiet about it).
    base = np.uint64((seed + (start + 1) * GAMMA) & _U64_MASK)
    with np.errstate(over="ignore"):
        z = np.arange(count, dtype=np.uint64)
        z *= np.uint64(GAMMA)
        z += base
        z ^= z >> np.uint64(33)
        z *= _MIX1
        z ^= z >> np.uint64(33)
        z *= _MIX2
        z ^= z >> np.uint64(33)
    return z


def _doubles(seed: int, count: int, start: int) -> np.ndarray:
    """``count`` doubles in [0, 1) from stream outputs ``start ..``: ``(x >>> 11) * 2**-53``."""
    x = splitmix64(seed, count, start)
    x >>= np.uint64(11)
    r = x.astype(np.float64)  # exact: the value has 53 bits
    r *= 2.0**-53
    return r


def _check_scale(scale: int) -> None:
    """Raise ValueError unless ``scale`` is an integer (not a bool) in 1.._MAX_SCALE."""
    if not isinstance(scale, (int, np.integer)) or isinstance(scale, bool):
        raise ValueError(f"scale must be an integer, got {scale!r}")
    if scale < 1 or scale > _MAX_SCALE:
        raise ValueError(f"scale must be in 1..{_MAX_SCALE}, got {scale}")


def rmat_edges(scale: int, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The R-MAT edge list in generation order (see the module docstring).

    Args:
        scale: log2 of the number of vertices, 1..30.
        seed: initial SplitMix64 state (default 2).

    Returns:
        ``(src, dst)``: two ``int64`` arrays of shape ``(8 * 2**scale,)``, vertex ids in
        ``[0, 2**scale)``; edge ``i`` is ``src[i] -> dst[i]``.

    Raises:
        ValueError: ``scale`` is not an integer in 1..30.
    """
    _check_scale(scale)
    m = EDGE_FACTOR << scale
    ab = A + B
    c_norm = C / (C + D)
    a_norm = A / (A + B)
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    drawn = 0
    for ib in range(scale):
        sbit = _doubles(seed, m, drawn) > ab
        drawn += m
        dbit = _doubles(seed, m, drawn) > np.where(sbit, c_norm, a_norm)
        drawn += m
        src[sbit] += 1 << ib
        dst[dbit] += 1 << ib
    return src, dst


class Graph:
    """A directed multigraph in CSR form; out-edges of each vertex in their given order.

    Attributes:
        N: number of vertices.
        M: number of edges (duplicates and self-loops included).
        offsets: ``int64`` array of shape ``(N + 1,)``; the out-edges of ``v`` are
            ``targets[offsets[v]:offsets[v + 1]]``.
        targets: ``int32`` array of shape ``(M,)``, vertex ids.
        recipe: ``(scale, seed)`` when the graph is ``rmat_graph(scale, seed)``, else None.

    The arrays are read-only.  A graph with a recipe pickles as its recipe (a few bytes) and
    is regenerated, once per process, on unpickling; other graphs pickle their arrays.

    Args:
        offsets: integer array of shape ``(N + 1,)`` as above (copied).
        targets: integer array of shape ``(M,)`` as above (copied).

    Raises:
        ValueError: inconsistent arrays (offsets not starting at 0, decreasing, or not
            ending at ``len(targets)``; a target out of range; N < 1 or N >= 2**31 - 1).
    """

    __slots__ = ("N", "M", "offsets", "targets", "recipe", "_plan")

    def __init__(self, offsets: npt.ArrayLike, targets: npt.ArrayLike) -> None:
        offsets = np.array(offsets, dtype=np.int64)
        targets = np.array(targets, dtype=np.int64)
        if offsets.ndim != 1 or targets.ndim != 1 or len(offsets) < 2:
            raise ValueError("offsets and targets must be 1-D, offsets of length N + 1 >= 2")
        n = len(offsets) - 1
        if n >= 2**31 - 1:
            raise ValueError(f"too many vertices: {n}")
        if offsets[0] != 0 or offsets[-1] != len(targets) or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must start at 0, not decrease and end at len(targets)")
        if len(targets) and (targets.min() < 0 or targets.max() >= n):
            raise ValueError("a target is out of range [0, N)")
        self.N = n
        self.M = len(targets)
        self.offsets = offsets
        self.targets = targets.astype(np.int32)
        self.offsets.flags.writeable = False
        self.targets.flags.writeable = False
        self.recipe: tuple[int, int] | None = None  # set by rmat_graph only
        self._plan: _Plan | None = None

    @classmethod
    def from_edges(cls, num_vertices: int, src: npt.ArrayLike, dst: npt.ArrayLike) -> Graph:
        """Build the CSR of an edge list, keeping each vertex's out-edges in list order.

        Args:
            num_vertices: N (>= 1).
            src, dst: integer arrays of shape ``(M,)``, vertex ids in ``[0, N)``.

        Raises:
            ValueError: N < 1 or >= 2**31 - 1, mismatched shapes, or an id out of range.
        """
        if num_vertices < 1 or num_vertices >= 2**31 - 1:
            raise ValueError(f"num_vertices must be in 1..2**31-2, got {num_vertices}")
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        if src.shape != dst.shape:
            raise ValueError(f"src and dst differ in length: {src.shape} vs {dst.shape}")
        if len(src) and (src.min() < 0 or src.max() >= num_vertices):
            raise ValueError("a source id is out of range [0, N)")
        order = np.argsort(src, kind="stable")  # stable: out-edges keep list order
        offsets = np.zeros(num_vertices + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=num_vertices), out=offsets[1:])
        return cls(offsets, dst[order])

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """``(src, dst)`` as ``int64`` arrays of shape ``(M,)``, in CSR order."""
        src = np.repeat(np.arange(self.N, dtype=np.int64), np.diff(self.offsets))
        return src, self.targets.astype(np.int64)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.recipe is not None:
            return (rmat_graph, self.recipe)
        return (Graph, (self.offsets, self.targets))

    def __repr__(self) -> str:
        return f"Graph(N={self.N}, M={self.M}, recipe={self.recipe})"


@functools.lru_cache(maxsize=4)
def _cached_rmat(scale: int, seed: int) -> Graph:
    src, dst = rmat_edges(scale, seed)
    g = Graph.from_edges(1 << scale, src, dst)
    g.recipe = (scale, seed)
    return g


def rmat_graph(scale: int, seed: int = 2) -> Graph:
    """The R-MAT graph of the module docstring as a ``Graph`` (cached per process).

    Args:
        scale: log2 of the number of vertices, 1..30.
        seed: initial SplitMix64 state (default 2).

    Returns:
        The graph (shared, read-only); ``recipe == (scale, seed)``.

    Raises:
        ValueError: ``scale`` is not an integer in 1..30.
    """
    _check_scale(scale)
    return _cached_rmat(int(scale), int(seed))


# --------------------------------------------------------------------------------------
# The batched Brandes kernel
# --------------------------------------------------------------------------------------


class _Plan:
    """Traversal structures of a graph for the kernels, built once per graph.

    Self-loops are dropped (never on a shortest path).  Vertices are relabelled by
    decreasing degree so that the hubs, which most DAG pairs touch, share few cache lines
    of the per-source matrices; ``perm[new] = old`` and ``rank[old] = new``.  The out-edges
    of a vertex are sorted by target and its in-edges by source (new labels), which fixes
    the order in which both kernels add up a vertex's contributions (module docstring,
    "Summation order").  All arrays below are in the new labels except ``sources``.
    """

    def __init__(self, graph: Graph) -> None:
        n = graph.N
        src, dst = graph.edges()
        keep = src != dst
        src = src[keep]
        dst = dst[keep]
        degree = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
        self.perm = np.argsort(-degree, kind="stable").astype(np.intp)
        self.rank = np.empty(n, dtype=np.intp)
        self.rank[self.perm] = np.arange(n, dtype=np.intp)
        src = self.rank[src]
        dst = self.rank[dst]
        self.n = n
        self.m = len(src)
        # CSR (push): out-edges by source, then target.
        order = np.lexsort((dst, src))
        self.outdeg = np.bincount(src, minlength=n).astype(np.intp)
        self.off = np.zeros(n + 1, dtype=np.intp)
        np.cumsum(self.outdeg, out=self.off[1:])
        self.tgt = dst[order]
        # CSC (pull): in-edges by target, then source, for bitwise_or.reduceat.
        order = np.lexsort((src, dst))
        self.cs = src[order]
        ct = dst[order]
        self.cs_key = self.cs * _LANES  # row keys: key = vertex * _LANES + lane
        self.ct_key = ct * _LANES
        indeg = np.bincount(ct, minlength=n)
        self.tu = np.flatnonzero(indeg)  # vertices with in-edges
        self.starts = np.zeros(len(self.tu), dtype=np.intp)
        np.cumsum(indeg[self.tu][:-1], out=self.starts[1:])
        self.ct_tu = np.repeat(np.arange(len(self.tu), dtype=np.intp), indeg[self.tu])
        self.indeg = indeg
        # Sources whose dependencies can be nonzero, in original ids, ascending.
        self.sources = np.flatnonzero(self.outdeg[self.rank])
        # Lanes of a numpy batch: a power of two dividing _LANES (the summation group).
        budget = _PAIR_BUDGET_BYTES // (16 * max(self.m, 1))
        self.lanes = 1 << int(max(0, min(_LANE_BITS, int(budget).bit_length() - 1)))
        self._orders: dict[int, np.ndarray] = {}
        self._buffers: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._compiled: tuple[np.ndarray, ...] | None = None
        self._workspaces: list[Any] = []

    def order(self, seed: int) -> np.ndarray:
        """The useful sources (original ids), shuffled with ``seed`` (cached)."""
        o = self._orders.get(seed)
        if o is None:
            o = np.random.default_rng(seed).permutation(self.sources)
            o.flags.writeable = False
            self._orders[seed] = o
        return o

    def take_buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Three float64 scratch matrices of ``N * _LANES``; reused, since fresh ones of this
        size cost page faults that measured 10-25 % of a batch.  Each caller (thread) gets
        its own set."""
        try:
            return self._buffers.pop()
        except IndexError:
            size = self.n * _LANES
            return (np.empty(size), np.empty(size), np.empty(size))

    def give_buffers(self, bufs: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Return the matrices of ``take_buffers`` for the next batch."""
        self._buffers.append(bufs)

    def compiled_graph(self) -> tuple[np.ndarray, ...]:
        """``(off, tgt, coff, csrc)`` of the compiled kernel: CSR offsets (int64) and targets
        (int32), CSC offsets and sources, in the plan's order."""
        if self._compiled is None:
            coff = np.zeros(self.n + 1, dtype=np.int64)
            np.cumsum(self.indeg, out=coff[1:])
            self._compiled = (self.off.astype(np.int64), self.tgt.astype(np.int32), coff,
                              self.cs.astype(np.int32))
        return self._compiled

    def take_workspace(self) -> Any:
        """A workspace of the compiled kernel (``_bc_numba.Workspace``), one per thread."""
        try:
            return self._workspaces.pop()
        except IndexError:
            return _nb().Workspace(self.n)

    def give_workspace(self, ws: Any) -> None:
        """Return the workspace of ``take_workspace`` for the next call."""
        self._workspaces.append(ws)


def _plan(graph: Graph) -> _Plan:
    """The graph's plan, built on first use and kept on the graph (not pickled)."""
    if graph._plan is None:
        graph._plan = _Plan(graph)
    return graph._plan


def _advance(
    p: _Plan, front: np.ndarray, visited: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """One BFS level for all lanes.

    Args:
        p: the plan.
        front: lane words (``_WORD``, shape ``(N,)``) of the current level.
        visited: lane words of all levels so far; updated in place.

    Returns:
        ``(words, key_v, key_w, next_front)``: for every edge ``v -> w`` that is a DAG edge
        of at least one lane, ``front[v] & next_front[w]`` and the row keys ``v * _LANES``
        and ``w * _LANES`` (``intp``); or None when no lane reaches a new vertex.
    """
    act = np.flatnonzero(front != 0)  # the bool path of flatnonzero is the fast one
    deg = p.outdeg[act]
    e = int(deg.sum())
    if e == 0:
        return None
    if e * _PUSH_RATIO < p.m:
        # Push: expand the frontier's out-edges (CSR ranges) and OR the words onto targets.
        vrep = np.repeat(act, deg)
        eidx = np.repeat(p.off[act] - (np.cumsum(deg) - deg), deg)
        eidx += np.arange(e, dtype=np.intp)
        t = p.tgt[eidx]
        g = front[vrep]
        nxt = np.zeros(p.n, dtype=_WORD)
        np.bitwise_or.at(nxt, t, g)
        nxt &= ~visited
        if not nxt.any():
            return None
        visited |= nxt
        g &= nxt[t]
        sel = np.flatnonzero(g != 0)
        kv = vrep[sel]
        kv *= _LANES
        kw = t[sel]
        kw *= _LANES
        return g[sel], kv, kw, nxt
    # Pull: OR of the in-neighbours' words, per vertex with in-edges.
    g = front[p.cs]
    new = np.bitwise_or.reduceat(g, p.starts)
    new &= ~visited[p.tu]
    if not new.any():
        return None
    nxt = np.zeros(p.n, dtype=_WORD)
    nxt[p.tu] = new
    visited |= nxt
    g &= new[p.ct_tu]
    sel = np.flatnonzero(g != 0)
    return g[sel], p.cs_key[sel], p.ct_key[sel], nxt


def _expand(words: np.ndarray, kv: np.ndarray, kw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``(kv[i] + lane, kw[i] + lane)`` for every set bit ``lane`` of ``words[i]``.

    Args:
        words: lane words (``_WORD``), shape ``(k,)``, all nonzero; consumed.
        kv, kw: ``intp`` row keys, shape ``(k,)``; consumed.

    Returns:
        ``(key_v, key_w)``, two ``intp`` arrays holding the pairs word by word in the words'
        order, lanes ascending within a word: the order in which the kernels add them up
        (module docstring, "Summation order").  Round ``t`` isolates the lowest remaining
        bit of every word that has one (``w & -w``) and writes its pair at the word's first
        pair plus ``t``, so the work is proportional to the number of pairs.
    """
    count = np.bitwise_count(words)
    at = np.cumsum(count, dtype=np.intp)
    total = int(at[-1]) if len(at) else 0
    at -= count  # each word's first pair
    out_v = np.empty(total, dtype=np.intp)
    out_w = np.empty(total, dtype=np.intp)
    # The lane of an isolated bit is read from the biased exponent of its float64 value
    # (exact: a power of two), so fold the exponent bias into the keys.
    kv -= 1023
    kw -= 1023
    w = words
    while len(w) > _BULK_WORDS:
        low = np.negative(w)
        low &= w  # lowest set bit of each word
        e = low.astype(np.float64).view(np.int64)
        e >>= 52
        out_v[at] = kv + e
        out_w[at] = kw + e
        at += 1
        w ^= low
        live = np.flatnonzero(w != 0)
        if len(live) < len(w):
            w = w[live]
            kv = kv[live]
            kw = kw[live]
            at = at[live]
    if len(w):
        # The few most populated words: unpack their remaining bits at once (ascending).
        bits = np.unpackbits(w.astype(_WORD_LE, copy=False).view(np.uint8), bitorder="little")
        pos = np.flatnonzero(bits.view(bool))
        k = pos >> _LANE_BITS
        pos &= _LANES - 1
        pos += 1023
        left = np.bitwise_count(w).astype(np.intp)
        dest = at[k]  # the word's next free pair, plus the bit's rank among those left
        dest += np.arange(len(pos), dtype=np.intp)
        dest -= np.repeat(np.cumsum(left) - left, left)
        a = kv[k]
        a += pos
        out_v[dest] = a
        b = kw[k]
        b += pos
        out_w[dest] = b
    return out_v, out_w


def _brandes_batch(p: _Plan, sources: np.ndarray, acc: np.ndarray) -> None:
    """Add the dependencies of up to ``p.lanes`` distinct sources to ``acc``, lane by lane.

    Args:
        p: the plan.
        sources: distinct source vertices (plan labels), at most ``p.lanes``.
        acc: ``float64`` array of shape ``(N,)`` (plan labels), updated in place: after it,
            ``acc[v]`` has had ``delta_s[v]`` added for each source ``s`` in turn.
    """
    n = p.n
    lanes = np.arange(len(sources), dtype=np.intp)
    front = np.zeros(n, dtype=_WORD)
    front[sources] = np.left_shift(_WORD.type(1), lanes.astype(_WORD))
    visited = front.copy()
    bufs = p.take_buffers()
    sigma, inv, psi = bufs
    sigma.fill(0.0)
    own = sources * _LANES + lanes  # each source's own entry in its lane
    sigma[own] = 1.0
    levels: list[tuple[np.ndarray, np.ndarray]] = []
    while True:
        step = _advance(p, front, visited)
        if step is None:
            break
        words, kv, kw, front = step
        a, b = _expand(words, kv, kw)
        # Level d -> d + 1: reads finished entries, writes entries of the next level.
        np.add.at(sigma, b, sigma[a])
        levels.append((a, b))
    # inv = 1 / sigma on reached entries; unreached ones (sigma = 0) get 2, harmlessly: no
    # pair touches them and their sigma factor below is 0.  Reached sigma are >= 1.
    np.maximum(sigma, 0.5, out=inv)
    np.divide(1.0, inv, out=inv)
    np.copyto(psi, inv)
    for a, b in reversed(levels):
        np.add.at(psi, a, psi[b])
    psi -= inv  # sum over DAG children of psi: exactly 0 without children
    psi[own] = 0.0
    psi *= sigma  # the dependencies
    dep = psi.reshape(n, _LANES)
    for lane in range(len(sources)):
        acc += dep[:, lane]
    p.give_buffers(bufs)


def _nb() -> Any:
    """The compiled kernel module (imports numba; only called when the backend is numba)."""
    from . import _bc_numba

    return _bc_numba


def _compiled(p: _Plan) -> bool:
    """Whether the compiled kernel runs for this plan (backend numba, indices fit int32)."""
    return compiled_now(__name__) and p.n * 64 < 2**31


def _run_sources(p: _Plan, sources: np.ndarray, bc: np.ndarray) -> None:
    """Brandes from ``sources`` (distinct, original ids), added into ``bc``: the
    dependencies of each 32 consecutive sources are summed first, then added."""
    if not len(sources):
        return
    if _compiled(p):
        nb = _nb()
        ws = p.take_workspace()
        try:
            graph = p.compiled_graph()
            for i in range(0, len(sources), nb.LANES):
                nogil_call(ws.brandes, graph, p.rank[sources[i : i + nb.LANES]], p.perm, bc)
        finally:
            p.give_workspace(ws)
        return
    acc = np.empty(p.n)
    for g in range(0, len(sources), _LANES):
        acc.fill(0.0)
        group = p.rank[sources[g : g + _LANES]]
        for i in range(0, len(group), p.lanes):
            _brandes_batch(p, group[i : i + p.lanes], acc)
        bc[p.perm] += acc


def graph_betweenness(graph: Graph, sources: npt.ArrayLike | None = None) -> np.ndarray:
    """Betweenness of ``graph`` (module definition) from all vertices or from ``sources``.

    Args:
        graph: the multigraph.
        sources: optional integer array of distinct source vertices, summed in this order
            (module docstring, "Summation order"); default all, ascending.

    Returns:
        ``float64`` array of shape ``(N,)``: the unnormalised betweenness.

    Raises:
        ValueError: a source is out of range or repeated.
    """
    p = _plan(graph)
    bc = np.zeros(graph.N)
    src = _checked_sources(p, graph, sources)
    _run_sources(p, src[p.outdeg[p.rank[src]] > 0] if sources is not None else src, bc)
    return bc


def _checked_sources(p: _Plan, graph: Graph, sources: npt.ArrayLike | None) -> np.ndarray:
    """The plan's sources, or ``sources`` as an index array after checking them.

    Raises:
        ValueError: a source is out of range or repeated.
    """
    if sources is None:
        return p.sources
    src = np.asarray(sources, dtype=np.intp).ravel()
    if len(src) and (src.min() < 0 or src.max() >= graph.N):
        raise ValueError("a source is out of range [0, N)")
    if len(np.unique(src)) != len(src):
        raise ValueError("sources must be distinct")
    return src


def shortest_path_edges(graph: Graph, sources: npt.ArrayLike | None = None) -> int:
    """Number of shortest-path (DAG) edges of Brandes' algorithm, summed over the sources.

    Counts the pairs ``(s, v -> w)`` of a source ``s`` and an edge with ``dist_s(w) =
    dist_s(v) + 1`` (module docstring): parallel edges each count, self-loops never.  It runs
    the kernel's forward BFS only (no sigma, no dependencies), so it costs a fraction of
    ``graph_betweenness``.

    Args:
        graph: the multigraph.
        sources: optional integer array of distinct source vertices; default all vertices
            (those without an out-edge other than a self-loop have no DAG edge and add 0).

    Returns:
        The count, a Python int (31,811,085 for ``rmat_graph(12)``).

    Raises:
        ValueError: a source is out of range or repeated.
    """
    p = _plan(graph)
    src = _checked_sources(p, graph, sources)
    total = 0
    if _compiled(p):
        nb = _nb()
        ws = p.take_workspace()
        try:
            graph_arrays = p.compiled_graph()
            for i in range(0, len(src), nb.LANES):
                total += ws.dag_edges(graph_arrays, p.rank[src[i : i + nb.LANES]])
        finally:
            p.give_workspace(ws)
        return total
    for i in range(0, len(src), p.lanes):
        batch = p.rank[src[i : i + p.lanes]]
        front = np.zeros(p.n, dtype=_WORD)
        front[batch] = np.left_shift(_WORD.type(1), np.arange(len(batch)).astype(_WORD))
        visited = front.copy()
        while True:
            step = _advance(p, front, visited)
            if step is None:
                break
            words, _, _, front = step
            total += int(np.bitwise_count(words).sum(dtype=np.int64))
    return total


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
