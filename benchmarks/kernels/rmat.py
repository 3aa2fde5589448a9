"""The R-MAT graph generator of the betweenness benchmark (SSCA2 v2.2): the SplitMix64
stream, the edge list and the CSR ``Graph``.  The definition (parameters, random numbers, edge
order) is the docstring of :mod:`benchmarks.kernels.bc`, which re-exports these names.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "A",
    "B",
    "C",
    "D",
    "EDGE_FACTOR",
    "GAMMA",
    "Graph",
    "rmat_edges",
    "rmat_graph",
    "splitmix64",
]

#: R-MAT quadrant probabilities of SSCA2 v2.2.
A, B, C, D = 0.55, 0.1, 0.1, 0.25
#: Edges per vertex.
EDGE_FACTOR = 8
#: SplitMix64 increment (the golden gamma).
GAMMA = 0x9E3779B97F4A7C15

# Largest scale accepted.  Vertex ids must fit the int32 targets; already at 2**30 vertices
# the int64 edge list alone needs 128 GiB, so larger requests are refused as absurd.
_MAX_SCALE = 30

_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_U64_MASK = (1 << 64) - 1


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
        self._plan: Any = None  # the kernel's plan (_bc_numpy._Plan), built on first use

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
