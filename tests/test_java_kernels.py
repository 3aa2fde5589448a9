"""The Java reference kernels (benchmarks/java) give the known answers and ours, so that the
same-run ratios of benchmarks.kernels_speed compare the same work; skipped without a JDK."""

from __future__ import annotations

import json
import math
import shutil
import subprocess

import pytest

from benchmarks import kernels_speed

needs_jdk = pytest.mark.skipif(not (shutil.which("javac") and shutil.which("java")),
                               reason="no JDK (javac and java) on PATH")


@pytest.fixture(scope="module")
def classes(tmp_path_factory):
    out = tmp_path_factory.mktemp("java")
    kernels_speed.compile_java(out)
    return out


def _java(classes, *args: str) -> dict:
    done = subprocess.run(["java", "-cp", str(classes), *args], capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@needs_jdk
@pytest.mark.parametrize(("depth", "seed", "nodes"),
                         [(1, 19, 6), (5, 19, 3987), (8, 19, 257_042), (10, 19, 4_130_071)])
def test_uts_counts_the_known_trees(classes, depth, seed, nodes):
    out = _java(classes, "Uts", str(depth), str(seed), "2")
    assert out["result"] == nodes
    assert len(out["runs_s"]) == 2 and all(s > 0 for s in out["runs_s"])


@needs_jdk
@pytest.mark.parametrize("mode", ["glb", "lean"])
@pytest.mark.parametrize(("n", "solutions"), [(8, 92), (10, 724)])
def test_nqueens_visits_the_same_boards_as_our_full_tree(classes, mode, n, solutions):
    from benchmarks.kernels.nqueens import count_full_tree

    out = _java(classes, "NQueens", str(n), "1", mode)
    assert (out["result"], out["boards"]) == (solutions, count_full_tree(n)[1])
    assert out["candidates"] == n * (1 + out["boards"] - solutions)  # n per expanded board


@needs_jdk
def test_nqueens_rejects_an_unknown_mode(classes):
    with pytest.raises(subprocess.CalledProcessError) as err:
        _java(classes, "NQueens", "8", "1", "fast")
    assert "mode must be glb or lean" in err.value.stderr


@needs_jdk
@pytest.mark.parametrize("scale", [6, 9])
def test_bc_gives_our_betweenness_and_shortest_path_edges(classes, scale):
    from benchmarks.kernels.bc import betweenness, rmat_graph, shortest_path_edges

    out = _java(classes, "Bc", str(scale), "1")["result"]
    ours = betweenness(scale)
    assert math.isclose(out["sum"], float(ours.sum()), rel_tol=1e-12)
    assert math.isclose(out["max"], float(ours.max()), rel_tol=1e-12)
    assert out["dag_edges"] == shortest_path_edges(rmat_graph(scale))


@needs_jdk
def test_bc_scale_12_has_the_known_shortest_path_edges(classes):
    out = _java(classes, "Bc", "12", "1")["result"]
    assert out["dag_edges"] == kernels_speed.BC_DAG_EDGES[12] == 31_811_085


@needs_jdk
def test_pi_is_within_five_standard_errors_and_draws_two_words_a_sample(classes):
    out = _java(classes, "Pi", "1e6", "1")
    assert out["samples"] == 10**6 and out["words"] == 2 * 10**6
    assert abs(out["pi"] - math.pi) < 5 * 1.642 / math.sqrt(10**6)
    assert out["result"] == _java(classes, "Pi", "1e6", "1")["result"]  # seeded


def test_without_a_jdk_on_path_the_harness_says_so(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    info, why = kernels_speed.find_jdk()
    assert info == {"available": False}
    assert why == "no javac and java on PATH"


def test_the_worker_runs_our_kernel_and_reports_cold_and_warm_runs():
    out = kernels_speed.worker("nqueens_full_12", 2)
    assert out["result"] == {"solutions": 14_200, "boards": 856_188}
    assert len(out["runs_s"]) == 2 and out["backend"] in ("numba", "numpy")
    assert out["ran"] in ("numba", "numpy")


def test_a_wrong_java_result_is_an_error():
    case = kernels_speed.cases(quick=True)["uts_d11"]
    with pytest.raises(RuntimeError, match="the Java kernel's result 5 is wrong"):
        kernels_speed._check_java("uts_d11", case, {"result": 5, "runs_s": [1.0]})


_ALL_CASES = kernels_speed.cases


def _nqueens_12_only(quick: bool) -> dict:
    every = _ALL_CASES(quick=True)
    return {name: every[name] for name in ("nqueens_full_12", "nqueens_12")}


def test_without_a_jdk_the_harness_measures_ours_and_cites_java_without_a_ratio(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(kernels_speed, "cases", _nqueens_12_only)
    lines: list[str] = []
    data = kernels_speed.measure(True, 1, 2, ["numpy"], None, log=lines.append)
    assert lines[0].startswith("No JDK here (no javac and java on PATH)")
    assert data["java"] == {"available": False, "why_not": "no javac and java on PATH"}
    for case in data["cases"].values():
        assert case["java"] is None and "ratio" not in case
        assert case["cited_java"]["date"] == "2026-11-23"
        assert case["ours"]["numpy"]["ran"] == ["numpy"]
    full = data["cases"]["nqueens_full_12"]["ours"]["numpy"]
    assert full["result"] == {"solutions": 14_200, "boards": 856_188}
    assert full["per_s"]["valid partial boards/s"] == pytest.approx(
        856_188 / full["warm_median_s"])


@needs_jdk
def test_the_harness_gives_same_run_ratios_only_for_the_same_work(monkeypatch):
    monkeypatch.setattr(kernels_speed, "cases", _nqueens_12_only)
    data = kernels_speed.measure(True, 2, 2, ["numpy"], None, log=lambda line: None)
    full, fast = data["cases"]["nqueens_full_12"], data["cases"]["nqueens_12"]
    java, ours = full["java"], full["ours"]["numpy"]
    assert java["same_run"] and len(java["runs_s"]) == 2 and len(java["runs_s"][0]) == 2
    assert java["result"] == 14_200 and java["lean"]["warm_median_s"] > 0
    key = "valid partial boards/s"
    assert full["ratio"]["numpy"] == pytest.approx(ours["per_s"][key] / java["per_s"][key])
    assert full["ratio_to_lean"]["numpy"] == pytest.approx(
        ours["per_s"][key] / java["lean"]["per_s"][key])
    assert fast["java"] == java and "ratio" not in fast  # shown beside, never divided
