"""N-Queens: count the placements of N non-attacking queens on an N×N board.

Definition: a solution puts one queen in each row so that no two queens share a column or a
diagonal; the kernel counts all solutions (reflections and rotations are distinct).  Known
counts: N=8: 92, 10: 724, 12: 14,200, 13: 73,712, 14: 365,596, 15: 2,279,184, 16: 14,772,512,
17: 95,815,104, 18: 666,090,624 (OEIS A000170).  By convention N=1 has 1 solution and N=2, 3
have none.

Source: the N-Queens benchmark of the GLB suite (LifelineGLB by Posner, the X10/APGAS GLB
examples).  The Java GLB kernel backtracks row by row and checks each candidate column against
every queen already placed (int arrays; see benchmarks/java/NQueens.java); this module
backtracks on bitboards instead, in the style of Martin Richards' and Jeff Somers' bitwise
algorithm: a partial board
with queens in its first ``d`` rows is three bit masks, one bit a column,

* ``cols``: columns already taken,
* ``ld``: squares of row ``d`` attacked along "left" diagonals (shifted left one bit a row),
* ``rd``: squares of row ``d`` attacked along "right" diagonals (shifted right one bit a row),

so the free squares of row ``d`` are ``~(cols | ld | rd) & mask`` and placing a queen on the
free bit ``b`` gives the child ``(cols | b, (ld | b) << 1, (rd | b) >> 1)``.

This module runs the search vectorized in numpy: a set of partial boards of one depth lives in
a ``(3, k)`` array (rows ``cols``, ``ld``, ``rd``) and one numpy pass expands all of them at
once (repeatedly take the lowest free bit ``free & -free`` of every board still having one).
Boards with two rows left are not expanded: their completions are counted in closed form from
bit counts (see ``_count_last_two``).  The left-right mirror symmetry of the board halves the
work: the first queen only goes in the left half of row 0 (for odd N, the middle column of row
0 is combined with the left half of row 1) and every count is doubled.

Full-tree mode (``NQueensBag(n, full_tree=True)``, ``count_full_tree``): the same vectorized
expansion, but from the empty board, without the mirror symmetry and without the closed form:
boards are expanded down to row ``N - 1`` and the solutions are the free squares of that last
row.  It visits every *valid partial board* once, as a plain backtracking search does (the Java
GLB kernel, which checks each of the N candidate columns of a row against every queen already
placed): a valid partial board is a placement of ``k`` queens, ``1 ≤ k ≤ N``, one in each of
the first ``k`` rows, no two attacking each other; complete solutions count (``k = N``), the
empty board does not.  N = 12, 13, 14 have 856,188, 4,674,889 and 27,358,552 of them.  The
mode exists to compare boards per second like for like; it takes about twice as long as the
default search (N = 12 to 14, measured).

Differences from the Java GLB kernel, default mode: bitboards instead of candidate checks
against int arrays, numpy passes over up to 65,536 boards at once instead of one board at a
time, mirror symmetry (half the tree) and the closed form for the last two rows (no boards
expanded there).  Full-tree mode keeps only the first two differences.

No compiled kernel: N-Queens runs this numpy kernel whatever ``APGAS_KERNELS`` says, because
the compiled versions measured were slower than it on one core of the reference machine
(numba 0.68): a bitboard backtracking search without symmetry, one board at a time, visited
the full tree at 160 M valid partial boards/s against 220-270 M for this kernel's full-tree
mode (N = 12 to 15; data-dependent branches on every board), and a compiled copy of
``_expand`` over the same 65,536-board chunks took twice as long as the numpy passes, which
run branch-free over whole arrays of boards.

Public API: ``NQueensBag`` (a GLB ``Bag[LongSum]``), ``count_solutions``, ``count_full_tree``,
``DEFAULT_WORK_UNITS`` and ``MAX_N``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from glb import Bag, LongSum, process_all

__all__ = ["NQueensBag", "count_solutions", "count_full_tree", "DEFAULT_WORK_UNITS", "MAX_N"]

#: Largest supported board size: masks are stored in ``uint32`` (one bit a column).
MAX_N = 32

#: Partial boards handled by one ``NQueensBag.process`` call (the bag's work unit is one partial
#: board expanded or counted).  Chosen so that a call takes roughly 5-20 ms on one core of the
#: reference machine: measured median 10 ms a call (p90 12-13 ms) for N=14 and N=15; a board
#: costs 2-9 ns, children included, depending on its depth.
DEFAULT_WORK_UNITS = 1 << 21

# Boards expanded by one vectorized pass.  Large enough that numpy's per-call overhead (about a
# microsecond for each of the ~12 calls per row of children) is amortized, small enough that the
# working set of one pass (a dozen arrays of this length, ~1.5 MiB in uint16) stays near the
# L2 cache.  N=14 timings: 2^13 0.22 s, 2^14 0.11 s, 2^15..2^18 0.077-0.087 s (within noise).
# It also bounds the memory of the depth-first search: a depth holds at most _CHUNK * N boards.
_CHUNK = 1 << 16

# A pass over boards of which fewer than this fraction still have a free square first compacts
# them (np.nonzero + take, ~3 ns a board kept) instead of computing and poisoning dead children
# (~1 ns a board for the dozen elementwise ops of a row of children).  Tuned on N=14 (0.35 to
# 1.0 tried; 0.5-0.8 are within noise of each other).
_COMPACT_BELOW = 0.65


def _check_n(n: int) -> int:
    """Validate a board size and return it as a Python int.

    Raises:
        TypeError: ``n`` is not an integer.
        ValueError: ``n`` < 1 or ``n`` > ``MAX_N``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"board size must be an integer, got {type(n).__name__}")
    n = int(n)
    if n < 1:
        raise ValueError(f"board size must be at least 1, got {n}")
    if n > MAX_N:
        raise ValueError(
            f"board size {n} exceeds MAX_N={MAX_N}: boards are {MAX_N}-bit column masks"
        )
    return n


