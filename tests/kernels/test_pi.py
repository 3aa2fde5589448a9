"""Tests of the Monte-Carlo π kernel (``benchmarks.kernels.pi``): accuracy, exact
reproducibility under any split/merge/pickle/order, the bias of the hit test, and arguments.

Every test that draws samples runs with both backends (``APGAS_KERNELS=numpy`` and, where numba
is installed, ``numba``): the hit counts must be identical, and a bag one backend worked on
must be continued exactly by the other."""

from __future__ import annotations

import math
import pickle
import random
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import benchmarks.kernels.pi as pi_mod
from benchmarks.kernels.pi import (
    DEFAULT_WORK_UNITS,
    TASK_SAMPLES,
    PiBag,
    estimate_pi,
    raw_words,
    standard_error,
)
from glb import LongSum, process_all

from .bagcheck import drive_randomly, needs_numba, with_backend


# 50 digits of π, for the bias check (the float math.pi is off by 1.2e-16).
PI = Fraction("3.14159265358979323846264338327950288419716939937510")


def run_one_bag(samples: int, seed: int, work_units: int = DEFAULT_WORK_UNITS) -> int:
    return process_all(PiBag(samples, seed), LongSum(), work_units).value()


def test_estimate_within_five_standard_errors(kernels: str) -> None:
    n = 10**7
    est, hits = estimate_pi(n)
    assert est == 4.0 * hits / n
    assert abs(est - math.pi) < 5 * standard_error(n)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_other_seeds_also_accurate(seed: int, kernels: str) -> None:
    n = 3 * 10**6
    est, _ = estimate_pi(n, seed)
    assert abs(est - math.pi) < 5 * standard_error(n)


def test_standard_error() -> None:
    assert standard_error(1) == pytest.approx(1.6422, abs=1e-4)
    assert standard_error(10**6) == pytest.approx(1.6422e-3, rel=1e-4)
    with pytest.raises(ValueError):
        standard_error(0)


def test_deterministic_and_seed_dependent(kernels: str) -> None:
    n = 2 * TASK_SAMPLES + 12345
    a = run_one_bag(n, 7)
    assert run_one_bag(n, 7) == a
    assert estimate_pi(n, 7)[1] == a
    others = {run_one_bag(n, s) for s in (8, 9, 10)}
    assert a not in others and len(others) == 3


@pytest.mark.parametrize("work_units", [1, 5000, 98_304, 10**6, 10**9])
def test_work_units_do_not_change_hits(work_units: int, kernels: str) -> None:
    n = 2 * TASK_SAMPLES + 100_003
    assert run_one_bag(n, 3, work_units) == run_one_bag(n, 3)


@pytest.mark.parametrize("n", [1, 2, 3, 98_303, 98_304, 98_305, TASK_SAMPLES, TASK_SAMPLES + 1])
def test_small_and_boundary_sizes(n: int, kernels: str) -> None:
    """Hit counts of a prefix of a task: the first n samples of the same stream."""
    hits = run_one_bag(n, 5)
    assert 0 <= hits <= n
    # Consistent with the sample layout: recompute directly from the raw words of task 0.
    if n <= TASK_SAMPLES:
        gen = np.random.SFC64(np.random.SeedSequence([5, 0]))
        expected = 0
        done = 0
        while done < n:
            words = gen.random_raw(1 << 16)
            a, b = words[: 1 << 15], words[1 << 15 :]
            mask = np.uint64((1 << 21) - 1)
            fields = [
                (a & mask, b & mask),
                ((a >> np.uint64(21)) & mask, (b >> np.uint64(21)) & mask),
                (a >> np.uint64(43), b >> np.uint64(43)),
            ]
            inside = np.concatenate([x * x + y * y < pi_mod._THRESHOLD for x, y in fields])
            take = min(n - done, inside.size)
            expected += int(np.count_nonzero(inside[:take]))
            done += take
        assert hits == expected


def test_random_split_merge_pickle_reproducible(kernels: str) -> None:
    """Random splits, merges, pickle round trips and processing orders give the same hits."""
    n = 9 * TASK_SAMPLES + 54_321  # 10 tasks, the last one short
    seed = 11
    reference = run_one_bag(n, seed)
    for trial in range(3):

        def conserved(bag: PiBag, loot: PiBag | None, before: int) -> None:
            if loot is not None:
                assert not bag.is_empty() and loot.remaining() + bag.remaining() == before

        total = drive_randomly([PiBag(n, seed)], LongSum(), random.Random(trial),
                               [1, 50_000, 200_000, TASK_SAMPLES], max_steps=10_000,
                               finish_n=TASK_SAMPLES, on_split=conserved,
                               measure=PiBag.remaining, shuffle=True)
        assert total.value() == reference


