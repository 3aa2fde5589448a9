"""Tests of the betweenness-centrality kernel (benchmarks/kernels/bc.py).

References used here are written straight from the definition, in plain Python: the
SplitMix64 stream, the SSCA2 R-MAT generator and Brandes' algorithm with edge multiplicity.
networkx checks the kernel on graphs without parallel edges (it ignores multiplicity).

Every test that runs the kernel runs with both backends (``APGAS_KERNELS=numpy`` and, where
numba is installed, ``numba``); the two must give the same bits for the same calls, which
the tests at the end check directly, also for a bag handed from one backend to the other.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from oracles import py_brandes

from benchmarks.kernels import bc as bcmod
from glb import ArraySum, process_all

from .bagcheck import needs_numba, with_backend

MASK = (1 << 64) - 1
RTOL = 1e-9
ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------
# Plain-Python references
# ------------------------------------------------------------------------------------------


def py_splitmix64(seed: int):
    """The SplitMix64 stream of the definition, as an endless generator of ints."""
    state = seed & MASK
    while True:
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 33)) * 0xFF51AFD7ED558CCD) & MASK
        z = ((z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53) & MASK
        yield z ^ (z >> 33)


def py_rmat(scale: int, seed: int = 2) -> tuple[list[int], list[int]]:
    """The SSCA2 R-MAT edge list of the definition, one edge at a time."""
    a, b, c, d = 0.55, 0.1, 0.1, 0.25
    m = 8 << scale
    rng = py_splitmix64(seed)
    src = [0] * m
    dst = [0] * m
    for ib in range(scale):
        r1 = [(next(rng) >> 11) * 2.0**-53 for _ in range(m)]
        r2 = [(next(rng) >> 11) * 2.0**-53 for _ in range(m)]
        for i in range(m):
            sbit = r1[i] > a + b
            if sbit:
                src[i] += 1 << ib
            if r2[i] > (c / (c + d) if sbit else a / (a + b)):
                dst[i] += 1 << ib
    return src, dst


def simple_rmat(scale: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The R-MAT graph without duplicate edges and self-loops, edges in shuffled order."""
    n = 1 << scale
    src, dst = bcmod.rmat_edges(scale)
    keys = np.unique(src * n + dst)
    keys = keys[keys // n != keys % n]
    keys = np.random.default_rng(scale).permutation(keys)
    return n, keys // n, keys % n


def assert_bc_equal(got: np.ndarray, want: np.ndarray) -> None:
    """Relative tolerance 1e-9 per vertex; exact zeros must stay exact zeros."""
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=0.0)


# ------------------------------------------------------------------------------------------
# Random numbers and the generator
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [2, 0, 12345, MASK, -7])
def test_splitmix64_first_outputs(seed: int) -> None:
    ref = py_splitmix64(seed)
    want = [next(ref) for _ in range(200)]
    got = bcmod.splitmix64(seed, 200)
    assert got.dtype == np.uint64 and got.shape == (200,)
    assert [int(x) for x in got] == want


def test_splitmix64_offset_start() -> None:
    ref = py_splitmix64(2)
    stream = [next(ref) for _ in range(5000)]
    for start in [0, 1, 17, 4096, 4950]:
        got = bcmod.splitmix64(2, 50, start)
        assert [int(x) for x in got] == stream[start : start + 50]
    # Offsets far beyond any stored stream, against the closed form of the state.
    start = 10**12
    got = bcmod.splitmix64(2, 3, start)
    for i in range(3):
        state = (2 + (start + i + 1) * 0x9E3779B97F4A7C15) & MASK
        assert int(got[i]) == next(py_splitmix64((state - 0x9E3779B97F4A7C15) & MASK))
    assert bcmod.splitmix64(2, 0).shape == (0,)


def test_splitmix64_rejects_negative() -> None:
    with pytest.raises(ValueError):
        bcmod.splitmix64(2, -1)
    with pytest.raises(ValueError):
        bcmod.splitmix64(2, 1, -1)


