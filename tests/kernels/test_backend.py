"""Tests of the kernel backend choice (``APGAS_KERNELS``), the numpy fallback where numba is
missing, the compiled kernels' on-disk cache and warm-up, and the benchmarks' report of the
backend that ran.

Where numba must be unavailable, the test runs a fresh interpreter whose ``PYTHONPATH`` starts
with a directory holding a ``numba.py`` that raises ImportError: the same state as a machine
without numba, for that process and for the places it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from apgaspy import ConfigurationError
from benchmarks.kernels import _backend
from benchmarks.kernels._backend import backend, select

from .bagcheck import needs_numba

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _env(**extra: str) -> dict[str, str]:
    """This environment without the settings a test must not inherit (APGAS_KERNELS: auto
    unless ``extra`` says otherwise), plus ``extra``."""
    env = dict(os.environ)
    for key in ("APGAS_PLACES", "APGAS_KERNELS", "SCHEDULER_PORT", "SCHEDULER_IP"):
        env.pop(key, None)
    return {**env, **extra}


@pytest.fixture
def without_numba(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import numba`` fails (a shadowing numba.py)."""
    shadow = tmp_path / "no_numba"
    shadow.mkdir()
    (shadow / "numba.py").write_text('raise ImportError("numba is not installed here")\n')
    path = os.pathsep.join([str(shadow), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return _env(PYTHONPATH=path)


# -- the setting ---------------------------------------------------------------------------------


def test_numpy_is_chosen_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APGAS_KERNELS", "numpy")
    assert backend() == "numpy"
    assert select("numpy") == "numpy"


@needs_numba
def test_auto_and_numba_choose_numba_where_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for value in ("auto", "numba", " NUMBA "):
        monkeypatch.setenv("APGAS_KERNELS", value)
        assert backend() == "numba"
    monkeypatch.delenv("APGAS_KERNELS")
    assert backend() == "numba"


def test_a_bad_value_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APGAS_KERNELS", "fortran")
    with pytest.raises(ConfigurationError, match="APGAS_KERNELS.*fortran"):
        backend()


def test_the_cache_directory_follows_numba_cache_dir(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "given"))
    assert _backend.cache_dir() == tmp_path / "given" and (tmp_path / "given").is_dir()
    monkeypatch.delenv("NUMBA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _backend.cache_dir() == tmp_path / "xdg" / "apgaspy" / "numba"


def test_warm_up_does_nothing_under_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    import benchmarks.kernels.uts  # noqa: F401 - registers its warm-up

    monkeypatch.setenv("APGAS_KERNELS", "numpy")
    assert _backend.warm_up(["benchmarks.kernels.uts"]) == {}
    assert "benchmarks.kernels.uts" in _backend.warm_up_modules()


# -- without numba -------------------------------------------------------------------------------


@pytest.mark.timeout(300)
def test_without_numba_auto_runs_numpy_exactly(without_numba: dict[str, str]) -> None:
    r = _python("""
        import sys
        from benchmarks.kernels import backend, warm_up
        from benchmarks.kernels.uts import count_nodes
        assert backend() == "numpy", backend()
        assert warm_up() == {}
        print(count_nodes(19, 8), count_nodes(19, 5, 7))
        assert "numba" not in sys.modules or sys.modules["numba"] is None
    """, without_numba)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["257042", "3987"]


@pytest.mark.timeout(300)
def test_without_numba_forcing_numba_is_a_clear_error(without_numba: dict[str, str]) -> None:
    r = _python("""
        from apgaspy import ConfigurationError
        from benchmarks.kernels.uts import count_nodes
        try:
            count_nodes(19, 3)
        except ConfigurationError as exc:
            print(exc)
        else:
            raise SystemExit("no error")
    """, {**without_numba, "APGAS_KERNELS": "numba"})
    assert r.returncode == 0, r.stderr
    assert "APGAS_KERNELS=numba" in r.stdout and "pip install 'apgaspy[fast]'" in r.stdout


@pytest.mark.timeout(300)
def test_without_numba_the_benchmark_runs_on_places_with_numpy(
        without_numba: dict[str, str]) -> None:
    cmd = [sys.executable, "-m", "benchmarks.uts", "-d", "8", "--places", "2", "--json"]
    r = subprocess.run(cmd, cwd=ROOT, env=without_numba, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["kernels"] == "numpy" and report["correct"] is True
    assert report["result"] == 257042 and report["warm_up_s"] == 0.0
    forced = subprocess.run(cmd, cwd=ROOT, env={**without_numba, "APGAS_KERNELS": "numba"},
                            capture_output=True, text=True, timeout=240)
    assert forced.returncode != 0
    assert "APGAS_KERNELS=numba, but numba does not import here" in forced.stderr


# -- the compiled kernels' cache -----------------------------------------------------------------


_WARM_UP_PROBE = """
    import json, time
    t = time.perf_counter()
    from benchmarks.kernels import warm_up
    took = warm_up(["benchmarks.kernels.uts"])
    seconds = time.perf_counter() - t
    from benchmarks.kernels import _uts_numba as k
    from benchmarks.kernels.uts import count_nodes
    stats = {f.__name__: (sum(f.stats.cache_hits.values()),
                          sum(f.stats.cache_misses.values()))
             for f in (k.process, k.sha1_children, k.child_counts)}
    print(json.dumps({"seconds": seconds, "stats": stats, "took": took,
                      "count": count_nodes(19, 9)}))
"""


@pytest.fixture(scope="module")
def uts_compiled(
        tmp_path_factory: pytest.TempPathFactory) -> tuple[str, subprocess.CompletedProcess]:
    """One cold warm-up of the UTS kernels into an empty numba cache, shared by the tests of
    the cache (a compile takes seconds; they only read the cache it leaves): the cache
    directory and the run of ``_WARM_UP_PROBE`` that filled it."""
    cache = str(tmp_path_factory.mktemp("numba") / "cache")
    return cache, _python(_WARM_UP_PROBE, _env(NUMBA_CACHE_DIR=cache, APGAS_KERNELS="numba"),
                          timeout=550)


@needs_numba
@pytest.mark.timeout(600)
def test_a_fresh_process_loads_the_kernels_that_a_warm_up_compiled(
        uts_compiled: tuple[str, subprocess.CompletedProcess]) -> None:
    """After a warm-up in one process, another process loads every compiled UTS kernel from
    the on-disk cache (numba's dispatcher statistics: hits, no misses) in well under the time
    a compile takes, and they count exactly."""
    cache, first = uts_compiled
    env = _env(NUMBA_CACHE_DIR=cache, APGAS_KERNELS="numba")
    assert first.returncode == 0, first.stderr
    cold = json.loads(first.stdout)
    assert all(misses > 0 for _, misses in cold["stats"].values()), cold  # compiled there
    second = _python(_WARM_UP_PROBE, env)
    assert second.returncode == 0, second.stderr
    warm = json.loads(second.stdout)
    assert warm["count"] == cold["count"] == 1031269
    assert all(hits > 0 and misses == 0 for hits, misses in warm["stats"].values()), warm
    # loading (numba's import included) takes tenths of a second; compiling, seconds
    assert warm["seconds"] < 5.0 < cold["seconds"], (warm, cold)


_STARTING_PLACE = """
    import json, sys, threading
    import apgaspy._child as child
    child.importing_main = 1  # as while a place imports the program's main module
    import benchmarks.kernels.uts as uts
    child.importing_main = None
    [t.join(120) for t in threading.enumerate() if t.name == "kernels-warm-up"]
    loaded = None
    if "numba" in sys.modules:
        from benchmarks.kernels import _uts_numba as k
        loaded = sorted(f.__name__ for f in (k.process, k.sha1_children, k.child_counts)
                        if f.signatures)
    print(json.dumps({"numba": "numba" in sys.modules, "loaded": loaded,
                      "count": uts.count_nodes(19, 6)}))
"""


@needs_numba
@pytest.mark.timeout(600)
def test_a_starting_place_loads_the_kernels_of_the_main_module_in_the_background(
        uts_compiled: tuple[str, subprocess.CompletedProcess]) -> None:
    """A kernel module imported while a place imports the program's main module starts its
    warm-up in a thread: once that thread is done, every compiled UTS kernel is loaded, before
    any call of the program's; under numpy the thread imports nothing of numba.  The cache
    is the one a warm-up in another process filled (``uts_compiled``: the same warm-up
    call)."""
    cache, warm = uts_compiled
    assert warm.returncode == 0, warm.stderr
    r = _python(_STARTING_PLACE, _env(NUMBA_CACHE_DIR=cache, APGAS_KERNELS="numba"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"numba": True, "count": 16000,
                                    "loaded": ["child_counts", "process", "sha1_children"]}
    r = _python(_STARTING_PLACE, _env(APGAS_KERNELS="numpy"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"numba": False, "loaded": None, "count": 16000}


# -- the benchmarks' reports ---------------------------------------------------------------------


@needs_numba
@pytest.mark.timeout(300)
def test_the_report_names_the_backend_that_ran() -> None:
    for kernels in ("numba", "numpy"):
        cmd = [sys.executable, "-m", "benchmarks.uts", "-d", "9", "--places", "2", "--json"]
        r = subprocess.run(cmd, cwd=ROOT, env=_env(APGAS_KERNELS=kernels),
                           capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout.strip().splitlines()[-1])
        assert report["kernels"] == kernels and report["result"] == 1031269
        assert (report["warm_up_s"] > 0) == (kernels == "numba")


def test_every_benchmark_help_names_the_setting() -> None:
    for module in ("uts", "nqueens", "bc", "pi", "scaling", "malleability"):
        r = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", "--help"], cwd=ROOT,
                           env=_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert "APGAS_KERNELS" in r.stdout, module


def test_result_files_name_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks._results import write_result

    monkeypatch.setenv("APGAS_KERNELS", "numpy")
    data = json.loads(write_result("probe", {"x": 1}, tmp_path).read_text())
    assert data["kernels"] == "numpy" and data["x"] == 1
    assert "numba" in data["machine"]


# -- a grow during a computation ---------------------------------------------------------------


@needs_numba
@pytest.mark.timeout(300)
def test_a_place_added_by_a_grow_gets_work_and_runs_the_compiled_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks.grow_latency's run: a grow order during UTS on GLB; the new place finishes
    a process call (its first loot arrived, the kernels loaded from the cache) and the count
    is exact."""
    from benchmarks.grow_latency import one_run

    monkeypatch.setenv("APGAS_KERNELS", "numba")  # the job inherits it
    r = one_run(13, cold=False)
    assert r["correct"] is True and r["kernels"] == "numba"
    assert r["first_work_s"] is not None and r["first_work_s"] > 0
    assert r["new_place_cpu_s"] is not None and r["new_place_cpu_s"] > 0


@needs_numba
@pytest.mark.timeout(120)
def test_a_bag_runs_its_numpy_kernel_while_its_compiled_one_loads_in_the_background(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A place started by a grow loads its compiled kernels in a background thread; until that
    has ended, a UTS bag's ``process`` runs the numpy kernel (the compiled one is not
    touched), and the count stays exact when the bag goes on with the compiled kernel."""
    import threading

    from benchmarks.kernels import uts
    from benchmarks.uts import KNOWN
    from glb import LongSum

    monkeypatch.setenv("APGAS_KERNELS", "numba")
    monkeypatch.setattr(_backend, "_loading", {})
    uts.warm_up()  # the compiled kernel is there; what is tested is the choice per call
    gate = threading.Event()

    def slow_load() -> None:
        gate.wait(60)

    slow_load.__module__ = uts.__name__  # a warm-up of the UTS kernels that takes a while
    loader = _backend.warm_up_in_background(slow_load)
    assert not _backend.compiled_now(uts.__name__)
    compiled = uts._nb_workspace

    def not_now() -> None:
        pytest.fail("the compiled kernel ran while it was still loading")

    monkeypatch.setattr(uts, "_nb_workspace", not_now)
    bag, total = uts.UTSBag(19, 9), LongSum()
    for _ in range(3):
        bag.process(4096, total)
    assert 0 < total.value() < KNOWN[(19, 9)]
    gate.set()
    loader.join(10)
    monkeypatch.setattr(uts, "_nb_workspace", compiled)
    assert _backend.compiled_now(uts.__name__)
    used = []
    monkeypatch.setattr(uts, "_nb_workspace", lambda: used.append(1) or compiled())
    while not bag.is_empty():
        bag.process(4096, total)
    assert used and total.value() == KNOWN[(19, 9)]