def test_split_gives_about_half() -> None:
    n = 20 * TASK_SAMPLES
    bag = PiBag(n)
    loot = bag.split(False)
    assert loot is not None
    assert loot.remaining() == bag.remaining() == n // 2
    bag.process(1, LongSum())  # begins a task
    before = bag.remaining()
    loot2 = bag.split(False)
    assert loot2 is not None
    assert abs(loot2.remaining() - before / 2) <= TASK_SAMPLES


def test_split_empty_and_unsplittable() -> None:
    bag = PiBag(1000)
    assert not bag.is_splittable()  # one task
    assert bag.split(False) is None
    process_all(bag, LongSum(), DEFAULT_WORK_UNITS)
    assert bag.is_empty()
    assert bag.split(False) is None
    assert bag.split(True) is None
    result = LongSum()
    bag.process(100, result)
    assert result.value() == 0


def test_split_take_all_moves_a_begun_task(kernels: str) -> None:
    n = TASK_SAMPLES
    reference = run_one_bag(n, 4)
    bag = PiBag(n, 4)
    total = LongSum()
    bag.process(100_000, total)  # begun, not finished
    assert bag.split(False) is None
    loot = bag.split(True)
    assert loot is not None and bag.is_empty()
    loot = pickle.loads(pickle.dumps(loot))
    process_all(loot, total, DEFAULT_WORK_UNITS)
    assert total.value() == reference


def test_pickle_is_compact() -> None:
    bag = PiBag(10**12, 3)
    bag.process(1, LongSum())
    assert len(pickle.dumps(bag)) < 1000


def test_merge_rejects_other_runs() -> None:
    with pytest.raises(ValueError):
        PiBag(10**6, 1).merge(PiBag(10**6, 2))
    with pytest.raises(ValueError):
        PiBag(10**6, 1).merge(PiBag(10**7, 1))
    with pytest.raises(TypeError):
        PiBag(10**6).merge(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, -(10**12)])
def test_invalid_samples(bad: int) -> None:
    with pytest.raises(ValueError):
        PiBag(bad)
    with pytest.raises(ValueError):
        estimate_pi(bad)


