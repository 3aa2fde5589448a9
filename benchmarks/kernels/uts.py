"""UTS (Unbalanced Tree Search), geometric tree: a numpy SHA-1 kernel and its GLB bag.

Definition (the geometric tree of the X10/APGAS GLB UTS, branching factor 4):

* The root's digest is SHA-1 of 16 zero bytes followed by the seed as 4 big-endian bytes.
* Child ``i`` (0-based) of a node has the digest SHA-1(parent's 20-byte digest ‖ ``i`` as 4
  big-endian bytes).
* A node's child count: ``v`` = bytes 16..19 of its digest as a big-endian 32-bit integer
  with the top bit cleared (0 ≤ v < 2**31);
  ``n = floor(ln(1 - v / 2**31) / ln(4/5))``, evaluated in IEEE double precision.
* The root has depth budget ``d``.  A node with budget 1 counts its ``n`` children without
  hashing them; a node with budget ``k > 1`` expands its children with budget ``k - 1``.
* The result is the number of nodes, root included (seed 19: d=1 → 6, d=10 → 4,130,071,
  d=13 → 264,459,392).

Source: S. Olivier, J. Huan, J. Liu, J. Prins, J. Dinan, P. Sadayappan, C.-W. Tseng,
"UTS: An Unbalanced Tree Search Benchmark", LCPC 2006; the geometric tree as coded in the
X10 GLB UTS sample and in LifelineGLB's UTS (Posner, Java).

Child counts are exact with respect to the formula evaluated with a correctly rounded
``log`` (Python's ``math.log``): numpy's vectorised ``log`` gives a first guess, and a table
of the 96 thresholds ``T[k]`` = least ``v`` with ``n(v) >= k`` (computed at import with
``math.log``) corrects the rare guesses that a last-bit difference moves across an integer.

SHA-1 kernel: every UTS message after the root is 24 bytes (20-byte digest + 4-byte index),
i.e. one 64-byte block whose words 6..15 are constants.  The kernel runs the 80 rounds on
uint32 lane arrays of a few thousand to tens of thousands of messages at once, with
preallocated buffers and ``out=`` arguments only (no temporaries), constant folding of the
first five rounds (the initial state is a constant) and of the constant message words, and
it stops after round 75 for lanes whose only use is their child count (word 4 of the digest
is final after round 75).  The kernel is in :mod:`benchmarks.kernels._uts_numpy`.

Bag layout (``UTSBag``): a stack of intervals of pending children, as in the Java
LifelineGLB UTS.  One uint32 array of shape (8, capacity); column ``i`` < ``m`` is one
interval: rows 0..4 the parent's digest (big-endian words), row 5 ``lo`` and row 6 ``hi``
(children ``lo <= i < hi`` of that parent are pending), row 7 the budget the children get
(≥ 1).  Work is taken from the top (column ``m - 1`` downwards), so the deepest work runs
first and the stack stays small (about ``depth × lanes per batch`` intervals).  One work
unit is one child hashed; leaves below budget-1 nodes are counted, not hashed.

Backends: ``APGAS_KERNELS`` (:mod:`benchmarks.kernels._backend`) chooses this numpy kernel or
the compiled one of :mod:`benchmarks.kernels._uts_numba` (numba; imported only when chosen).
``sha1_children``, ``child_counts``, ``UTSBag.process`` and so ``count_nodes`` dispatch on it;
both give bit-identical digests and counts (the compiled child counts use the same threshold
table, searched without floating point), and both work on the same interval stack, so a bag
one backend worked on is split, merged, pickled and continued by the other.  The compiled
kernel hashes ``NUMBA_LANES`` children per batch, about 200 M nodes/s on one core of the
reference machine against about 22 M for the numpy one.

Differences from the Java GLB kernel: none in the work (the same tree, one SHA-1 per node
hashed, leaves below budget-1 nodes counted without hashing, as the definition says); the
SHA-1 runs on numpy lanes of thousands of messages at once with the constant folding above,
and it stops after round 75 where only the child count is needed; the Java kernel hashes one
node at a time, a whole SHA-1 each.
"""

