"""Parallel efficiency of the GLB benchmarks over 1 to P places.

    python -m benchmarks.scaling [--places 1,2] [--repeats 3] [--label NAME] [--plot]
                                 [--resilient] [--benchmarks uts,nqueens,bc,pi]
                                 [--size nqueens=16,bc=14]

For each benchmark, the sequential kernel (one bag, ``glb.process_all``, no places) gives
T_seq; each place count P runs ``python -m benchmarks.<name> --json --places P`` and takes the
computation's time T_P as the benchmark reports it (start of the GLB computation to its final
reduction, the places already running).  Runs are interleaved (seq, P=1, P=2, ... then again)
so that a noisy neighbour hurts all of them alike; medians are kept.

    speedup = T_seq / T_P,   efficiency = T_seq / (P · T_P)

and, when P = 1 is measured, the efficiency against the GLB run on one place,
T_1 / (P · T_P), which leaves out what a second busy core costs the first on a shared machine.

With ``--resilient``, every GLB run is also made with ``--resilient`` (resilient GLB,
``glb._store`` and ``glb._recovery``), interleaved with the plain one, and the cost of
resilience with no failure is reported per place count:
``overhead = T_P(resilient) / T_P(plain) - 1``.

Results: ``benchmarks/results/scaling[-LABEL].json``; with ``--plot``, a PNG of speedup
against places next to it (needs matplotlib: ``pip install -e ".[plot]"``).

``APGAS_KERNELS`` chooses the kernels of the sequential runs and of the GLB runs alike (they
inherit it); the results file's ``kernels`` field says which ran.  With the compiled kernels a
problem size takes several times less time, so the default sizes are larger there
(:data:`COMPILED_SIZES`): each GLB run should last seconds, not tenths.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._cli import ENVIRONMENT_HELP, float_count, place_counts, positive_int
from ._results import RESULTS_DIR, write_result
from .kernels._backend import backend
from .references import pick

ROOT = Path(__file__).resolve().parent.parent


DEFAULT_SIZES = {"uts": 13, "nqueens": 15, "bc": 13, "pi": 2 * 10**9}
"""Problem size per benchmark: UTS depth, N-Queens board, BC scale, Pi points (numpy kernels)."""

COMPILED_SIZES = {"uts": 14, "nqueens": 16, "bc": 14, "pi": 10**10}
"""The sizes with the compiled kernels, each a few seconds on one core: UTS d = 14 (1.06 G
nodes, about 5 s; d = 13 takes 1.3 s, too short for 2-place runs to show their efficiency),
N-Queens 16 (N-Queens has no compiled path; 15 takes a third of a second), BC scale 14 (about
4 s; scale 13 under 1 s) and Pi 10^10 points (about 6 s; 2e9 took 1.2 s)."""


def default_size(name: str) -> int:
    """The default problem size of benchmark ``name`` for the backend that runs."""
    if backend() == "numba" and name in COMPILED_SIZES:
        return COMPILED_SIZES[name]
    return DEFAULT_SIZES[name]


def _sequential(name: str, size: int | None = None) -> tuple[list[str], Callable[[], Any]]:
    """(benchmark arguments, the sequential run) of a benchmark at ``size`` (default
    :func:`default_size`)."""
    from .kernels.bc import betweenness
    from .kernels.nqueens import count_solutions
    from .kernels.pi import estimate_pi
    from .kernels.uts import count_nodes

    n = default_size(name) if size is None else size
    configs: dict[str, tuple[list[str], Callable[[], Any]]] = {
        "uts": (["uts", "--depth", str(n)], lambda: count_nodes(19, n)),
        "nqueens": (["nqueens", "-N", str(n)], lambda: count_solutions(n)),
        "bc": (["bc", "--scale", str(n)], lambda: betweenness(n)),
        "pi": (["pi", "--samples", str(n)], lambda: estimate_pi(n)),
    }
    return configs[name]


def _sizes(text: str) -> dict[str, int]:
    """``--size`` as a dict: ``"nqueens=16,bc=14"`` → ``{"nqueens": 16, "bc": 14}``.

    Raises:
        argparse.ArgumentTypeError: an unknown benchmark or a size that is not a positive
            number (``2e9`` is accepted).
    """
    out: dict[str, int] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, value = item.partition("=")
        if name not in DEFAULT_SIZES:
            raise argparse.ArgumentTypeError(f"unknown benchmark {name!r} in --size")
        out[name] = float_count(value)  # raises ArgumentTypeError saying what it expected
    return out


def _glb_seconds(args: list[str], places: int) -> float:
    env = {**os.environ}
    env.pop("APGAS_PLACES", None)
    env.pop("SCHEDULER_PORT", None)
    out = subprocess.run([sys.executable, "-m", f"benchmarks.{args[0]}", *args[1:], "--json",
                          "--places", str(places)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=1800, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    if report["correct"] is False:
        raise RuntimeError(f"{args} on {places} places: wrong answer")
    return float(report["phases"]["compute_s"] + report["phases"]["reduce_s"])


def measure(names: list[str], place_counts: list[int], repeats: int,
            resilient: bool = False, sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Interleaved runs; returns name -> {seq_s, P -> {seconds, speedup, efficiency}} (and,
    with ``resilient``, P -> resilient -> {seconds, runs_s, overhead})."""
    out: dict[str, Any] = {}
    for name in names:
        args, seq = _sequential(name, (sizes or {}).get(name))
        seq()  # warm up (graph generation, caches)
        runs: dict[Any, list[float]] = {"seq": [], **{p: [] for p in place_counts}}
        res_runs: dict[int, list[float]] = {p: [] for p in place_counts}
        for i in range(repeats):
            t = time.perf_counter()
            seq()
            runs["seq"].append(time.perf_counter() - t)
            for p in place_counts:
                if resilient and i % 2:  # alternate which of the two goes first
                    res_runs[p].append(_glb_seconds([*args, "--resilient"], p))
                runs[p].append(_glb_seconds(args, p))
                if resilient and not i % 2:
                    res_runs[p].append(_glb_seconds([*args, "--resilient"], p))
        t_seq = statistics.median(runs["seq"])
        entry: dict[str, Any] = {"args": args, "seq_s": t_seq, "seq_runs_s": runs["seq"]}
        t_1 = statistics.median(runs[1]) if 1 in runs else None
        for p in place_counts:
            t_p = statistics.median(runs[p])
            entry[str(p)] = {"seconds": t_p, "runs_s": runs[p], "speedup": t_seq / t_p,
                             "efficiency": t_seq / (p * t_p),
                             "efficiency_vs_1_place": t_1 / (p * t_p) if t_1 else None}
            if resilient:
                t_r = statistics.median(res_runs[p])
                entry[str(p)]["resilient"] = {"seconds": t_r, "runs_s": res_runs[p],
                                              "overhead": t_r / t_p - 1}
        out[name] = entry
        print(f"{name:8} seq {t_seq:7.3f} s  " + "  ".join(
            f"P={p}: {entry[str(p)]['seconds']:.3f} s ({100 * entry[str(p)]['efficiency']:.0f} %)"
            + (f" resilient {entry[str(p)]['resilient']['seconds']:.3f} s "
               f"({100 * entry[str(p)]['resilient']['overhead']:+.1f} %)" if resilient else "")
            for p in place_counts), flush=True)
    return out


