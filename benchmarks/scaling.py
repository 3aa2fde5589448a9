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

On a machine shared with other work, wall-clock figures mostly measure the neighbours: a
place whose worker waits for a CPU looks slow.  Every run therefore also reports the
efficiency with that wait taken out, the same way for both sides (Linux only, from the
scheduler's per-thread run delay, ``/proc/thread-self/schedstat``)::

    A_seq = T_seq − d_seq
    A_P   = Σ_p (T_P − d_p) + Σ_p (c_p − w_p)
    efficiency_uncontended = A_seq / A_P

with ``d`` the time the computing thread (the sequential loop; place p's GLB worker) was
runnable but waited for a CPU, ``c_p`` the CPU time of place p's process during the
computation and ``w_p`` that of its worker thread (so ``c_p − w_p``, the CPU of the place's
other threads, counts as overhead), from ``glb.PlaceStats``.  It estimates the efficiency on
an otherwise idle machine; it does not remove what two busy cores cost each other (shared
caches, memory bandwidth, clock), which ``work_cpu_ratio`` shows: the CPU seconds spent in
``Bag.process`` over all places divided by the sequential run's CPU seconds (1.0: no extra
work).  The load averages (``os.getloadavg``) before and after are in the results file.

What the cores cost each other is measured directly too, for every P up to the number of
cores: P processes each run the whole sequential kernel at the same moment
(:class:`CoRun`, no communication, no load balancing), interleaved with the other runs.
With ``T_co`` the mean copy's time (median over the rounds)::

    co_run_slowdown      = T_co / T_seq
    efficiency_vs_co_run = T_co / (P · T_P)

The first is the machine's own limit for this kernel (a P-place run cannot beat
``1 / co_run_slowdown`` of the wall-clock efficiency however little GLB costs); the second
is what GLB loses beyond it.

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
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from glb import thread_run_delay_s

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


def sequential(name: str, size: int | None = None) -> tuple[list[str], Callable[[], Any]]:
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


def parse_sizes(text: str) -> dict[str, int]:
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


@dataclass
class Run:
    """One timed run (sequential or GLB).

    Attributes:
        seconds: wall-clock time T (s): the sequential loop, or a GLB computation's
            ``compute_s + reduce_s``.
        available_s: the place-seconds it would have taken without other processes' load
            (``A`` of the module docstring), or ``None`` where the run delay is unknown.
        work_cpu_s: CPU seconds spent in the work itself (the sequential loop's thread; the
            sum of the places' ``busy_cpu_s``).
    """

    seconds: float
    available_s: float | None
    work_cpu_s: float


def sequential_run(seq: Callable[[], Any]) -> Run:
    """Time ``seq()`` on this thread: wall clock, CPU, and the wait for a CPU."""
    d0, c0, t0 = thread_run_delay_s(), time.thread_time(), time.perf_counter()
    seq()
    t, c, d1 = time.perf_counter() - t0, time.thread_time() - c0, thread_run_delay_s()
    available = None if d0 is None or d1 is None else t - (d1 - d0)
    return Run(t, available, c)


def _co_run_copy(name: str, size: int | None, conn: Any, barrier: Any) -> None:
    """A :class:`CoRun` copy: warm the kernel up, then time one sequential run per ``"go"``,
    all copies released together by ``barrier``, until told ``"stop"``."""
    _, seq = sequential(name, size)
    seq()  # warm up (graph generation, compiled kernels), like measure()'s own
    conn.send("ready")
    while conn.recv() == "go":
        barrier.wait()
        conn.send(sequential_run(seq))