from __future__ import annotations

import hashlib
import math
import operator
import struct
import threading
from typing import Any

import numpy as np

from glb import Bag, LongSum, nogil_call, process_all

from ._backend import backend, compiled_now, register_warm_up
from ._uts_numpy import (
    _CHILD_TEMPLATE,
    _M32,
    _ROOT_TEMPLATE,
    _add,
    _and,
    _c,
    _round_plan,  # noqa: F401 - the tests reach it as uts._round_plan
    _Sha1Lanes,
)

__all__ = [
    "DEFAULT_WORK_UNITS",
    "LANES",
    "NUMBA_LANES",
    "UTSBag",
    "child_counts",
    "count_nodes",
    "count_nodes_reference",
    "sha1_children",
    "sha1_roots",
    "warm_up",
]

LANES = 16384
"""Messages hashed per numpy pass (a batch).  A pass is about 1,350 ufunc calls of ~0.3 µs
fixed cost each, which at 16K lanes is ~15 % of its time; 8K lanes measured ~15 % slower end
to end, 16K..48K the same, and 16K keeps the 23 working rows (1.5 MB) near the L2 cache."""

DEFAULT_WORK_UNITS = 65536
"""Children hashed per ``UTSBag.process`` call by default, with either kernel: about 10 ms
with numpy and 1.3 ms compiled on the reference machine (one AMD EPYC core).  With the compiled
kernel, GLB runs of UTS d = 14 on 2 places kept the places busy (in ``process``) over 99 % of
the computation at 16K, 64K and 256K alike, their times differing by less than the machine's
noise; 64K keeps the wait of a thief for its loot near a millisecond."""

# Largest child count: v = 2**31 - 1 gives floor(ln(2**-31) / ln(0.8)) = 96.
_MAX_CHILDREN = 96
_LN_4_5 = math.log(4.0 / 5.0)


def _n_python(v: int) -> int:
    """Child count for a 31-bit ``v``, the formula evaluated with ``math.log``."""
    return math.floor(math.log(1.0 - v / 2147483648.0) / _LN_4_5)


def _thresholds() -> np.ndarray:
    """T[k] = least v with n(v) >= k for k = 1..96; T[0] = 0 and T[97] = 2**31 (above any v).

    ``n(v)`` is non-decreasing in ``v`` (log is monotonic), so ``n(v)`` is the number of
    thresholds ``T[1..96]`` that are ``<= v``.
    """
    t = np.empty(_MAX_CHILDREN + 2, dtype=np.int64)
    t[0] = 0
    t[_MAX_CHILDREN + 1] = 1 << 31
    for k in range(1, _MAX_CHILDREN + 1):
        lo, hi = 0, (1 << 31) - 1  # n(hi) = 96 >= k, so the search is well defined
        while lo < hi:
            mid = (lo + hi) // 2
            if _n_python(mid) >= k:
                hi = mid
            else:
                lo = mid + 1
        t[k] = lo
    return t


_T_U32 = _thresholds().astype(np.uint32)
_T_NEXT = _T_U32[1:].copy()  # _T_NEXT[k] = T[k + 1]
# The compiled kernel's copy of the same thresholds: _T_SEARCH[j] = T[j + 1] for j < 96, then
# 2**31 (above any v) up to 127 entries, for a branch-free binary search of 7 steps.
_T_SEARCH = np.full(127, 1 << 31, dtype=np.uint32)
_T_SEARCH[:_MAX_CHILDREN] = _T_U32[1 : _MAX_CHILDREN + 1]

NUMBA_LANES = 4096
"""Children hashed per batch by the compiled kernel: the lane buffers (about 130 KB) stay in
the L2 cache, and a batch is short (about 30 µs) next to a ``process`` call."""


def _nb() -> Any:
    """The compiled kernel module (imports numba; only called when the backend is numba)."""
    from . import _uts_numba

    return _uts_numba


_local = threading.local()


