"""Single-core kernel throughput, beside the Java GLB kernels' figures of SPEC.md §4.

    python -m benchmarks.kernels_speed [--repeats 3] [--quick]

Runs each kernel sequentially in this process (``glb.process_all`` on one bag, no places) and
keeps the median and best of ``--repeats`` runs.  Results: ``benchmarks/results/kernels.json``,
the one source of the README's kernel rows (``python -m benchmarks.report``).  ``--quick``
skips the long BC scale 14 and N-Queens 14.

The Java figures cannot be measured here (no JVM in this project's runs): each case carries
its reference as what it is, a figure from SPEC.md §4 with its machine, date and source, and
whether the Java kernel does the same work.  A ratio to a reference is given only where the
work is the same, and it is a ratio across two runs, never a same-run comparison.

Besides the fast kernels, like-for-like measures: N-Queens valid partial boards per second in
the kernel's full-tree mode (no symmetry, no closed form), BC shortest-path edges per second,
Pi random 64-bit words per second (see ``WORK`` for exactly what each counts).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._cli import positive_int
from ._results import write_result

# -- where the reference figures come from ----------------------------------------------------

#: The Java GLB kernels measured on 2026-11-23, alternating with apgaspy's (SPEC.md §4).
JAVA_2026_11_23 = {
    "machine": "this project's 2-core machine, then reporting an Intel Xeon (OpenJDK 17)",
    "date": "2026-11-23",
    "source": "SPEC.md §4, measured 2026-11-23 alternating with apgaspy on this project's "
              "2-core machine",
    "cite": "SPEC.md §4, 2026-11-23, Intel Xeon",
}
#: The first single-thread table of SPEC.md §4 (no date given there; before 2026-11-23).
JAVA_EARLIER = {
    "machine": "this project's 2-core machine, then reporting an AMD EPYC (OpenJDK 17, warm "
               "JIT, median of 3)",
    "date": None,
    "source": "SPEC.md §4, first single-thread table of the Java GLB kernels (undated, before "
              "2026-11-23)",
    "cite": "SPEC.md §4 first table, AMD EPYC",
}

#: Nodes of the UTS tree seed 19, d = 11 (SPEC.md §3), and of d = 10: the messages d = 11
#: hashes (one per node of the d = 10 tree; the leaves below budget-1 nodes are counted).
UTS_D11_NODES, UTS_D10_NODES = 16_526_523, 4_130_071
#: Java GLB's UTS on one core, 2026-11-23 (SPEC.md §4): the reference and issue 11's target.
JAVA_UTS_NODES_PER_S = 46.2e6

#: What each kernel does differently from the Java GLB kernel (from the kernels' docstrings).
KERNEL_NOTES = {
    "uts": "same work as Java (the same tree, one SHA-1 per hashed node), hashed in numpy "
           "lanes of thousands of nodes, stopping after round 75 where only the child count "
           "is needed.",
    "nqueens": "Java backtracks board by board and checks each candidate column against every "
               "placed queen (int arrays); ours uses numpy bitboards, mirror symmetry and a "
               "closed form for the last two rows, so its times are not the same work; the "
               "full-tree mode drops the symmetry and the closed form and visits the same "
               "valid partial boards as Java.",
    "bc": "same result and the same shortest-path edges as Java; ours runs 32 sources at "
          "once in bit lanes, materialises only the shortest-path edges, relabels vertices by "
          "degree and skips the sources with no out-edge but self-loops (no shortest-path "
          "edge, zero dependencies).",
    "pi": "Java draws two doubles (two 64-bit words) a sample; ours cuts three 21-bit "
          "coordinates from each SFC64 word (1.5 samples a word): not the same work, in "
          "samples nor in words.",
}

#: What the work counts of the throughputs count exactly.
WORK = {
    "nodes": "UTS tree nodes, root included (16,526,523 for seed 19, d = 11)",
    "valid partial boards": "placements of k = 1..N non-attacking queens in the first k "
                            "rows, solutions included, the empty board not, each visited "
                            "once (856,188 / 4,674,889 / 27,358,552 for N = 12 / 13 / 14; "
                            "SPEC.md §4: 0.86 / 4.67 / 27.4 M)",
    "shortest-path edges": "pairs (source s, edge v -> w) with dist_s(w) = dist_s(v) + 1 over "
                           "all sources, parallel edges each, self-loops never, each used "
                           "once forward and once backward (31,811,085 / 490,845,036 at "
                           "scale 12 / 14, Java's figures in SPEC.md §4; the skipped sources "
                           "have none)",
    "samples": "points thrown (10^8)",
    "random 64-bit words": "64-bit words drawn from the generators (66,715,648 for 10^8 "
                           "samples, whole blocks of 2^16 a task; Java draws 2·10^8)",
}

#: Full-tree valid partial boards (tests/kernels/test_nqueens.py checks them).
FULL_TREE_BOARDS = {12: 856_188, 13: 4_674_889, 14: 27_358_552}
#: Shortest-path (DAG) edges of BC over all sources, seed 2 (SPEC.md §4).
BC_DAG_EDGES = {12: 31_811_085, 14: 490_845_036}
#: Known solution counts (SPEC.md §3).
NQUEENS_SOLUTIONS = {12: 14_200, 13: 73_712, 14: 365_596}


@dataclass(frozen=True)
class Case:
    """One measured kernel run and its reference.

    Attributes:
        label: row name in the README.
        kernel: key of ``KERNEL_NOTES``.
        run: the kernel call that is timed.
        expected: its exact result, or None when the tests check it.
        work: unit -> count (exact), for the throughputs; ``WORK`` says what each counts.
        java_s: the Java kernel's seconds on 2026-11-23 (SPEC.md §4).
        java_per_s: throughputs SPEC.md §4 gives for Java as figures (unit -> per second);
            the others are derived as work / ``java_s``.
        same_work: whether the Java kernel does the same work (same tree, same edges...).
        note: what the reference is and how it compares.
        earlier_s: the Java seconds of SPEC.md §4's first table, or None.
        target: the issue's target, or None (``{"op", "value", "unit", "text", "cite",
            "source"}``).
    """

    label: str
    kernel: str
    run: Callable[[], Any]
    expected: Any
    work: dict[str, int]
    java_s: float
    java_per_s: dict[str, float]
    same_work: bool
    note: str
    earlier_s: float | None = None
    target: dict[str, Any] | None = None


def _issue4(text: str, value: float) -> dict[str, Any]:
    """A time target of issue 4 (resolved), set against SPEC.md §4's first table."""
    return {"op": "<=", "value": value, "unit": "s", "text": text, "cite": "issue 4",
            "source": "issue 4 (resolved), against the Java figure of SPEC.md §4's first table"}


