"""Tests of the UTS kernel: SHA-1 lanes against hashlib, node counts, and the GLB bag contract.

Every test that runs a kernel runs with both backends (``APGAS_KERNELS=numpy`` and, where numba
is installed, ``numba``): the answers must be identical, and a bag one backend worked on must be
continued exactly by the other.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import random
import struct

import numpy as np
import pytest

from benchmarks.kernels import uts
from benchmarks.kernels._backend import numba_available
from benchmarks.kernels.uts import (
    UTSBag,
    child_counts,
    count_nodes,
    count_nodes_reference,
    sha1_children,
    sha1_roots,
)
from glb import LongSum, process_all

from .bagcheck import drive_randomly, needs_numba

# Node counts of seed 19 as the X10 GLB and LifelineGLB UTS programs give them (also in
# benchmarks/uts.py's KNOWN).
SEED19 = {1: 6, 2: 65, 3: 254, 4: 944, 5: 3987, 6: 16000, 7: 63914, 8: 257042, 9: 1031269,
          10: 4130071}
SEED19_D13 = 264_459_392


def _words(digest: bytes) -> np.ndarray:
    return np.frombuffer(digest, dtype=">u4").astype(np.uint32)


def _n_formula(v: int) -> int:
    return math.floor(math.log(1.0 - v / 2**31) / math.log(4 / 5))


# -- SHA-1 kernel --------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 7, 5000, uts.LANES + 123])
def test_sha1_children_matches_hashlib(k: int, kernels: str) -> None:
    rng = np.random.default_rng(k)
    parents = rng.integers(0, 2**32, size=(5, k), dtype=np.uint32)
    # Mostly realistic indices (< 97) plus arbitrary 32-bit ones.
    indices = rng.integers(0, 97, size=k).astype(np.uint32)
    indices[::3] = rng.integers(0, 2**32, size=indices[::3].shape[0], dtype=np.uint32)
    got = sha1_children(parents, indices)
    assert got.dtype == np.uint32 and got.shape == (5, k)
    for i in range(k):
        message = parents[:, i].astype(">u4").tobytes() + struct.pack(">I", int(indices[i]))
        assert np.array_equal(got[:, i], _words(hashlib.sha1(message).digest())), i


def test_sha1_children_edge_words(kernels: str) -> None:
    parents = np.array([[0, 0xFFFFFFFF, 0x80000000, 1]] * 5, dtype=np.uint32)
    indices = np.array([0, 0xFFFFFFFF, 0x80000000, 95], dtype=np.uint32)
    got = sha1_children(parents, indices)
    for i in range(4):
        message = parents[:, i].astype(">u4").tobytes() + struct.pack(">I", int(indices[i]))
        assert np.array_equal(got[:, i], _words(hashlib.sha1(message).digest()))


def test_sha1_roots_matches_hashlib(kernels: str) -> None:
    seeds = np.array([0, 1, 19, 29, 12345, 2**31, 2**32 - 1], dtype=np.uint32)
    got = sha1_roots(seeds)
    for i, seed in enumerate(seeds):
        expected = _words(hashlib.sha1(bytes(16) + struct.pack(">I", int(seed))).digest())
        assert np.array_equal(got[:, i], expected)


def test_sha1_rejects_bad_input(kernels: str) -> None:
    with pytest.raises(ValueError):
        sha1_children(np.zeros((4, 3), dtype=np.uint32), np.zeros(3, dtype=np.uint32))
    with pytest.raises(ValueError):
        sha1_children(np.zeros((5, 3), dtype=np.uint32), np.zeros(2, dtype=np.uint32))
    with pytest.raises(ValueError):
        sha1_roots(np.array([-1]))


# -- child counts --------------------------------------------------------------------------


def test_child_counts_match_formula(kernels: str) -> None:
    rng = np.random.default_rng(3)
    word4 = rng.integers(0, 2**32, size=20000, dtype=np.uint32)
    # Values at and next to every threshold, where a last-bit error of log would show.
    thresholds = uts._T_U32[1 : uts._MAX_CHILDREN + 1].tolist()
    edges = [x for t in thresholds for x in (t - 1, t, t + 1) if 0 <= x < 2**31]
    edges += [0, 1, 2**31 - 1]
    edge_words = np.array(edges, dtype=np.uint32)
    word4 = np.concatenate([word4, edge_words, edge_words | 0x80000000])
    got = child_counts(word4)
    expected = [_n_formula(int(w) & 0x7FFFFFFF) for w in word4]
    assert got.tolist() == expected
    assert got.max() == 96


def test_thresholds_are_exact() -> None:
    table = uts._T_U32
    for k in range(1, uts._MAX_CHILDREN + 1):
        t = int(table[k])
        assert _n_formula(t) >= k > _n_formula(t - 1)


# -- node counts ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", sorted(SEED19))
def test_count_nodes_seed19(depth: int, kernels: str) -> None:
    assert count_nodes(19, depth) == SEED19[depth]


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5])
def test_reference_agrees(depth: int) -> None:
    assert count_nodes_reference(19, depth) == SEED19[depth]


@pytest.mark.parametrize("seed", [0, 1, 29, 2**32 - 1])
def test_other_seeds_agree_with_reference(seed: int, kernels: str) -> None:
    assert count_nodes(seed, 5) == count_nodes_reference(seed, 5)


@pytest.mark.parametrize("n, depth", [(1, 4), (3, 5), (1000, 6), (2 * uts.LANES + 5, 8)])
def test_count_independent_of_work_units(n: int, depth: int, kernels: str) -> None:
    # Each process call costs about a millisecond however small n is: small n, small tree.
    assert count_nodes(19, depth, n) == SEED19[depth]


def test_invalid_arguments(kernels: str) -> None:
    with pytest.raises(ValueError):
        UTSBag(19, 0)
    with pytest.raises(ValueError):
        UTSBag(-1, 3)
    with pytest.raises(ValueError):
        UTSBag(2**32, 3)
    with pytest.raises(TypeError):
        UTSBag(19.0, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        count_nodes_reference(19, 0)
    with pytest.raises(ValueError):
        count_nodes(19, 3, 0)
    with pytest.raises(ValueError):
        UTSBag(19, 3).process(0, LongSum())


# -- bag contract --------------------------------------------------------------------------


def test_process_unit_is_one_child(kernels: str) -> None:
    bag = UTSBag(19, 2)  # the root has 5 children, each counted with its own children
    assert bag.pending_children() == 5
    result = LongSum()
    bag.process(1, result)
    assert bag.pending_children() == 4
    bag.process(10, result)
    assert bag.is_empty()
    bag.submit(result)
    assert result.value() == SEED19[2]


def test_depth_one_bag_is_empty_but_counts(kernels: str) -> None:
    bag = UTSBag(19, 1)
    assert bag.is_empty() and not bag.is_splittable()
    assert bag.split(False) is None and bag.split(True) is None
    assert process_all(bag, LongSum(), 10).value() == SEED19[1]


def _bag_with_one_child() -> UTSBag:
    """A bag whose only pending work is a single child."""
    bag = UTSBag(19, 3)
    while bag.pending_children() > 1:
        assert bag.split(False) is not None
    return bag


def test_split_unsplittable_and_empty(kernels: str) -> None:
    bag = _bag_with_one_child()
    assert not bag.is_empty() and not bag.is_splittable()
    assert bag.split(False) is None
    loot = bag.split(True)
    assert loot is not None and loot.pending_children() == 1
    assert bag.is_empty()
    assert bag.split(False) is None and bag.split(True) is None


def test_split_one_big_interval(kernels: str) -> None:
    bag = UTSBag(19, 6)  # one interval: the root's 5 children
    assert len(bag) == 1 and bag.is_splittable()
    before = bag.pending_children()
    loot = bag.split(False)
    assert loot is not None and not loot.is_empty() and not bag.is_empty()
    assert loot.pending_children() + bag.pending_children() == before
    assert abs(loot.pending_children() - bag.pending_children()) <= 1
    result = LongSum()
    process_all(loot, result, 100)
    process_all(bag, result, 100)
    assert result.value() == SEED19[6]


def test_split_halves_the_work(kernels: str) -> None:
    bag = UTSBag(19, 9)
    result = LongSum()
    for _ in range(5):
        bag.process(3000, result)
    before = bag.pending_children()
    loot = bag.split(False)
    assert loot is not None
    assert abs(loot.pending_children() - before / 2) <= len(bag) + len(loot)
    bag.merge(loot)
    assert bag.pending_children() == before and loot.is_empty()
    process_all(bag, result, 5000)
    assert result.value() == SEED19[9]


@pytest.mark.parametrize("trial", range(6))
def test_random_splits_merges_and_pickles_count_exactly(trial: int, kernels: str) -> None:
    depth = 8 if trial % 2 else 7
    result = drive_randomly([UTSBag(19, depth)], LongSum(), random.Random(trial),
                            [1, 7, 50, 300, 2000], max_steps=2000, finish_n=4000)
    assert result.value() == SEED19[depth]


def test_pickle_round_trip_mid_run(kernels: str) -> None:
    bag = UTSBag(19, 8)
    result = LongSum()
    bag.process(2500, result)
    bag.process(2500, result)
    data = pickle.dumps(bag)
    # Compact: one uint32 column of 8 words per interval plus a small header.
    assert len(data) < 32 * len(bag) + 1024
    copy = pickle.loads(data)
    assert copy.pending_children() == bag.pending_children()
    assert process_all(copy, LongSum(result.value()), 3000).value() == SEED19[8]
    assert process_all(bag, result, 3000).value() == SEED19[8]


def test_partial_count_travels_with_merge(kernels: str) -> None:
    a, b = UTSBag(19, 4), UTSBag(19, 4)
    result = LongSum()
    a.merge(b)  # b's root count moves into a
    b.submit(result)
    assert result.value() == 0
    process_all(a, result, 50)
    assert result.value() == 2 * SEED19[4]
    with pytest.raises(TypeError):
        a.merge(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        a.merge(a)


def test_stack_stays_bounded(kernels: str) -> None:
    # the stack holds about depth × (children hashed per batch) intervals
    lanes = uts.NUMBA_LANES if kernels == "numba" else uts.LANES
    bag = UTSBag(19, 9)
    result = LongSum()
    peak = 0
    while not bag.is_empty():
        bag.process(uts.DEFAULT_WORK_UNITS, result)
        peak = max(peak, len(bag))
    assert result.value() == SEED19[9]
    assert peak <= 9 * lanes


# -- larger trees, and the two backends together -----------------------------------------------


@needs_numba
def test_published_depth_13_count_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APGAS_KERNELS", "numba")
    assert count_nodes(19, 13) == SEED19_D13


@pytest.mark.slow
def test_published_depth_13_count_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APGAS_KERNELS", "numpy")  # about 12 s on one core
    assert count_nodes(19, 13) == SEED19_D13


def test_depth_11_count_from_the_hashlib_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed-19 d = 11 count that benchmarks/uts.py and the GLB tests use as their oracle,
    checked against the plain hashlib walk (not published; about 4 s on one core)."""
    from benchmarks.uts import KNOWN

    expected = count_nodes_reference(19, 11)
    assert KNOWN[(19, 11)] == expected == 16_526_523
    for name in ("numpy", "numba") if numba_available() else ("numpy",):
        monkeypatch.setenv("APGAS_KERNELS", name)
        assert count_nodes(19, 11) == expected


