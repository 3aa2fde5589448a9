"""Single-core kernel throughput against Java reference kernels run alternately in the same run.

    python -m benchmarks.kernels_speed [--quick] [--kernels auto|numba|numpy|both]
                                       [--rounds 3] [--runs 3] [--cpu N] [--no-write]
                                       [--uts-bound]

What runs.  For each case (a kernel and a size) and each of ``--rounds`` rounds, two kinds
of fresh process, one after the other (the order flips every round, so slow drift of a shared
machine hits both sides alike):

* the Java reference kernel of ``benchmarks/java/`` (compiled once with ``javac`` into a
  temporary directory), which runs the kernel ``--runs`` times in one JVM;
* a worker of this module (``--worker CASE``) with ``APGAS_KERNELS`` set to the backend
  measured, which runs our kernel ``--runs`` times in one process.

In both, the first run of a process is *cold* (the JVM's JIT warm-up; numba's compilation or
loading of its on-disk cache, and for numpy the first touches of its buffers) and the others
are *warm*.  The figures kept are the medians over rounds of the cold runs and of all warm
runs; ratios are of warm medians, measured in this one run on this one machine.  The Java
kernels and what they do are described in ``docs/benchmarks/java-references.md``.

Ratios are given only for the same work, or for a like-for-like unit named with it:

=================  ========================================  ==================================
case               unit of the ratio                         same work as Java?
=================  ========================================  ==================================
UTS seed 19, d     nodes/s                                   yes: same tree, one SHA-1 a node
BC scale s         shortest-path edges/s                     yes: same result, same DAG edges
N-Queens full      valid partial boards/s                    yes: the full tree, no symmetry
N-Queens fast      none (times shown side by side)           no: symmetry and a closed form
Pi                 random 64-bit words/s                     no: like-for-like per word only
=================  ========================================  ==================================

Without a JDK (``javac`` and ``java`` on ``PATH``) nothing Java is run: the script says so,
measures ours alone and shows the Java figures measured earlier on this project's machine
(``CITED_JAVA``, each with its machine and date), never as a ratio.

Results: ``benchmarks/results/kernels.json`` (read by ``python -m benchmarks.report``), unless
``--no-write``; ``--quick`` (UTS d = 11, BC 12, N-Queens 12, 2 rounds; about a minute) writes
nothing unless ``--write`` is given, so a quick check never replaces a full result.
``--cpu N`` pins every process of both sides to CPU ``N`` (the JVM's JIT threads then share
it); ``--uts-bound`` also times the numpy UTS kernel's SHA-1 passes alone
(``uts_hash_bound``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ._cli import positive_int
from ._results import write_result

JAVA_DIR = Path(__file__).resolve().parent / "java"
#: The Java reference kernels (``benchmarks/java/<name>.java``, class ``<name>``).
JAVA_SOURCES = ("Uts", "Bc", "NQueens", "Pi")

# -- known answers ------------------------------------------------------------------------

#: Nodes of the UTS geometric tree, seed 19, depth d (the UTS definition's known answers).
UTS_NODES = {11: 16_526_523, 12: 66_106_929, 13: 264_459_392}
#: N-Queens solutions.
NQUEENS_SOLUTIONS = {12: 14_200, 13: 73_712, 14: 365_596}
#: Valid partial boards of the full tree (k = 1..N queens in the first k rows, solutions
#: included, the empty board not); tests/kernels/test_nqueens.py checks them.
FULL_TREE_BOARDS = {12: 856_188, 13: 4_674_889, 14: 27_358_552}
#: Shortest-path (DAG) edges of Brandes' algorithm over all sources, R-MAT seed 2.
BC_DAG_EDGES = {12: 31_811_085, 14: 490_845_036}
#: Nodes of the d = 10 tree: the messages the d = 11 tree hashes (one per node of the d = 10
#: tree; the leaves below budget-1 nodes are counted, not hashed).
UTS_D10_NODES, UTS_D11_NODES = 4_130_071, UTS_NODES[11]
#: The Java GLB UTS kernel's earlier figure on this project's machine (Intel Xeon,
#: 2026-11-23), for ``uts_hash_bound``'s ``pass_s_for_46m`` only.
JAVA_UTS_NODES_PER_S = 46.2e6
#: Pi: our hits for 10^8 samples, seed 0 (a deterministic function of samples and seed).
PI_HITS = {10**8: 78_538_588}

#: What each work unit counts.
WORK = {
    "nodes": "UTS tree nodes, root included",
    "valid partial boards": "placements of k = 1..N non-attacking queens in the first k rows, "
                            "solutions included, the empty board not, each visited once "
                            "(856,188 / 4,674,889 / 27,358,552 for N = 12 / 13 / 14)",
    "shortest-path edges": "pairs (source s, edge v -> w) with dist_s(w) = dist_s(v) + 1 over "
                           "all sources, parallel edges each, self-loops never; each is used "
                           "once forward and once backward, by ours and by Java "
                           "(31,811,085 / 490,845,036 at scale 12 / 14)",
    "samples": "points thrown",
    "random 64-bit words": "64-bit words drawn from the generators: Java 2 a sample, ours "
                           "1.5 a sample in whole blocks of 2^16 a task",
}

#: What each of our kernels does differently from the Java reference kernel.
KERNEL_NOTES = {
    "uts": "same work as Java (the same tree, one SHA-1 per hashed node); ours hashes many "
           "nodes at once (numpy lanes, or a compiled loop with numba).",
    "nqueens": "the full-tree mode visits the same valid partial boards as Java (no "
               "symmetry, no closed form); the fast mode does less work (bitboards, mirror "
               "symmetry, a closed form for the last two rows), so its time is shown beside "
               "Java's full-tree time without a ratio.",
    "bc": "same result and the same shortest-path edges as Java; ours runs many sources at "
          "once and relabels vertices by degree.",
    "pi": "Java draws two doubles (two 64-bit words) a sample; ours cuts three 21-bit "
          "coordinates from each SFC64 word (1.5 samples a word): not the same work, so the "
          "ratio is per random 64-bit word only.",
}

#: Java GLB kernel figures measured earlier on this project's machine; shown, without a
#: ratio, only when no JDK is here to run the Java kernels in the same run.
CITED_JAVA: dict[str, dict[str, Any]] = {
    "uts": {"text": "UTS seed 19: d = 11 0.358 s (46.2 M nodes/s); d = 12 44.9-46.7 M nodes/s",
            "machine": "this project's 2-core machine (Intel Xeon on 2026-11-23, AMD EPYC on "
                       "2026-11-24), OpenJDK 17, one core",
            "date": "2026-11-23, 2026-11-24"},
    "bc": {"text": "BC scale 12 0.859 s, scale 14 14.76 s",
           "machine": "this project's 2-core machine (Intel Xeon), OpenJDK 17, one core",
           "date": "2026-11-23"},
    "nqueens": {"text": "N-Queens 12 / 13 / 14 (full tree): 0.343 / 2.06 / 13.65 s",
                "machine": "this project's 2-core machine (Intel Xeon), OpenJDK 17, one core",
                "date": "2026-11-23"},
    "pi": {"text": "Pi 10^8 samples 0.528 s (two doubles a sample: 379 M words/s)",
           "machine": "this project's 2-core machine (Intel Xeon), OpenJDK 17, one core",
           "date": "2026-11-23"},
}

#: Goals on same-run ratios (ours over Java, warm medians, same work).
GOALS = {
    "uts": {"op": ">=", "value": 4.0, "unit": "× Java", "text": "≥ 4× Java, same run",
            "cite": "project goal for the compiled kernels"},
    "bc": {"op": ">=", "value": 3.0, "unit": "× Java", "text": "≥ 3× Java, same run",
           "cite": "project goal for the compiled kernels"},
}


@dataclass(frozen=True)
class Case:
    """One kernel and size, measured on both sides.

    Attributes:
        label: row name in the report.
        kernel: ``"uts"``, ``"bc"``, ``"nqueens"`` or ``"pi"``.
        java: the Java class and its arguments before the run count (``[class, *args]``), or
            None for a case with no Java side of its own (the N-Queens fast mode).
        java_extra: arguments after the run count.
        work: unit -> count: the work of one run (``WORK`` says what each unit counts).
        ratio_unit: the unit whose per-second figures give the ratio, or None (no ratio).
        same_work: whether ours and Java do the same work.
        note: how the two compare.
        goal: a ``GOALS`` entry, or None.
        java_of: for a case without a Java side, the case whose Java figures it shows.
        also_lean: run the Java N-Queens ``lean`` mode as a second, stronger reference.
    """

    label: str
    kernel: str
    java: list[str] | None
    work: dict[str, int]
    ratio_unit: str | None
    same_work: bool
    note: str
    goal: dict[str, Any] | None = None
    java_of: str | None = None
    java_extra: list[str] = field(default_factory=list)
    also_lean: bool = False


def cases(quick: bool) -> dict[str, Case]:
    """The cases, by name: UTS d = 12 (d = 11 when quick), BC 12 and 14 (12), N-Queens
    12-14 (12) full tree and fast, Pi 10^8."""
    from .kernels.pi import raw_words

    out: dict[str, Case] = {}
    d = 11 if quick else 12
    out[f"uts_d{d}"] = Case(
        f"UTS seed 19 d={d}, 1 core", "uts", ["Uts", str(d), "19"],
        {"nodes": UTS_NODES[d]}, "nodes", True,
        "same tree, one SHA-1 per hashed node on both sides", goal=GOALS["uts"])
    for scale in (12,) if quick else (12, 14):
        out[f"bc_{scale}"] = Case(
            f"BC scale {scale}, 1 core", "bc", ["Bc", str(scale)],
            {"shortest-path edges": BC_DAG_EDGES[scale]}, "shortest-path edges", True,
            "same betweenness and the same shortest-path edges on both sides",
            goal=GOALS["bc"], java_extra=["2"])
    for n in (12,) if quick else (12, 13, 14):
        out[f"nqueens_full_{n}"] = Case(
            f"N-Queens {n} full tree, 1 core", "nqueens", ["NQueens", str(n)],
            {"valid partial boards": FULL_TREE_BOARDS[n]}, "valid partial boards", True,
            "the same valid partial boards: ours the full-tree mode (bitboards, no symmetry, "
            "no closed form), Java int arrays checked queen by queen",
            java_extra=["glb"], also_lean=True)
        out[f"nqueens_{n}"] = Case(
            f"N-Queens {n} fast mode, 1 core", "nqueens", None, {}, None, False,
            "less work than Java: mirror symmetry and a closed form for the last two rows; "
            "the Java time shown is its full tree (same run), no ratio",
            java_of=f"nqueens_full_{n}")
    samples = 10**8
    out["pi_1e8"] = Case(
        "Pi 10^8 samples, 1 core", "pi", ["Pi", "1e8"],
        {"samples": samples, "random 64-bit words": raw_words(samples)},
        "random 64-bit words", False,
        "not the same work: Java two doubles (2 words) a sample, ours 1.5 samples a word; "
        "the ratio is per random 64-bit word", java_extra=["42"])
    return out


# -- our side: the worker ----------------------------------------------------------------


def _our_kernel(name: str) -> tuple[Callable[[], Any], Callable[[Any], dict[str, Any]]]:
    """Our kernel call for case ``name`` (setup done, untimed) and a function that turns its
    return value into the JSON ``result`` (checked against the known answer)."""
    kind, _, size = name.rpartition("_")
    if kind == "uts":
        from .kernels.uts import count_nodes

        depth = int(size.removeprefix("d"))
        return (lambda: count_nodes(19, depth)), lambda r: {"nodes": r}
    if kind == "bc":
        from .kernels.bc import betweenness, rmat_graph

        scale = int(size)
        rmat_graph(scale)  # the graph is generated (and cached) outside the timed runs

        def bc_result(r: Any) -> dict[str, Any]:
            return {"sum": float(r.sum()), "max": float(r.max())}
        return (lambda: betweenness(scale)), bc_result
    if kind == "nqueens_full":
        from .kernels.nqueens import count_full_tree

        n = int(size)
        return (lambda: count_full_tree(n)), lambda r: {"solutions": r[0], "boards": r[1]}
    if kind == "nqueens":
        from .kernels.nqueens import count_solutions

        n = int(size)
        return (lambda: count_solutions(n)), lambda r: {"solutions": r}
    if kind == "pi":
        from .kernels.pi import estimate_pi

        return (lambda: estimate_pi(10**8)), lambda r: {"pi": r[0], "hits": r[1]}
    raise ValueError(f"no kernel case named {name!r}")


def _compiled() -> bool:
    """Whether a compiled (numba) module of the kernels was loaded in this process (a worker
    imports one kernel only, so it is that kernel's)."""
    return any("numba" in m for m in sys.modules if m.startswith("benchmarks.kernels."))


def worker(name: str, runs: int) -> dict[str, Any]:
    """Run our kernel of case ``name`` ``runs`` times in this process (the first one cold).

    Returns:
        ``backend`` (what ``APGAS_KERNELS`` resolved to), ``ran`` (``"numba"`` only when a
        compiled module of this kernel was loaded, else ``"numpy"``), ``setup_s`` (imports
        and graph generation, seconds), ``runs_s`` (seconds per run) and ``result``.
    """
    from .kernels._backend import backend

    t = time.perf_counter()
    chosen = backend()
    call, result_of = _our_kernel(name)
    setup = time.perf_counter() - t
    times, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        got = call()
        times.append(time.perf_counter() - t)
        result = result_of(got)
    ran = "numba" if chosen == "numba" and _compiled() else "numpy"
    return {"backend": chosen, "ran": ran, "setup_s": setup, "runs_s": times,
            "result": result}


# -- running the two sides ---------------------------------------------------------------


def find_jdk() -> tuple[dict[str, Any], str | None]:
    """``({"available": bool, ...}, why)``: javac and java on PATH, and their version."""
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        missing = " and ".join(n for n, p in (("javac", javac), ("java", java)) if not p)
        return {"available": False}, f"no {missing} on PATH"
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    version = (out.stderr or out.stdout).strip().splitlines()
    return {"available": True, "java": java, "javac": javac,
            "version": version[0] if version else "unknown", "version_lines": version}, None


def compile_java(directory: Path) -> None:
    """Compile ``benchmarks/java/*.java`` into ``directory``.

    Raises:
        RuntimeError: a source is missing (an install without ``benchmarks/java``), or javac
            failed (its output is in the message).
    """
    sources = [str(JAVA_DIR / f"{name}.java") for name in JAVA_SOURCES]
    missing = [path for path in sources if not Path(path).is_file()]
    if missing:
        raise RuntimeError(f"Java sources missing: {', '.join(missing)} (run from a checkout "
                           "of the repository)")
    out = subprocess.run(["javac", "-d", str(directory), *sources], capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"javac failed:\n{out.stdout}{out.stderr}")


def _pin(cpu: int | None) -> Callable[[], None] | None:
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def _run_json(cmd: list[str], env: dict[str, str] | None, cpu: int | None,
              timeout: float) -> dict[str, Any]:
    """Run ``cmd`` and parse the last line of its output as JSON.

    Raises:
        RuntimeError: the command failed or printed no JSON.
    """
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                         preexec_fn=_pin(cpu))
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}"
                           f"{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def run_java(classes: Path, args: list[str], runs: int, extra: list[str],
             cpu: int | None) -> dict[str, Any]:
    """One JVM running a Java kernel ``runs`` times: its JSON line."""
    cmd = ["java", "-cp", str(classes), args[0], *args[1:], str(runs), *extra]
    return _run_json(cmd, None, cpu, timeout=1800)