def _dtype_for(n: int) -> type:
    """Mask dtype for board size ``n``: uint16 up to 16 columns (half the memory traffic of
    uint32, which the kernel is bound by), uint32 beyond."""
    return np.uint16 if n <= 16 else np.uint32


def _initial_boards(n: int, full_tree: bool = False) -> tuple[int, list[np.ndarray]]:
    """The starting partial boards of the symmetric search (or of the full tree) and their weight.

    Returns:
        ``(weight, levels)``: every solution found from the boards counts ``weight`` times;
        ``levels[d]`` is a ``(3, k)`` array of the boards with ``d`` queens placed.

    For n ≥ 2 the mirror image of a solution with its row-0 queen in column ``c`` has it in
    column ``n-1-c``, so the boards are row-0 queens in columns ``0 .. n//2-1`` and, for odd
    ``n``, the middle column of row 0 with a row-1 queen left of it (a row-1 queen can never
    sit in the middle column then, so the mirror pairs up the rest); weight 2.  For n = 1 the
    only board is the empty one, weight 1.  With ``full_tree`` the only board is the empty one,
    weight 1, for every n.
    """
    dt = _dtype_for(n)
    levels: list[np.ndarray] = [np.zeros((3, 0), dtype=dt) for _ in range(n)]
    if n == 1 or full_tree:
        levels[0] = np.zeros((3, 1), dtype=dt)
        return 1, levels
    row0 = [(1 << c, (1 << c) << 1, (1 << c) >> 1) for c in range(n // 2)]
    levels[1] = np.array(row0, dtype=dt).T.copy() if row0 else levels[1]
    if n % 2 == 1:
        m = 1 << (n // 2)
        cols, ld, rd = m, m << 1, m >> 1
        row1 = []
        for c in range(n // 2):
            b = 1 << c
            if not (b & (cols | ld | rd)):
                row1.append((cols | b, ((ld | b) << 1) & ((1 << n) - 1), (rd | b) >> 1))
        if row1:
            levels[2] = np.array(row1, dtype=dt).T.copy()
    return 2, levels


def _expand(boards: np.ndarray, mask: int) -> np.ndarray:
    """All children of a set of partial boards, one row further down.

    Args:
        boards: ``(3, k)`` array (uint16 or uint32) of boards of one depth; rows are ``cols``,
            ``ld``, ``rd``.  Not modified.
        mask: ``(1 << N) - 1``, the columns of the board.

    Returns:
        A ``(3, K)`` array of the same dtype: the children, in no particular order.  Some
        entries may be *dead* boards, poisoned with ``cols == mask`` (no free square, so they
        have no children and complete to zero solutions); this saves compacting the output.
    """
    dt = boards.dtype.type
    full = dt(mask)
    one = dt(1)
    zero = dt(0)
    free = boards[0] | boards[1]
    free |= boards[2]
    np.invert(free, out=free)
    free &= full
    alive = np.not_equal(free, zero)
    n = free.shape[0]
    live = int(np.count_nonzero(alive))
    if live == 0:
        return np.empty((3, 0), dtype=dt)
    parents = boards
    outs: list[np.ndarray] = []
    bit = np.empty(n, dtype=dt)
    while True:
        if live < _COMPACT_BELOW * n:
            keep = np.nonzero(alive[:n])[0]
            parents = parents.take(keep, axis=1)
            free = free.take(keep)
            n = live
        b = bit[:n]
        np.negative(free, out=b)
        b &= free  # lowest free bit of every board (0 for a board already exhausted)
        child = parents | b  # broadcast over the rows cols, ld, rd
        child[1] <<= one
        child[2] >>= one
        if live < n:
            # Exhausted boards still in the arrays give b == 0: poison their "child" so that it
            # has no free square (cheaper than compacting on every pass).
            child[0] |= np.equal(b, zero).view(np.uint8) * full
        outs.append(child)
        free ^= b
        np.not_equal(free, zero, out=alive[:n])
        live = int(np.count_nonzero(alive[:n]))
        if live == 0:
            break
    return outs[0] if len(outs) == 1 else np.concatenate(outs, axis=1)


def _count_last_two(boards: np.ndarray, mask: int) -> int:
    """Number of completions of boards with exactly two rows left, without expanding them.

    Args:
        boards: ``(3, k)`` array (uint16 or uint32) of boards of depth ``N - 2``.
        mask: ``(1 << N) - 1``.

    Returns:
        The number of ways to place the last two queens, summed over the boards (a Python int).

    With ``A`` the free squares of the next row and ``B = ~(cols | ld << 1 | rd >> 1)`` the
    squares of the last row not attacked by the queens already placed, a queen on ``x`` in
    ``A`` leaves ``B`` minus ``{x-1, x, x+1}`` for the last row, so the count is
    ``|A|·|B| - |A ∩ B| - |A ∩ (B >> 1)| - |A ∩ (B << 1)|`` (``|·|`` = popcount).
    """
    dt = boards.dtype.type
    full = dt(mask)
    one = dt(1)
    cols, ld, rd = boards[0], boards[1], boards[2]
    a = cols | ld
    a |= rd
    np.invert(a, out=a)
    a &= full
    b = ld << one
    t = rd >> one
    b |= t
    b |= cols
    np.invert(b, out=b)
    b &= full
    pa = np.bitwise_count(a).astype(np.int32)
    pa *= np.bitwise_count(b)
    total = int(pa.sum(dtype=np.int64))
    np.bitwise_and(a, b, out=t)
    overlap = np.bitwise_count(t)
    np.right_shift(b, one, out=t)
    t &= a
    overlap += np.bitwise_count(t)
    np.left_shift(b, one, out=t)
    t &= a
    overlap += np.bitwise_count(t)
    return total - int(overlap.sum(dtype=np.int64))


def _count_tail(boards: np.ndarray, depth: int, n: int) -> int:
    """Solutions below boards of depth ``n-2`` or ``n-1`` (a Python int)."""
    mask = (1 << n) - 1
    if depth == n - 2:
        return _count_last_two(boards, mask)
    # depth == n - 1: every free square of the last row is a solution.
    free = boards[0] | boards[1]
    free |= boards[2]
    np.invert(free, out=free)
    free &= boards.dtype.type(mask)
    return int(np.bitwise_count(free).sum(dtype=np.int64))


class NQueensBag(Bag[LongSum]):
    """A GLB bag of pending N-Queens partial boards, searched depth-first in vectorized chunks.

    Args:
        n: the board size N, an int with 1 ≤ N ≤ ``MAX_N``.  The new bag holds the whole
            problem (the empty board, as the row-0 placements of the symmetric search).
        full_tree: search the full tree without symmetry and without the closed form, and
            count the valid partial boards in ``boards`` (module docstring); the solution
            count is the same.

    Raises:
        TypeError: ``n`` is not an integer.
        ValueError: ``n`` < 1 or ``n`` > ``MAX_N``.

    Work unit: one partial board expanded into its children (or, for boards with at most two
    rows left, counted in closed form; in full-tree mode, the boards with one row left are
    counted, two are not).  ``process(k, result)`` handles up to ``k`` boards,
    at most ``_CHUNK`` (65,536) a pass, from the deepest pending depth, and adds the solutions
    it completes to ``result``; nothing is kept back for ``submit``.

    The pending boards are kept per depth (``depth`` = queens placed) as lists of ``(3, k)``
    arrays of uint16 (N ≤ 16) or uint32; the depth-first order bounds each depth to about
    ``_CHUNK * N`` boards (N = 18 measured: at most 2.0 M boards pending, 64 MB peak RSS of
    the whole process).

    Attributes:
        n: the board size.
        full_tree: the mode (bool).
        boards: full-tree mode only, the valid partial boards this bag has visited (boards
            taken from it by ``process``, plus the solutions found below its last-row boards);
            a split's loot starts at 0 and ``merge`` adds the other bag's count, so the sum
            over the bags of a run is the tree's count.  Always 0 in the default mode.
    """

    __slots__ = ("n", "full_tree", "boards", "_weight", "_levels", "_pending", "_tail")

    def __init__(self, n: int, full_tree: bool = False) -> None:
        self.n = _check_n(n)
        self.full_tree = bool(full_tree)
        self.boards = 0
        weight, levels = _initial_boards(self.n, self.full_tree)
        self._weight = weight
        # Depth from which boards are counted, not expanded (_count_tail).
        self._tail = self.n - 1 if self.full_tree else self.n - 2
        self._levels: list[list[np.ndarray]] = [[a] if a.shape[1] else [] for a in levels]
        self._pending = sum(a.shape[1] for a in levels)

    # -- queries -------------------------------------------------------------------------------

    def pending(self) -> int:
        """Number of partial boards waiting in the bag (including poisoned dead ones)."""
        return self._pending

    def is_empty(self) -> bool:
        return self._pending == 0

    def is_splittable(self) -> bool:
        return self._pending >= 2

    # -- work ----------------------------------------------------------------------------------

    def process(self, n: int, result: LongSum) -> None:
        """Expand or count up to ``n`` pending boards, deepest first, and add the solutions
        found to ``result``.

        Args:
            n: work units, partial boards (≥ 1).
            result: the ``LongSum`` receiving the solution count.
        """
        budget = max(int(n), 1)
        size = self.n
        mask = (1 << size) - 1
        found = 0
        levels = self._levels
        tail = self._tail
        full = self.full_tree
        while budget > 0 and self._pending > 0:
            depth = size - 1
            while not levels[depth]:
                depth -= 1
            segs = levels[depth]
            want = min(budget, _CHUNK)
            if len(segs) > 1 and segs[-1].shape[1] < want:
                # Merged loot leaves several small segments; join them to keep passes long.
                segs[:] = [np.concatenate(segs, axis=1)]
            seg = segs[-1]
            k = seg.shape[1]
            take = min(k, want)
            chunk = seg[:, k - take :]
            if take == k:
                segs.pop()
            else:
                segs[-1] = seg[:, : k - take]
            self._pending -= take
            budget -= take
            if full and depth:
                # Valid partial boards: the live boards of this chunk (poisoned dead ones have
                # every column taken, which no board above the last row has).
                self.boards += int(np.count_nonzero(chunk[0] != chunk.dtype.type(mask)))
            if depth >= tail:
                tail_found = _count_tail(chunk, depth, size)
                found += tail_found
                if full:
                    self.boards += tail_found  # the complete boards of the last row
            else:
                children = _expand(chunk, mask)
                if children.shape[1]:
                    levels[depth + 1].append(children)
                    self._pending += children.shape[1]
        if found:
            result.add(found * self._weight)

    # -- load balancing ------------------------------------------------------------------------

    def _empty_like(self) -> NQueensBag:
        bag = NQueensBag.__new__(NQueensBag)
        bag.n = self.n
        bag.full_tree = self.full_tree
        bag.boards = 0
        bag._tail = self._tail
        bag._weight = self._weight
        bag._levels = [[] for _ in range(self.n)]
        bag._pending = 0
        return bag

    def split(self, take_all: bool) -> NQueensBag | None:
        """Give away about half of the pending boards of every depth.

        Each depth is halved (alternate boards, which mixes boards of different parents), so
        the loot gets about half of the shallow boards, which hold most of the work.  Where a
        depth holds an odd number the extra board goes alternately to the loot and to the
        bag, starting with the loot at the shallowest such depth.

        Args:
            take_all: when the bag holds a single board (not splittable), give it.

        Returns:
            A new ``NQueensBag`` with the loot, or ``None`` when nothing is given.
        """
        if self._pending == 0:
            return None
        loot = self._empty_like()
        if self._pending < 2:
            if not take_all:
                return None
            loot._levels, self._levels = self._levels, loot._levels
            loot._pending, self._pending = self._pending, 0
            return loot
        give_extra = True
        for depth, segs in enumerate(self._levels):
            if not segs:
                continue
            arr = segs[0] if len(segs) == 1 else np.concatenate(segs, axis=1)
            k = arr.shape[1]
            if k % 2 == 1:
                first_to_loot = give_extra
                give_extra = not give_extra
            else:
                first_to_loot = False
            given = np.ascontiguousarray(arr[:, 0::2] if first_to_loot else arr[:, 1::2])
            kept = np.ascontiguousarray(arr[:, 1::2] if first_to_loot else arr[:, 0::2])
            self._levels[depth] = [kept] if kept.shape[1] else []
            if given.shape[1]:
                loot._levels[depth] = [given]
                loot._pending += given.shape[1]
        self._pending -= loot._pending
        return loot

    def merge(self, other: Bag[LongSum]) -> None:
        """Append all of ``other``'s boards to this bag (and, in full-tree mode, add its
        ``boards`` count to this one's).

        Raises:
            TypeError: ``other`` is not an ``NQueensBag``.
            ValueError: ``other`` is for another board size or the other mode.
        """
        if not isinstance(other, NQueensBag):
            raise TypeError(f"cannot merge {type(other).__name__} into NQueensBag")
        if other.n != self.n:
            raise ValueError(f"cannot merge a bag for N={other.n} into one for N={self.n}")
        if other.full_tree != self.full_tree:
            raise ValueError("cannot merge a full-tree bag with a symmetric one")
        for depth, segs in enumerate(other._levels):
            self._levels[depth].extend(segs)
        self._pending += other._pending
        self.boards += other.boards
        other._levels = [[] for _ in range(other.n)]
        other._pending = 0
        other.boards = 0

    # -- pickling: one array of boards plus per-depth counts (and the mode) --------------------

    def __getstate__(self) -> tuple[int, np.ndarray, np.ndarray] | tuple[Any, ...]:
        counts = np.array([sum(s.shape[1] for s in segs) for segs in self._levels], np.int64)
        parts = [s for segs in self._levels for s in segs]
        boards = (
            np.concatenate(parts, axis=1) if parts else np.empty((3, 0), dtype=_dtype_for(self.n))
        )
        if self.full_tree:
            return self.n, counts, boards, True, self.boards
        return self.n, counts, boards

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        n, counts, boards = state[:3]
        self.n = n
        self.full_tree = len(state) > 3 and bool(state[3])
        self.boards = int(state[4]) if self.full_tree else 0
        self._tail = n - 1 if self.full_tree else n - 2
        self._weight = 1 if n == 1 or self.full_tree else 2
        self._levels = []
        start = 0
        for c in counts.tolist():
            self._levels.append([boards[:, start : start + c]] if c else [])
            start += c
        self._pending = start

    def __repr__(self) -> str:
        mode = ", full_tree=True" if self.full_tree else ""
        return f"NQueensBag(n={self.n}{mode}, pending={self._pending})"


def count_solutions(n: int, work_units: int = DEFAULT_WORK_UNITS) -> int:
    """Count the solutions of the N-Queens problem by running one bag to the end.

    Args:
        n: the board size N, 1 ≤ N ≤ ``MAX_N`` (N ≥ 19 takes hours on one core).
        work_units: partial boards per ``process`` call (≥ 1).

    Returns:
        The number of solutions (a Python int): 1 for N=1, 0 for N=2 and N=3.

    Raises:
        TypeError: ``n`` is not an integer.
        ValueError: ``n`` out of range, or ``work_units`` < 1.
    """
    bag = NQueensBag(n)
    return process_all(bag, LongSum(), work_units).value()


def count_full_tree(n: int, work_units: int = DEFAULT_WORK_UNITS) -> tuple[int, int]:
    """Search the full N-Queens tree (no symmetry, no closed form) by running one full-tree bag
    to the end, counting solutions and valid partial boards.

    A valid partial board is a placement of ``k`` queens, 1 ≤ k ≤ N, one in each of the first
    ``k`` rows, no two attacking (complete solutions included, the empty board not): the boards
    a plain backtracking search accepts, as in the Java GLB kernel (module docstring).

    Args:
        n: the board size N, 1 ≤ N ≤ ``MAX_N`` (N = 14 takes about a quarter of a second).
        work_units: partial boards per ``process`` call (≥ 1).

    Returns:
        ``(solutions, boards)``, two Python ints; N = 12 gives ``(14200, 856188)``.

    Raises:
        TypeError: ``n`` is not an integer.
        ValueError: ``n`` out of range, or ``work_units`` < 1.
    """
    bag = NQueensBag(n, full_tree=True)
    solutions = process_all(bag, LongSum(), work_units).value()
    return solutions, bag.boards
