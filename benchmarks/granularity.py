"""The granularity-and-affinity study: fit a contention model on real runs, simulate Liu &
Guitart's two experiments under six layouts, and check the model on a real batch.

    python -m benchmarks.granularity [--fit] [--repeats 3] [--seed 1] [--raw JSON]

It does three steps (docs/benchmarks.md, "Granularity and affinity"); ``--fit`` leaves out
the third, ``--raw FILE`` fits from an earlier result's measurements instead of the first:

::

    1. fit    for each kind (network: UTS with tiny batches; cpu: UTS; memory: BC; Jacobi 2D)
              real runs on this machine: 2 places x 1 worker and 1 place x 2 workers
              (pinned, alone) -> shape2; two 1-core jobs at once, pinned and not ->
              unpinned; 1 place x 1 worker alone -> the base of a 1-core job
              ──► ContentionModel (scheduler.contention), the rest assumed with its source
    2. study  scheduler.studies.granularity: experiments 1 and 2 on 4 nodes x 32 cores
              (2 sockets), six scenarios, the fitted model
    3. real   a scaled experiment 2 (8 short jobs) on 1 logical node of 2 cores under the
              real scheduler, "none" and "granularity+groups" (pinned), beside the
              simulator's prediction of the same batch with the fitted model

Writes ``benchmarks/results/granularity.json`` (the machine, its vector ISA and cores, the raw
measurements, the fit, the tables and the real check) and ``granularity.png``.  Every
answer is checked (UTS against its known node count, BC and Jacobi against a sequential run);
a wrong one makes the exit status 1.  ``--markdown FILE`` prints the tables of
docs/benchmarks.md from an earlier result.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._results import RESULTS_DIR, write_result

#: The apgaspy kinds and the run that stands for each (module, arguments): small enough for
#: a few seconds a run on two cores; every answer is checked.
FIT_JOBS: dict[str, tuple[str, tuple[str, ...]]] = {
    "network": ("uts", ("-d", "10", "--work-units", "16")),
    "cpu": ("uts", ("-d", "12")),
    "memory": ("bc", ("--scale", "12", "--verify")),
    "jacobi": ("jacobi", ("-n", "1024", "-i", "100", "--verify")),
}
#: Profile of each kind (``#PROFILE``).
PROFILE = {"network": "network", "cpu": "cpu", "memory": "memory", "jacobi": "memory"}

#: Assumed factors: what a one-socket 2-core machine cannot show, with the source.
ASSUMED = {
    "straddle": (1.10, "assumed: a node's places on two sockets cost 10 % for memory-bound and "
                       "network-bound kinds (remote-socket memory traffic; Liu & Guitart 2022 "
                       "bind a task group to one socket for this reason); not measured: this "
                       "machine has one socket"),
    "socket_saturation": (8, "assumed: 8 memory-bound cores saturate a 16-core socket's "
                             "memory bandwidth (STREAM-like kernels reach a socket's bandwidth "
                             "with about half its cores: Hager & Wellein, Introduction to "
                             "High Performance Computing for Scientists and Engineers, 2010, "
                             "ch. 1); not measured: this machine has one socket of 2 cores"),
    "spread2": (1.0, "not measured across hosts: on one machine places on two logical hosts "
                     "talk over loopback as places on one host do, so packed vs spread is "
                     "measured as 1 place x 2 workers vs 2 places x 1 worker (shape2); a real "
                     "network would add to the cost of spreading"),
}


def _host() -> str:
    return socket.gethostname()


def _command(kind: str, places: int, workers: int) -> list[str]:
    module, args = FIT_JOBS[kind]
    argv = [sys.executable, "-m", f"benchmarks.{module}", *args, "--json"]
    if module != "jacobi":
        argv += ["--quiet", "--workers", str(workers)]
    return argv + ["--places", str(places)]


def _start(kind: str, places: int, workers: int, cores: str | None) -> tuple[Any, float]:
    env = dict(os.environ, APGAS_PLACES_PER_HOST=str(places), GLB_WORKERS=str(workers))
    env.pop("APGAS_CORES", None)
    if cores is not None:
        env["APGAS_CORES"] = f"{_host()}={cores}"
    proc = subprocess.Popen(_command(kind, places, workers), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    return proc, time.monotonic()


def _finish(proc: Any, t0: float, timeout_s: float = 120.0) -> dict[str, Any]:
    """Wait for a run (its process group is ended after ``timeout_s``); its report."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this run started, places included
        proc.communicate()
        raise RuntimeError(f"{proc.args}: still running after {timeout_s:g} s") from None
    wall = time.monotonic() - t0
    report = next((json.loads(x) for x in reversed(out.splitlines()) if x.startswith("{")), None)
    if proc.returncode != 0 or report is None:
        raise RuntimeError(f"{proc.args}: exit {proc.returncode}: {err.strip()[-300:]}")
    return {"seconds": report["seconds"], "wall_s": round(wall, 3),
            "correct": report.get("correct"), "places": report.get("places")}


