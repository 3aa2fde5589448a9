"""The priority policies for real: a scaled batch of malleable Jacobi jobs, beside the simulator.

    python -m benchmarks.priority_real [--policies rigid-min,rigid-max,moldable,elastic-priority]
                                       [--seed 1] [--model FILE] [--small] [--sim-only]

Bhosale et al., "Elastic scheduling of Charm++ jobs on Kubernetes" (2024), run one batch of
16 Jacobi 2D jobs on 64 slots under four policies, for real and in their simulator (their
Table 1).  This script does the same on one machine, scaled down (docs/guides/priorities.md,
"A real batch"):

* **nodes**: 16 logical nodes of this machine (:class:`scheduler.nodes.LocalNodes`), one kept
  free, run by the real scheduler (:class:`scheduler.server.Server`), as ``scheduler.demo``
  does; each job is ``python -m benchmarks.jacobi`` with one place per node.
* **jobs**: the paper's batch drawn as the priority study draws it
  (:func:`scheduler.workload.jacobi_batch`: seed, then for each job a size and a priority
  1-5), with the node ranges divided by 4 (2-8 -> 1-2, 4-16 -> 1-4, 8-32 -> 2-8,
  16-64 -> 4-16) and the grids and iteration counts of :data:`SIZES`.
* **emulated nodes**: the jobs run with ``--node-rate`` (:data:`NODE_RATE`): each place
  computes its rows for real and waits out the rest of the time a node of that speed would
  take (docs/guides/jacobi.md, "Emulated nodes"), so 15 places do not compete for the
  machine's 2 cores; start-up, halo exchange and rescales are real.
* **time**: the submission gap (90 s) and the rescale gap (180 s) are multiplied by
  :data:`TIME_FACTOR` = 0.1 (9 s and 18 s); so are the jobs' run times at their minimum,
  roughly (grids and iterations chosen for it).
* **required times**: 1.5 x the modelled time at the minimum (as in the study) plus
  :data:`REQUIRED_MARGIN_S`, since the real scheduler ends a job that overruns it.
* **checks**: every job's checksum against the one-place solve of its grid
  (:func:`benchmarks.kernels.jacobi.solve`).
* **metrics**: :func:`scheduler.metrics.priority_metrics` (total time, utilisation,
  priority-weighted mean response and completion) of the real run and of the simulator
  (:class:`scheduler.simulate.Simulator`) on the same jobs, submission times and
  priorities, with the model measured beforehand by ``benchmarks.jacobi_scaling``
  (``benchmarks/results/jacobi_model-paced.json``; :func:`scaled_model`): it is not fitted
  to the real run.

``--small``: a tiny batch (4 jobs, 4 nodes, two policies, seconds) for tests.  Results:
``benchmarks/results/priority_real[-LABEL].json`` (``--out`` for another directory).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._results import RESULTS_DIR, write_result

__all__ = ["NODE_RATE", "REQUIRED_MARGIN_S", "SIZES", "SMALL_SIZES", "TIME_FACTOR", "ScaledJob",
           "main", "reference_checksums", "run_real", "run_sim", "scaled_batch", "scaled_model"]

TIME_FACTOR = 0.1
"""Seconds here per second of the paper's experiment: gaps and job times are scaled by it."""

NODE_RATE = 2.0e6
"""Emulated node speed (grid points a second) of the full evaluation."""

PAPER_GAP_S = 90.0
PAPER_RESCALE_GAP_S = 180.0
POLICIES = ("rigid-min", "rigid-max", "moldable", "elastic-priority")
METRICS = ("total_time_s", "utilisation", "weighted_mean_response_s",
           "weighted_mean_completion_s")


@dataclass(frozen=True)
class ScaledJob:
    """One Jacobi size of the scaled batch: grid side, iterations, node range (nodes)."""

    grid: int
    iterations: int
    min_nodes: int
    max_nodes: int


#: The paper's sizes scaled to 16 nodes (ranges / 4).  The grids keep the paper's ratios
#: (512, 2048, 8192, 16384 / 8); the iterations keep its 4:4:4:1.  With NODE_RATE a job at
#: its minimum lasts (compute alone) 1.0, 16.6, 134 and 67 s, about 0.1 x the paper's
#: 21, 168, 1350 and 675 s (placeholder model at its minimum).
SIZES: dict[str, ScaledJob] = {
    "small": ScaledJob(64, 512, 1, 2),
    "medium": ScaledJob(256, 512, 1, 4),
    "large": ScaledJob(1024, 512, 2, 8),
    "xlarge": ScaledJob(2048, 128, 4, 16),
}

