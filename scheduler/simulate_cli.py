"""``python -m scheduler simulate``: the paper's evaluation (or an SWF trace) in simulation.

By default: 10 seeded batches (seeds 43-52) of 25 jobs from the paper's mix (Table 2) ×
malleable shares
0, 20, 40, 60, 80, 100 % × the algorithms fcfs, backfilling, easy, malleable on 32 nodes.
Prints a table, or with ``--json`` one JSON object::

    {"config": {...},
     "rows": [{"algorithm", "malleable_share", "batches", "makespan_s", "utilisation",
               "mean_wait_s", "mean_turnaround_s", "mean_bounded_slowdown",
               "shrinks_per_malleable_job", "grows_per_malleable_job", "jobs",
               "malleable_jobs", "makespan_min_s", "makespan_max_s", "makespan_std_s",
               "refused"}, ...],          # one per (algorithm, share), means over batches
     "summary": {"fcfs_0_makespan_s", "malleable_share", "malleable_makespan_s",
                 "makespan_reduction", "paper_makespan_reduction", "goal_13_percent_met"},
     "elapsed_s": 1.2}

With ``--swf`` the workload is an SWF trace instead (``--swf-max-jobs`` keeps its first
jobs); a progress bar on a terminal counts the jobs done (``--quiet`` hides it).
``--records PATH`` writes the per-job records of the first batch as JSON (one list per
``"<algorithm>@<share>"``), ``--records-swf DIR`` the same schedules as SWF traces
``DIR/<algorithm>@<share>.swf`` (wait and run time fields filled in;
:func:`scheduler.workload.write_swf`).  docs/guides/simulation.md has examples.

``--study priority`` runs the priority study instead (Bhosale et al. 2024,
docs/guides/priorities.md): 64 nodes, 100 seeded batches of 16 Jacobi jobs, the policies
rigid-min, rigid-max, moldable, elastic-priority, elastic-priority-easy, swept over the
submission gap (0-300 s at a rescale gap of 180 s) and the rescale gap (0-1200 s at a
submission gap of 180 s), plus the point of the paper's Table 1 (90 s, 180 s), once over
all batches (``table``) and once over those with at least the paper's batch's work
(``table_loaded``).  ``--json``
prints ``{"config": {...}, "rows": [{"sweep", "policy", "submission_gap_s",
"rescale_gap_s", "batches", "total_time_s", "utilisation", "weighted_mean_response_s",
"weighted_mean_completion_s", "max_wait_priority1_s"}, ...]}``; ``--plot DIR`` draws the
sweeps.  ``--jacobi-model FILE`` gives measured run times
(:func:`scheduler.model.load_jacobi_model`).

``--study evolving`` runs the evolving study (docs/guides/evolving-scheduling.md): 10 nodes,
20 seeded batches (seeds 42…) of 20 synthetic evotree jobs of 1, 2, 4 or 8 nodes, 5 submitted
at 0 and the rest over 600 s; at each evolving share (default 20, 40, 60, 80, 100 %) that
share of the jobs is evolving (1-2, 1-4, 2-8, 4-16 nodes).  The evolving-only policies
(evolving-easy, evolving-smallest, evolving-reserve) run the batch whose other jobs are rigid
(mix ``rigid``); the policies that resize malleable jobs too (evolving-easy-malleable,
evolving-elastic) the batch whose other jobs are split over rigid, moldable and malleable
(mix ``mixed``); the row ``all-rigid`` runs the same batches with every job rigid under EASY
backfilling.  ``--json`` prints ``{"config": {...}, "rows": [{"algorithm", "mix",
"evolving_share", "batches", "makespan_s", "mean_turnaround_s", "mean_wait_s",
"utilisation", "requests", "requests_served", "releases", "shrinks", "grows",
"makespan_cut", "turnaround_cut"}, ...]}`` (:func:`scheduler.studies.evolving.evolving_study`);
``--plot DIR`` writes ``DIR/evolving_study.png``
(:func:`scheduler.studies.evolving.plot_evolving_study`).

A mix file (``--mix``) is a JSON list of rows ``{"program", "size", "nodes", "weight",
"min_nodes", "max_nodes"}``, each optionally with ``"times": {"<nodes>": seconds, ...}`` for
a program the built-in model does not know.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._argtypes import (
    fraction,
    nonnegative_int,
    percentages,
    positive_int,
    positive_number,
    positive_seconds,
    seconds,
)
from ._table import format_table
from .algorithms import registry
from .model import ResizeCostModel, RuntimeModel, ScalingCurve
from .simulate import SimConfig
from .studies.paper import DEFAULT_ALGORITHMS, DEFAULT_SHARES, Evaluation, evaluate_workloads
from .studies.priority import PAPER_TABLE_NODE_S, PRIORITY_POLICIES, priority_study
from .workload import PAPER_MIX, MixRow, Workload, paper_batch, swf_workload, write_swf

__all__ = ["HELP", "add_arguments", "paper_comparable", "run", "summary"]

HELP = "simulate the scheduling algorithms on the paper's job mix or an SWF trace"

_COSTS: dict[str, Callable[[], ResizeCostModel]] = {
    "apgaspy": ResizeCostModel,
    "java": ResizeCostModel.java,
    "free": ResizeCostModel.free,
}



def _algorithms(text: str) -> list[str]:
    names = [v.strip() for v in text.split(",") if v.strip()]
    unknown = [n for n in names if n not in registry]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown algorithm(s) {unknown or text!r}; known: {', '.join(registry)}"
        )
    return names



def add_priority_arguments(p: argparse.ArgumentParser) -> None:
    """The priority policies' parameters (shared by ``simulate`` and ``serve``)."""
    g = p.add_argument_group("priority policies (docs/guides/priorities.md)")
    g.add_argument("--rescale-gap-s", type=seconds, default=None,
                   help="least seconds between two scheduling events of one job "
                        "(T_rescale_gap; default: the algorithm's own, 180 for the priority "
                        "policies, 10 for evolving-elastic)")
    g.add_argument("--keep-free", type=nonnegative_int, default=None,
                   help="nodes never handed out (default 0; --study priority: 1, as the "
                        "paper keeps one for its launcher)")
    g.add_argument("--aging-s", type=positive_seconds, default=None,
                   help="elastic-priority-easy: seconds of waiting per rank step "
                        "gained (default 600)")