@pytest.mark.parametrize("scale", [4, 5, 6])
def test_rmat_edges_match_reference(scale: int) -> None:
    want_src, want_dst = py_rmat(scale)
    src, dst = bcmod.rmat_edges(scale)
    assert src.shape == dst.shape == (8 << scale,)
    assert src.tolist() == want_src
    assert dst.tolist() == want_dst


def test_rmat_graph_csr_keeps_generation_order() -> None:
    scale = 6
    src, dst = bcmod.rmat_edges(scale)
    g = bcmod.rmat_graph(scale)
    assert (g.N, g.M) == (64, 512)
    assert g.offsets.dtype == np.int64 and g.offsets.shape == (65,)
    assert g.targets.shape == (512,)
    for v in range(g.N):
        assert g.targets[g.offsets[v] : g.offsets[v + 1]].tolist() == dst[src == v].tolist()
    # Duplicates and self-loops are kept.
    assert np.any(src == dst)
    assert len(np.unique(src * 64 + dst)) < len(src)


@pytest.mark.parametrize("scale", [0, -1, 31, 2.0, True, "4"])
def test_rmat_rejects_bad_scale(scale) -> None:
    with pytest.raises(ValueError):
        bcmod.rmat_graph(scale)
    with pytest.raises(ValueError):
        bcmod.rmat_edges(scale)
    with pytest.raises(ValueError):
        bcmod.betweenness(scale)


def test_graph_validation() -> None:
    with pytest.raises(ValueError):
        bcmod.Graph.from_edges(0, [], [])
    with pytest.raises(ValueError):
        bcmod.Graph.from_edges(3, [0, 3], [1, 1])
    with pytest.raises(ValueError):
        bcmod.Graph.from_edges(3, [0, 1], [1])
    with pytest.raises(ValueError):
        bcmod.Graph([0, 2, 1], [0, 1])
    with pytest.raises(ValueError):
        bcmod.Graph([0, 1], [5])


# ------------------------------------------------------------------------------------------
# Brandes
# ------------------------------------------------------------------------------------------


def test_small_multigraph_by_hand(kernels: str) -> None:
    # 0 -> 1 twice, 0 -> 2, 1 -> 3, 2 -> 3, a self-loop on 1: from 0, sigma[3] = 2 + 1, so
    # 1 carries 2/3 and 2 carries 1/3 of the pair (0, 3); no other pair has a middle vertex.
    g = bcmod.Graph.from_edges(4, [0, 0, 0, 1, 2, 1], [1, 2, 1, 3, 3, 1])
    assert_bc_equal(bcmod.graph_betweenness(g), np.array([0.0, 2.0 / 3.0, 1.0 / 3.0, 0.0]))


def test_graph_without_edges(kernels: str) -> None:
    g = bcmod.Graph.from_edges(5, [], [])
    assert_bc_equal(bcmod.graph_betweenness(g), np.zeros(5))
    bag = bcmod.BCBag(g)
    assert bag.is_empty() and bag.split(True) is None


@pytest.mark.parametrize("scale", [6, 7, 8])
def test_brandes_matches_networkx_on_simple_graphs(scale: int, kernels: str) -> None:
    n, src, dst = simple_rmat(scale)
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(src.tolist(), dst.tolist(), strict=True))
    ref = nx.betweenness_centrality(graph, normalized=False, endpoints=False)
    want = np.array([ref[v] for v in range(n)])
    got = bcmod.graph_betweenness(bcmod.Graph.from_edges(n, src, dst))
    assert got.dtype == np.float64 and got.shape == (n,)
    assert_bc_equal(got, want)


@pytest.mark.parametrize("scale", [6, 7, 8])
def test_brandes_matches_python_on_multigraphs(scale: int, kernels: str) -> None:
    src, dst = bcmod.rmat_edges(scale)
    want = py_brandes(1 << scale, src, dst)
    assert_bc_equal(bcmod.betweenness(scale), want)