#: ``--small``: 4 nodes, jobs of a few seconds.
SMALL_SIZES: dict[str, ScaledJob] = {
    "small": ScaledJob(34, 200, 1, 2),
    "medium": ScaledJob(66, 200, 1, 2),
    "large": ScaledJob(130, 100, 1, 3),
    "xlarge": ScaledJob(130, 100, 2, 4),
}


REQUIRED_MARGIN_S = 30.0
"""Seconds added to every job's required time: the real scheduler ends a job that overruns
it (as a batch system does), and start-up on a busy machine can take seconds more than it
did alone (the small jobs' modelled time is about 2 s)."""


def scaled_batch(seed: int, sizes: dict[str, ScaledJob], *, jobs: int = 16,
                 gap_s: float = PAPER_GAP_S * TIME_FACTOR, node_rate: float = NODE_RATE,
                 model: Any = None, required_factor: float = 1.5,
                 margin_s: float = REQUIRED_MARGIN_S) -> list[Any]:
    """The batch: ``jobs`` jobs drawn as :func:`scheduler.workload.jacobi_batch` draws them
    (``random.Random(seed)``: a size label uniformly from small, medium, large, xlarge, then a
    priority from 1-5, per job), job ``i`` submitted at ``i * gap_s`` seconds.

    Args:
        seed: the batch's seed; sizes: label -> :class:`ScaledJob`; jobs: >= 1;
        gap_s: submission gap (s, >= 0); node_rate: ``--node-rate`` of the jobs (points/s);
        model: a :class:`~scheduler.model.JacobiModel` for the required times (the time at
            the minimum x ``required_factor`` + ``margin_s``, as in the priority study plus
            the margin); ``None``: 3600 s.

    Returns:
        :class:`~scheduler.jobs.BatchEntry` list; each spec is malleable over its range,
        ``program="jacobi"``, ``size`` its label, its command
        ``python -m benchmarks.jacobi --grid N --iterations K --node-rate R --json``.

    Raises ``ValueError`` for ``jobs < 1`` or a negative gap.
    """
    from scheduler.jobs import BatchEntry, JobClass, JobSpec
    from scheduler.model import JACOBI_SIZES

    if jobs < 1:
        raise ValueError(f"a batch needs at least one job, got {jobs}")
    if not gap_s >= 0:
        raise ValueError(f"the submission gap must be >= 0 s, got {gap_s}")
    rng = random.Random(seed)
    labels = list(JACOBI_SIZES)  # the study's order: the same draws give the same batch
    out = []
    for i in range(jobs):
        label = rng.choice(labels)
        priority = rng.randint(1, 5)
        job = sizes[label]
        required = (model.curves[label](job.min_nodes) * required_factor + margin_s
                    if model is not None else 3600.0)
        command = ("python", "-m", "benchmarks.jacobi", "--grid", str(job.grid),
                   "--iterations", str(job.iterations), "--node-rate", repr(node_rate),
                   "--json")
        spec = JobSpec(name=f"jacobi_{label}_{i}", job_class=JobClass.MALLEABLE,
                       min_nodes=job.min_nodes, max_nodes=job.max_nodes,
                       required_time_s=required, command=command, program="jacobi",
                       size=label, priority=priority)
        out.append(BatchEntry(spec, i * float(gap_s)))
    return out


