"""Tests of the N-Queens kernel (``benchmarks.kernels.nqueens``): exact counts, the bag protocol
under random splits/merges/pickling, and argument checking.

N-Queens has no compiled kernel (the module docstring says why); the known counts are checked
under both settings of ``APGAS_KERNELS`` all the same, since either may be set for a run."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from benchmarks.kernels.nqueens import (
    DEFAULT_WORK_UNITS,
    MAX_N,
    NQueensBag,
    count_full_tree,
    count_solutions,
)
from glb import LongSum, process_all

from .bagcheck import drive_randomly

# OEIS A000170.
KNOWN = {
    1: 1,
    2: 0,
    3: 0,
    4: 2,
    5: 10,
    6: 4,
    7: 40,
    8: 92,
    9: 352,
    10: 724,
    11: 2680,
    12: 14200,
    13: 73712,
    14: 365596,
}


def reference_count(n: int) -> int:
    """Plain backtracking over column lists (no bit tricks), for small n."""

    def place(queens: list[int]) -> int:
        row = len(queens)
        if row == n:
            return 1
        total = 0
        for col in range(n):
            if all(col != c and abs(col - c) != row - r for r, c in enumerate(queens)):
                total += place(queens + [col])
        return total

    return place([])


@pytest.mark.parametrize("n", range(1, 10))
def test_reference_agrees(n: int) -> None:
    assert reference_count(n) == KNOWN[n]
    assert count_solutions(n) == KNOWN[n]


@pytest.mark.parametrize("n", sorted(KNOWN))
def test_known_counts(n: int, kernels: str) -> None:
    assert count_solutions(n) == KNOWN[n]


@pytest.mark.parametrize("work_units", [1, 7, 1000, DEFAULT_WORK_UNITS])
def test_work_units_do_not_change_count(work_units: int) -> None:
    assert count_solutions(9, work_units) == KNOWN[9]


def test_default_work_units() -> None:
    assert isinstance(DEFAULT_WORK_UNITS, int) and DEFAULT_WORK_UNITS >= 1


@pytest.mark.parametrize("bad", [0, -1, -100, MAX_N + 1, 64])
def test_invalid_size(bad: int) -> None:
    with pytest.raises(ValueError):
        NQueensBag(bad)
    with pytest.raises(ValueError):
        count_solutions(bad)


def test_non_integer_size() -> None:
    with pytest.raises(TypeError):
        NQueensBag(8.0)  # type: ignore[arg-type]


def test_invalid_work_units() -> None:
    with pytest.raises(ValueError):
        count_solutions(6, 0)


def test_max_n_bag_can_start() -> None:
    # The widest board must build and expand (not run to the end: that takes forever).
    bag = NQueensBag(MAX_N)
    result = LongSum()
    bag.process(10_000, result)
    assert result.value() == 0
    assert not bag.is_empty()


def test_empty_bag_behaviour() -> None:
    bag = NQueensBag(6)
    process_all(bag, LongSum(), 100)
    assert bag.is_empty()
    assert not bag.is_splittable()
    assert bag.split(False) is None
    assert bag.split(True) is None
    result = LongSum()
    bag.process(10, result)
    assert result.value() == 0


def test_single_board_split() -> None:
    bag = NQueensBag(1)  # exactly one board: the empty 1×1 board
    assert not bag.is_splittable()
    assert bag.split(False) is None
    loot = bag.split(True)
    assert loot is not None and bag.is_empty() and loot.pending() == 1
    assert process_all(loot, LongSum(), 10).value() == 1


def test_split_halves_every_depth() -> None:
    bag = NQueensBag(12)
    bag.process(200, LongSum())
    before = bag.pending()
    loot = bag.split(False)
    assert loot is not None
    assert loot.pending() + bag.pending() == before
    assert abs(loot.pending() - bag.pending()) <= len(bag._levels)
    total = LongSum()
    process_all(bag, total, 5000)
    process_all(loot, total, 5000)
    assert total.value() == 14200


def test_merge_rejects_other_sizes() -> None:
    with pytest.raises(ValueError):
        NQueensBag(8).merge(NQueensBag(9))
    with pytest.raises(TypeError):
        NQueensBag(8).merge(object())  # type: ignore[arg-type]


def test_pickle_is_compact_and_exact() -> None:
    bag = NQueensBag(13)
    result = LongSum()
    bag.process(300_000, result)
    blob = pickle.dumps(bag)
    # 3 uint16 masks a board plus a small header.
    assert len(blob) < 6 * bag.pending() + 2000
    clone = pickle.loads(blob)
    assert clone.pending() == bag.pending()
    process_all(clone, result, DEFAULT_WORK_UNITS)
    assert result.value() == 73712


@pytest.mark.parametrize("n,seed", [(10, 1), (11, 2), (12, 3), (12, 4)])
def test_random_split_merge_pickle(n: int, seed: int) -> None:
    """Random interleavings of process/split/merge/pickle never lose or duplicate work."""
    total = drive_randomly([NQueensBag(n)], LongSum(), random.Random(seed),
                           [1, 3, 50, 1000, 20_000], max_steps=100_000)
    assert total.value() == KNOWN[n]


def test_children_are_valid_boards() -> None:
    """Every pending board, decoded, is a valid partial placement of its depth."""
    n = 8
    bag = NQueensBag(n)
    bag.process(40, LongSum())
    mask = (1 << n) - 1
    for depth, segs in enumerate(bag._levels):
        for seg in segs:
            cols = seg[0].astype(np.int64)
            live = cols != mask  # poisoned (dead) boards have every column taken
            assert np.all(np.bitwise_count(cols[live]) == depth)


# -- full-tree mode: valid partial boards ------------------------------------------------------

# Valid partial boards of the full tree (k = 1..N queens in the first k rows, none attacking,
# solutions included, the empty board not): 0.86 / 4.67 / 27.4 M for N = 12 / 13 / 14 in
# (benchmark definitions); the exact values are those of reference_boards (N <= 13, checked below).
FULL_TREE_BOARDS = {12: 856_188, 13: 4_674_889, 14: 27_358_552}


def reference_boards(n: int) -> tuple[int, int]:
    """(solutions, valid partial boards) by plain backtracking over column lists, with the
    Java kernel's candidate test (each candidate column against every queen placed)."""
    solutions = boards = 0

    def place(queens: list[int]) -> None:
        nonlocal solutions, boards
        row = len(queens)
        if row == n:
            solutions += 1
            return
        for col in range(n):
            if all(col != c and abs(col - c) != row - r for r, c in enumerate(queens)):
                boards += 1
                queens.append(col)
                place(queens)
                queens.pop()

    place([])
    return solutions, boards