def priority_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options :func:`add_priority_arguments` parsed, as keywords for
    :func:`scheduler.algorithms.make` (only those given)."""
    out: dict[str, Any] = {}
    for key in ("rescale_gap_s", "keep_free", "aging_s"):
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``simulate``'s options to ``p``."""
    out = p.add_argument_group("output")
    out.add_argument("--json", action="store_true", help="print one JSON object, not a table")
    out.add_argument("--csv", metavar="PATH", type=Path, help="also write the rows as CSV")
    out.add_argument("--plot", metavar="DIR", type=Path,
                     help="write PNG charts (Gantt, utilisation, makespan vs share) to DIR")
    out.add_argument("--records", metavar="PATH", type=Path,
                     help="write the per-job records of the first batch as JSON")
    out.add_argument("--records-swf", metavar="DIR", type=Path,
                     help="write the schedules of the first batch as SWF traces "
                          "DIR/<algorithm>@<share>.swf (wait and run time filled in)")
    out.add_argument("--quiet", action="store_true", help="no progress bar")

    p.add_argument("--study", choices=["priority", "evolving"], default=None,
                   help="run a named study instead: 'priority' (Bhosale et al. 2024) or "
                        "'evolving' (evolving jobs, docs/guides/evolving-scheduling.md)")
    p.add_argument("--jacobi-model", metavar="FILE", type=Path, default=None,
                   help="--study priority: JSON run times of the Jacobi jobs "
                        "(default: the documented placeholder)")
    add_priority_arguments(p)

    sweep = p.add_argument_group("sweep")
    sweep.add_argument("--algorithms", type=_algorithms, default=None,
                       help="comma-separated (default: fcfs,backfilling,easy,malleable; "
                            "--study priority: the five priority policies)")
    sweep.add_argument("--shares", type=percentages, default=None,
                       help="malleable shares in %% (default: 0,20,40,60,80,100); --study "
                            "evolving: evolving shares (default 20,40,60,80,100)")
    sweep.add_argument("--batches", type=positive_int, default=None,
                       help="seeded batches (default 10; 1 with --swf; 100 with --study "
                            "priority; 20 with --study evolving)")
    sweep.add_argument("--seed", type=int, default=None,
                       help="seed of the first batch; batch i uses seed+i (default 43; "
                            "1 with --study priority; 42 with --study evolving)")
    sweep.add_argument("--nodes", type=positive_int, default=None,
                       help="cluster size in nodes (default 32; 64 with --study priority; 10 "
                            "with --study evolving)")

    mix = p.add_argument_group("paper job mix (Table 2 of Finnerty et al. 2024)")
    mix.add_argument("--mix", metavar="PATH", type=Path, help="JSON job mix instead of Table 2")
    mix.add_argument("--jobs", type=positive_int, default=None,
                     help="jobs per batch (25; --study evolving: 20)")
    mix.add_argument("--submit-window-s", type=seconds, default=600.0,
                     help="submissions drawn in [0, this) seconds (600)")
    mix.add_argument("--first-at-zero", type=nonnegative_int, default=5,
                     help="jobs submitted at time 0 (5)")
    mix.add_argument("--required-factor", type=positive_number, default=1.5,
                     help="required time = model run time x this (1.5)")
    mix.add_argument("--required-time-s", type=positive_seconds, default=None,
                     help="one required time for all jobs (the Java scripts: 800)")

    swf = p.add_argument_group("SWF trace")
    swf.add_argument("--swf", metavar="PATH", type=Path, help="simulate this SWF trace")
    swf.add_argument("--swf-malleable-share", type=percentages, default=None,
                     help="malleable share(s) in %% for the trace (default: --shares)")
    swf.add_argument("--cores-per-node", type=positive_int, default=1,
                     help="processors per node of the traced machine (1)")
    swf.add_argument("--swf-cores", action="store_true",
                     help="count cores: nodes have --cores-per-node cores and the trace's "
                          "rigid jobs ask for their processors as #CORES")
    swf.add_argument("--swf-max-jobs", type=positive_int, default=None,
                     help="use only the first jobs of the trace")
    swf.add_argument("--serial-fraction", type=fraction, default=0.05,
                     help="Amdahl serial fraction of trace jobs (0.05)")

    sim = p.add_argument_group("simulation")
    sim.add_argument("--interval-s", type=positive_seconds, default=5.0,
                     help="period of algorithm runs in seconds (5)")
    sim.add_argument("--ready-s", type=seconds, default=0.4,
                     help="start to APGAS-Ready in seconds (0.4)")
    sim.add_argument("--cooldown-s", type=seconds, default=60.0,
                     help="per-job order cool-down in seconds (60)")
    sim.add_argument("--resize-costs", choices=sorted(_COSTS), default="apgaspy",
                     help="resize durations: apgaspy's (default), the Java figures, or none")


