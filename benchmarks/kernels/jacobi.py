"""Jacobi iteration for the steady-state heat equation on a square grid (numpy kernel).

Problem: an ``n × n`` grid of float64 temperatures.  The boundary is fixed (the top row, row 0,
at 1.0; the other three edges at 0.0); the interior starts at 0.0.  One Jacobi iteration
replaces every interior point by the mean of its four neighbours (the 5-point stencil of the
Laplace equation, Δu = 0, the steady state of the heat equation)::

    new[i, j] = 0.25 * (((old[i-1, j] + old[i+1, j]) + old[i, j-1]) + old[i, j+1])

for ``1 <= i, j <= n-2``.  This is the workload of Bhosale et al., "Elastic scheduling of
Charm++ jobs on Kubernetes" (2024), whose malleable jobs are a Jacobi 2D solver.

Reproducibility.  Each new value is four IEEE float64 operations, always in the order written
above, on the same four neighbour values; numpy's elementwise ``add``/``multiply`` are exact
per element (vectorisation does not reorder them).  So any decomposition of the rows that feeds
each point the same neighbours yields the same bits as :func:`solve`, the sequential solver,
whatever the number of places, the halo depth or the resizes in between.

The distributed solver (``benchmarks/jacobi.py``) keeps, at each place, a block of interior rows
``[lo, hi)`` plus ``depth`` halo rows on each side (clipped to the grid), and runs up to
``depth`` iterations between halo exchanges on a shrinking row range (:func:`advance`): after
``k <= depth`` iterations the rows ``[lo, hi)`` are exact, the halo rows are stale.

Backends.  :func:`sweep` runs the compiled loop (numba, ``@njit(cache=True)``, no fastmath:
the same four operations in the same order, so the same bits) where the kernels' backend
(:func:`benchmarks.kernels._backend.backend`, setting ``APGAS_KERNELS``) is ``numba``, else
numpy's whole-array operations (four passes over the rows).  The compiled loop makes one pass
and is about 3 to 10 times faster; places may even use different backends in one run.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ._backend import backend as _backend
from ._backend import numba_available

__all__ = ["TOP", "initial_rows", "initial_grid", "sweep", "sweep_numpy", "sweep_numba",
           "advance", "solve", "checksum", "partition"]

TOP = 1.0
"""The fixed temperature of the top edge (row 0); the other edges are at 0.0."""


def initial_rows(n: int, a: int, b: int) -> np.ndarray:
    """Rows ``[a, b)`` of the initial ``n × n`` grid, a new ``(b - a, n)`` float64 array.

    Row 0 is the top edge (``TOP``); every other value is 0.0.

    Raises:
        ValueError: ``not 0 <= a <= b <= n``.
    """
    if not 0 <= a <= b <= n:
        raise ValueError(f"rows [{a}, {b}) are not rows of a {n} x {n} grid")
    rows = np.zeros((b - a, n), dtype=np.float64)
    if a == 0 and b > 0:
        rows[0, :] = TOP
    return rows


def initial_grid(n: int) -> np.ndarray:
    """The initial ``n × n`` grid (float64): top row ``TOP``, everything else 0.0."""
    return initial_rows(n, 0, n)


def sweep(src: np.ndarray, dst: np.ndarray, a: int, b: int, backend: str | None = None) -> None:
    """One Jacobi iteration of the local rows ``[a, b)``: ``dst[a:b, 1:-1]`` from ``src``.

    Args:
        src, dst: ``(m, n)`` float64 C-contiguous arrays, distinct; rows ``a-1 .. b`` of ``src``
            are read.
        a, b: local row indices, ``1 <= a <= b <= m - 1``.
        backend: ``"numba"`` or ``"numpy"``; ``None``: the kernels' backend of this process.

    Columns 0 and ``n-1`` (the side edges) and the rows outside ``[a, b)`` of ``dst`` are left
    untouched.  The operations are those of the module docstring, in that order.

    Raises:
        ConfigurationError: ``APGAS_KERNELS`` is bad, or ``numba`` where numba does not import.
    """
    if a >= b:
        return
    if (backend or _backend()) == "numba":
        sweep_numba(src, dst, a, b)
    else:
        sweep_numpy(src, dst, a, b)


def sweep_numpy(src: np.ndarray, dst: np.ndarray, a: int, b: int) -> None:
    """:func:`sweep` with numpy's whole-array operations."""
    if a >= b:
        return
    out = dst[a:b, 1:-1]
    np.add(src[a - 1:b - 1, 1:-1], src[a + 1:b + 1, 1:-1], out=out)
    out += src[a:b, :-2]
    out += src[a:b, 2:]
    out *= 0.25