def _run(*jobs: tuple[str, int, int, str | None]) -> list[dict[str, Any]]:
    """Run ``jobs`` (kind, places, workers, cores or None) at once; their reports."""
    started = [_start(*job) for job in jobs]
    return [_finish(p, t0) for p, t0 in started]


def measure(kinds: list[str], repeats: int, log: Any = print) -> dict[str, Any]:
    """The fit's real runs (module docstring, step 1), each configuration ``repeats`` times,
    the configurations of one repeat in turn.

    Returns ``{kind: {"2x1": [runs], "1x2": [...], "1x1": [...], "corun_pinned": [...],
    "corun_unpinned": [...]}}``, a run ``{"seconds" (the computation), "wall_s" (the
    process), "correct", "places"}``.  Raises ``RuntimeError`` for a run that fails.
    """
    raw: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for rep in range(repeats):
        for kind in kinds:
            r = raw.setdefault(kind, {k: [] for k in ("2x1", "1x2", "1x1", "corun_pinned",
                                                      "corun_unpinned")})
            r["2x1"] += _run((kind, 2, 1, "0-1"))
            r["1x2"] += _run((kind, 1, 2, "0-1"))
            r["1x1"] += _run((kind, 1, 1, "0"))
            r["corun_pinned"] += _run((kind, 1, 1, "0"), (kind, 1, 1, "1"))
            r["corun_unpinned"] += _run((kind, 1, 1, None), (kind, 1, 1, None))
            last = {k: v[-2:] if k.startswith("corun") else v[-1:] for k, v in r.items()}
            log(f"  fit {rep + 1}/{repeats} {kind}: " + ", ".join(
                f"{k} {statistics.fmean(x['seconds'] for x in v):.3f} s"
                for k, v in last.items()), flush=True)
    return raw