class CoRun:
    """``copies`` processes, each with its own copy of a benchmark's sequential kernel, run
    at the same moment: what the machine's cores cost each other for this kernel (shared
    caches, memory bandwidth, clock) with no communication and no load balancing at all.

    Each copy does the whole sequential problem, so a copy's time against one run alone
    (``T_seq``) is the slowdown a place suffers from its neighbours on this machine, and
    ``T_co / (P · T_P)`` the efficiency of the GLB run against that baseline.  It is
    meaningful only with at most one copy per core.

    Args:
        name: benchmark (``uts``, ``nqueens``, ``bc``, ``pi``).
        size: its problem size (``None``: :func:`default_size`).
        copies: processes (>= 2).

    Raises:
        ValueError: ``copies`` < 2.
        RuntimeError: a copy died before it was ready.
    """

    def __init__(self, name: str, size: int | None, copies: int) -> None:
        if copies < 2:
            raise ValueError(f"a co-run needs at least 2 copies, got {copies}")
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(copies)
        self._conns = []
        self._procs = []
        for _ in range(copies):
            ours, theirs = ctx.Pipe()
            proc = ctx.Process(target=_co_run_copy, args=(name, size, theirs, barrier),
                               daemon=True)
            proc.start()
            self._conns.append(ours)
            self._procs.append(proc)
        for conn in self._conns:
            if not conn.poll(600) or conn.recv() != "ready":
                self.close()
                raise RuntimeError(f"a co-run copy of {name} did not start")

    def run(self) -> list[Run]:
        """One round: every copy runs once, all at the same moment; their :class:`Run`."""
        for conn in self._conns:
            conn.send("go")
        return [conn.recv() for conn in self._conns]

    def close(self) -> None:
        """End the copies (they exit on ``"stop"``; a copy that does not is terminated)."""
        for conn in self._conns:
            try:
                conn.send("stop")
            except OSError:
                pass
        for proc in self._procs:
            proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join()


