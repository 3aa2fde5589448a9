"""Evolving jobs for real, beside the simulator: one batch, several policies, real and simulated.

    python -m benchmarks.evolving_real [--nodes 10] [--jobs 16] [-g 8] [--share 50]
        [--algorithms all-rigid,evolving-easy,evolving-smallest,evolving-elastic]
        [--seeds 42] [--quick]

The batch is the evolving evaluation's (:func:`scheduler.studies.evolving.evolving_batch`: the Java
ElasticJobScheduler's set-up, evotree jobs of 1, 2, 4 or 8 nodes, some submitted at 0 and
the rest uniformly over a window), scaled to one machine: ``--nodes`` logical nodes, ``-g``
seconds per tree instead of 50, the submission window and the evolving monitor's idle grace
scaled with it.  ``--share`` % of the jobs are evolving (ranges 1-2, 1-4, 2-8, 4-16); the
others, in index order, are rigid, moldable and malleable in turn (moldable and malleable
with the evolving ranges).  The row ``all-rigid`` runs the same jobs (same submission times
and sizes) all rigid under EASY backfilling.

Each policy's batch runs for real: the scheduler (:class:`scheduler.server.Server`, real TCP)
starts every job as ``python -m benchmarks.evotree ... --sleep`` on logical nodes of this
machine; the evolving ones run apgaspy's evolving monitor in ``task`` mode and send the Java
lines (docs/guides/evolving.md).  Tasks wait their time out (``--sleep``): ten nodes' busy
loops on two cores would share them and stretch every phase, so a logical node stands for a
node's compute time.  Every job must end with its exact task count.

Beside each real run the same batch runs in the project's evolving simulator
(:func:`scheduler.evolving_simulation.simulate_evolving`) with the run's parameters: the node count,
the scheduler's period, the cool-down, the monitor's standby and decision interval, and two
costs measured in that real run, nothing fitted:

* the start-up and shutdown of a job: the median over the jobs of the time the scheduler
  saw the job run minus the time its computation took (``run_s - job_seconds``); in the
  simulator a sequential phase of that length before tree 1 (:class:`StartedTree`), during
  which the job holds its nodes and does no work;
* the time from a place going idle to its node's release: the monitor's idle grace plus the
  median release time the jobs reported (``shrinkTimeAPGAS``), the simulator's ``idle_s``.

A second simulation without these costs (``simulated_ideal``, the simulator as it is)
shows what they account for.  In the sequential branch the real monitor asks for nothing, as
the simulator assumes: its ``task`` load counts only the time a place's worker holds work
another place could take (docs/guides/evolving.md).

Metrics (:mod:`scheduler.metrics`, the simulator's definitions): ``makespan_s``,
``mean_turnaround_s``, ``mean_wait_s``, ``utilisation``; per job ``requests``,
``requests_served``, ``releases``.  The JSON goes to ``benchmarks/results/<name>.json``
(:func:`benchmarks._results.write_result`), the Gantt chart of the real run under the last
policy (resizes marked) and the utilisation curves of the real runs to
``benchmarks/results/<name>-gantt.png`` and ``<name>-utilisation.png``.  The discussion is
in docs/guides/evolving-scheduling.md ("A real batch").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scheduler.algorithms import EVOLVING_ALGORITHMS
from scheduler.demo import EVOLVING_JOB_ENV, evotree_command, run_batch
from scheduler.evolving_simulation import EvolvingJob, EvoTree, MonitorConfig, simulate_evolving
from scheduler.jobs import BatchEntry, JobClass
from scheduler.studies.evolving import EVOLVING_RANGES, evolving_batch

from ._cli import non_negative_int, percent, positive_int, positive_seconds, seconds
from ._results import RESULTS_DIR, write_result

__all__ = ["METRICS", "StartedTree", "batch", "compare", "main",
           "real_costs", "summarise", "to_entries", "with_startup"]

METRICS = ("makespan_s", "mean_turnaround_s", "mean_wait_s", "utilisation")
"""The metrics compared, real against simulated."""

TASKS_PER_WORKER = 1000
BRANCH_TASKS = 200


@dataclass(frozen=True)
class StartedTree(EvoTree):
    """An :class:`~scheduler.evolving_simulation.EvoTree` whose job first starts up for
    ``startup_s`` seconds (>= 0), holding its nodes without working: a sequential phase
    before tree 1 (the simulator advances every phase but a tree at one second per second,
    whatever the nodes).  Raises ``ValueError`` for a negative or non-finite ``startup_s``, and as
    :class:`~scheduler.evolving_simulation.EvoTree`."""

    startup_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.startup_s < float("inf"):
            raise ValueError(f"startup_s must be a finite number >= 0, got {self.startup_s}")

    def phases(self) -> list[tuple[str, float]]:
        """``[("start-up", startup_s)]`` (when > 0) and the evotree's three phases."""
        head = [("start-up", self.startup_s)] if self.startup_s > 0 else []
        return head + super().phases()