def _cases(quick: bool) -> dict[str, Case]:
    """The cases to run, by name; graphs are generated here (not part of the kernel time) and
    the BC shortest-path edges are counted here (checked against SPEC.md §4's figures).

    Raises:
        RuntimeError: a BC shortest-path edge count differs from SPEC.md §4's.
    """
    from .kernels.bc import betweenness, rmat_graph, shortest_path_edges
    from .kernels.nqueens import count_full_tree, count_solutions
    from .kernels.pi import estimate_pi, raw_words
    from .kernels.uts import count_nodes

    java_nq = {12: 0.343, 13: 2.06, 14: 13.65}
    earlier_nq = {12: 0.66, 13: 3.4, 14: 25.6}
    cases: dict[str, Case] = {
        "uts_d11": Case(
            "UTS seed 19 d=11, 1 core", "uts", lambda: count_nodes(19, 11), UTS_D11_NODES,
            {"nodes": UTS_D11_NODES}, 0.358, {"nodes": JAVA_UTS_NODES_PER_S}, True,
            "Java GLB UTS on the same tree (same SHA-1 per node)",
            earlier_s=UTS_D11_NODES / 34e6,
            target={"op": ">=", "value": JAVA_UTS_NODES_PER_S, "unit": "nodes/s",
                    "text": "≥ 46.2 M nodes/s",
                    "cite": "issue 11",
                    "source": "issue 11: at least Java's 46 M nodes/s on one core"}),
    }
    sizes = (12, 13) if quick else (12, 13, 14)
    for n in sizes:
        cases[f"nqueens_{n}"] = Case(
            f"N-Queens {n}, 1 core", "nqueens", lambda n=n: count_solutions(n),
            NQUEENS_SOLUTIONS[n], {}, java_nq[n], {}, False,
            "Java GLB N-Queens searches the full tree, candidate by candidate; ours uses "
            "symmetry and a closed form for the last two rows: not the same work",
            earlier_s=earlier_nq[n],
            target=_issue4("≤ 0.68 s", 0.68) if n == 13 else None)
        cases[f"nqueens_full_{n}"] = Case(
            f"N-Queens {n} full tree (like for like), 1 core", "nqueens",
            lambda n=n: count_full_tree(n), (NQUEENS_SOLUTIONS[n], FULL_TREE_BOARDS[n]),
            {"valid partial boards": FULL_TREE_BOARDS[n]}, java_nq[n], {}, True,
            "Java GLB N-Queens visits the same valid partial boards (the full tree without "
            "symmetry); its boards/s is these boards over its seconds for this N",
            earlier_s=earlier_nq[n])
    scales = (12,) if quick else (12, 14)
    java_bc = {12: 0.859, 14: 14.76}
    earlier_bc = {12: 1.32, 14: 24.7}
    for scale in scales:
        edges = shortest_path_edges(rmat_graph(scale))  # also builds the graph, untimed
        if edges != BC_DAG_EDGES[scale]:
            raise RuntimeError(f"BC scale {scale}: {edges} shortest-path edges, SPEC.md §4 "
                               f"says {BC_DAG_EDGES[scale]}")
        cases[f"bc_{scale}"] = Case(
            f"BC scale {scale}, 1 core", "bc", lambda scale=scale: betweenness(scale), None,
            {"shortest-path edges": edges}, java_bc[scale], {}, True,
            "Java GLB BC: identical result and the same shortest-path edges",
            earlier_s=earlier_bc[scale],
            target=_issue4(f"≤ {earlier_bc[scale]:g} s", earlier_bc[scale]))
    cases["pi_1e8"] = Case(
        "Pi 10^8 samples, 1 core", "pi", lambda: estimate_pi(10**8)[1], 78_538_588,
        {"samples": 10**8, "random 64-bit words": raw_words(10**8)}, 0.528,
        {"random 64-bit words": 379e6}, False,
        "Java GLB Pi draws two doubles a sample, ours 1.5 samples a 64-bit word: not the same "
        "work, in samples nor in words", earlier_s=0.78, target=_issue4("≤ 0.78 s", 0.78))
    return cases


