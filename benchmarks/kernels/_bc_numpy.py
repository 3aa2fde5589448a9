"""The numpy batched Brandes kernel of the betweenness benchmark: the traversal plan of a
graph, 32 sources a batch in bit lanes, and the entry points ``graph_betweenness`` and
``shortest_path_edges``, which dispatch to the compiled kernel of
:mod:`benchmarks.kernels._bc_numba` when the backend is numba.  The definition, the layout
and the summation order are the docstring of :mod:`benchmarks.kernels.bc`, which re-exports
the public names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from glb import nogil_call

from ._backend import compiled_now
from .rmat import Graph

__all__ = ["graph_betweenness", "shortest_path_edges"]

# The module whose warm-up loads the compiled kernels (bc.py): compiled_now asks about it.
_BAG_MODULE = f"{__package__}.bc"

# Sources per numpy batch, one bit ("lane") of a uint32 word per vertex.  Measured: 32 lanes
# in uint32 words beat 48 or 64 lanes in uint64 words by 5-15 % at scales 12-14, because the
# (N, lanes) float64 matrices that every DAG pair touches at random stay smaller (cache),
# which outweighs the extra BFS passes per source.  It is also the summation group: both
# kernels add the dependencies of 32 consecutive sources before adding them to the result.
_LANES = 32
_LANE_BITS = 5  # log2(_LANES)
_WORD = np.dtype(np.uint32)
_WORD_LE = _WORD.newbyteorder("<")
# A level expands its frontier's out-edges (push) instead of all in-edges (pull) when the
# frontier has fewer than 1/_PUSH_RATIO of the edges; measured crossover.
_PUSH_RATIO = 4
# Lowest-set-bit extraction runs while more words than this are left with bits set; the
# few heavily populated words that remain are unpacked bit by bit (fewer Python rounds).
_BULK_WORDS = 1000
# Bound on the DAG-pair keys kept between the forward and the backward pass of a batch
# (16 bytes per pair; a source has at most one pair per edge): fewer lanes on huge graphs.
_PAIR_BUDGET_BYTES = 512 << 20


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
    return compiled_now(_BAG_MODULE) and p.n * 64 < 2**31


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
