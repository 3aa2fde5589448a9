"""The compiled (numba) betweenness kernel of :mod:`benchmarks.kernels.bc`.

Imported only when the backend is numba (:func:`benchmarks.kernels.backend`).  It computes
what the numpy kernel of ``_bc_numpy.py`` computes with the same floating-point operations in the
same order, so the two give bit-identical betweenness (``bc.py``'s docstring, "Summation
order").  Its layout differs:

* 64 sources a batch, one bit ("lane") of a ``uint64`` word each (numpy: 32 in ``uint32``).
* Level words ``words[d, v]``: the lanes whose BFS reaches ``v`` at depth ``d``.  A level is
  pushed from the frontier's out-edges while they are few (under 1/8 of the edges), else
  pulled over the in-edges of every vertex with an unvisited lane, the OR stopping as soon as
  it covers them all (direction-optimising BFS: Beamer, Asanovic and Patterson, SC 2012).
* Packed per-source values: the entries ``(v, lane)`` of level ``d`` lie together, vertex by
  vertex in ascending order and a vertex's lanes in ascending order (a lane's place is a
  popcount of ``words[d, v]`` below it), so a level's ``sigma`` and ``psi`` are one block, a
  fraction of the ``(N, 64)`` matrix a dense layout would touch at random.
* The shortest-path (DAG) pairs are listed once, in the forward pass, as pairs of indices into
  the packed arrays, edge by edge in the adjacency's order and lanes ascending within an edge;
  ``sigma`` (forward) and ``psi`` (backward) each run over that list without a branch.
* Backward, level by level from the deepest: ``psi = 1 / sigma`` once per entry of the level,
  the pairs into the next level, then the level's dependencies ``sigma * (psi - 1 / sigma)``
  (the reciprocal computed again, the same IEEE result) scattered into a dense ``(N, 64)``
  matrix, whose rows
  are finally summed 32 lanes at a time in lane order into the result, reading only the
  lanes that reached the vertex in this batch (the matrix is never cleared).

What made it fast (scale 14, one core, measured against the previous version in one process,
alternating batch by batch, bit-identical results; 1.55-1.6x in all):

* Array indices are unsigned (``_ix``).  numba lets a signed index count from the end, with a
  compare and a select at every access; in the ``sigma`` and ``psi`` loops that was about
  half their time (-16 % for the kernel, -21 % with the BFS and pair loops too).
* A DAG edge's pairs are written four lanes a round, whether the lanes exist or not (the
  pair list has ``_SLACK`` spare slots), and every frontier edge goes through the writer,
  ``mm == 0`` included: loops of fixed length instead of a mispredicted branch at the end of
  each edge and at each edge's test (-9 %).  With a fast BMI2 ``pext`` (``_fast_pext``) the
  lanes' ranks come from ``pext`` and trailing-zero counts instead of two popcounts a lane
  (-5 %).
* ``psi``'s start ``1 / sigma`` is computed in a loop LLVM vectorises (``error_model="numpy"``:
  no zero-division check, the same IEEE results).  The dependency computes ``1 / sigma``
  again instead of reading it from a third packed array: that array (up to 8 MB at scale 14) cost
  more than the division (-3 to -6 % on one core at scale 14, CPU time, alternating with the
  previous version).
* The dependency matrix is read under the batch's lane masks instead of being cleared after
  every batch (-4 %), and its scatter finds the lanes by trailing-zero count (-2 %).

Tried and not kept (slower, or within the noise): computing ``sigma`` and ``psi`` straight
from the lane words, without a pair list (``psi`` then revisits every out-edge of a level,
+17 %); adding ``sigma`` inside the pair writer, or right after a pulled vertex's pairs
(+19 %); the dependency scatter four lanes a round; pairs packed in one ``uint64`` (+5 %);
software prefetch in the pair loops (+5 %); push/pull thresholds of 4 and 16; 32 lanes a
batch (the workspace halved: two GLB places then spent 8-10 % more CPU in ``process`` than
one instead of 16-17 %, but one place alone 11 % more, the BFS and level scans costing per
batch, not per source).

Memory: about 1.5 KB per vertex (three ``N x 64`` float64 arrays) plus 8 bytes per DAG pair of a
batch; ``Workspace`` holds it for one thread and grows the pair list when needed.  The
functions release the GIL (``nogil``) and are cached on disk (``cache=True``).
"""