def test_betweenness_from_a_subset_of_sources(kernels: str) -> None:
    scale = 7
    n = 1 << scale
    src, dst = bcmod.rmat_edges(scale)
    g = bcmod.Graph.from_edges(n, src, dst)
    sources = np.random.default_rng(3).permutation(n)
    parts = [sources[:45], sources[45:46], sources[46:]]
    total = np.sum([bcmod.graph_betweenness(g, part) for part in parts], axis=0)
    assert_bc_equal(total, bcmod.graph_betweenness(g))
    with pytest.raises(ValueError):
        bcmod.graph_betweenness(g, np.array([1, 1]))
    with pytest.raises(ValueError):
        bcmod.graph_betweenness(g, np.array([n]))


# ------------------------------------------------------------------------------------------
# The work measure: shortest-path (DAG) edges
# ------------------------------------------------------------------------------------------


def py_dag_edges(n: int, src, dst) -> int:
    """Shortest-path edges summed over all sources by one plain BFS per source: every edge
    v -> w (parallel edges each, self-loops included in the scan) with dist[w] = dist[v] + 1."""
    out: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src, dst, strict=True):
        out[int(a)].append(int(b))
    total = 0
    for s in range(n):
        dist = [-1] * n
        dist[s] = 0
        queue = [s]
        for v in queue:
            for w in out[v]:
                if dist[w] < 0:
                    dist[w] = dist[v] + 1
                    queue.append(w)
                if dist[w] == dist[v] + 1:
                    total += 1
    return total


def test_shortest_path_edges_by_hand(kernels: str) -> None:
    # From 0: 0->1 twice, 0->2, 1->3 and 2->3 (5); from 1: 1->3 (1); from 2: 2->3 (1); the
    # self-loop on 1 never counts.
    g = bcmod.Graph.from_edges(4, [0, 0, 0, 1, 2, 1], [1, 2, 1, 3, 3, 1])
    assert bcmod.shortest_path_edges(g) == 7
    assert bcmod.shortest_path_edges(g, [0]) == 5
    assert bcmod.shortest_path_edges(g, [3]) == 0
    with pytest.raises(ValueError):
        bcmod.shortest_path_edges(g, [1, 1])
    with pytest.raises(ValueError):
        bcmod.shortest_path_edges(g, [4])


@pytest.mark.parametrize("scale", [5, 7, 8])
def test_shortest_path_edges_match_python(scale: int, kernels: str) -> None:
    src, dst = bcmod.rmat_edges(scale)
    want = py_dag_edges(1 << scale, src, dst)
    assert bcmod.shortest_path_edges(bcmod.rmat_graph(scale)) == want
    # Sources in parts add up; the skipped sources add nothing.
    g = bcmod.rmat_graph(scale)
    every = np.random.default_rng(scale).permutation(1 << scale)
    assert sum(bcmod.shortest_path_edges(g, part) for part in np.array_split(every, 3)) == want


def test_shortest_path_edges_spec_scale_12(kernels: str) -> None:
    # the same DAG-edge work as the Java kernel (benchmarks/java/Bc.java), 31,811,085 at scale 12.
    assert bcmod.shortest_path_edges(bcmod.rmat_graph(12)) == 31_811_085


# ------------------------------------------------------------------------------------------
# The bag
# ------------------------------------------------------------------------------------------