def _glb_run(args: list[str], places: int) -> Run:
    env = {**os.environ}
    env.pop("APGAS_PLACES", None)
    env.pop("SCHEDULER_PORT", None)
    out = subprocess.run([sys.executable, "-m", f"benchmarks.{args[0]}", *args[1:], "--json",
                          "--places", str(places)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=1800, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    if report["correct"] is False:
        raise RuntimeError(f"{args} on {places} places: wrong answer")
    return glb_run(report)


def glb_run(report: dict[str, Any]) -> Run:
    """The :class:`Run` of a benchmark's JSON report (``python -m benchmarks.<name> --json``):
    ``T_P`` from its phases, ``A_P`` and the work's CPU from its per-place ``log`` (a place
    of W workers counts W times ``T_P``, less the run delays of all its workers).

    Raises:
        KeyError: the report lacks ``phases`` or ``log``.
    """
    t = float(report["phases"]["compute_s"] + report["phases"]["reduce_s"])
    log = report["log"]
    delays = [s.get("run_delay_s") for s in log]
    available = None
    if log and all(d is not None for d in delays):
        available = sum(max(0.0, s.get("workers", 1) * t - d)
                        for s, d in zip(log, delays, strict=True)) + sum(
            max(0.0, s["cpu_s"] - s["worker_cpu_s"]) for s in log)
    return Run(t, available, sum(s.get("busy_cpu_s", 0.0) for s in log))


def median_known(values: list[float | None]) -> float | None:
    """The median of ``values``, or ``None`` when one of them is ``None`` (or none is given)."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if len(known) == len(values) and known else None


def measure(names: list[str], place_counts: list[int], repeats: int,
            resilient: bool = False, sizes: dict[str, int] | None = None) -> dict[str, Any]:
    """Interleaved runs; returns name -> {seq_s, P -> {seconds, speedup, efficiency}} (and,
    with ``resilient``, P -> resilient -> {seconds, runs_s, overhead})."""
    out: dict[str, Any] = {}
    for name in names:
        args, seq = sequential(name, (sizes or {}).get(name))
        seq()  # warm up (graph generation, caches)
        runs: dict[Any, list[Run]] = {"seq": [], **{p: [] for p in place_counts}}
        res_runs: dict[int, list[float]] = {p: [] for p in place_counts}
        co_counts = [p for p in place_counts if 2 <= p <= (os.cpu_count() or 1)]
        co_runs: dict[int, list[float]] = {p: [] for p in co_counts}
        co: dict[int, CoRun] = {}
        try:  # started inside: a copy that fails to start ends the ones started before it
            for p in co_counts:
                co[p] = CoRun(name, (sizes or {}).get(name), p)
            for i in range(repeats):
                runs["seq"].append(sequential_run(seq))
                for p in place_counts:
                    if p in co:  # the mean copy's time, this round
                        co_runs[p].append(statistics.fmean(r.seconds for r in co[p].run()))
                    _glb_point(args, p, i, resilient, runs, res_runs)
        finally:
            for c in co.values():
                c.close()
        seq_runs = runs["seq"]
        t_seq = statistics.median(r.seconds for r in seq_runs)
        a_seq = median_known([r.available_s for r in seq_runs])
        cpu_seq = statistics.median(r.work_cpu_s for r in seq_runs)
        entry: dict[str, Any] = {"args": args, "seq_s": t_seq,
                                 "seq_runs_s": [r.seconds for r in seq_runs],
                                 "seq_available_s": a_seq, "seq_cpu_s": cpu_seq}
        t_1 = statistics.median(r.seconds for r in runs[1]) if 1 in runs else None
        for p in place_counts:
            t_p = statistics.median(r.seconds for r in runs[p])
            a_p = median_known([r.available_s for r in runs[p]])
            entry[str(p)] = {
                "seconds": t_p, "runs_s": [r.seconds for r in runs[p]],
                "speedup": t_seq / t_p, "efficiency": t_seq / (p * t_p),
                "efficiency_vs_1_place": t_1 / (p * t_p) if t_1 else None,
                "available_s": a_p,
                "efficiency_uncontended": a_seq / a_p if a_seq and a_p else None,
                "work_cpu_ratio": statistics.median(r.work_cpu_s for r in runs[p]) / cpu_seq,
            }
            if p in co_runs:
                t_co = statistics.median(co_runs[p])
                entry[str(p)].update({
                    "co_run_s": t_co, "co_run_runs_s": co_runs[p],
                    "co_run_slowdown": t_co / t_seq,
                    "efficiency_vs_co_run": t_co / (p * t_p),
                })
            if resilient:
                t_r = statistics.median(res_runs[p])
                entry[str(p)]["resilient"] = {"seconds": t_r, "runs_s": res_runs[p],
                                              "overhead": t_r / t_p - 1}
        out[name] = entry
        print(f"{name:8} seq {t_seq:7.3f} s  " + "  ".join(_summary(entry[str(p)], p, resilient)
                                                          for p in place_counts), flush=True)
    return out


def _glb_point(args: list[str], p: int, i: int, resilient: bool, runs: dict[Any, list[Run]],
               res_runs: dict[int, list[float]]) -> None:
    """Round ``i``'s GLB run(s) on ``p`` places, appended to ``runs`` (and ``res_runs``)."""
    if resilient and i % 2:  # alternate which of the two goes first
        res_runs[p].append(_glb_run([*args, "--resilient"], p).seconds)
    runs[p].append(_glb_run(args, p))
    if resilient and not i % 2:
        res_runs[p].append(_glb_run([*args, "--resilient"], p).seconds)


def _summary(point: dict[str, Any], p: int, resilient: bool) -> str:
    """One place count's figures for the console."""
    unc = point["efficiency_uncontended"]
    text = (f"P={p}: {point['seconds']:.3f} s ({100 * point['efficiency']:.0f} %"
            + ("" if unc is None else f", uncontended {100 * unc:.0f} %")
            + ("" if "efficiency_vs_co_run" not in point else
               f", vs co-run {100 * point['efficiency_vs_co_run']:.0f} % (copies "
               f"x{point['co_run_slowdown']:.3f})")
            + f", work CPU x{point['work_cpu_ratio']:.3f})")
    if resilient:
        text += (f" resilient {point['resilient']['seconds']:.3f} s "
                 f"({100 * point['resilient']['overhead']:+.1f} %)")
    return text


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (``None`` where the system has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


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
    parser.add_argument("--size", type=parse_sizes, default={},
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
    load_before = load_average()
    figures = measure(names, counts, args.repeats, args.resilient, args.size)
    load = {"before": load_before, "after": load_average()}
    print(f"load averages (1, 5, 15 min): before {load['before']}, after {load['after']}")
    if args.no_write:
        return 0
    name = "scaling" + (f"-{args.label}" if args.label else "")
    path = write_result(name, {"params": vars(args), "load_average": load,
                               "benchmarks": figures,
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