def _reference(case: Case) -> dict[str, Any]:
    """The JSON ``reference`` object of a case (the 2026-11-23 Java figure)."""
    per_s = {}
    for unit, count in case.work.items():
        given = case.java_per_s.get(unit)
        per_s[f"{unit}/s"] = {
            "value": given if given is not None else count / case.java_s,
            "from": "SPEC.md §4 gives it" if given is not None
            else f"derived: {count:,} {unit} / {case.java_s:g} s",
        }
    return {"value": case.java_s, "unit": "s", "per_s": per_s, **JAVA_2026_11_23,
            "same_work": case.same_work, "note": case.note}


def _earlier_reference(case: Case) -> dict[str, Any] | None:
    """The JSON ``earlier_reference`` object (SPEC.md §4's first table), or None."""
    if case.earlier_s is None:
        return None
    per_s = {f"{unit}/s": count / case.earlier_s for unit, count in case.work.items()}
    return {"value": case.earlier_s, "unit": "s", "per_s": per_s, **JAVA_EARLIER,
            "same_work": case.same_work,
            "note": "older figure, from the machine as it reported an AMD EPYC (SPEC.md §4: "
                    "machines differ, compare only within one run); kept for history"
                    + (" (given as 34 M nodes/s)" if case.kernel == "uts" else "")}


def _target(case: Case, median_s: float) -> dict[str, Any] | None:
    """The case's target with ``met`` (bool) for the median run, or None."""
    if case.target is None:
        return None
    t = dict(case.target)
    if t["unit"] == "s":
        ours = median_s
    else:
        unit = t["unit"].removesuffix("/s")
        ours = case.work[unit] / median_s
    t["met"] = ours >= t["value"] if t["op"] == ">=" else ours <= t["value"]
    return t