def run_ours(name: str, runs: int, backend: str, cpu: int | None) -> dict[str, Any]:
    """One worker process running our kernel of case ``name`` with ``APGAS_KERNELS=backend``."""
    env = dict(os.environ, APGAS_KERNELS=backend)
    cmd = [sys.executable, "-m", "benchmarks.kernels_speed", "--worker", name,
           "--runs", str(runs)]
    return _run_json(cmd, env, cpu, timeout=1800)


def _summary(processes: list[dict[str, Any]], work: dict[str, int]) -> dict[str, Any]:
    """Cold and warm figures of one side over the rounds (one process a round)."""
    cold = [p["runs_s"][0] for p in processes]
    warm = [s for p in processes for s in p["runs_s"][1:]] or cold
    med = statistics.median(warm)
    return {
        "cold_s": statistics.median(cold),
        "cold_first_s": cold[0],
        "warm_median_s": med,
        "warm_best_s": min(warm),
        "runs_s": [p["runs_s"] for p in processes],
        "per_s": {f"{unit}/s": count / med for unit, count in work.items()},
    }


def _check_ours(name: str, result: dict[str, Any], java_result: Any | None) -> None:
    """Raise RuntimeError unless our result is the known answer (and, for BC, Java's)."""
    kind, _, size = name.rpartition("_")
    if kind == "uts":
        ok = result["nodes"] == UTS_NODES[int(size[1:])]
    elif kind == "nqueens_full":
        ok = (result["solutions"], result["boards"]) == (
            NQUEENS_SOLUTIONS[int(size)], FULL_TREE_BOARDS[int(size)])
    elif kind == "nqueens":
        ok = result["solutions"] == NQUEENS_SOLUTIONS[int(size)]
    elif kind == "pi":
        ok = result["hits"] == PI_HITS[10**8]
    else:  # bc: the same betweenness as Java's, to rounding
        ok = java_result is None or math.isclose(result["sum"], java_result["sum"],
                                                 rel_tol=1e-9)
    if not ok:
        raise RuntimeError(f"{name}: our result {result} is wrong (Java: {java_result})")


