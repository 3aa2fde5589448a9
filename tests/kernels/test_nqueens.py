"""Tests of the N-Queens kernel (``benchmarks.kernels.nqueens``): exact counts, the bag protocol
under random splits/merges/pickling, and argument checking."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from benchmarks.kernels.nqueens import (
    DEFAULT_WORK_UNITS,
    MAX_N,
    NQueensBag,
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
def test_known_counts(n: int) -> None:
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