def scaled_model(path: str | Path, sizes: dict[str, ScaledJob], node_rate: float) -> Any:
    """The simulator's model of the scaled jobs, from the paced scaling measurements.

    ``path`` is ``benchmarks.jacobi_scaling``'s model file (``{"models": [{"grid", "steps",
    "nodes", "seconds", "overhead_s", "node_rate", "grow_s", "shrink_s"}, ...]}``).  For a job
    of grid ``N`` and ``K`` iterations, the entry of the same grid (else the nearest, its
    compute scaled by the points a step) gives, at each measured place count ``P``::

        t(P) = overhead_s(P) + seconds(P) x K / steps x (entry's node_rate / node_rate)

    (start-up, set-up, gathering and exit measured, plus the iterations, linear in ``K``),
    joined piecewise linearly (:class:`~scheduler.model.PiecewiseLinearCurve`).  A grow and
    a shrink of a job cost what the same entry measured
    (:func:`scheduler.model.pause_costs`: the time the iterations stand still); the model's
    common costs, for a size the entry lacks a figure for, are the means over the entries.

    Raises:
        OSError: the file cannot be read.  ValueError: no usable entry (the message names
            the file), or an entry without ``overhead_s`` or ``node_rate`` (measured without
            emulated nodes: rerun ``benchmarks.jacobi_scaling --node-rate``).
    """
    from scheduler.model import JacobiModel, PiecewiseLinearCurve, ResizeCostModel, pause_costs

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    entries = data.get("models") if isinstance(data, dict) else None
    if not entries:
        raise ValueError(f"{path}: no \"models\" entries")
    for e in entries:
        if "overhead_s" not in e or not e.get("node_rate"):
            raise ValueError(f"{path}: grid {e.get('grid')} was measured without emulated "
                             f"nodes (no overhead_s/node_rate); rerun benchmarks.jacobi_scaling "
                             f"with --node-rate")
    measured = [pause_costs(e) for e in entries]
    grows = [g for g, _ in measured if g is not None]
    shrinks = [s for _, s in measured if s is not None]
    grow = statistics.fmean(grows) if grows else 1.0
    shrink = statistics.fmean(shrinks) if shrinks else 1.0
    costs = ResizeCostModel.constant(grow, shrink)
    curves, size_costs, said = {}, {}, []
    for label, job in sizes.items():
        i = min(range(len(entries)),
                key=lambda i: (abs(math.log(entries[i]["grid"] / job.grid)), entries[i]["grid"]))
        e = entries[i]
        points = (job.grid - 2) * job.grid / ((e["grid"] - 2) * e["grid"])
        scale = points * job.iterations / e["steps"] * e["node_rate"] / node_rate
        curves[label] = PiecewiseLinearCurve(
            {int(p): round(o + s * scale, 3)
             for p, s, o in zip(e["nodes"], e["seconds"], e["overhead_s"], strict=True)})
        g, s = measured[i]
        size_costs[label] = ResizeCostModel.constant(grow if g is None else g,
                                                     shrink if s is None else s)
        said.append(f"{label} grow {size_costs[label].grow_s(1):.2f} s, shrink "
                    f"{size_costs[label].shrink_s(1):.2f} s")
    return JacobiModel(curves, costs, f"{path}: paced scaling at {node_rate:g} points/s; "
                                      + "; ".join(said), size_costs)


def reference_checksums(sizes: dict[str, ScaledJob]) -> dict[str, str]:
    """label -> SHA-256 of the one-place (sequential) solve of its grid and iterations."""
    from .kernels.jacobi import checksum, solve

    return {label: checksum(solve(j.grid, j.iterations)) for label, j in sizes.items()}


def run_real(policy: str, entries: list[Any], *, nodes: int, rescale_gap_s: float,
             keep_free: int, interval_s: float, out: Path, timeout_s: float,
             checksums: dict[str, str], quiet: bool = False) -> dict[str, Any]:
    """Run the batch for real under ``policy`` on ``nodes`` logical nodes.

    Args:
        policy: an algorithm name; entries: from :func:`scaled_batch`; nodes: >= 1;
        rescale_gap_s, keep_free: the policy's options; interval_s: the scheduler's period
        (s); out: directory for the log and the jobs' output; timeout_s: give up after it;
        checksums: label -> expected SHA-256.

    Returns:
        ``{"policy", "metrics" (priority_metrics), "jobs": [{name, size, priority, submit_s,
        start_s, end_s, shrinks, grows, state, result, correct}], "all_correct", "timed_out",
        "processes_left", "elapsed_s"}``.
    """
    from scheduler.algorithms import make
    from scheduler.demo import job_report, serve_batch
    from scheduler.metrics import priority_metrics
    from scheduler.nodes import LocalNodes
    from scheduler.serve_cli import format_event
    from scheduler.server import Server

    def show(ev: dict[str, Any]) -> None:
        line = format_event(ev)
        if line and not quiet:
            print(f"  [{policy}] {line}", file=sys.stderr, flush=True)

    out.mkdir(parents=True, exist_ok=True)
    algorithm = make(policy, rescale_gap_s=rescale_gap_s, keep_free=keep_free)
    server = Server(LocalNodes(nodes), algorithm, port=0, run_dir=out / "run",
                    log_path=out / "events.jsonl", interval_s=interval_s,
                    job_env={"APGAS_START_TIMEOUT": "120"}, on_event=show)
    started = time.monotonic()
    timed_out = serve_batch(server, entries, timeout_s=timeout_s, poll_s=0.25, quiet=True)
    left = server.leftover_pids()
    status = server.status()
    records = server.records()
    by_name = {e.spec.name: e.spec for e in entries}
    jobs = []
    for info in status["jobs"]:
        rep = job_report(info)
        spec = by_name[rep["name"]]
        jobs.append({"name": rep["name"], "size": spec.size, "priority": spec.priority,
                     "range": rep["range"], "submit_s": rep["submit_s"],
                     "start_s": rep["start_s"], "end_s": rep["end_s"],
                     "shrinks": rep["shrinks"], "grows": rep["grows"], "state": rep["state"],
                     "places": [rep["places_at_start"], rep["places_at_end"]],
                     "result": rep["result"],
                     "correct": rep["result"] == checksums[str(spec.size)]})
    metrics = priority_metrics(records, nodes) if records else None
    return {"policy": policy, "metrics": metrics, "jobs": jobs,
            "all_correct": len(jobs) == len(entries) and all(j["correct"] for j in jobs),
            "timed_out": timed_out, "processes_left": left,
            "elapsed_s": round(time.monotonic() - started, 3)}