def run_random_schedule(graph: bcmod.Graph, rng: random.Random, order_seed: int) -> np.ndarray:
    """Drive bags like GLB would: random process sizes, splits, merges and pickling."""
    bags: list[bcmod.BCBag] = [bcmod.BCBag(graph, order_seed=order_seed)]
    results: list[ArraySum] = [ArraySum(graph.N)]
    total = bags[0].pending()
    processed = 0
    for _ in range(400):
        i = rng.randrange(len(bags))
        op = rng.random()
        if op < 0.35:
            before = bags[i].pending()
            bags[i].process(rng.randint(1, 40), results[i])
            processed += before - bags[i].pending()
        elif op < 0.6:
            loot = bags[i].split(rng.random() < 0.3)
            if loot is not None:
                bags.append(loot)
                results.append(ArraySum(graph.N))
        elif op < 0.8 and len(bags) > 1:
            j = rng.randrange(len(bags))
            if i != j:
                bags[i].merge(bags[j])
                assert bags[j].is_empty()
                bags[j].submit(results[i])
                results[i].fold(results[j])
                del bags[j], results[j]
        else:
            # A bag and its result travel to another place.
            bags[i] = pickle.loads(pickle.dumps(bags[i]))
            results[i] = pickle.loads(pickle.dumps(results[i]))
        assert sum(b.pending() for b in bags) + processed == total
    final = ArraySum(graph.N)
    for bag, result in zip(bags, results, strict=True):
        process_all(bag, result, rng.randint(1, 64))
        final.fold(result)
    return final.value()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bag_split_merge_pickle_give_the_same_result(seed: int, kernels: str) -> None:
    scale = 8
    graph = bcmod.rmat_graph(scale)
    want = bcmod.betweenness(scale)
    got = run_random_schedule(graph, random.Random(seed), order_seed=seed)
    assert_bc_equal(got, want)


def test_source_order_does_not_change_the_result(kernels: str) -> None:
    graph = bcmod.rmat_graph(9)
    results = []
    firsts = []
    for order_seed in [0, 1, 99]:
        first = ArraySum(graph.N)
        bag = bcmod.BCBag(graph, order_seed=order_seed)
        bag.process(8, first)  # the first sources of this order
        firsts.append(first.value())
        result = ArraySum(graph.N)
        process_all(bag, result, bcmod.DEFAULT_WORK_UNITS)
        result.fold(first)
        results.append(result.value())
    assert not np.array_equal(firsts[0], firsts[1])  # the orders differ
    for other in results[1:]:
        assert_bc_equal(other, results[0])


def test_bag_split_edge_cases() -> None:
    graph = bcmod.rmat_graph(6)
    bag = bcmod.BCBag(graph)
    total = bag.pending()
    src, dst = graph.edges()
    # Sources with no out-edge but self-loops are skipped: their dependencies are zero.
    assert total == np.count_nonzero(np.bincount(src[src != dst], minlength=graph.N))
    loot = bag.split(False)
    assert loot is not None and loot.pending() == total // 2
    assert bag.pending() == total - total // 2
    # Down to one source: only take_all moves it.
    one = bcmod.BCBag(graph, np.array([[3, 4]]))
    assert not one.is_splittable() and one.split(False) is None
    moved = one.split(True)
    assert moved is not None and moved.pending() == 1 and one.is_empty()
    assert one.split(True) is None and one.split(False) is None
    # Splits cut through multi-range bags at the right place.
    multi = bcmod.BCBag(graph, np.array([[0, 3], [10, 11], [20, 26]]))
    part = multi.split(False)
    assert part is not None and (multi.pending(), part.pending()) == (5, 5)
    multi.merge(part)
    assert multi.pending() == 10 and len(multi._ranges) == 3


def test_bag_pickles_compactly() -> None:
    graph = bcmod.rmat_graph(10)
    bag = bcmod.BCBag(graph)
    loot = bag.split(False)
    assert loot is not None
    data = pickle.dumps(loot)
    assert len(data) < 1000  # ranges and the (scale, seed) recipe, not the edges
    copy = pickle.loads(data)
    assert copy.graph is graph  # the per-process cache
    assert copy.pending() == loot.pending()
    # A graph without a recipe travels with its arrays.
    small = bcmod.Graph.from_edges(3, [0, 1], [1, 2])
    back = pickle.loads(pickle.dumps(small))
    assert back.recipe is None and back.targets.tolist() == [1, 2]