def with_startup(jobs: list[EvolvingJob], startup_s: float) -> list[EvolvingJob]:
    """The same jobs, each starting up for ``startup_s`` seconds first (:class:`StartedTree`);
    the required times stay those of the plain jobs."""
    for job in jobs:
        job.tree = StartedTree(job.tree.size, job.tree.g_s, startup_s)
    return jobs


def batch(seed: int, share: float, *, jobs: int, g_s: float, window_s: float,
          first_at_zero: int) -> list[EvolvingJob]:
    """The mixed batch: :func:`~scheduler.studies.evolving.evolving_batch` with ``share`` % evolving
    jobs (``share`` 0: every job rigid), the other jobs rigid, moldable and malleable in turn
    (index order; the flexible ones with the evolving ranges and a required time of 1.5 ×
    the run time on their minimum).  Fresh objects each call (the simulator fills them in).

    Raises:
        ValueError: as :func:`~scheduler.studies.evolving.evolving_batch`.
    """
    out = evolving_batch(seed, share, jobs=jobs, g_s=g_s, submit_window_s=window_s,
                         first_at_zero=first_at_zero)
    if share == 0:
        return out
    turn = 0
    for job in out:
        if job.spec.job_class is JobClass.EVOLVING:
            continue
        kind = ("rigid", "moldable", "malleable")[turn % 3]
        turn += 1
        if kind == "rigid":
            continue
        lo, hi = EVOLVING_RANGES[job.tree.size]
        job.spec = replace(job.spec, name=f"evotree-{job.job_id}-{kind}",
                           job_class=JobClass.parse(kind), min_nodes=lo, max_nodes=hi,
                           nodes=job.tree.size,
                           required_time_s=1.5 * job.tree.run_time_s(lo))
    return out


def to_entries(jobs: list[EvolvingJob]) -> list[BatchEntry]:
    """The batch as the real scheduler's entries: each job runs
    ``python -m benchmarks.evotree -g G -t 1000 -u 20 -s SIZE --branch 200 --sleep --json``
    (:func:`scheduler.demo.evotree_command`), submitted at its ``submit_s``."""
    out = []
    for job in jobs:
        argv = (*evotree_command(job.tree.size, job.tree.g_s, tasks=TASKS_PER_WORKER,
                                 branch=BRANCH_TASKS).split(), "--json")
        spec = replace(job.spec, command=argv, program="evotree", size=job.tree.size)
        out.append(BatchEntry(spec, job.submit_s))
    return out