def _check_java(name: str, case: Case, out: dict[str, Any]) -> None:
    """Raise RuntimeError unless the Java kernel's result is the known answer."""
    r = out["result"]
    if case.kernel == "uts":
        ok = r == case.work["nodes"]
    elif case.kernel == "bc":
        ok = r["dag_edges"] == case.work["shortest-path edges"]
    elif case.kernel == "nqueens":
        ok = r == NQUEENS_SOLUTIONS[out["n"]] and \
            out["boards"] == case.work["valid partial boards"]
    else:  # pi: within 5 standard errors
        n = out["samples"]
        ok = abs(out["pi"] - math.pi) < 5 * 1.642 / math.sqrt(n)
    if not ok:
        raise RuntimeError(f"{name}: the Java kernel's result {r} is wrong")


def _java_work(case: Case) -> dict[str, int]:
    """Java's work for one run in the case's units (Pi draws two words a sample)."""
    if case.kernel == "pi":
        n = case.work["samples"]
        return {"samples": n, "random 64-bit words": 2 * n}
    return dict(case.work)


def _resolve_backends(choice: str) -> list[str]:
    """``--kernels`` as the list of backends to measure (``both``: numba where it imports)."""
    from .kernels._backend import numba_available, select

    if choice == "both":
        return ["numba", "numpy"] if numba_available() else ["numpy"]
    return [select(choice)]