from __future__ import annotations

import platform

from . import _backend

_backend.numba_available()  # sets NUMBA_CACHE_DIR before numba is imported

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.core.extending import intrinsic  # noqa: E402

__all__ = ["GROUP", "LANES", "Workspace"]

LANES = 64
"""Sources per batch: the bits of a ``uint64`` word."""
GROUP = 32
"""Sources whose dependencies are summed before they are added to the result: the numpy
kernel's batch, so that both add the same partial sums in the same order."""
_PUSH_RATIO = 8
"""A level is pushed when its frontier has fewer than 1/8 of the edges as out-edges."""
_SLACK = 4
"""Room past the last pair of the list that ``_emit`` may write to (four lanes a round)."""

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_FULL = np.uint64(0xFFFFFFFFFFFFFFFF)


@intrinsic
def _popcount(typingctx, x):  # type: ignore[no-untyped-def]
    """Number of set bits of a ``uint64`` (LLVM's ctpop), as an int64."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        fn = builder.module.declare_intrinsic("llvm.ctpop", [ir.IntType(64)])
        return builder.call(fn, args)

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _ix(i):  # type: ignore[no-untyped-def]
    """``i`` (a non-negative integer) as an unsigned array index: numba wraps signed
    indices around (negative ones count from the end) with a compare and a select at every
    access, which measured as about half the time of the ``sigma`` and ``psi`` loops."""
    return np.uint64(i)


@intrinsic
def _pext(typingctx, x, mask):  # type: ignore[no-untyped-def]
    """The bits of ``x`` at ``mask``'s set bits, packed at the bottom (BMI2 ``pext``); only
    compiled where :func:`_fast_pext` says the CPU has it."""
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64, i64]),
                                            "llvm.x86.bmi.pext.64")
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def _ctz(typingctx, x):  # type: ignore[no-untyped-def]
    """Trailing zero bits of a ``uint64`` (LLVM's cttz, defined as 64 for 0: ``_emit_pext``
    reads it off an exhausted mask), as an int64."""
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        fn = builder.module.declare_intrinsic("llvm.cttz", [ir.IntType(64), ir.IntType(1)])
        return builder.call(fn, [args[0], ir.Constant(ir.IntType(1), 0)])

    return sig, codegen


def _fast_pext() -> bool:
    """Whether numba compiles for an x86-64 CPU with a fast BMI2 ``pext``: not where numba is
    told another CPU (``NUMBA_CPU_NAME``), and not on AMD Zen 1 and 2 (microcoded there)."""
    from llvmlite import binding
    from numba.core import config

    if getattr(config, "CPU_NAME", None) or getattr(config, "CPU_FEATURES", None):
        return False
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    name = binding.get_host_cpu_name()
    return bool(binding.get_host_cpu_features().get("bmi2")) and name not in ("znver1",
                                                                              "znver2")


@njit(cache=True, nogil=True, inline="always")
def _emit_popcount(pa, pb, k, pu, pw, mm, fu, fw):  # type: ignore[no-untyped-def]
    """Append the pairs of one DAG edge ``u -> w`` (lanes ``mm``) at ``pa[k:]``, ``pb[k:]``,
    lanes ascending: the packed index of ``(u, lane)`` (``pu`` plus the lane's rank in
    ``fu``) and of ``(w, lane)`` (``pw``, ``fw``).  Returns the new length.

    Four lanes a round, written whether they exist or not (past the edge's last lane, a
    round writes values that the next edge overwrites or nobody reads; the lists have
    ``_SLACK`` spare slots): a loop of fixed length, so the end of a short edge is not a
    mispredicted branch, and an edge with ``mm == 0`` needs no test."""
    left = _popcount(mm)
    while True:
        for t in range(4):
            low = mm & (_U0 - mm)
            below = low - _U1
            pa[_ix(k + t)] = pu + _popcount(fu & below)
            pb[_ix(k + t)] = pw + _popcount(fw & below)
            mm ^= low
        if left <= 4:
            return k + left
        k += 4
        left -= 4


@njit(cache=True, nogil=True, inline="always")
def _emit_pext(pa, pb, k, pu, pw, mm, fu, fw):  # type: ignore[no-untyped-def]
    """``_emit_popcount`` with BMI2: ``pext(mm, fu)`` marks the ranks in ``fu`` of ``mm``'s
    lanes, which are then read off lowest first (the same pairs, fewer instructions)."""
    left = _popcount(mm)
    ru = _pext(mm, fu)
    rw = _pext(mm, fw)
    while True:
        for t in range(4):
            pa[_ix(k + t)] = pu + _ctz(ru)
            pb[_ix(k + t)] = pw + _ctz(rw)
            ru &= ru - _U1
            rw &= rw - _U1
        if left <= 4:
            return k + left
        k += 4
        left -= 4


_emit = _emit_pext if _fast_pext() else _emit_popcount


@njit(cache=True, nogil=True)
def _push_bfs(off, tgt, lv, ls, le, cur, nxt, vis, touched):  # type: ignore[no-untyped-def]
    """The next level's words by push from the frontier ``lv[ls:le]``; returns how many
    vertices it reached (listed in ``touched``, unsorted).  ``vis`` is not updated."""
    nxt[:] = 0
    cnt = 0
    for i in range(ls, le):
        v = _ix(lv[_ix(i)])
        word = cur[v]
        for j in range(off[v], off[v + 1]):
            w = _ix(tgt[_ix(j)])
            x = word & ~vis[w]
            if x:
                if nxt[w] == 0:
                    touched[_ix(cnt)] = w
                    cnt += 1
                nxt[w] |= x
    return cnt


@njit(cache=True, nogil=True)
def _push_pairs(off, tgt, lv, ls, le, cur, nxt, pos_cur, pos_nxt, pa,  # type: ignore[no-untyped-def]
                pb, k):
    """The DAG pairs from the frontier ``lv[ls:le]`` (ascending) to the next level, out-edge by
    out-edge; returns the new length of the pair list."""
    for i in range(ls, le):
        v = _ix(lv[_ix(i)])
        word = cur[v]
        pu = pos_cur[v]
        for j in range(off[v], off[v + 1]):
            w = _ix(tgt[_ix(j)])
            fw = nxt[w]
            mm = word & fw
            k = _emit(pa, pb, k, pu, pos_nxt[w], mm, word, fw)
    return k


@njit(cache=True, nogil=True)
def _pull(coff, csrc, full, cur, nxt, vis, lv, out, pos_cur, pos_nxt, p,  # type: ignore[no-untyped-def]
          pa, pb, k):
    """Next level by pull over every vertex with an unvisited lane, with its DAG pairs in-edge
    by in-edge.  Returns ``(end of the level list, end of the packed level, end of the pair
    list)``."""
    n = vis.shape[0]
    for w in range(n):
        un = full & ~vis[w]
        if un == 0:
            nxt[w] = 0
            continue
        x = _U0
        j0 = coff[w]
        j1 = coff[w + 1]
        for j in range(j0, j1):
            x |= cur[_ix(csrc[_ix(j)])]
            if (x & un) == un:
                break
        x &= un
        nxt[w] = x
        if x:
            vis[w] |= x
            lv[_ix(out)] = w
            out += 1
            pw = p
            pos_nxt[w] = pw
            p += _popcount(x)
            for j in range(j0, j1):
                u = _ix(csrc[_ix(j)])
                fu = cur[u]
                mm = fu & x
                k = _emit(pa, pb, k, pos_cur[u], pw, mm, fu, x)
    return out, p, k


@njit(cache=True, nogil=True)
def _sigma(sig, pa, pb, k0, k1):  # type: ignore[no-untyped-def]
    """``sigma[w] += sigma[u]`` over the pairs ``k0 .. k1 - 1``, in order."""
    a = pa[k0:k1]
    b = pb[k0:k1]
    for k in range(a.shape[0]):
        sig[_ix(b[k])] += sig[_ix(a[k])]


@njit(cache=True, nogil=True)
def _psi(psi, pa, pb, k0, k1):  # type: ignore[no-untyped-def]
    """``psi[u] += psi[w]`` over the pairs ``k0 .. k1 - 1``, in order."""
    a = pa[k0:k1]
    b = pb[k0:k1]
    for k in range(a.shape[0]):
        psi[_ix(a[k])] += psi[_ix(b[k])]


@njit(cache=True, nogil=True)
def _grow_pairs(pa, pb, k, need):  # type: ignore[no-untyped-def]
    cap = max(2 * pa.shape[0], need)
    na = np.empty(cap, np.int32)
    nb = np.empty(cap, np.int32)
    na[:k] = pa[:k]
    nb[:k] = pb[:k]
    return na, nb


@njit(cache=True, nogil=True)
def _grow_rows(words, rows):  # type: ignore[no-untyped-def]
    grown = np.zeros((max(2 * words.shape[0], rows), words.shape[1]), dtype=np.uint64)
    grown[: words.shape[0]] = words
    return grown


@njit(cache=True, nogil=True)
def _grow_list(lv, used, need):  # type: ignore[no-untyped-def]
    out = np.empty(max(2 * lv.shape[0], need), np.int32)
    out[:used] = lv[:used]
    return out


@njit(cache=True, nogil=True)
def _forward(off, tgt, coff, csrc, sources, words, vis, lv, lptr, lofs, touched, pos_a, pos_b,
             sig, pa, pb, plvl):  # type: ignore[no-untyped-def]
    """BFS levels, packed ``sigma`` and the DAG pairs of one batch (``sources``: distinct,
    plan labels, at most 64).  Returns ``(depth, words, lv, pa, pb)`` (arrays grown if needed);
    levels ``0 .. depth`` hold vertices, level ``d``'s list is ``lv[lptr[d]:lptr[d + 1]]``,
    its packed entries ``lofs[d] .. lofs[d + 1] - 1`` and the pairs into it
    ``plvl[d - 1] .. plvl[d] - 1``."""
    n = vis.shape[0]
    m = tgt.shape[0]
    ns = sources.shape[0]
    full = _FULL if ns == 64 else (_U1 << np.uint64(ns)) - _U1
    vis[:] = 0
    words[0, :] = 0
    order = np.argsort(sources)
    for r in range(ns):
        i = order[r]
        s = sources[i]
        bit = _U1 << np.uint64(i)
        words[0, s] = bit
        vis[s] = bit
        lv[r] = s
        pos_a[s] = r
        sig[r] = 1.0
    lptr[0] = 0
    lptr[1] = ns
    lofs[0] = 0
    lofs[1] = ns
    plvl[0] = 0
    pos_cur = pos_a
    pos_nxt = pos_b
    k = 0
    d = 0
    while True:
        ls = lptr[d]
        le = lptr[d + 1]
        e = 0
        bound = 0  # at most this many pairs: each starts at a frontier entry's out-edge
        cur = words[d]
        for i in range(ls, le):
            v = _ix(lv[_ix(i)])
            deg = off[v + 1] - off[v]
            e += deg
            bound += deg * _popcount(cur[v])
        if e == 0:
            break
        if k + bound + _SLACK > pa.shape[0]:
            pa, pb = _grow_pairs(pa, pb, k, k + bound + _SLACK)
        if d + 2 > words.shape[0]:
            words = _grow_rows(words, d + 2)
        if le + n > lv.shape[0]:
            lv = _grow_list(lv, le, le + n)
        cur = words[d]
        nxt = words[d + 1]
        base = lofs[d + 1]
        if e * _PUSH_RATIO < m:
            cnt = _push_bfs(off, tgt, lv, ls, le, cur, nxt, vis, touched)
            if cnt == 0:
                break
            reached = np.sort(touched[:cnt])
            p = base
            out = le
            for i in range(cnt):
                w = _ix(reached[i])
                x = nxt[w]
                vis[w] |= x
                lv[_ix(out)] = w
                out += 1
                pos_nxt[w] = p
                p += _popcount(x)
            k1 = _push_pairs(off, tgt, lv, ls, le, cur, nxt, pos_cur, pos_nxt, pa, pb, k)
        else:
            out, p, k1 = _pull(coff, csrc, full, cur, nxt, vis, lv, le, pos_cur, pos_nxt,
                               base, pa, pb, k)
            if out == le:
                break
        lofs[d + 2] = p
        sig[base:p] = 0.0
        _sigma(sig, pa, pb, k, k1)
        k = k1
        lptr[d + 2] = out
        plvl[d + 1] = k
        pos_cur, pos_nxt = pos_nxt, pos_cur
        d += 1
    return d, words, lv, pa, pb


@njit(cache=True, nogil=True, error_model="numpy")
def _dependencies(d, words, lv, lptr, lofs, sig, psi, dep):  # type: ignore[no-untyped-def]
    """Scatter the dependencies ``sigma * (psi - 1 / sigma)`` of level ``d``'s packed entries
    into the dense ``(N, 64)`` matrix ``dep``."""
    p = lofs[d]
    cur = words[d]
    for i in range(lptr[d], lptr[d + 1]):
        v = lv[_ix(i)]
        word = cur[_ix(v)]
        row = v * LANES
        while word:
            q = _ix(p)
            dep[_ix(row + _ctz(word))] = sig[q] * (psi[q] - 1.0 / sig[q])
            p += 1
            word &= word - _U1


@njit(cache=True, nogil=True, error_model="numpy")
def _reciprocal(sig, psi):  # type: ignore[no-untyped-def]
    """``psi = 1 / sig`` elementwise (views of one level's packed entries)."""
    for i in range(sig.shape[0]):
        psi[i] = 1.0 / sig[i]


@njit(cache=True, nogil=True)
def _backward(depth, words, lv, lptr, lofs, plvl, sig, psi, pa, pb,  # type: ignore[no-untyped-def]
              dep):
    """Level by level from the deepest: ``psi = 1 / sigma`` on the level's entries, then
    ``psi[u] += psi[w]`` over the pairs into the next level, then the level's dependencies into
    ``dep``.  Level 0 holds each source's own entry, whose dependency is 0: it is skipped."""
    for d in range(depth, 0, -1):
        _reciprocal(sig[lofs[d]:lofs[d + 1]], psi[lofs[d]:lofs[d + 1]])
        if d < depth:
            _psi(psi, pa, pb, plvl[d], plvl[d + 1])
        _dependencies(d, words, lv, lptr, lofs, sig, psi, dep)


@njit(cache=True, nogil=True)
def _accumulate(vis, own, dep, ns, perm, bc):  # type: ignore[no-untyped-def]
    """Add ``dep`` (dense ``(N, 64)``) to ``bc`` (original labels) 32 sources at a time, each
    vertex's lanes in ascending order.  Only the entries of the lanes that reached the vertex
    (``vis``), less a source's own lane (``own``: level 0's words), were written by this batch;
    the others count as 0.0 without being cleared (a select, not a branch)."""
    n = vis.shape[0]
    # Eight vertices at a time, so that their eight sums (each in lane order) interleave.
    acc = np.empty(8)
    live = np.empty(8, dtype=np.uint64)
    for v0 in range(0, n, 8):
        v1 = min(v0 + 8, n)
        reached = False
        for v in range(v0, v1):
            if vis[v]:
                reached = True
        if not reached:
            continue
        for j in range(v1 - v0):
            live[j] = vis[v0 + j] & ~own[v0 + j]
        for g in range(0, ns, GROUP):
            acc[:] = 0.0
            for lane in range(g, min(g + GROUP, ns)):
                for j in range(v1 - v0):
                    x = dep[_ix((v0 + j) * LANES + lane)]
                    acc[j] += x if (live[j] >> np.uint64(lane)) & _U1 else 0.0
            for j in range(v1 - v0):
                bc[_ix(perm[v0 + j])] += acc[j]


@njit(cache=True, nogil=True)
def _batch(off, tgt, coff, csrc, sources, perm, words, vis, lv, lptr, lofs, touched, pos_a,
           pos_b, sig, psi, dep, pa, pb, plvl, bc):  # type: ignore[no-untyped-def]
    """One batch, start to end: the dependencies of ``sources`` added to ``bc``."""
    depth, words, lv, pa, pb = _forward(off, tgt, coff, csrc, sources, words, vis, lv, lptr,
                                        lofs, touched, pos_a, pos_b, sig, pa, pb, plvl)
    _backward(depth, words, lv, lptr, lofs, plvl, sig, psi, pa, pb, dep)
    _accumulate(vis, words[0], dep, sources.shape[0], perm, bc)
    return words, lv, pa, pb


@njit(cache=True, nogil=True)
def _count(off, tgt, coff, csrc, sources, words, vis, lv, lptr, lofs, touched, pos_a, pos_b,
           sig, pa, pb, plvl):  # type: ignore[no-untyped-def]
    """The forward pass only: the number of DAG pairs of ``sources``."""
    depth, words, lv, pa, pb = _forward(off, tgt, coff, csrc, sources, words, vis, lv, lptr,
                                        lofs, touched, pos_a, pos_b, sig, pa, pb, plvl)
    return plvl[depth], words, lv, pa, pb


class Workspace:
    """Scratch arrays of the compiled kernel for one graph and one thread at a time.

    Args:
        n: the graph's vertices.

    Raises:
        ValueError: ``n * 64`` does not fit the kernel's int32 indices (``n >= 2**25``).
    """

    def __init__(self, n: int) -> None:
        if n * LANES >= 2**31:
            raise ValueError(f"too many vertices for the compiled kernel: {n}")
        self.words = np.zeros((16, n), dtype=np.uint64)
        self.vis = np.zeros(n, dtype=np.uint64)
        self.lv = np.zeros(4 * n + LANES, dtype=np.int32)
        self.lptr = np.zeros(n + 2, dtype=np.int64)
        self.lofs = np.zeros(n + 2, dtype=np.int64)
        self.touched = np.zeros(n, dtype=np.int64)
        self.pos_a = np.zeros(n, dtype=np.int64)
        self.pos_b = np.zeros(n, dtype=np.int64)
        self.sig = np.zeros(n * LANES)
        self.psi = np.zeros(n * LANES)
        self.dep = np.zeros(n * LANES)
        self.pa = np.zeros(16 * n, dtype=np.int32)
        self.pb = np.zeros(16 * n, dtype=np.int32)
        self.plvl = np.zeros(n + 2, dtype=np.int64)

    def _scratch(self) -> tuple[np.ndarray, ...]:
        return (self.words, self.vis, self.lv, self.lptr, self.lofs, self.touched, self.pos_a,
                self.pos_b, self.sig)

    def brandes(self, graph: tuple[np.ndarray, ...], sources: np.ndarray, perm: np.ndarray,
                bc: np.ndarray) -> None:
        """Add the dependencies of ``sources`` (distinct, plan labels, at most 64) to ``bc``
        (original labels), 32 sources at a time."""
        self.words, self.lv, self.pa, self.pb = _batch(  # type: ignore[call-arg]
            *graph, sources, perm, *self._scratch(), self.psi, self.dep, self.pa, self.pb,
            self.plvl, bc)

    def dag_edges(self, graph: tuple[np.ndarray, ...], sources: np.ndarray) -> int:
        """Shortest-path (DAG) pairs of ``sources`` (distinct, plan labels, at most 64)."""
        count, self.words, self.lv, self.pa, self.pb = _count(  # type: ignore[call-arg]
            *graph, sources, *self._scratch(), self.pa, self.pb, self.plvl)
        return int(count)