def test_invalid_seed_and_types() -> None:
    with pytest.raises(ValueError):
        PiBag(100, -1)
    with pytest.raises(TypeError):
        PiBag(100.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        PiBag(100, 1.5)  # type: ignore[arg-type]


def _isqrt(d: np.ndarray) -> np.ndarray:
    """Exact floor(sqrt(d)) of int64 values ≤ 2^43 (float guess, then integer correction)."""
    s = np.floor(np.sqrt(d.astype(np.float64))).astype(np.int64)
    for _ in range(2):
        s -= s * s > d
        s += (s + 1) * (s + 1) <= d
    return s


def test_hit_test_bias_is_negligible() -> None:
    """Count the grid points with x² + y² < T exactly: P(hit) is π/4 to ~1e-13."""
    r = 1 << 21
    x = np.arange(r, dtype=np.int64)
    d = pi_mod._THRESHOLD - x * x  # y² < d, i.e. y ≤ isqrt(d - 1), for d ≥ 1
    assert np.all(d > 0)
    count = int(np.minimum(_isqrt(d - 1) + 1, r).sum())
    assert count == 3_454_217_652_358
    bias = 4 * Fraction(count, r * r) - PI
    assert abs(float(bias)) < 1e-12
    # Relative to the standard error of the largest run considered (1.2e12 samples).
    assert abs(float(bias)) < 1e-6 * standard_error(12 * 10**11)


class _CountingGenerator:
    """Wraps a task's bit generator and counts the raw words drawn from it (numpy kernel)."""

    drawn = 0

    def __init__(self, gen: np.random.SFC64) -> None:
        self.gen = gen

    def random_raw(self, size: int) -> np.ndarray:
        _CountingGenerator.drawn += size
        return self.gen.random_raw(size)

    @property
    def state(self) -> Any:
        return self.gen.state


def _count_compiled_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Count the words the compiled kernel draws: how far each call moves the SFC64 counters
    (a task seeded in the call starts at counter 13: 1, then 12 outputs discarded)."""
    from benchmarks.kernels import _pi_numba

    real = _pi_numba.tasks_hits

    def counting(seed_words: Any, plan: np.ndarray, states: np.ndarray, buf: Any) -> int:
        before = np.where(plan[:, 1] != 0, np.uint64(13), states[:, 3])
        hits = real(seed_words, plan, states, buf)
        _CountingGenerator.drawn += int((states[:, 3] - before).sum())
        return int(hits)

    monkeypatch.setattr(_pi_numba, "tasks_hits", counting)


@pytest.mark.parametrize("samples", [1, 98_304, 98_305, TASK_SAMPLES, TASK_SAMPLES + 1,
                                     3 * TASK_SAMPLES + 12_345])
def test_raw_words_counts_the_words_drawn(samples: int, monkeypatch: pytest.MonkeyPatch,
                                          kernels: str) -> None:
    if kernels == "numba":
        _count_compiled_words(monkeypatch)
    else:
        real = pi_mod._task_generator
        monkeypatch.setattr(pi_mod, "_task_generator",
                            lambda seed, task, state=None: _CountingGenerator(
                                real(seed, task, state)))
    _CountingGenerator.drawn = 0
    hits = run_one_bag(samples, 3, work_units=50_000)
    assert _CountingGenerator.drawn == raw_words(samples)
    monkeypatch.undo()
    assert hits == run_one_bag(samples, 3)  # the wrapper changes nothing


def test_raw_words_of_the_benchmark_run() -> None:
    # 10^8 samples: 31 whole tasks of 32 blocks, then 25.25 blocks rounded up to 26.
    assert raw_words(10**8) == (31 * 32 + 26) * 2**16 == 66_715_648
    with pytest.raises(ValueError):
        raw_words(0)
    with pytest.raises(TypeError):
        raw_words(1.5)  # type: ignore[arg-type]


# -- the two backends ------------------------------------------------------------------------


@needs_numba
@pytest.mark.parametrize("samples,seed,work_units", [
    (1, 0, 1), (98_305, 1, 7), (TASK_SAMPLES + 1, 2, 50_000),
    (5 * TASK_SAMPLES + 77_777, 9, 3 * TASK_SAMPLES + 5), (2 * 10**7, 123, DEFAULT_WORK_UNITS),
    (3 * TASK_SAMPLES + 5, 2**70 + 3, 7 * TASK_SAMPLES),  # a seed of three 32-bit words
])
def test_backends_give_identical_hits(samples: int, seed: int, work_units: int) -> None:
    assert (with_backend("numpy", run_one_bag, samples, seed, work_units)
            == with_backend("numba", run_one_bag, samples, seed, work_units))


@needs_numba
def test_a_bag_moves_between_backends_exactly() -> None:
    """The same calls under either backend take the same samples and leave the same state
    (pickled bags compare equal), so a bag can alternate between them."""
    n = 4 * TASK_SAMPLES + 99_999
    sizes = [1, 200_000, TASK_SAMPLES, 98_304, 3 * TASK_SAMPLES, 10**9]
    bags = {"numpy": PiBag(n, 6), "alternating": PiBag(n, 6)}
    totals = {name: LongSum() for name in bags}
    for i, size in enumerate(sizes):
        with_backend("numpy", bags["numpy"].process, size, totals["numpy"])
        with_backend(("numba", "numpy")[i % 2], bags["alternating"].process, size,
              totals["alternating"])
        assert pickle.dumps(bags["numpy"]) == pickle.dumps(bags["alternating"])
        assert totals["numpy"].value() == totals["alternating"].value()
    assert bags["numpy"].is_empty() and totals["numpy"].value() == run_one_bag(n, 6)


@needs_numba
@pytest.mark.parametrize("seed", [0, 1, 2**32 - 1, 2**32, 2**70 + 3])
def test_compiled_seeding_matches_numpy(seed: int) -> None:
    """The compiled kernel's seeding of a task is numpy's ``SFC64(SeedSequence([seed, task]))``,
    for seeds and task indices of one and of several 32-bit words."""
    from benchmarks.kernels import _pi_numba

    for task in [0, 1, 2, 1000, 2**32 - 1, 2**32, 2**40 + 7]:
        state = np.zeros(4, dtype=np.uint64)
        _pi_numba.task_state(pi_mod._seed_words(seed), task, state)
        expected = np.random.SFC64(np.random.SeedSequence([seed, task])).state["state"]["state"]
        assert state.tolist() == [int(v) for v in expected], (seed, task)


@needs_numba
def test_one_compiled_call_a_process() -> None:
    """A ``process`` call of many tasks, begun and new, makes one compiled kernel call."""
    from benchmarks.kernels import _pi_numba

    calls = []
    real = _pi_numba.tasks_hits

    def counting(*args: Any) -> int:
        calls.append(len(args[1]))
        return int(real(*args))

    bag = PiBag(6 * TASK_SAMPLES, 4)
    total = LongSum()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_pi_numba, "tasks_hits", counting)
        with_backend("numba", bag.process, TASK_SAMPLES // 2, total)
        with_backend("numba", bag.process, 4 * TASK_SAMPLES, total)
    assert calls == [1, 5]  # the begun task, then four new ones
    with_backend("numba", bag.process, 10**9, total)
    assert total.value() == with_backend("numpy", run_one_bag, 6 * TASK_SAMPLES, 4)