def real_costs(events_path: Path, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """The start-up and resize costs of a real run, from its event log and its jobs'
    reports (:func:`scheduler.demo.job_report`), in seconds, each ``{"n", "median",
    "max"}``: ``overhead_s`` (the scheduler's run time minus the computation's own time:
    start-up and shutdown), ``ready_s`` (start → ``APGAS-Ready``), ``grow_s`` (grow order
    → done), ``release_s`` (the job's ``shrinkTimeAPGAS``: a release's whole duration)."""
    overheads = [j["run_s"] - j["job_seconds"] for j in jobs
                 if j.get("run_s") is not None and j.get("job_seconds") is not None]
    starts: list[float] = []
    grows: list[float] = []
    releases: list[float] = []
    for line in events_path.read_text(encoding="utf-8").splitlines():
        ev = json.loads(line)
        if ev["event"] == "ready" and "after_s" in ev:
            starts.append(ev["after_s"])
        elif ev["event"] == "grow_done":
            grows.append(ev["seconds"])
        elif ev["event"] == "timing" and ev["fields"][0] == "shrinkTimeAPGAS":
            releases.append(int(ev["fields"][2]) / 1e9)

    def summary(xs: list[float]) -> dict[str, Any]:
        return {"n": len(xs), "median": round(statistics.median(xs), 3) if xs else None,
                "max": round(max(xs), 3) if xs else None}

    return {"overhead_s": summary(overheads), "ready_s": summary(starts),
            "grow_s": summary(grows), "release_s": summary(releases)}


def compare(real: dict[str, Any], sim: dict[str, Any]) -> dict[str, float]:
    """``|real - sim| / sim`` for each of :data:`METRICS` (0.2 = 20 % apart)."""
    return {k: round(abs(real[k] - sim[k]) / sim[k], 4) if sim[k] else float("inf")
            for k in METRICS}


def summarise(rows: list[dict[str, Any]], algorithms: list[str]) -> list[dict[str, Any]]:
    """Per algorithm, the means over its rows (one a seed) of the real and the simulated
    values, the relative difference of the means (:func:`compare`), ``within_20pct``, and
    the largest per-seed difference of each metric."""
    out = []
    for name in algorithms:
        mine = [r for r in rows if r["algorithm"] == name]
        keys = (*METRICS, "requests", "requests_served", "releases")
        real = {k: round(statistics.fmean(r["real"][k] for r in mine), 4) for k in keys}
        sim = {k: round(statistics.fmean(r["simulated"][k] for r in mine), 4) for k in keys}
        diff = compare(real, sim)
        out.append({"algorithm": name, "seeds": [r["seed"] for r in mine], "real": real,
                    "simulated": sim, "relative_difference": diff,
                    "within_20pct": all(v <= 0.2 for v in diff.values()),
                    "largest_seed_difference": {
                        k: max(r["relative_difference"][k] for r in mine) for k in METRICS}})
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.evolving_real",
        description="One mixed batch of evotree jobs run for real on logical nodes under "
                    "all-rigid EASY, the Java evolving rule and ours, each beside the "
                    "evolving simulator's run of the same batch.")
    p.add_argument("--nodes", type=positive_int, default=10, help="logical nodes (10)")
    p.add_argument("--jobs", type=positive_int, default=16, help="jobs in the batch (16)")
    p.add_argument("-g", type=positive_seconds, default=8.0, dest="g",
                   help="seconds of one tree on the job's size (8; the Java set-up: 50)")
    p.add_argument("--share", type=percent, default=50.0, help="evolving jobs in %% (50)")
    p.add_argument("--first-at-zero", type=non_negative_int, default=4,
                   help="jobs submitted at 0 (4)")
    p.add_argument("--window", type=seconds, default=None,
                   help="seconds over which the others are submitted (default 12 g: the Java "
                        "set-up's 600 s for g = 50 s)")
    p.add_argument("--seeds", default="42",
                   help="comma-separated batch seeds: each batch runs under every policy, "
                        "and the summary gives the means over the batches (42)")
    p.add_argument("--algorithms", default="all-rigid,evolving-easy,evolving-smallest,"
                                          "evolving-elastic",
                   help="comma-separated: all-rigid and evolving policies "
                        "(default all-rigid,evolving-easy,evolving-smallest,evolving-elastic)")
    p.add_argument("--cooldown", type=seconds, default=10.0,
                   help="evolving-easy's cool-down in s (10: Java's 60 s scaled with g)")
    p.add_argument("--interval", type=positive_seconds, default=1.0,
                   help="the scheduler's period in s, real and simulated (1)")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="end a policy's run after this many seconds (600)")
    p.add_argument("--name", default="evolving_real",
                   help="result name: benchmarks/results/<name>.json and the PNGs")
    p.add_argument("--results", type=Path, default=RESULTS_DIR,
                   help="directory of the results (benchmarks/results)")
    p.add_argument("--out", type=Path, default=None,
                   help="directory of the runs' logs and job output (default: a new "
                        "temporary directory)")
    p.add_argument("--quick", action="store_true",
                   help="a small try: 8 nodes, 5 jobs, g = 4 s")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, write the results; exit status 0 when every real run was ok
    (every job done with its exact count, no process left), 1 otherwise, 2 on bad options."""
    p = _parser()
    args = p.parse_args(argv)
    if args.quick:
        args.nodes, args.jobs, args.g, args.first_at_zero = 8, 5, 4.0, 2
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    bad = [a for a in algorithms if a != "all-rigid" and a not in EVOLVING_ALGORITHMS]
    if bad or not algorithms:
        p.error(f"--algorithms: unknown {bad}; known: all-rigid, "
                f"{', '.join(EVOLVING_ALGORITHMS)}")
    if args.first_at_zero > args.jobs:
        p.error(f"--first-at-zero ({args.first_at_zero}) exceeds --jobs ({args.jobs})")
    try:
        seeds = list(dict.fromkeys(int(x) for x in args.seeds.split(",")))
    except ValueError:
        p.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    window = args.window if args.window is not None else 12 * args.g
    grace = float(EVOLVING_JOB_ENV["APGAS_EVOLVING_IDLE_GRACE"])
    shape = {"jobs": args.jobs, "g_s": args.g, "window_s": window,
             "first_at_zero": args.first_at_zero}
    out = (args.out or Path(tempfile.mkdtemp(prefix="apgaspy-evolving-real-"))).resolve()
    rows: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    ok = True
    for seed, name in [(seed, name) for seed in seeds for name in algorithms]:
        share = 0.0 if name == "all-rigid" else args.share
        policy = "easy" if name == "all-rigid" else name
        jobs = batch(seed, share, **shape)
        print(f"{name}, seed {seed}: {len(jobs)} jobs on {args.nodes} logical nodes, for "
              "real ...",
              file=sys.stderr, flush=True)
        t0 = time.monotonic()
        run_dir = out / f"seed{seed}" / name
        report, result = run_batch(to_entries(jobs), policy, nodes=args.nodes, out=run_dir,
                                   cooldown_s=args.cooldown, interval_s=args.interval,
                                   timeout_s=args.timeout, job_env=dict(EVOLVING_JOB_ENV))
        costs = real_costs(run_dir / "events.jsonl", report["jobs"])
        startup = costs["overhead_s"]["median"] or 0.0
        idle = grace + (costs["release_s"]["median"] or 0.0)
        sim = simulate_evolving(with_startup(batch(seed, share, **shape), startup), policy,
                                total_nodes=args.nodes, interval_s=args.interval,
                                monitor=MonitorConfig(standby_s=3.0, decide_s=1.0, idle_s=idle),
                                cooldown_s=args.cooldown)
        ideal = simulate_evolving(batch(seed, share, **shape), policy,
                                  total_nodes=args.nodes, interval_s=args.interval,
                                  monitor=MonitorConfig(standby_s=3.0, decide_s=1.0,
                                                        idle_s=grace),
                                  cooldown_s=args.cooldown)
        real = {k: report[k] for k in (*METRICS, "requests", "requests_served", "releases")}
        sim = {k: round(v, 4) for k, v in sim.items()}
        diff = compare(real, sim)
        ok = ok and report["ok"]
        rows.append({
            "seed": seed, "algorithm": name, "policy": policy, "evolving_share": share,
            "real": real, "simulated": sim, "relative_difference": diff,
            "within_20pct": all(v <= 0.2 for v in diff.values()),
            "simulated_ideal": {k: round(v, 4) for k, v in ideal.items()},
            "relative_difference_ideal": compare(real, ideal),
            "sim_startup_s": startup, "sim_idle_s": round(idle, 3),
            "ok": report["ok"], "processes_left": report["processes_left"],
            "costs": costs,
            "jobs": [{k: j[k] for k in ("id", "name", "class", "range", "state", "submit_s",
                                        "start_s", "end_s", "run_s", "job_seconds", "grows",
                                        "requests",
                                        "requests_served", "releases", "places_at_start",
                                        "places_at_end", "result", "correct")}
                     for j in report["jobs"]],
            "elapsed_s": round(time.monotonic() - t0, 1),
        })
        if seed == seeds[0]:
            results[name] = result
        print(f"  real {json.dumps(real)}\n  sim  {json.dumps(sim)}\n  diff {json.dumps(diff)}"
              f"  ok={report['ok']}", file=sys.stderr, flush=True)
    plots: list[str] = []
    args.results.mkdir(parents=True, exist_ok=True)
    try:
        from scheduler import plots as charts

        last = algorithms[-1]
        plots.append(str(charts.gantt(
            results[last], args.results / f"{args.name}-gantt.png",
            title=f"real run, seed {seeds[0]}, {args.nodes} logical nodes, {last}: makespan "
                  f"{results[last].makespan_s:.0f} s")))
        plots.append(str(charts.usage({f"{k} (real)": v for k, v in results.items()},
                                      args.results / f"{args.name}-utilisation.png",
                                      total_nodes=args.nodes,
                                      title=f"busy nodes over time, real runs of the batch of "
                                            f"seed {seeds[0]}")))
    except RuntimeError as exc:
        print(f"no charts: {exc}", file=sys.stderr)
    summary = summarise(rows, algorithms)
    config = {"nodes": args.nodes, "seeds": seeds, "evolving_share": args.share,
              **shape, "cooldown_s": args.cooldown, "interval_s": args.interval,
              "monitor": {"standby_s": 3.0, "decide_s": 1.0, "idle_grace_s": grace,
                          "mode": "task"},
              "job_command": evotree_command(1, args.g, tasks=TASKS_PER_WORKER,
                                             branch=BRANCH_TASKS).replace("-s 1", "-s SIZE")}
    path = write_result(args.name, {"config": config, "summary": summary, "rows": rows,
                                    "plots": [Path(x).name for x in plots],
                                    "runs_dir": str(out)}, args.results)
    print(f"{'algorithm':<18}" + "".join(f"{m:>22}" for m in METRICS) + "  requests/served/"
          f"releases (real | sim); means over seeds {seeds}")
    for r in summary:
        cells = "".join(f"{r['real'][m]:>9.3g} | {r['simulated'][m]:<9.3g} " for m in METRICS)
        print(f"{r['algorithm']:<18}{cells} {r['real']['requests']}/"
              f"{r['real']['requests_served']}/{r['real']['releases']} | "
              f"{r['simulated']['requests']:g}/{r['simulated']['requests_served']:g}/"
              f"{r['simulated']['releases']:g}")
    print(f"results: {path}; charts: {', '.join(plots) or 'none'}; runs: {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