def reference_boards_bits(n: int) -> tuple[int, int]:
    """The same count on bit masks (fast enough for N = 12 and 13 in pure Python)."""
    full = (1 << n) - 1
    solutions = boards = 0
    stack = [(0, 0, 0, 0)]
    while stack:
        depth, cols, ld, rd = stack.pop()
        if depth == n:
            solutions += 1
            continue
        free = ~(cols | ld | rd) & full
        while free:
            b = free & -free
            free ^= b
            boards += 1
            stack.append((depth + 1, cols | b, ((ld | b) << 1) & full, (rd | b) >> 1))
    return solutions, boards


@pytest.mark.parametrize("n", range(1, 10))
def test_full_tree_matches_reference(n: int) -> None:
    expected = reference_boards(n)
    assert reference_boards_bits(n) == expected
    assert count_full_tree(n) == expected
    assert expected[0] == KNOWN[n]


def test_full_tree_small_boards_by_hand() -> None:
    # N=1: the one queen.  N=2: two one-queen boards, no second row possible.  N=3: three
    # one-queen boards and two two-queen ones (corner queen, opposite corner of row 1).  N=4:
    # 4 + 6 + 4 + 2.
    assert [count_full_tree(n)[1] for n in (1, 2, 3, 4)] == [1, 2, 5, 16]


@pytest.mark.parametrize("n", [12, 13])
def test_full_tree_boards_match_spec(n: int) -> None:
    expected = reference_boards_bits(n)
    assert expected == (KNOWN[n], FULL_TREE_BOARDS[n])
    assert count_full_tree(n) == expected
    # The benchmark definitions round them to 0.86 and 4.67 M.
    assert round(expected[1] / 1e6, 2) == {12: 0.86, 13: 4.67}[n]


def test_full_tree_spec_figure_14() -> None:
    solutions, boards = count_full_tree(14)
    assert solutions == 365_596
    assert boards == FULL_TREE_BOARDS[14]
    assert round(boards / 1e6, 1) == 27.4


@pytest.mark.parametrize("n", range(1, 12))
def test_modes_give_the_same_solutions(n: int) -> None:
    assert count_full_tree(n)[0] == count_solutions(n) == KNOWN[n]


@pytest.mark.parametrize("work_units", [1, 7, 1000, DEFAULT_WORK_UNITS])
def test_full_tree_work_units_do_not_change_counts(work_units: int) -> None:
    assert count_full_tree(9, work_units) == (352, 8393)


def test_default_mode_counts_no_boards() -> None:
    bag = NQueensBag(9)
    assert process_all(bag, LongSum(), 1000).value() == 352
    assert bag.boards == 0 and not bag.full_tree


def test_full_tree_split_merge_pickle_keep_the_counts() -> None:
    """Boards counted by every bag of a run, loot and merged bags included, add up exactly."""
    n = 11
    expected = reference_boards_bits(n)
    bag = NQueensBag(n, full_tree=True)
    total = LongSum()
    bag.process(300, total)
    loot = bag.split(False)
    assert loot is not None and loot.full_tree and loot.boards == 0
    loot.process(500, total)
    loot = pickle.loads(pickle.dumps(loot))
    assert loot.full_tree and loot.boards > 0
    other = loot.split(False)
    assert other is not None
    other.process(100, total)
    bag.merge(other)
    assert other.boards == 0 and other.is_empty()
    process_all(bag, total, 2000)
    process_all(loot, total, 2000)
    assert (total.value(), bag.boards + loot.boards) == expected


@pytest.mark.parametrize("n,seed", [(10, 5), (12, 6)])
def test_full_tree_random_split_merge_pickle(n: int, seed: int) -> None:
    total = drive_randomly([NQueensBag(n, full_tree=True)], LongSum(), random.Random(seed),
                           [1, 3, 50, 1000, 20_000], max_steps=100_000)
    assert total.value() == KNOWN[n]


def test_modes_do_not_merge() -> None:
    with pytest.raises(ValueError):
        NQueensBag(8).merge(NQueensBag(8, full_tree=True))
    with pytest.raises(ValueError):
        NQueensBag(8, full_tree=True).merge(NQueensBag(8))


def test_full_tree_pickle_keeps_the_mode() -> None:
    bag = NQueensBag(10, full_tree=True)
    bag.process(50, LongSum())
    clone = pickle.loads(pickle.dumps(bag))
    assert clone.full_tree and clone.boards == bag.boards and clone.pending() == bag.pending()
    assert "full_tree=True" in repr(clone)
    # The default mode keeps its compact three-field state.
    assert len(NQueensBag(10).__getstate__()) == 3