def plot(figures: dict[str, Any], place_counts: list[int], path: Path, title: str) -> None:
    """Speedup against places, one line per benchmark, and the ideal line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.plot(place_counts, place_counts, "k--", label="ideal", linewidth=1)
    for name, entry in figures.items():
        ax.plot(place_counts, [entry[str(p)]["speedup"] for p in place_counts], "o-",
                label=f"{name} {' '.join(entry['args'][1:])}")
    ax.set_xlabel("places")
    ax.set_ylabel("speedup over the sequential kernel")
    ax.set_xticks(place_counts)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Measure, print, write the JSON (and the plot); returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scaling",
        description=__doc__.split("\n\n")[0],
        epilog=ENVIRONMENT_HELP)
    parser.add_argument("--benchmarks", default="uts,nqueens,bc,pi",
                        help="comma-separated: uts, nqueens, bc, pi (all)")
    parser.add_argument("--places", default="1,2", help="comma-separated place counts (1,2)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs per point (3)")
    parser.add_argument("--label", default="", help="suffix of the result files")
    parser.add_argument("--plot", action="store_true", help="also write a PNG plot")
    parser.add_argument("--no-write", action="store_true", help="do not write files")
    parser.add_argument("--size", type=_sizes, default={},
                        help="problem sizes, e.g. nqueens=16,bc=14 (defaults with the compiled "
                             "kernels: UTS depth 14, N-Queens 16, BC scale 14, Pi 1e10 points; "
                             "with numpy: 13, 15, 13, 2e9)")
    parser.add_argument("--resilient", action="store_true",
                        help="also run every point with resilient GLB, interleaved, and report "
                             "its cost")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.benchmarks.split(",") if n.strip()]
    unknown = [n for n in names if n not in DEFAULT_SIZES]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    counts = place_counts(parser, args.places, 1)
    figures = measure(names, counts, args.repeats, args.resilient, args.size)
    if args.no_write:
        return 0
    name = "scaling" + (f"-{args.label}" if args.label else "")
    path = write_result(name, {"params": vars(args), "benchmarks": figures,
                               **pick("efficiency_2_places", "efficiency_16_places",
                                      "resilient_overhead")})
    print(f"wrote {path}")
    if args.plot:
        png = RESULTS_DIR / f"{name}.png"
        plot(figures, counts, png, f"GLB scaling ({os.cpu_count()} cores)")
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