def test_bag_errors() -> None:
    graph = bcmod.rmat_graph(5)
    bag = bcmod.BCBag(graph)
    with pytest.raises(ValueError):
        bag.process(0, ArraySum(graph.N))
    with pytest.raises(ValueError):
        bag.process(1, ArraySum(graph.N + 1))
    with pytest.raises(ValueError):
        bag.merge(bcmod.BCBag(bcmod.rmat_graph(6)))
    with pytest.raises(ValueError):
        bag.merge(bcmod.BCBag(graph, order_seed=5))
    with pytest.raises(ValueError):
        bag.merge(bcmod.BCBag(graph))  # shares sources
    with pytest.raises(TypeError):
        bag.merge(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        bcmod.BCBag(graph, np.array([[0, 10**6]]))
    with pytest.raises(ValueError):
        bcmod.BCBag(graph, np.array([[0, 5], [4, 6]]))


def test_default_work_units() -> None:
    assert isinstance(bcmod.DEFAULT_WORK_UNITS, int) and bcmod.DEFAULT_WORK_UNITS >= 1


# ------------------------------------------------------------------------------------------
# The two backends: the same bits
# ------------------------------------------------------------------------------------------


def both(fn, *args):  # type: ignore[no-untyped-def]
    """``fn(*args)`` under numpy and under numba."""
    return with_backend("numpy", fn, *args), with_backend("numba", fn, *args)


@needs_numba
@pytest.mark.parametrize("scale,seed", [(5, 2), (7, 2), (8, 5), (10, 2), (10, 77)])
def test_backends_agree_bit_for_bit_on_rmat_graphs(scale: int, seed: int) -> None:
    graph = bcmod.rmat_graph(scale, seed)
    a, b = both(bcmod.graph_betweenness, graph)
    assert np.array_equal(a, b)
    assert bcmod.shortest_path_edges(graph) == with_backend(
        "numba", bcmod.shortest_path_edges, graph)
    # Any sources in any order, in calls of any size: the same summation groups.
    rng = np.random.default_rng(scale)
    sources = rng.permutation(graph.N)[: rng.integers(1, graph.N)]
    a, b = both(bcmod.graph_betweenness, graph, sources)
    assert np.array_equal(a, b)


@needs_numba
def test_backends_agree_bit_for_bit_at_scale_12() -> None:
    a, b = both(bcmod.betweenness, 12)
    assert np.array_equal(a, b)
    assert with_backend("numba", bcmod.shortest_path_edges, bcmod.rmat_graph(12)) == 31_811_085


@needs_numba
def test_backends_agree_on_other_shapes() -> None:
    """Graphs without R-MAT's shape: a long path (many levels), a star (one huge level), a
    dense random graph, a graph with isolated vertices; sources fewer and more than 64."""
    rng = np.random.default_rng(1)
    n = 300
    graphs = [
        bcmod.Graph.from_edges(n, np.arange(n - 1), np.arange(1, n)),
        bcmod.Graph.from_edges(n, np.r_[np.zeros(n - 1, int), np.arange(1, n)],
                               np.r_[np.arange(1, n), np.zeros(n - 1, int)]),
        bcmod.Graph.from_edges(n, rng.integers(0, n, 20 * n), rng.integers(0, n, 20 * n)),
        bcmod.Graph.from_edges(n, rng.integers(0, n // 3, n), rng.integers(0, n // 3, n)),
    ]
    for g in graphs:
        a, b = both(bcmod.graph_betweenness, g)
        assert np.array_equal(a, b)
        src, dst = g.edges()
        if len(set(zip(src.tolist(), dst.tolist(), strict=True))) == g.M:  # no parallel edge
            assert_bc_equal(a, py_brandes(n, src, dst))
        for count in (1, 63, 65, 130):
            part = rng.permutation(n)[:count]
            a, b = both(bcmod.graph_betweenness, g, part)
            assert np.array_equal(a, b)


@needs_numba
def test_a_bag_moves_between_backends_exactly() -> None:
    """Calls alternate between the backends on bags that are split, merged and pickled: the
    sum is the bits of the same schedule run by numpy alone."""
    graph = bcmod.rmat_graph(9)

    def schedule(alternate: bool) -> np.ndarray:
        rng = random.Random(4)
        bag = bcmod.BCBag(graph)
        loot = bag.split(False)
        assert loot is not None
        results = [ArraySum(graph.N), ArraySum(graph.N)]
        bags = [bag, pickle.loads(pickle.dumps(loot))]
        step = 0
        while not all(b.is_empty() for b in bags):
            i = step % 2
            step += 1
            if bags[i].is_empty():
                continue
            name = ("numpy", "numba")[step % 2] if alternate else "numpy"
            with_backend(name, bags[i].process, rng.choice([1, 17, 64, 100]), results[i])
            bags[i] = pickle.loads(pickle.dumps(bags[i]))
        results[0].fold(results[1])
        return results[0].value()

    assert np.array_equal(schedule(True), schedule(False))


@needs_numba
@pytest.mark.timeout(300)
def test_a_fresh_process_loads_the_compiled_kernel_from_the_cache() -> None:
    """After a warm-up has run once, another process's warm-up only loads the compiled BC
    kernel (numba's dispatcher statistics: cache hits, no misses) and it computes exactly."""
    env = {k: v for k, v in os.environ.items() if k not in ("APGAS_PLACES",)}
    env["APGAS_KERNELS"] = "numba"
    probe = textwrap.dedent("""
        import json
        from benchmarks.kernels import warm_up
        took = warm_up(["benchmarks.kernels.bc"])
        from benchmarks.kernels import _bc_numba as k
        from benchmarks.kernels import bc
        stats = {f.__name__: (sum(f.stats.cache_hits.values()),
                              sum(f.stats.cache_misses.values())) for f in (k._batch, k._count)}
        print(json.dumps({"stats": stats, "took": took,
                          "edges": bc.shortest_path_edges(bc.rmat_graph(7))}))
    """)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=280)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout))
    warm = runs[1]
    assert warm["edges"] == 29568
    assert all(hits > 0 and misses == 0 for hits, misses in warm["stats"].values()), warm