def fit(raw: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The :class:`~scheduler.contention.ContentionModel` of the measurements: ``shape2`` =
    median 1x2 / median 2x1 computation time, ``unpinned`` = median unpinned co-run /
    median pinned co-run; the assumed factors of :data:`ASSUMED`.  Returns ``(model, fit)``,
    ``fit`` the factors by kind with their source."""
    from scheduler.contention import ContentionModel, KindFactors

    def med(runs: list[dict[str, Any]], key: str = "seconds") -> float:
        return statistics.median(x[key] for x in runs)

    kinds, table = {}, {}
    straddle = ASSUMED["straddle"][0]
    for kind, r in raw.items():
        shape2 = med(r["1x2"]) / med(r["2x1"])
        unpinned = med(r["corun_unpinned"]) / med(r["corun_pinned"])
        memory = PROFILE[kind] == "memory"
        kinds[kind] = KindFactors(shape2=shape2, unpinned=unpinned,
                                  spread2=ASSUMED["spread2"][0],
                                  straddle=straddle if PROFILE[kind] != "cpu" else 1.0,
                                  memory=memory)
        table[kind] = {"shape2": round(shape2, 4), "unpinned": round(unpinned, 4),
                       "corun_pinned_over_alone": round(med(r["corun_pinned"]) / med(r["1x1"]), 4),
                       "spread2": ASSUMED["spread2"][0],
                       "straddle": kinds[kind].straddle, "memory_bound": memory}
    sources = {"shape2": "fitted: median time of 1 place x 2 workers over 2 places x 1 worker, "
                         "pinned, alone, on this machine",
               "unpinned": "fitted: median time of two 1-core jobs run at once unpinned over "
                           "pinned (APGAS_CORES unset vs set), on this machine",
               **{k: v[1] for k, v in ASSUMED.items()}}
    model = ContentionModel(kinds, socket_saturation=int(ASSUMED["socket_saturation"][0]),
                            sources=sources)
    return model, {"kinds": table, "socket_saturation": model.socket_saturation,
                   "sources": sources}


def neutral_network(model: Any) -> Any:
    """``model`` with the ``network`` kind's ``shape2`` set to the ``cpu`` kind's: the
    like-for-like row of the docs (what is left of the gain when packing a network-bound job
    buys it no more than it buys a CPU-bound one); ``model`` itself where either is missing."""
    import dataclasses

    kinds = dict(model.kinds)
    if "network" not in kinds or "cpu" not in kinds:
        return model
    kinds["network"] = dataclasses.replace(kinds["network"], shape2=kinds["cpu"].shape2)
    return dataclasses.replace(model, kinds=kinds)


# ------------------------------------------------------------------------------- real check

#: The real batch: experiment 2 scaled to 2 cores: (kind, cores), submitted at times drawn in
#: 0-12 s (experiment 2's 0-1200 s x 0.01) from the seed.
REAL_JOBS = (("cpu", 2), ("memory", 1), ("network", 2), ("jacobi", 1),
             ("cpu", 1), ("memory", 2), ("network", 1), ("jacobi", 2))
#: The two scenarios of the real check: (name, shape policy, pinned).
REAL_SCENARIOS = (("none", "core", False), ("granularity+groups", "granularity", True))


def real_entries(seed: int) -> list[Any]:
    """The real batch as scheduler entries (``#CORES`` jobs, submission times drawn)."""
    from scheduler.jobs import BatchEntry, JobSpec

    rng = random.Random(seed)
    out = []
    for i, (kind, cores) in enumerate(REAL_JOBS):
        module, args = FIT_JOBS[kind]
        argv = (sys.executable, "-m", f"benchmarks.{module}", *args, "--json")
        spec = JobSpec(name=f"{kind}-{i}", cores=cores, profile=PROFILE[kind], program=kind,
                       size=cores, required_time_s=300.0, command=argv)
        out.append(BatchEntry(spec, round(rng.uniform(0.0, 12.0), 2)))
    return sorted(out, key=lambda e: e.submit_s)


def run_real(entries: list[Any], shape: str, pin: bool, out: Path) -> dict[str, Any]:
    """Run ``entries`` on the real scheduler (FCFS, 1 logical node of 2 cores, ``shape``,
    pinned or not); ``{"mean_turnaround_s", "makespan_s", "jobs", "all_correct",
    "processes_left"}``."""
    from scheduler.algorithms import make
    from scheduler.demo import job_report, serve_batch
    from scheduler.nodes import LocalNodes
    from scheduler.server import Server

    env = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}
    server = Server(LocalNodes(1, cores_per_node=2), make("fcfs"), port=0,
                    run_dir=out / "run", log_path=out / "events.jsonl", interval_s=0.5,
                    grace_s=2.0, job_env={"APGAS_START_TIMEOUT": "120", **env}, shape=shape,
                    pin=pin)
    timed_out = serve_batch(server, entries, timeout_s=240.0, poll_s=0.2, quiet=True)
    left = server.leftover_pids()
    result = server.result()
    jobs = [job_report(info) for info in server.status()["jobs"]]
    return {"mean_turnaround_s": round(result.mean_turnaround_s, 3),
            "makespan_s": round(result.makespan_s, 3), "timed_out": timed_out,
            "all_correct": len(jobs) == len(entries) and all(j["correct"] for j in jobs),
            "processes_left": left,
            "jobs": [{k: j[k] for k in ("name", "submit_s", "start_s", "end_s", "job_seconds",
                                        "places_at_start", "correct")} for j in jobs]}


def predict_real(entries: list[Any], model: Any, raw: dict[str, Any], shape: str,
                 pin: bool) -> dict[str, Any]:
    """The simulator's prediction of the real batch: each job's base time its kind's median
    wall time alone (2 cores: 2 places x 1 worker; 1 core: 1 x 1), one socket of 2 cores
    (memory-bound sharing there is in the measured co-run, so not counted again: saturation
    2), and the fitted factors diluted by the start-up: a factor ``f`` acts on the
    computation only, so a job whose computation is the share ``c`` of its wall time alone
    runs ``1 + (f - 1) c`` times its base time (``c`` of its kind's 2 x 1 runs)."""
    from dataclasses import replace

    from scheduler.contention import KindFactors
    from scheduler.studies.granularity import Scenario, run_scenario

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(x[key] for x in runs)

    base = {(k, 2): med(r["2x1"], "wall_s") for k, r in raw.items()}
    base.update({(k, 1): med(r["1x1"], "wall_s") for k, r in raw.items()})
    kinds = {}
    for kind, f in model.kinds.items():
        c = min(1.0, med(raw[kind]["2x1"], "seconds") / med(raw[kind]["2x1"], "wall_s"))
        kinds[kind] = KindFactors(shape2=1 + (f.shape2 - 1) * c,
                                  unpinned=1 + (f.unpinned - 1) * c,
                                  spread2=f.spread2, straddle=f.straddle, memory=f.memory)
    local = replace(model, kinds=kinds, socket_saturation=2)
    run = run_scenario(entries, Scenario("shares", shape, pin, False), local, nodes=1,
                       cores_per_node=2, sockets_per_node=1, base_s=base)
    return {"mean_turnaround_s": round(run["mean_turnaround_s"], 3),
            "makespan_s": round(run["makespan_s"], 3), "jobs": run["jobs"]}


# ------------------------------------------------------------------------------- report


def _pct(x: float) -> str:
    return f"{100 * x:+.1f} %"


def table(study: dict[str, Any]) -> str:
    """The study's tables as text (one per experiment)."""
    lines = []
    for name, rows in study.items():
        lines.append(f"{name}: scenario, mean response s, makespan s, vs none, vs affinity")
        for r in rows:
            lines.append(f"  {r['scenario']:<19} {r['mean_turnaround_s']:8.1f} "
                         f"{r['makespan_s']:8.1f}  resp {_pct(r['response_vs_none'])} "
                         f"mksp {_pct(r['makespan_vs_none'])}  |  resp "
                         f"{_pct(r['response_vs_affinity'])} mksp "
                         f"{_pct(r['makespan_vs_affinity'])}")
    return "\n".join(lines)


def markdown(data: dict[str, Any]) -> str:
    """The tables of docs/benchmarks.md ("Granularity and affinity") from a result: the
    fitted factors, each experiment's scenarios beside the paper's changes, the real check."""
    def pct(x: float | None) -> str:
        return "" if x is None else f"{100 * x:+.0f} %"

    out = ["| kind | shape2 | unpinned | co-run pinned / alone |", "|---|---|---|---|"]
    for kind, f in data["fit"]["kinds"].items():
        out.append(f"| {kind} | {f['shape2']:.2f} | {f['unpinned']:.2f} | "
                   f"{f['corun_pinned_over_alone']:.2f} |")
    paper = data.get("paper", {})
    for name in ("experiment1", "experiment2"):
        vs_none = paper.get(f"{name}_vs_none", {})
        vs_aff = paper.get(f"{name}_vs_affinity", {})
        out += ["", f"{name.replace('experiment', 'Experiment ')}:", "",
                "| scenario | mean response s | makespan s | response vs none | makespan vs "
                "none | response vs affinity | makespan vs affinity |",
                "|---|---|---|---|---|---|---|"]
        for r in data["study"][name]:
            out.append(f"| {r['scenario']} | {r['mean_turnaround_s']:.0f} | "
                       f"{r['makespan_s']:.0f} | {pct(r['response_vs_none'])} | "
                       f"{pct(r['makespan_vs_none'])} | {pct(r['response_vs_affinity'])} | "
                       f"{pct(r['makespan_vs_affinity'])} |")
        out.append(f"| paper: granularity + groups + affinity |  |  | "
                   f"{pct(vs_none.get('response'))} | {pct(vs_none.get('makespan'))} | "
                   f"{pct(vs_aff.get('response'))} | {pct(vs_aff.get('makespan'))} |")
    like = data.get("study_network_as_cpu")
    if like:
        r = next(x for x in like["experiment2"] if x["scenario"] == "granularity+groups")
        out += ["", "Like for like (experiment 2, the network kind's shape2 set to the cpu "
                "kind's):", "", "| scenario | response vs none | makespan vs none | response "
                "vs affinity | makespan vs affinity |", "|---|---|---|---|---|",
                f"| granularity + groups | {pct(r['response_vs_none'])} | "
                f"{pct(r['makespan_vs_none'])} | {pct(r['response_vs_affinity'])} | "
                f"{pct(r['makespan_vs_affinity'])} |"]
    real = data.get("real")
    if real:
        out += ["", "| real batch | response s | makespan s | predicted response s | "
                "predicted makespan s | all correct |", "|---|---|---|---|---|---|"]
        for name, _, _ in REAL_SCENARIOS:
            r = real[name]
            out.append(f"| {name} | {r['mean_turnaround_s']:.1f} | {r['makespan_s']:.1f} | "
                       f"{r['predicted']['mean_turnaround_s']:.1f} | "
                       f"{r['predicted']['makespan_s']:.1f} | {r['all_correct']} |")
    return "\n".join(out)


def plot(study: dict[str, Any], path: Path) -> None:
    """Bars of mean response time and makespan per scenario, one panel per experiment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(study), figsize=(11, 4))
    for ax, (name, rows) in zip(axes, study.items(), strict=True):
        names = [r["scenario"] for r in rows]
        xs = range(len(rows))
        ax.bar([x - 0.2 for x in xs], [r["mean_turnaround_s"] for r in rows], 0.4,
               label="mean response time")
        ax.bar([x + 0.2 for x in xs], [r["makespan_s"] for r in rows], 0.4, label="makespan")
        ax.set_xticks(list(xs), names, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("seconds (simulated)")
        ax.set_title(name.replace("experiment", "experiment "))
        ax.legend(fontsize=8)
    fig.suptitle("Granularity and affinity, 4 nodes x 32 cores, fitted contention model")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Fit, simulate, check for real (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.granularity",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true",
                        help="the fit and the simulated study only, no real batch")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each fit point, the median fitted (3)")
    parser.add_argument("--raw", type=Path, default=None, metavar="JSON",
                        help="fit from the raw measurements of an earlier result instead of "
                             "measuring (the study and the real batch run as usual)")
    parser.add_argument("--seed", type=int, default=1, help="experiment 2's seed (1)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results directory")
    parser.add_argument("--markdown", type=Path, default=None, metavar="JSON",
                        help="measure nothing: print the docs' tables of an earlier result")
    args = parser.parse_args(argv)
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text(encoding="utf-8"))))
        return 0
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    t0 = time.monotonic()
    if args.raw is not None:
        raw = json.loads(args.raw.read_text(encoding="utf-8"))["raw"]
        print(f"fit: the raw measurements of {args.raw}", flush=True)
    else:
        print("fit: real runs on this machine", flush=True)
        raw = measure(list(FIT_JOBS), args.repeats)
    model, fitted = fit(raw)
    wrong = [f"{k}/{c}" for k, r in raw.items() for c, runs in r.items()
             for x in runs if x["correct"] is False]
    for kind, f in fitted["kinds"].items():
        print(f"  {kind}: shape2 {f['shape2']:.3f}, unpinned {f['unpinned']:.3f}, "
              f"co-run pinned / alone {f['corun_pinned_over_alone']:.3f}")
    data: dict[str, Any] = {"params": {"repeats": args.repeats, "seed": args.seed},
                            "fit_jobs": {k: [m, *a] for k, (m, a) in FIT_JOBS.items()},
                            "raw": raw, "fit": fitted}
    from scheduler.studies.granularity import BASE_S, PAPER, granularity_study

    study = granularity_study(model, seed=args.seed)
    print(table(study))
    best = next(r for r in study["experiment2"] if r["scenario"] == "granularity+groups")
    print(f"experiment 2, granularity+groups vs none: response "
          f"{_pct(best['response_vs_none'])}, makespan {_pct(best['makespan_vs_none'])} "
          f"(paper: -35 %, -34 %)")
    # Like for like: our network stand-in is not network-bound on one machine; what packing
    # buys it is the adaptive batch size of a multi-worker place (glb._gil.adapt_work_units).
    # The same study with its shape2 set to the cpu kind's says how much of the gain is that.
    neutral = neutral_network(model)
    study_neutral = granularity_study(neutral, seed=args.seed)
    same = next(r for r in study_neutral["experiment2"] if r["scenario"] == "granularity+groups")
    print(f"  the same, the network kind's shape2 set to the cpu kind's: response "
          f"{_pct(same['response_vs_none'])}, makespan {_pct(same['makespan_vs_none'])}")
    data["study_network_as_cpu"] = study_neutral
    data.update({"study": study, "paper": PAPER, "base_s": BASE_S,
                 "cluster": {"nodes": 4, "cores_per_node": 32, "sockets_per_node": 2,
                             "job_cores": 16, "algorithm": "fcfs"}})
    args.out.mkdir(parents=True, exist_ok=True)
    plot(study, args.out / "granularity.png")
    if not args.fit:
        entries = real_entries(args.seed)
        real = {"jobs": [[e.spec.name, e.spec.cores, e.submit_s] for e in entries]}
        with tempfile.TemporaryDirectory(prefix="apgas-granularity-") as tmp:
            for name, shape, pin in REAL_SCENARIOS:
                print(f"real batch: {name} ({len(entries)} jobs, 1 node x 2 cores)", flush=True)
                got = run_real(entries, shape, pin, Path(tmp) / name)
                got["predicted"] = predict_real(entries, model, raw, shape, pin)
                real[name] = got
                print(f"  measured: response {got['mean_turnaround_s']:.2f} s, makespan "
                      f"{got['makespan_s']:.2f} s; predicted: response "
                      f"{got['predicted']['mean_turnaround_s']:.2f} s, makespan "
                      f"{got['predicted']['makespan_s']:.2f} s; all correct: "
                      f"{got['all_correct']}", flush=True)
                if not got["all_correct"]:
                    wrong.append(f"real/{name}")
        data["real"] = real
    data["elapsed_s"] = round(time.monotonic() - t0, 1)
    path = write_result("granularity", data, args.out)
    print(f"wrote {path} in {data['elapsed_s']:.0f} s")
    if wrong:
        print(f"error: wrong answers: {', '.join(wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