def measure(quick: bool, rounds: int, runs: int, backends: list[str], cpu: int | None,
            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Measure every case: Java (when a JDK is here) and ours, alternating, ``rounds`` times.

    Args:
        quick: the small sizes (see the module docstring).
        rounds: processes per side and case (≥ 1).
        runs: kernel runs per process (≥ 1; the first is cold).
        backends: ours to measure, each ``"numba"`` or ``"numpy"``.
        cpu: pin every process to this CPU, or None.
        log: where progress lines go.

    Returns:
        The JSON object written to ``kernels.json`` (less the machine), see
        ``docs/benchmarks/java-references.md``.

    Raises:
        RuntimeError: a wrong result on either side, or javac failing.
    """
    jdk, why = find_jdk()
    the_cases = cases(quick)
    java_runs: dict[str, list[dict[str, Any]]] = {}
    lean_runs: dict[str, list[dict[str, Any]]] = {}
    ours_runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        n: {b: [] for b in backends} for n in the_cases}
    with tempfile.TemporaryDirectory(prefix="apgas-java-") as tmp:
        if jdk["available"]:
            compile_java(Path(tmp))
        else:
            log(f"No JDK here ({why}): the Java kernels are not run, so there is no same-run "
                "ratio; the Java figures shown are cited from earlier runs (machine, date).")
        for name, case in the_cases.items():
            for r in range(rounds):
                steps: list[Callable[[], None]] = []
                if case.java is not None and jdk["available"]:
                    def java_step(name: str = name, case: Case = case,
                                  args: list[str] = case.java) -> None:
                        out = run_java(Path(tmp), args, runs, case.java_extra, cpu)
                        _check_java(name, case, out)
                        java_runs.setdefault(name, []).append(out)
                        if case.also_lean:
                            out = run_java(Path(tmp), args, runs, ["lean"], cpu)
                            _check_java(name, case, out)
                            lean_runs.setdefault(name, []).append(out)
                    steps.append(java_step)
                for b in backends:
                    def our_step(name: str = name, b: str = b) -> None:
                        ours_runs[name][b].append(run_ours(name, runs, b, cpu))
                    steps.append(our_step)
                for step in steps if r % 2 == 0 else reversed(steps):
                    step()
                log(f"  {name} round {r + 1}/{rounds} done")
    figures: dict[str, Any] = {}
    for name, case in the_cases.items():
        source = case.java_of or name
        java = None
        if source in java_runs:
            base = the_cases[source]
            java_class = (base.java or ["?"])[0]
            java = _summary(java_runs[source], _java_work(base))
            java["result"] = java_runs[source][-1]["result"]
            java["same_run"] = True
            java["kernel"] = f"benchmarks/java/{java_class}.java"
            if source in lean_runs:
                lean = _summary(lean_runs[source], _java_work(base))
                lean["kernel"] = f"benchmarks/java/{java_class}.java, lean mode"
                java["lean"] = lean
        ours = {}
        for b, procs in ours_runs[name].items():
            for p in procs:
                _check_ours(name, p["result"], java["result"] if java else None)
            s = _summary(procs, case.work)
            s.update(backend=b, ran=sorted({p["ran"] for p in procs}),
                     setup_s=statistics.median(p["setup_s"] for p in procs),
                     result=procs[-1]["result"])
            ours[b] = s
        entry: dict[str, Any] = {
            "label": case.label, "kernel": case.kernel, "same_work": case.same_work,
            "note": case.note,
            "work": {u: {"count": c, "counts": WORK[u]} for u, c in case.work.items()},
            "java": java, "ours": ours, "ratio_unit": case.ratio_unit,
        }
        if java is not None and case.ratio_unit:
            key = f"{case.ratio_unit}/s"
            entry["ratio"] = {b: o["per_s"][key] / java["per_s"][key] for b, o in ours.items()}
            if "lean" in java:
                entry["ratio_to_lean"] = {b: o["per_s"][key] / java["lean"]["per_s"][key]
                                          for b, o in ours.items()}
        if java is None and jdk["available"] is False:
            entry["cited_java"] = CITED_JAVA[case.kernel]
        if case.goal:
            goal = dict(case.goal)
            ratios = entry.get("ratio")
            goal["met"] = {b: (x >= goal["value"] if goal["op"] == ">=" else x <= goal["value"])
                           for b, x in ratios.items()} if ratios else None
            entry["target"] = goal
        figures[name] = entry
    return {
        "params": {"quick": quick, "rounds": rounds, "runs": runs, "backends": backends,
                   "cpu": cpu},
        "about": (f"{rounds} round(s) a case, each side in a fresh process a round, "
                  f"alternating (the order flips every round), {runs} kernel runs a process: "
                  "the first cold (JIT warm-up, numba compilation or cache load), the "
                  "others warm. Figures are medians over the rounds; ratios are our warm "
                  "throughput over Java's, measured in this run on this machine, and given "
                  "only for the same work or "
                  "for the like-for-like unit named. The machine may be shared with other "
                  "work, so absolute times drift; the ratios are the figures to compare."),
        "java": dict(jdk, why_not=why) if not jdk["available"] else jdk,
        "kernels_selected": backends,
        "kernels": "/".join(sorted({r for f in figures.values() for o in f["ours"].values()
                                    for r in o["ran"]})),
        "kernel_notes": KERNEL_NOTES,
        "cases": figures,
    }


def uts_hash_bound(repeats: int = 30) -> dict[str, Any]:
    """What the UTS kernel could reach if it did nothing but its numpy SHA-1 passes.

    Times one pass of the lane-parallel SHA-1 (``benchmarks.kernels._uts_numpy``) over ``LANES``
    child messages that need only their child count (rounds 76-79 skipped, the cheapest
    pass), counts the numpy calls in a pass, times one such call alone on ``LANES`` uint32
    lanes, and turns the best pass into nodes per second for the seed 19, d = 11 tree: it
    hashes 4,130,071 messages (one per node of the d = 10 tree; the leaves below budget-1
    nodes are counted, not hashed) for 16,526,523 nodes.  Bag handling, child counts and the
    passes that need whole digests are left out, so the real kernel is slower than this.

    Args:
        repeats: passes timed (≥ 1); the best is kept (the least disturbed by other work).

    Returns:
        ``lanes``, ``ufunc_calls_per_pass``, ``schedule_calls_per_pass`` (those that build
        the message schedule: three xors at most and a rotation per word),
        ``bound_without_schedule_nodes_per_s`` (the bound if the schedule cost nothing, each
        other call at the pass's average), ``best_pass_s``, ``best_ufunc_s`` (one
        ``bitwise_xor`` of two arrays over ``lanes`` lanes), ``ns_per_lane_per_call`` (the
        pass's average), ``hashed_messages``, ``nodes``, ``bound_nodes_per_s`` (seconds,
        counts, nodes per second) and ``pass_s_for_46m`` (the pass time 46.2 M nodes/s, the
        Java GLB kernel's earlier figure on this machine, ``JAVA_UTS_NODES_PER_S``, would
        need).
    """
    from .kernels import _uts_numpy, uts

    lanes = uts.LANES
    sha = _uts_numpy._Sha1Lanes(lanes)
    for i in range(6):
        sha.w[i][:lanes] = np.arange(lanes, dtype=np.uint32) * np.uint32(2654435761 + i)
    names = ("_xor", "_and", "_or", "_add", "_shl", "_shr")
    saved = {name: getattr(_uts_numpy, name) for name in names}
    calls = 0

    def counting(f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return f(*args)
        return call

    try:
        for name in names:
            setattr(_uts_numpy, name, counting(saved[name]))
        sha.compress(lanes, 0, uts._CHILD_TEMPLATE)
    finally:
        for name in names:
            setattr(_uts_numpy, name, saved[name])
    best_pass = best_call = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        sha.compress(lanes, 0, uts._CHILD_TEMPLATE)
        best_pass = min(best_pass, time.perf_counter() - t)
    a = np.arange(lanes, dtype=np.uint32)
    b, out = a * np.uint32(3), np.empty_like(a)
    for _ in range(repeats * 50):
        t = time.perf_counter()
        np.bitwise_xor(a, b, out)
        best_call = min(best_call, time.perf_counter() - t)
    hashed, nodes = UTS_D10_NODES, UTS_D11_NODES
    steps, _ = _uts_numpy._round_plan(uts._CHILD_TEMPLATE)
    schedule = sum(len(xors) + 3 for t, xors, _ in steps if xors and t < 76)
    per_call = best_pass / calls
    return {"lanes": lanes, "ufunc_calls_per_pass": calls, "best_pass_s": best_pass,
            "schedule_calls_per_pass": schedule,
            "bound_without_schedule_nodes_per_s":
                nodes / (hashed / lanes * per_call * (calls - schedule)),
            "best_ufunc_s": best_call,
            "ns_per_lane_per_call": best_pass / (calls * lanes) * 1e9,
            "hashed_messages": hashed, "nodes": nodes,
            "bound_nodes_per_s": nodes / (hashed / lanes * best_pass),
            "pass_s_for_46m": nodes / JAVA_UTS_NODES_PER_S / (hashed / lanes)}


def _si(x: float) -> str:
    for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def print_table(data: dict[str, Any]) -> None:
    """The measured figures as a plain-text table, one line per case and backend."""
    java_ok = data["java"]["available"]
    print(f"Java: {data['java'].get('version') if java_ok else data['java']['why_not']}")
    print(f"{'case':18}{'side':13}{'cold s':>9}{'warm s':>9}  throughput (warm)  ratio")
    mismatch = False
    for name, f in data["cases"].items():
        j = f["java"]
        if j:
            rates = "; ".join(f"{_si(v)} {u}" for u, v in j["per_s"].items())
            print(f"{name:18}{'Java':13}{j['cold_s']:9.4f}{j['warm_median_s']:9.4f}  {rates}")
            if "lean" in j:
                lean = j["lean"]
                rates = "; ".join(f"{_si(v)} {u}" for u, v in lean["per_s"].items())
                print(f"{'':18}{'lean':13}{lean['cold_s']:9.4f}{lean['warm_median_s']:9.4f}  "
                      f"{rates}")
        for b, o in f["ours"].items():
            rates = "; ".join(f"{_si(v)} {u}" for u, v in o["per_s"].items())
            ratio = f.get("ratio", {}).get(b)
            text = f"  {ratio:.2f}× Java ({f['ratio_unit']})" if ratio is not None else \
                ("  no ratio: not the same work" if not f["ratio_unit"] else "")
            if ratio is not None and "ratio_to_lean" in f:
                text += f", {f['ratio_to_lean'][b]:.2f}× lean Java"
            t = f.get("target")
            if t and t["met"]:
                text += f"; goal {t['text']}: {'met' if t['met'][b] else 'not met'}"
            ran = b if o["ran"] == [b] else f"{b}>{'/'.join(o['ran'])}"
            mismatch = mismatch or ran != b
            print(f"{'':18}{ran:13}{o['cold_s']:9.4f}{o['warm_median_s']:9.4f}  {rates}{text}")
        if "cited_java" in f:
            c = f["cited_java"]
            print(f"{'':18}cited: {c['text']} (measured on {c['machine']}, {c['date']}; "
                  "another run: no ratio)")
    if mismatch:
        print("numba>numpy: numba was asked for, but the kernel has no compiled path in this "
              "tree, so numpy ran")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.kernels_speed",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and 2 rounds (about a minute); writes nothing "
                             "unless --write")
    parser.add_argument("--kernels", choices=("auto", "numba", "numpy", "both"),
                        default=None, help="our backend(s) to measure (default: "
                                           "APGAS_KERNELS, else auto)")
    parser.add_argument("--rounds", type=positive_int, default=None,
                        help="processes per side and case (default 3, quick 2)")
    parser.add_argument("--runs", type=positive_int, default=3,
                        help="kernel runs per process, the first cold (default 3)")
    parser.add_argument("--cpu", type=int, default=None, help="pin every process to this CPU")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument("--write", action="store_true", help="write the JSON even when quick")
    parser.add_argument("--uts-bound", action="store_true",
                        help="also time the numpy UTS kernel's SHA-1 passes alone "
                             "(uts_hash_bound)")
    parser.add_argument("--worker", metavar="CASE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.runs)))
        return 0
    choice = args.kernels or os.environ.get("APGAS_KERNELS", "").strip() or "auto"
    try:
        backends = _resolve_backends(choice)
    except Exception as exc:  # ConfigurationError: numba asked for and missing
        parser.error(str(exc))
    rounds = args.rounds or (2 if args.quick else 3)
    data = measure(args.quick, rounds, args.runs, backends, args.cpu)
    print_table(data)
    if args.uts_bound:
        bound = data["uts_hash_bound"] = uts_hash_bound()
        print(f"UTS numpy SHA-1 passes alone: {_si(bound['bound_nodes_per_s'])} nodes/s "
              f"(d = 11; {bound['ufunc_calls_per_pass']} numpy calls a pass of "
              f"{bound['lanes']} lanes, {bound['best_pass_s'] * 1e3:.2f} ms)")
    if not args.no_write and (args.write or not args.quick):
        print(f"wrote {write_result('kernels', data)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