def _load_mix(path: Path, model: RuntimeModel) -> list[MixRow]:
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for index, raw in enumerate(data):
        try:
            times = raw.pop("times", None)
            row = MixRow(**raw)
        except TypeError as exc:
            raise SystemExit(f"{path}: row {index}: {exc}") from None
        if times:
            model.add(row.program, row.size,
                      ScalingCurve({int(n): float(t) for n, t in times.items()}))
        if (row.program, row.size) not in model:
            raise SystemExit(f"{path}: row {index}: no run times for {row.program}/{row.size}; "
                             "add \"times\": {\"<nodes>\": seconds}")
        rows.append(row)
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Malleable at its highest share against FCFS at 0 % (the paper's headline figure)."""
    fcfs = [r for r in rows if r["algorithm"] == "fcfs" and r["malleable_share"] == 0]
    mall = [r for r in rows if r["algorithm"] == "malleable"]
    if not fcfs or not mall:
        return {}
    top = max(mall, key=lambda r: r["malleable_share"])
    base = fcfs[0]["makespan_s"]
    reduction = 1 - top["makespan_s"] / base if base > 0 else 0.0
    return {
        "fcfs_0_makespan_s": base,
        "malleable_share": top["malleable_share"],
        "malleable_makespan_s": top["makespan_s"],
        "makespan_reduction": reduction,
        "paper_makespan_reduction": 1 - 1006 / 1157,  # the paper: 1157 s -> 1006 s
        "goal_13_percent_met": reduction >= 0.13,
    }


def _table(rows: list[dict[str, Any]], *, nodes: int | None = None) -> str:
    """The rows as a table; a ``refused`` column counts the jobs (over all batches) that
    could never fit the cluster of ``nodes`` nodes, left out of every mean."""
    head = ("algorithm", "share%", "makespan_s", "sd_s", "util%", "wait_s", "turnaround_s",
            "bsld", "shrinks/j", "grows/j", "refused")
    lines = format_table(head, [(
        r["algorithm"], r["malleable_share"], f"{r['makespan_s']:.1f}",
        f"{r['makespan_std_s']:.1f}", f"{100 * r['utilisation']:.1f}", f"{r['mean_wait_s']:.1f}",
        f"{r['mean_turnaround_s']:.1f}", f"{r['mean_bounded_slowdown']:.2f}",
        f"{r['shrinks_per_malleable_job']:.2f}", f"{r['grows_per_malleable_job']:.2f}",
        r.get("refused", 0)) for r in rows], "<>>>>>>>>>>")
    refused = max((r.get("refused", 0) for r in rows), default=0)
    if refused:
        where = f"the {nodes} nodes" if nodes else "the cluster"
        lines.append(f"\nrefused: up to {refused} jobs a row (over all batches) can never fit "
                     f"{where}; they are left out of every figure above")
    return "\n".join(lines)


def paper_comparable(cfg: dict[str, Any], summary_: dict[str, Any]) -> bool:
    """Whether the paper's makespan reduction (13.1 %, Finnerty et al. 2024) compares with
    this run: the paper's own batches (its job mix, 25 jobs, 32 nodes, no SWF trace) with
    every job malleable, the share it measured."""
    return (cfg.get("workload") == "paper" and cfg.get("nodes") == 32
            and cfg.get("jobs") == 25 and summary_.get("malleable_share") == 100)


def _plots(evaluation: Evaluation, rows: list[dict[str, Any]], out: Path, nodes: int) -> list:
    from . import plots

    out.mkdir(parents=True, exist_ok=True)
    written = [plots.makespan_vs_share(rows, out / "makespan_vs_share.png")]
    shares = sorted({s for _, s, _ in evaluation.results})
    algorithms = list(dict.fromkeys(a for a, _, _ in evaluation.results))
    for share in dict.fromkeys([shares[0], shares[-1]]):
        tag = f"{share:g}"
        runs = {a: evaluation.results[(a, share, 0)] for a in algorithms}
        written.append(plots.usage(runs, out / f"utilisation_{tag}.png", total_nodes=nodes,
                                   title=f"batch 0, {tag} % malleable"))
        for algorithm, result in runs.items():
            written.append(plots.gantt(
                result, out / f"gantt_{algorithm}_{tag}.png",
                title=f"{algorithm}, batch 0, {tag} % malleable: makespan "
                      f"{result.makespan_s:.0f} s, utilisation {result.utilisation:.1%}"))
    return written


def _study_table(rows: list[dict[str, Any]]) -> str:
    head = ("sweep", "sub_gap_s", "resc_gap_s", "policy", "total_s", "util%", "w_resp_s",
            "w_compl_s", "max_p1_wait_s")
    lines = format_table(head, [(
        r["sweep"], f"{r['submission_gap_s']:.0f}", f"{r['rescale_gap_s']:.0f}", r["policy"],
        f"{r['total_time_s']:.1f}", f"{100 * r['utilisation']:.1f}",
        f"{r['weighted_mean_response_s']:.1f}", f"{r['weighted_mean_completion_s']:.1f}",
        f"{r['max_wait_priority1_s']:.1f}") for r in rows], "<>><>>>>>")
    return "\n".join(lines)


def run_priority_study(args: argparse.Namespace) -> int:
    """``--study priority``: run it, print a table or JSON, draw the sweeps.  Returns 0, or 1
    when a chart cannot be drawn; exits with a message for a bad model file."""
    from .model import jacobi_placeholder, load_jacobi_model

    started = time.perf_counter()
    try:
        model = load_jacobi_model(str(args.jacobi_model)) if args.jacobi_model \
            else jacobi_placeholder()
    except (OSError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    options = priority_options(args)
    batches = args.batches or 100
    policies = list(args.algorithms or PRIORITY_POLICIES)
    other = [a for a in policies if a not in PRIORITY_POLICIES]
    if other:
        raise SystemExit(f"error: --study priority runs the priority policies "
                         f"({', '.join(PRIORITY_POLICIES)}), not {', '.join(other)}")
    nodes = args.nodes or 64
    try:
        rows = priority_study(batches=batches, seed=1 if args.seed is None else args.seed,
                              total_nodes=nodes, policies=policies,
                              keep_free=options.get("keep_free", 1),
                              aging_s=options.get("aging_s"), model=model)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    cfg = {"study": "priority", "nodes": nodes, "batches": batches, "policies": policies,
           "keep_free": options.get("keep_free", 1), "aging_s": options.get("aging_s"),
           "loaded_node_s": PAPER_TABLE_NODE_S, "model": model.source,
           "elapsed_s": round(time.perf_counter() - started, 3)}
    if args.csv:
        _write_csv(args.csv, rows)
    if args.plot:
        from . import plots

        try:
            for path in plots.priority_sweeps(rows, args.plot):
                print(f"wrote {path}", file=sys.stderr)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps({"config": cfg, "rows": rows}, indent=1))
    else:
        print(_study_table(rows))
        runs = sum(r["batches"] for r in rows if r["sweep"] != "table_loaded")
        print(f"{runs} simulations in {cfg['elapsed_s']:.2f} s")
    return 0


def run_evolving_study(args: argparse.Namespace) -> int:
    """``--study evolving``: run it, print a table or JSON.  Returns 0; exits with a message
    for an algorithm that is not an evolving policy or a bad share."""
    from .algorithms import EVOLVING_ALGORITHMS
    from .studies.evolving import evolving_study, plot_evolving_study

    started = time.perf_counter()
    algorithms = list(args.algorithms or EVOLVING_ALGORITHMS)
    other = [a for a in algorithms if a not in EVOLVING_ALGORITHMS]
    if other:
        raise SystemExit(f"error: --study evolving runs the evolving policies "
                         f"({', '.join(EVOLVING_ALGORITHMS)}), not {', '.join(other)}")
    batches = args.batches or 20
    seed = 42 if args.seed is None else args.seed
    nodes = args.nodes or 10
    shares = args.shares if args.shares is not None else [20.0, 40.0, 60.0, 80.0, 100.0]
    jobs = args.jobs or 20
    try:
        rows = evolving_study(batches=batches, seed=seed, shares=shares, algorithms=algorithms,
                              total_nodes=nodes, jobs=jobs,
                              submit_window_s=args.submit_window_s,
                              first_at_zero=min(args.first_at_zero, jobs),
                              required_factor=args.required_factor)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    cfg = {"study": "evolving", "nodes": nodes, "batches": batches,
           "seeds": list(range(seed, seed + batches)), "shares": shares,
           "algorithms": algorithms, "jobs": jobs, "submit_window_s": args.submit_window_s,
           "first_at_zero": min(args.first_at_zero, jobs),
           "required_factor": args.required_factor,
           "elapsed_s": round(time.perf_counter() - started, 3)}
    if args.csv:
        _write_csv(args.csv, rows)
    if args.plot:
        plot_evolving_study(rows, args.plot)
    if args.json:
        print(json.dumps({"config": cfg, "rows": rows}, indent=1))
    else:
        head = ("algorithm", "mix", "evolving%", "makespan_s", "turnaround_s", "wait_s",
                "util%", "makespan_cut%", "turnaround_cut%")
        lines = format_table(head, [(
            r["algorithm"], r["mix"], f"{r['evolving_share']:g}", f"{r['makespan_s']:.1f}",
            f"{r['mean_turnaround_s']:.1f}", f"{r['mean_wait_s']:.1f}",
            f"{100 * r['utilisation']:.1f}", f"{100 * r['makespan_cut']:.1f}",
            f"{100 * r['turnaround_cut']:.1f}") for r in rows], "<<>>>>>>>")
        print("\n".join(lines))
        print(f"{sum(r['batches'] for r in rows)} simulations in {cfg['elapsed_s']:.2f} s")
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the sweep the options describe; print the table or JSON.  Returns 0."""
    if args.study == "priority":
        return run_priority_study(args)
    if args.study == "evolving":
        return run_evolving_study(args)
    args.shares = args.shares if args.shares is not None else list(DEFAULT_SHARES)
    args.nodes = args.nodes or 32
    args.seed = 43 if args.seed is None else args.seed
    args.algorithms = args.algorithms or list(DEFAULT_ALGORITHMS)
    started = time.perf_counter()
    config = SimConfig(
        total_nodes=args.nodes,
        interval_s=args.interval_s,
        ready_s=args.ready_s,
        cooldown_s=args.cooldown_s,
        costs=_COSTS[args.resize_costs](),
        algorithm_options=priority_options(args),
        cores_per_node=args.cores_per_node if args.swf and args.swf_cores else None,
    )
    batches = args.batches or (1 if args.swf else 10)
    shares = args.swf_malleable_share if args.swf and args.swf_malleable_share else args.shares
    bar = _progress(quiet=args.quiet)
    per_workload = len(args.algorithms)

    def counted(make: Callable[[float, int], Workload]) -> Callable[[float, int], Workload]:
        """``make``, growing the bar's total by the jobs each workload brings."""
        def wrapped(share: float, batch: int) -> Workload:
            workload = make(share, batch)
            if bar is not None:
                bar.total += len(workload.entries) * per_workload
                bar.refresh()
            return workload
        return wrapped

    cfg: dict[str, Any] = {
        "nodes": args.nodes,
        "batches": batches,
        "seeds": list(range(args.seed, args.seed + batches)),
        "shares": shares,
        "algorithms": args.algorithms,
        "interval_s": args.interval_s,
        "ready_s": args.ready_s,
        "cooldown_s": args.cooldown_s,
        "resize_costs": args.resize_costs,
    }
    try:
        if args.swf:
            cfg.update(workload=f"swf:{args.swf}", cores_per_node=args.cores_per_node,
                       serial_fraction=args.serial_fraction, swf_max_jobs=args.swf_max_jobs,
                       swf_cores=args.swf_cores)
            evaluation = evaluate_workloads(
                counted(lambda share, batch: swf_workload(
                    args.swf, total_nodes=args.nodes, cores_per_node=args.cores_per_node,
                    malleable_share=share, seed=args.seed + batch,
                    serial_fraction=args.serial_fraction, max_jobs=args.swf_max_jobs,
                    as_cores=args.swf_cores)),
                algorithms=args.algorithms, shares=shares, batches=batches, config=config,
                job_progress=bar.update if bar is not None else None,
            )
        else:
            model = RuntimeModel.paper()
            mix = _load_mix(args.mix, model) if args.mix else list(PAPER_MIX)
            args.jobs = args.jobs or 25
            cfg.update(workload=f"mix:{args.mix}" if args.mix else "paper", jobs=args.jobs,
                       submit_window_s=args.submit_window_s, first_at_zero=args.first_at_zero,
                       required_factor=args.required_factor,
                       required_time_s=args.required_time_s)
            evaluation = evaluate_workloads(
                counted(lambda share, batch: paper_batch(
                    cfg["seeds"][batch], share, mix=mix, model=model, jobs=args.jobs,
                    submit_window_s=args.submit_window_s, first_at_zero=args.first_at_zero,
                    required_factor=args.required_factor,
                    required_time_s=args.required_time_s)),
                algorithms=args.algorithms, shares=shares, batches=batches, config=config,
                job_progress=bar.update if bar is not None else None,
            )
    finally:
        if bar is not None:
            bar.close()
    rows = evaluation.rows()
    report: dict[str, Any] = {"config": cfg, "rows": rows, "summary": summary(rows),
              "elapsed_s": round(time.perf_counter() - started, 3)}
    if args.csv:
        _write_csv(args.csv, rows)
    if args.records:
        args.records.write_text(json.dumps({
            f"{a}@{s:g}": [rec.to_dict() for rec in res.records]
            for (a, s, b), res in evaluation.results.items() if b == 0
        }, indent=1))
    if args.records_swf:
        _write_swf_records(evaluation, args)
    if args.plot:
        try:
            for path in _plots(evaluation, rows, args.plot, args.nodes):
                print(f"wrote {path}", file=sys.stderr)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(_table(rows, nodes=args.nodes))
        s: dict[str, Any] = report["summary"]
        if s:
            paper = (f"; the paper, same batches: {100 * s['paper_makespan_reduction']:.1f} %"
                     if paper_comparable(cfg, s) else "")
            print(f"\nmalleable at {s['malleable_share']:g} % vs fcfs at 0 %: makespan "
                  f"{s['fcfs_0_makespan_s']:.1f} s -> {s['malleable_makespan_s']:.1f} s "
                  f"({100 * s['makespan_reduction']:.1f} % shorter{paper})")
        print(f"{len(evaluation.results)} simulations in {report['elapsed_s']:.2f} s")
    return 0


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["algorithm"])
        writer.writeheader()
        writer.writerows(rows)


def _write_swf_records(evaluation: Evaluation, args: argparse.Namespace) -> None:
    """One SWF trace per (algorithm, share) of the first batch, in ``args.records_swf``."""
    args.records_swf.mkdir(parents=True, exist_ok=True)
    cores = args.cores_per_node if args.swf else 1
    for (algorithm, share, batch), result in evaluation.results.items():
        if batch != 0:
            continue
        path = args.records_swf / f"{algorithm}@{share:g}.swf"
        write_swf(
            result.records, path, cores_per_node=cores, total_nodes=args.nodes,
            notes=[f"algorithm {algorithm}, malleable share {share:g} %, seed {args.seed}",
                   f"workload {f'swf:{args.swf}' if args.swf else 'paper mix'}",
                   f"refused jobs (not listed): {len(result.refused)}"],
        )
        print(f"wrote {path}", file=sys.stderr)


def _progress(*, quiet: bool) -> Any:
    """A tqdm bar of jobs done on stderr (its total grows as workloads are built), or None
    when quiet, not a terminal, or tqdm is missing."""
    if quiet or not sys.stderr.isatty():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=0, file=sys.stderr, desc="simulate", unit="job", leave=False,
                mininterval=0.5)