@needs_numba
def test_the_compiled_pair_writers_list_the_defined_pairs() -> None:
    """The compiled kernel lists a DAG edge's pairs with one of two writers, chosen by the CPU
    (BMI2 ``pext`` where fast, popcounts elsewhere), so a machine runs only one of them
    through the kernel tests above: both must list, for each lane of ``mm`` ascending,
    ``(pu + the lane's rank among fu's lanes, pw + its rank among fw's)``, and nothing for
    ``mm == 0``."""
    from numba import njit

    from benchmarks.kernels import _bc_numba as k

    writers = [k._emit_popcount] + ([k._emit_pext] if k._fast_pext() else [])
    rng = random.Random(5)
    cases = [(0, MASK, MASK), (1, 1, 1), (MASK, MASK, MASK), (1 << 63, MASK, 1 << 63)]
    for _ in range(300):
        fu, fw = rng.getrandbits(64), rng.getrandbits(64)
        cases.append((fu & fw & rng.getrandbits(64), fu, fw))
    def compiled(writer):  # type: ignore[no-untyped-def]
        return njit(lambda pa, pb, k0, pu, pw, mm, fu, fw: writer(pa, pb, k0, pu, pw, mm, fu, fw))

    for call in map(compiled, writers):
        for mm, fu, fw in cases:
            lanes = [b for b in range(64) if mm >> b & 1]
            want_a = [100 + bin(fu & ((1 << b) - 1)).count("1") for b in lanes]
            want_b = [7000 + bin(fw & ((1 << b) - 1)).count("1") for b in lanes]
            pa = np.full(3 + 64 + k._SLACK, -1, dtype=np.int32)
            pb = pa.copy()
            end = call(pa, pb, 3, 100, 7000, np.uint64(mm), np.uint64(fu), np.uint64(fw))
            assert end == 3 + len(lanes)
            assert pa[3:end].tolist() == want_a and pb[3:end].tolist() == want_b
            assert (pa[:3] == -1).all() and (pb[:3] == -1).all()