def _sweep_loops(src: Any, dst: Any, a: int, b: int) -> None:  # compiled by sweep_numba
    m = src.shape[1]
    for i in range(a, b):
        for j in range(1, m - 1):
            dst[i, j] = 0.25 * (((src[i - 1, j] + src[i + 1, j]) + src[i, j - 1]) + src[i, j + 1])


_compiled: Callable[..., None] | None = None
_compile_lock = threading.Lock()


def sweep_numba(src: np.ndarray, dst: np.ndarray, a: int, b: int) -> None:
    """:func:`sweep` as a compiled loop (numba; compiled on first use, cached on disk).

    Raises:
        ImportError: numba is not installed.
    """
    global _compiled
    if _compiled is None:
        with _compile_lock:
            if _compiled is None:
                if not numba_available():  # sets numba's cache directory first
                    raise ImportError("numba does not import here: pip install 'apgaspy[fast]'")
                from numba import njit

                _compiled = njit(cache=True)(_sweep_loops)
    _compiled(src, dst, a, b)


def advance(u: np.ndarray, v: np.ndarray, base: int, n: int, lo: int, hi: int,
            k: int) -> tuple[np.ndarray, np.ndarray]:
    """Run ``k`` iterations on a block that holds global rows ``[base, base + len(u))``.

    Iteration ``j`` (1-based) updates the global rows ``[lo - k + j, hi + k - j)`` clipped to
    the interior ``[1, n - 1)``; so with ``k`` rows of valid halo on each side of ``[lo, hi)``,
    the rows ``[lo, hi)`` come out exact.  ``u`` and ``v`` swap roles at each iteration; both
    must hold the same fixed boundary rows and columns.

    Args:
        u: ``(m, n)`` float64, the current values; v: the same shape, scratch.
        base: the global index of local row 0.
        n: the grid size; lo, hi: the block's own interior rows; k: iterations, ``k >= 0``.

    Returns:
        ``(current, scratch)``: the array holding the values after ``k`` iterations first.
    """
    top, bottom = base, base + u.shape[0]
    for j in range(1, k + 1):
        a = max(1, lo - k + j, top + 1)
        b = min(n - 1, hi + k - j, bottom - 1)
        sweep(u, v, a - base, b - base)
        u, v = v, u
    return u, v


def solve(n: int, iterations: int, backend: str | None = None) -> np.ndarray:
    """The sequential reference: the ``n × n`` grid after ``iterations`` Jacobi iterations.

    ``backend``: as :func:`sweep` (the answer is the same bits with either).

    Raises:
        ValueError: ``n < 3`` or ``iterations < 0``.
    """
    if n < 3:
        raise ValueError(f"grid {n}: needs n >= 3 (at least one interior point)")
    if iterations < 0:
        raise ValueError(f"iterations {iterations}: must be >= 0")
    u = initial_grid(n)
    v = u.copy()
    for _ in range(iterations):
        sweep(u, v, 1, n - 1, backend)
        u, v = v, u
    return u


def checksum(grid: np.ndarray) -> str:
    """SHA-256 (hex) of the grid's values as little-endian float64, in row-major order."""
    data = np.ascontiguousarray(grid, dtype="<f8")
    return hashlib.sha256(data.tobytes()).hexdigest()


def partition(n: int, count: int) -> list[tuple[int, int]]:
    """Cut the interior rows ``[1, n - 1)`` into ``count`` contiguous blocks ``(lo, hi)``.

    Block sizes differ by at most one (the first blocks get the extra rows); with more
    blocks than interior rows, the last blocks are empty (``lo == hi``).

    Raises:
        ValueError: ``n < 3`` or ``count < 1``.
    """
    if n < 3:
        raise ValueError(f"grid {n}: needs n >= 3 (at least one interior point)")
    if count < 1:
        raise ValueError(f"cannot cut the rows into {count} blocks")
    rows = n - 2
    size, extra = divmod(rows, count)
    blocks, lo = [], 1
    for i in range(count):
        hi = lo + size + (1 if i < extra else 0)
        blocks.append((lo, hi))
        lo = hi
    return blocks