@needs_numba
def test_backends_hash_and_count_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    parents = rng.integers(0, 2**32, size=(5, 20000), dtype=np.uint32)
    indices = rng.integers(0, 2**32, size=20000, dtype=np.uint32)
    got = {}
    for name in ("numpy", "numba"):
        monkeypatch.setenv("APGAS_KERNELS", name)
        digests = sha1_children(parents, indices)
        got[name] = (digests, child_counts(digests), child_counts(parents[4]))
    for a, b in zip(got["numpy"], got["numba"], strict=True):
        assert np.array_equal(a, b)


@needs_numba
@pytest.mark.parametrize("trial", range(4))
def test_a_bag_is_continued_by_the_other_backend(trial: int,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Process, split, merge and pickle, switching backend at random between steps."""
    rng = random.Random(100 + trial)
    depth = 8
    bags = [UTSBag(19, depth)]
    result = LongSum()
    while bags:
        monkeypatch.setenv("APGAS_KERNELS", rng.choice(["numpy", "numba"]))
        i = rng.randrange(len(bags))
        bag = bags[i]
        action = rng.random()
        if action < 0.5:
            bag.process(rng.choice([1, 37, 500, 5000, 20000]), result)
        elif action < 0.7:
            loot = bag.split(False)
            if loot is not None:
                bags.append(pickle.loads(pickle.dumps(loot)))
        elif action < 0.85 and len(bags) > 1:
            j = rng.randrange(len(bags))
            if j != i:
                bag.merge(bags[j])
        else:
            bags[i] = pickle.loads(pickle.dumps(bag))
        for b in [b for b in bags if b.is_empty()]:
            b.submit(result)
        bags = [b for b in bags if not b.is_empty()]
    assert result.value() == SEED19[depth]


def test_the_hash_bound_is_consistent_and_leaves_the_kernel_exact() -> None:
    """benchmarks.kernels_speed.uts_hash_bound: the bound follows from its best pass over the
    d = 10 tree's hashed messages, a pass is some hundreds of numpy calls, and the kernel is
    bit-exact afterwards (its ufuncs restored)."""
    from benchmarks.kernels_speed import uts_hash_bound

    b = uts_hash_bound(repeats=1)
    assert b["lanes"] == uts.LANES
    assert 0 < b["schedule_calls_per_pass"] < b["ufunc_calls_per_pass"]
    assert b["hashed_messages"] == 4_130_071 and b["nodes"] == 16_526_523
    assert b["bound_nodes_per_s"] == pytest.approx(
        16_526_523 / (4_130_071 / uts.LANES * b["best_pass_s"]))
    parent = hashlib.sha1(b"x").digest()
    words = np.array(struct.unpack(">5I", parent), dtype=np.uint32).reshape(5, 1)
    got = uts.sha1_children(words, np.array([7], dtype=np.uint32))
    want = struct.unpack(">5I", hashlib.sha1(parent + struct.pack(">I", 7)).digest())
    assert tuple(int(w) for w in got[:, 0]) == want
    assert count_nodes(19, 6) == SEED19[6]


# -- the command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("branching", ["2", "5"])
def test_other_branching_factors_are_refused_by_name(
        branching: str, capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import _cli
    from benchmarks import uts as uts_cli

    with pytest.raises(SystemExit) as exc:
        _cli.main(uts_cli.BENCHMARK, ["-d", "3", "-b", branching, "--places", "1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"-b {branching}" in err and "branching factor 4" in err