def _workspace() -> _Workspace:
    ws = getattr(_local, "ws", None)
    if ws is None:
        ws = _local.ws = _Workspace(LANES)
    return ws


def _nb_workspace() -> _NumbaLanes:
    ws = getattr(_local, "nb", None)
    if ws is None:
        ws = _local.nb = _NumbaLanes(NUMBA_LANES)
    return ws


class _NumbaLanes:
    """Per-thread lane buffers of the compiled kernel's batches (see ``_uts_numba.process``)."""

    def __init__(self, lanes: int) -> None:
        self.lanes = lanes  # the batch: idx_in's length
        # Rows a little longer than the batch, as in _Sha1Lanes: rows a multiple of 4 KiB
        # apart compete for the same L1 sets when a lane's five words are written.
        row = lanes + 16
        self.par_in = np.empty((5, row), dtype=np.uint32)
        self.idx_in = np.empty(lanes, dtype=np.uint32)
        self.bud_in = np.empty(lanes, dtype=np.uint32)
        self.out = np.empty((5, row), dtype=np.uint32)
        self.cnt = np.empty(lanes, dtype=np.int64)
        self.par_lf = np.empty((5, row), dtype=np.uint32)
        self.idx_lf = np.empty(lanes, dtype=np.uint32)

    def process(self, stack: np.ndarray, m: int, n: int) -> tuple[int, int, int]:
        return _nb().process(stack, m, n, self.par_in, self.idx_in, self.bud_in, self.out,
                             self.cnt, self.par_lf, self.idx_lf, _T_SEARCH)