def measure(repeats: int, quick: bool) -> dict[str, Any]:
    """Time every kernel ``repeats`` times.

    Args:
        repeats: runs per kernel (≥ 1).
        quick: skip BC scale 14 and N-Queens 14.

    Returns:
        name -> figures: ``median_s``, ``best_s``, ``runs_s`` (seconds), ``work`` (unit ->
        ``{"count", "counts"}``), ``per_s_median`` (unit/s -> our throughput), ``reference``
        (the 2026-11-23 Java figure: value, unit, per_s, machine, date, source, same_work,
        note), ``ratio_to_reference`` (only for the same work: its speed over the Java
        figure's, across two runs), ``earlier_reference``, ``target``, ``kernel``, ``label``.

    Raises:
        RuntimeError: a kernel returned a wrong result, or a BC edge count differs from SPEC.
    """
    out: dict[str, Any] = {}
    for name, case in _cases(quick).items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            got = case.run()
            times.append(time.perf_counter() - t)
            if case.expected is not None and got != case.expected:
                raise RuntimeError(f"{name}: wrong result {got!r}, expected {case.expected!r}")
        med, best = statistics.median(times), min(times)
        ratio = None
        if case.same_work:
            ratio = {"value": case.java_s / med,
                     "is": "our speed over the reference's (its seconds / our median "
                           "seconds), from two different runs (the reference's machine and "
                           "date are in reference): not a same-run ratio",
                     "same_run": False}
        out[name] = {
            "label": case.label,
            "kernel": case.kernel,
            "median_s": med,
            "best_s": best,
            "runs_s": times,
            "work": {unit: {"count": count, "counts": WORK[unit]}
                     for unit, count in case.work.items()},
            "per_s_median": {f"{unit}/s": count / med for unit, count in case.work.items()},
            "reference": _reference(case),
            "ratio_to_reference": ratio,
            "earlier_reference": _earlier_reference(case),
            "target": _target(case, med),
        }
    return out


def uts_hash_bound(repeats: int = 30) -> dict[str, Any]:
    """What the UTS kernel could reach if it did nothing but its numpy SHA-1 passes.

    Times one pass of the lane-parallel SHA-1 (``benchmarks.kernels.uts``) over ``LANES``
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
        target of issue 11, would need).
    """
    from .kernels import uts

    lanes = uts.LANES
    sha = uts._Sha1Lanes(lanes)
    for i in range(6):
        sha.w[i][:lanes] = np.arange(lanes, dtype=np.uint32) * np.uint32(2654435761 + i)
    names = ("_xor", "_and", "_or", "_add", "_shl", "_shr")
    saved = {name: getattr(uts, name) for name in names}
    calls = 0

    def counting(f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            nonlocal calls
            calls += 1
            return f(*args)
        return call

    try:
        for name in names:
            setattr(uts, name, counting(saved[name]))
        sha.compress(lanes, 0, uts._CHILD_TEMPLATE)
    finally:
        for name in names:
            setattr(uts, name, saved[name])
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
    steps, _ = uts._round_plan(uts._CHILD_TEMPLATE)
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
    """``x`` per second as a short string (k, M, G)."""
    for scale, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs per kernel")
    parser.add_argument("--quick", action="store_true", help="skip BC 14 and N-Queens 14")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    figures = measure(args.repeats, args.quick)
    print(f"{'kernel':18}{'median s':>10}{'best s':>10}{'Java s':>9}  same work  throughput "
          f"(ours / Java 2026-11-23, other run)")
    for name, f in figures.items():
        ref = f["reference"]
        rates = "; ".join(f"{_si(v)} / {_si(ref['per_s'][u]['value'])} {u}"
                          for u, v in f["per_s_median"].items())
        print(f"{name:18}{f['median_s']:10.4f}{f['best_s']:10.4f}{ref['value']:9.3f}  "
              f"{'yes' if ref['same_work'] else 'no':9}  {rates}")
    bound = uts_hash_bound()
    print(f"UTS SHA-1 passes alone: {_si(bound['bound_nodes_per_s'])} nodes/s, "
          f"{_si(bound['bound_without_schedule_nodes_per_s'])} with a free message schedule "
          f"({bound['ufunc_calls_per_pass']} numpy calls a pass of {bound['lanes']} lanes, "
          f"{bound['best_pass_s'] * 1e3:.2f} ms; one call {bound['best_ufunc_s'] * 1e6:.2f} µs)")
    if not args.no_write:
        path = write_result("kernels", {
            "params": vars(args),
            "about": f"ours are medians of {args.repeats} runs (runs_s) on one core of a "
                     "machine shared with other work, so they spread from run to run; each "
                     "reference is a Java GLB figure of SPEC.md §4 from another run (Java "
                     "cannot run here), cited with its machine, date and source; a ratio is "
                     "given only for the same work, and it is never a same-run ratio.",
            "kernel_notes": KERNEL_NOTES,
            "kernels": figures,
            "uts_hash_bound": bound,
        })
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