def run_sim(policy: str, entries: list[Any], model: Any, *, nodes: int,
            rescale_gap_s: float, keep_free: int, interval_s: float) -> dict[str, Any]:
    """The simulator on the same batch: ``{"policy", "metrics", "jobs": [{name, start_s,
    end_s, shrinks, grows}]}`` (seconds from the batch's start)."""
    from scheduler.algorithms import make
    from scheduler.metrics import priority_metrics
    from scheduler.simulate import SimConfig, Simulator

    config = SimConfig(total_nodes=nodes, interval_s=interval_s, costs=model.costs,
                       job_costs=model.sim_costs())
    algorithm = make(policy, rescale_gap_s=rescale_gap_s, keep_free=keep_free)
    result = Simulator(algorithm, entries, config, model=model.runtime_model()).run()
    return {"policy": policy, "metrics": priority_metrics(result.records, nodes),
            "jobs": [{"name": r.name, "start_s": round(r.start_s, 3),
                      "end_s": round(r.end_s, 3), "shrinks": r.shrinks, "grows": r.grows}
                     for r in result.records]}


def _fmt(m: dict[str, float] | None, key: str) -> str:
    if m is None:
        return "-"
    return f"{100 * m[key]:.1f}" if key == "utilisation" else f"{m[key]:.1f}"


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table: per policy, each metric real / simulated and their difference."""
    head = ("| policy | total time s | utilisation % | w. response s | w. completion s |\n"
            "|---|---|---|---|---|")
    lines = [head]
    for row in rows:
        cells = []
        for key in METRICS:
            real, sim = row["real"]["metrics"] if row.get("real") else None, row["sim"]["metrics"]
            diff = row["difference"].get(key)
            d = "" if diff is None else f" ({100 * diff:+.0f} %)"
            cells.append(f"{_fmt(real, key)} / {_fmt(sim, key)}{d}")
        lines.append(f"| {row['policy']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; print the table; 0 when every real job ended with the right
    checksum and no process was left, else 1 (2: bad input)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.priority_real",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--policies", default=None,
                        help=f"comma-separated policies ({','.join(POLICIES)}; --small: "
                             f"rigid-min,elastic-priority)")
    parser.add_argument("--seed", type=int, default=1, help="the batch's seed (1)")
    parser.add_argument("--jobs", type=int, default=None, help="jobs (16; --small: 4)")
    parser.add_argument("--nodes", type=int, default=None, help="logical nodes (16; --small: 4)")
    parser.add_argument("--node-rate", type=float, default=None, metavar="POINTS_PER_S",
                        help=f"emulated node speed ({NODE_RATE:g}; --small: 2e6)")
    parser.add_argument("--model", default=str(RESULTS_DIR / "jacobi_model-paced.json"),
                        help="benchmarks.jacobi_scaling's model file, measured with "
                             "--node-rate (benchmarks/results/jacobi_model-paced.json)")
    parser.add_argument("--keep-free", type=int, default=1, help="nodes kept free (1)")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="scheduler period, real and simulated (1 s)")
    parser.add_argument("--small", action="store_true",
                        help="a tiny batch (4 jobs on 4 nodes, rigid-min and "
                             "elastic-priority unless --policies) for tests")
    parser.add_argument("--sim-only", action="store_true", help="simulate only")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="give up on a policy's real run after this many seconds (900)")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory of the result JSON (default benchmarks/results)")
    parser.add_argument("--label", default="", help="suffix of the result file")
    parser.add_argument("--quiet", action="store_true", help="no scheduler events on stderr")
    args = parser.parse_args(argv)
    from scheduler.algorithms import make

    if args.small:
        sizes, jobs, nodes, gap, rgap = SMALL_SIZES, 4, 4, 1.0, 2.0
        policies = ["rigid-min", "elastic-priority"]
        rate = 2.0e6
    else:
        sizes, jobs, nodes = SIZES, 16, 16
        gap, rgap = PAPER_GAP_S * TIME_FACTOR, PAPER_RESCALE_GAP_S * TIME_FACTOR
        policies = list(POLICIES)
        rate = NODE_RATE
    if args.policies is not None:
        policies = [p for p in args.policies.split(",") if p]
    if not policies:
        parser.error("--policies: give at least one policy")
    jobs = args.jobs if args.jobs is not None else jobs
    nodes = args.nodes if args.nodes is not None else nodes
    rate = args.node_rate if args.node_rate is not None else rate
    if jobs < 1:
        parser.error(f"--jobs {jobs}: at least 1")
    if not 1 <= nodes <= 254:
        parser.error(f"--nodes {nodes}: 1 to 254 logical nodes")
    if not (rate > 0 and math.isfinite(rate)):
        parser.error(f"--node-rate {rate}: must be a finite number of grid points a second > 0")
    biggest = max(j.max_nodes for j in sizes.values())
    if nodes - args.keep_free < max(j.min_nodes for j in sizes.values()):
        parser.error(f"--nodes {nodes} with --keep-free {args.keep_free}: too few for the "
                     f"largest minimum")
    try:
        for p in policies:
            make(p, rescale_gap_s=rgap, keep_free=args.keep_free)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        model = scaled_model(args.model, sizes, rate)
    except (OSError, ValueError) as exc:
        parser.error(f"--model: {exc}")
    entries = scaled_batch(args.seed, sizes, jobs=jobs, gap_s=gap, node_rate=rate, model=model)
    checksums = reference_checksums(sizes)
    print(f"batch (seed {args.seed}): " + ", ".join(
        f"{e.spec.size}/p{e.spec.priority}@{e.submit_s:g}s" for e in entries), flush=True)
    rows = []
    ok = True
    for policy in policies:
        sim = run_sim(policy, entries, model, nodes=nodes, rescale_gap_s=rgap,
                      keep_free=args.keep_free, interval_s=args.interval)
        row: dict[str, Any] = {"policy": policy, "sim": sim, "real": None, "difference": {}}
        if not args.sim_only:
            work = Path(tempfile.mkdtemp(prefix=f"apgaspy-prioreal-{policy}-"))
            try:
                real = run_real(policy, entries, nodes=nodes, rescale_gap_s=rgap,
                                keep_free=args.keep_free, interval_s=args.interval,
                                out=work, timeout_s=args.timeout, checksums=checksums,
                                quiet=args.quiet)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            row["real"] = real
            ok = ok and real["all_correct"] and not real["timed_out"] and \
                not real["processes_left"]
            if real["metrics"] is not None:
                row["difference"] = {k: sim["metrics"][k] / real["metrics"][k] - 1
                                     for k in METRICS if real["metrics"][k]}
        m = sim["metrics"]
        print(f"{policy}: sim total {m['total_time_s']:.1f} s, util {m['utilisation']:.3f}, "
              f"w.resp {m['weighted_mean_response_s']:.1f} s, w.compl "
              f"{m['weighted_mean_completion_s']:.1f} s" + (
                  "" if row["real"] is None else
                  f"; real {json.dumps(row['real']['metrics'])}, correct "
                  f"{row['real']['all_correct']}, left {row['real']['processes_left']}"),
              flush=True)
        rows.append(row)
    print(table(rows))
    config = {"seed": args.seed, "jobs": jobs, "nodes": nodes, "keep_free": args.keep_free,
              "node_rate": rate, "time_factor": None if args.small else TIME_FACTOR,
              "submission_gap_s": gap, "rescale_gap_s": rgap, "interval_s": args.interval,
              "sizes": {k: vars(v) for k, v in sizes.items()}, "biggest_range": biggest,
              "model_file": str(args.model), "model": model.to_json(),
              "checksums": checksums,
              "batch": [{"name": e.spec.name, "size": e.spec.size,
                         "priority": e.spec.priority, "submit_s": e.submit_s,
                         "range": [e.spec.min_nodes, e.spec.max_nodes]} for e in entries]}
    name = "priority_real" + (f"-{args.label}" if args.label else "")
    path = write_result(name, {"config": config, "rows": rows}, directory=args.out)
    print(path)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