class _Workspace:
    """Per-thread scratch buffers: the SHA-1 lanes and the child-count arrays."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.sha = _Sha1Lanes(capacity)
        self.iota = np.arange(capacity, dtype=np.uint32)
        self.f64 = np.empty(capacity, dtype=np.float64)
        self.v = np.empty(capacity, dtype=np.uint32)
        self.n = np.empty(capacity, dtype=np.int64)
        self.t = np.empty(capacity, dtype=np.uint32)
        self.b1 = np.empty(capacity, dtype=np.bool_)
        self.b2 = np.empty(capacity, dtype=np.bool_)

    def counts(self, word4: np.ndarray) -> np.ndarray:
        """Child counts of digests given their word 4 (uint32, length ≤ capacity).

        Returns an int64 view into this workspace, valid until the next call.
        """
        k = word4.shape[0]
        v, f, n, t = self.v[:k], self.f64[:k], self.n[:k], self.t[:k]
        b1, b2 = self.b1[:k], self.b2[:k]
        _and(word4, _c(0x7FFFFFFF), v)
        # 1 - v / 2**31 is exact in float64 (a multiple of 2**-31 in (0, 1]).
        np.multiply(v, _NEG_2_M31, f)
        np.add(f, _ONE, f)
        np.log(f, f)
        np.divide(f, _LN_4_5_ARR, f)
        # The quotient is ≥ 0, so truncation is floor.
        np.copyto(n, f, casting="unsafe")
        # n is right iff T[n] <= v < T[n + 1]; numpy's log may differ from a correctly
        # rounded one in the last bit, which matters only for v at a threshold.
        np.take(_T_NEXT, n, out=t, mode="clip")
        np.greater_equal(v, t, b1)
        np.take(_T_U32, n, out=t, mode="clip")
        np.less(v, t, b2)
        np.bitwise_or(b1, b2, b1)
        if b1.any():
            wrong = np.flatnonzero(b1)
            n[wrong] = np.searchsorted(_T_U32[1 : _MAX_CHILDREN + 1], v[wrong], side="right")
        return n


_NEG_2_M31 = np.array(-(2.0**-31))
_ONE = np.array(1.0)
_LN_4_5_ARR = np.array(_LN_4_5)


def _as_u32_lanes(a: Any, name: str, ndim: int) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != ndim or (ndim == 2 and arr.shape[0] != 5):
        shape = "(5, k)" if ndim == 2 else "(k,)"
        raise ValueError(f"{name} must have shape {shape}, got {arr.shape}")
    if arr.size and (arr.dtype.kind not in "ui" or arr.min() < 0 or arr.max() > _M32):
        raise ValueError(f"{name} must hold integers in [0, 2**32)")
    return arr.astype(np.uint32, copy=False)


def _lanes_in(a: np.ndarray) -> np.ndarray:
    """``a`` as the compiled kernels take it: C-contiguous and writeable (a read-only or strided
    array would be another argument type, compiled again)."""
    return np.require(a, np.uint32, ["C", "W"])


def sha1_children(parents: Any, indices: Any) -> np.ndarray:
    """SHA-1 of (parent digest ‖ child index) for many messages at once, bit-exact with hashlib.

    Args:
        parents: parent digests, shape (5, k), integers in [0, 2**32) (uint32 preferred):
            the five big-endian 32-bit words of each 20-byte digest, one column per message.
        indices: child indices, shape (k,), integers in [0, 2**32), hashed as 4 big-endian
            bytes.

    Returns:
        The digests, uint32 array of shape (5, k), big-endian words, column per message.

    Raises:
        ValueError: wrong shapes, mismatched ``k``, or values outside [0, 2**32).
    """
    p = _as_u32_lanes(parents, "parents", 2)
    j = _as_u32_lanes(indices, "indices", 1)
    if p.shape[1] != j.shape[0]:
        raise ValueError(f"parents has {p.shape[1]} columns but indices has {j.shape[0]} entries")
    if backend() == "numba":
        out = np.empty((5, j.shape[0]), dtype=np.uint32)
        _nb().sha1_children(_lanes_in(p), _lanes_in(j), out, j.shape[0])
        return out
    return _hash_many(p, j, _CHILD_TEMPLATE)


def sha1_roots(seeds: Any) -> np.ndarray:
    """Root digests SHA-1(16 zero bytes ‖ seed as 4 big-endian bytes), vectorised.

    Args:
        seeds: shape (k,), integers in [0, 2**32).

    Returns:
        uint32 array of shape (5, k): the big-endian words of each digest.

    Raises:
        ValueError: wrong shape or seeds outside [0, 2**32).
    """
    s = _as_u32_lanes(seeds, "seeds", 1)
    zeros = np.zeros((4, s.shape[0]), dtype=np.uint32)
    return _hash_many(np.concatenate([zeros, s[None, :]]), None, _ROOT_TEMPLATE)


def _hash_many(
    words: np.ndarray, index: np.ndarray | None, template: tuple[int | None, ...]
) -> np.ndarray:
    ws = _workspace()
    sha = ws.sha
    k = words.shape[1]
    out = np.empty((5, k), dtype=np.uint32)
    for lo in range(0, k, sha.capacity):
        hi = min(k, lo + sha.capacity)
        lanes = hi - lo
        for i in range(5):
            sha.w[i][:lanes] = words[i, lo:hi]
        if index is not None:
            sha.w[5][:lanes] = index[lo:hi]
        w4, w03 = sha.compress(lanes, lanes, template)
        out[4, lo:hi] = w4
        for i in range(4):
            out[i, lo:hi] = w03[i]
    return out


def child_counts(digests: Any) -> np.ndarray:
    """Child counts ``n`` of nodes with the given digests.

    Args:
        digests: shape (5, k) (only row 4 is used) or (k,) (word 4 itself), integers in
            [0, 2**32).

    Returns:
        int64 array of shape (k,), values in [0, 96].

    Raises:
        ValueError: wrong shape or values outside [0, 2**32).
    """
    arr = np.asarray(digests)
    word4 = _as_u32_lanes(arr[4] if arr.ndim == 2 else arr, "digests", 1)
    out = np.empty(word4.shape[0], dtype=np.int64)
    if backend() == "numba":
        _nb().child_counts(_lanes_in(word4), _T_SEARCH, out)
        return out
    ws = _workspace()
    for lo in range(0, word4.shape[0], ws.capacity):
        hi = min(word4.shape[0], lo + ws.capacity)
        out[lo:hi] = ws.counts(word4[lo:hi])
    return out


@register_warm_up
def warm_up() -> None:
    """Compile, or load from numba's cache, every compiled UTS kernel (tiny inputs, each with
    the argument types of real use); see :func:`benchmarks.kernels.warm_up`.  Requires the
    numba backend."""
    k = 3
    words = np.arange(5 * k, dtype=np.uint32).reshape(5, k)
    index = np.arange(k, dtype=np.uint32)
    sha1_children(words, index)
    child_counts(words[4])
    bag = UTSBag(19, 3)
    bag.process(1, LongSum())


def _check_seed_depth(seed: int, depth: int) -> tuple[int, int]:
    seed, depth = operator.index(seed), operator.index(depth)
    if not 0 <= seed <= _M32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    return seed, depth


def count_nodes_reference(seed: int, depth: int) -> int:
    """Node count by a plain Python walk (``hashlib``, ``math.log``): the tests' oracle.

    Slow (about a microsecond per node); meant for depths up to about 8.

    Args:
        seed: the tree's seed, an int in [0, 2**32).
        depth: the root's depth budget, an int ≥ 1.

    Raises:
        ValueError: seed outside [0, 2**32) or depth < 1.
        TypeError: seed or depth is not an integer.
    """
    seed, depth = _check_seed_depth(seed, depth)
    sha1 = hashlib.sha1
    pack = struct.Struct(">I").pack

    def n_of(digest: bytes) -> int:
        return _n_python(int.from_bytes(digest[16:20], "big") & 0x7FFFFFFF)

    total = 1
    stack = [(sha1(bytes(16) + pack(seed)).digest(), depth)]
    while stack:
        digest, budget = stack.pop()
        n = n_of(digest)
        total += n
        if budget > 1:
            stack.extend((sha1(digest + pack(i)).digest(), budget - 1) for i in range(n))
    return total


class UTSBag(Bag[LongSum]):
    """The pending work of a UTS tree (or of a part of one) as a stack of child intervals.

    ``UTSBag(seed, depth)`` holds the whole tree: the root is hashed and counted at
    construction (the count is kept inside the bag until ``process`` or ``submit``).  One
    work unit of ``process`` is one child hashed (about a quarter of the nodes; the rest
    are leaves below budget-1 nodes, counted without hashing).  See the module docstring
    for the layout.

    Args:
        seed: the tree's seed, an int in [0, 2**32).
        depth: the root's depth budget, an int ≥ 1.

    Raises:
        ValueError: seed outside [0, 2**32) or depth < 1.
        TypeError: seed or depth is not an integer.
    """

    __slots__ = ("_stack", "_m", "_pending")

    def __init__(self, seed: int, depth: int) -> None:
        seed, depth = _check_seed_depth(seed, depth)
        root = sha1_roots(np.array([seed], dtype=np.uint32))
        n = int(child_counts(root)[0])
        self._stack = np.empty((8, 64), dtype=np.uint32)
        self._m = 0
        self._pending = 1
        if depth == 1:
            self._pending += n
        elif n > 0:
            self._stack[:5, 0] = root[:, 0]
            self._stack[5:, 0] = (0, n, depth - 1)
            self._m = 1

    @classmethod
    def _from_columns(cls, columns: np.ndarray, pending: int = 0) -> UTSBag:
        bag = cls.__new__(cls)
        bag._stack = columns
        bag._m = columns.shape[1]
        bag._pending = pending
        return bag

    # -- protocol ------------------------------------------------------------------------

    def process(self, n: int, result: LongSum) -> None:
        """Hash about ``n`` pending children (deepest first) and add the nodes counted.

        Args:
            n: work units, children to hash (≥ 1); the work is done in batches of at most
                ``LANES`` children of about equal size.
            result: the sum that the counted nodes are added to.

        Raises:
            ValueError: ``n`` < 1.
        """
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        if compiled_now(__name__):
            lanes = _nb_workspace()
            if not self._stack.flags.c_contiguous:
                self._stack = np.ascontiguousarray(self._stack)
            done = 0
            while done < n and self._m:
                # a batch pushes at most one interval per child hashed
                self._reserve(self._m + lanes.lanes)
                self._m, hashed, counted = nogil_call(lanes.process, self._stack, self._m,
                                                      n - done)
                done += hashed
                self._pending += counted
            result.add(self._pending)
            self._pending = 0
            return
        ws = _workspace()
        batches = -(-n // ws.capacity)
        size = -(-n // batches)
        done = 0
        while done < n and self._m:
            done += self._batch(min(size, n - done), ws)
        result.add(self._pending)
        self._pending = 0

    def split(self, take_all: bool) -> UTSBag | None:
        """Give away about half of the pending children: the upper half of each interval.

        An interval of ``c`` children gives ``c // 2``; intervals with an odd count give one
        more child, every second one, so a stack of single-child intervals is halved too.

        Args:
            take_all: when the bag is not splittable (one pending child), give that child.

        Returns:
            A new bag with the loot (its partial count is 0), or ``None`` when the bag is
            empty, or not splittable and ``take_all`` is false.
        """
        m = self._m
        if m == 0:
            return None
        s = self._stack
        if not self.is_splittable():
            if not take_all:
                return None
            loot = s[:, :m].copy()
            self._m = 0
            return type(self)._from_columns(loot)
        lo = s[5, :m].astype(np.int64)
        hi = s[6, :m].astype(np.int64)
        cnt = hi - lo
        odd = cnt & 1
        give = (cnt >> 1) + (odd & np.cumsum(odd))  # cumsum & 1 picks every second odd one
        giving = give > 0
        loot = s[:, :m][:, giving]
        loot[5] = (hi - give)[giving]
        keep_hi = hi - give
        s[6, :m] = keep_hi
        keeping = keep_hi > lo
        kept = int(np.count_nonzero(keeping))
        if kept < m:
            s[:, :kept] = s[:, :m][:, keeping]
            self._m = kept
        return type(self)._from_columns(loot)

    def merge(self, other: Bag[LongSum]) -> None:
        """Put all of ``other``'s intervals on top of this stack and take over its partial count.

        Raises:
            TypeError: ``other`` is not a ``UTSBag``.
            ValueError: ``other`` is this bag.
        """
        if not isinstance(other, UTSBag):
            raise TypeError(f"cannot merge {type(other).__name__} into UTSBag")
        if other is self:
            raise ValueError("cannot merge a bag into itself")
        k = other._m
        if k:
            self._reserve(self._m + k)
            self._stack[:, self._m : self._m + k] = other._stack[:, :k]
            self._m += k
        self._pending += other._pending
        other._m = 0
        other._pending = 0

    def is_empty(self) -> bool:
        """True when no child is pending (a partial count may still wait for ``submit``)."""
        return self._m == 0

    def is_splittable(self) -> bool:
        """True when at least two children are pending."""
        m = self._m
        return m >= 2 or (m == 1 and int(self._stack[6, 0]) - int(self._stack[5, 0]) >= 2)

    def submit(self, result: LongSum) -> None:
        """Add the nodes counted but not yet added (e.g. the root of an unprocessed bag)."""
        result.add(self._pending)
        self._pending = 0

    # -- other public helpers --------------------------------------------------------------

    def pending_children(self) -> int:
        """Number of pending children: the work units left at the top of each interval."""
        m = self._m
        s = self._stack
        return int(s[6, :m].astype(np.int64).sum() - s[5, :m].astype(np.int64).sum())

    def __len__(self) -> int:
        """Number of intervals on the stack."""
        return self._m

    def __repr__(self) -> str:
        return (
            f"UTSBag(intervals={self._m}, pending_children={self.pending_children()}, "
            f"counted={self._pending})"
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"stack": self._stack[:, : self._m].copy(), "pending": self._pending}

    def __setstate__(self, state: dict[str, Any]) -> None:
        stack = np.asarray(state["stack"], dtype=np.uint32)
        self._stack = np.ascontiguousarray(stack)
        self._m = stack.shape[1]
        self._pending = int(state["pending"])

    # -- internals -------------------------------------------------------------------------

    def _reserve(self, need: int) -> None:
        cap = self._stack.shape[1]
        if need > cap:
            grown = np.empty((8, max(need, 2 * cap, 64)), dtype=np.uint32)
            grown[:, : self._m] = self._stack[:, : self._m]
            self._stack = grown

    def _batch(self, want: int, ws: _Workspace) -> int:
        """Pop about ``want`` children off the top, hash, count and push; return how many."""
        s = self._stack
        m = self._m
        # Intervals hold five children on average (at least one): the top want/2 of them
        # nearly always cover the batch, and scanning fewer keeps this cheap.
        w = min(m, want // 2 + 16)
        top = s[:, m - w : m]
        cnt = top[6].astype(np.int64) - top[5]
        from_top = np.cumsum(cnt[::-1])
        whole = int(np.searchsorted(from_top, want, side="right"))
        if whole == w:
            batch = top.copy()
            self._m = m - w
        else:
            taken = int(from_top[whole - 1]) if whole else 0
            rest = want - taken
            first = w - 1 - whole  # partly taken: its upper `rest` children go now
            batch = top[:, first:].copy()
            batch[5, 0] = batch[6, 0] - rest
            s[6, m - w + first] -= rest
            self._m = m - whole
        budget = batch[7]
        cnt = batch[6].astype(np.int64) - batch[5]
        inner = budget > 1
        n_inner = int(np.count_nonzero(inner))
        if 0 < n_inner < budget.shape[0]:
            # Lanes of children that need their whole digest go first: the hash skips the
            # last rounds for the rest.
            order = np.argsort(~inner, kind="stable")
            batch, cnt, budget = batch[:, order], cnt[order], budget[order]
        full = int(cnt[:n_inner].sum())
        lanes = int(cnt.sum())

        # Lane l belongs to interval parent[l]; its child index is lo + (l - start).
        k = batch.shape[1]
        parent = np.repeat(np.arange(k), cnt)
        starts = np.cumsum(cnt) - cnt
        offset = ((batch[5].astype(np.int64) - starts) & _M32).astype(np.uint32)
        sha = ws.sha
        for i in range(5):
            np.take(batch[i], parent, out=sha.w[i][:lanes], mode="clip")
        np.take(offset, parent, out=sha.w[5][:lanes], mode="clip")
        _add(sha.w[5][:lanes], ws.iota[:lanes], sha.w[5][:lanes])
        word4, words = sha.compress(lanes, full, _CHILD_TEMPLATE)
        n = ws.counts(word4)
        self._pending += lanes + int(n[full:].sum())
        if full:
            nf = n[:full]
            keep = nf > 0
            new = int(np.count_nonzero(keep))
            if new:
                base = self._m
                self._reserve(base + new)
                s = self._stack
                dst = s[:, base : base + new]
                for i in range(4):
                    np.compress(keep, words[i], out=dst[i])
                np.compress(keep, word4[:full], out=dst[4])
                dst[5] = 0
                dst[6] = np.compress(keep, nf)
                child_budget = np.take(budget[:n_inner] - 1, parent[:full])
                np.compress(keep, child_budget, out=dst[7])
                self._m = base + new
        return lanes


def count_nodes(seed: int, depth: int, n: int = DEFAULT_WORK_UNITS) -> int:
    """Number of nodes of the UTS tree (seed, depth), computed sequentially with ``UTSBag``.

    Args:
        seed: the tree's seed, an int in [0, 2**32).
        depth: the root's depth budget, an int ≥ 1.
        n: work units (children hashed) per ``process`` call, ≥ 1.

    Raises:
        ValueError: seed outside [0, 2**32), depth < 1 or n < 1.
        TypeError: seed or depth is not an integer.
    """
    return process_all(UTSBag(seed, depth), LongSum(), n).value()
