"""Co-location by duty cycle on a mixed batch, for real and in the simulator.

    python -m benchmarks.colocation_batch [--jacobi 4] [--glb 2] [--bound 1.0] [--sim-only]
                                          [--out DIR]

Xie 2026 ("sparse-domain multiplexing of MPI-CFD on Kubernetes") lets simulations that wait
most of their time share the cores one of them would hold idle.  This script runs one small
batch twice on this machine, without and with co-location (docs/guides/colocation.md), and
then gives the simulator the same batch:

* **nodes**: one logical node of 2 cores (``LocalNodes(1, cores_per_node=2)``: this 2-core
  machine), the real scheduler (:class:`scheduler.server.Server`) under the malleable
  policy, a period of 0.5 s, and jobs that report their load every 0.5 s
  (``APGAS_LOAD_INTERVAL``).
* **idle jobs**: ``--jacobi`` Jacobi 2D jobs (``benchmarks.jacobi``, 256 x 256, 80
  iterations, ``--pause 0.3``: place 0 sleeps 0.3 s between its steps of 8 iterations, so the
  job computes a few percent of its wall time), ``#CORES_PER_NODE 2`` on one node,
  ``#COLOCATE yes``, ``--verify``: each checksum is compared with the sequential solve.  They
  are malleable jobs of one node (never resized; a job run as rigid, ``ELASTIC=rigid``,
  would report its duty cycle as well).
* **busy jobs**: ``--glb`` Monte-Carlo pi jobs on GLB (``benchmarks.pi``, 1e9 samples, seeded:
  the same estimate whatever the places), ``#CORES 2``, never co-located; exact when every
  estimate equals the others' and lies within 5 standard errors.
* **submission**: all at time 0, idle jobs first; the policy starts them in that order.
* **metrics**: makespan and mean response time (submission to end, s) of both runs; the gain
  is ``1 - makespan with / makespan without``.
* **simulator**: the same batch (:class:`scheduler.simulate.Simulator`, same policy and
  period), each program's time alone taken from the real run without co-location (its median
  run time, start-up included) and its duty cycle from the real run with it (the median of
  its jobs' last load lines; the busy jobs 1.0); beta from
  ``benchmarks/results/colocation.json`` when there, else the paper's 0.524 (said in the
  result).

Results: ``benchmarks/results/colocation_batch.json`` (``--out`` for another directory).
The whole command takes about two minutes on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from ._results import RESULTS_DIR, write_result

__all__ = ["JACOBI_ARGS", "PI_ARGS", "batch", "main", "run_real", "run_sim"]

#: The idle job: a Jacobi 2D that sleeps 0.3 s between its steps.
JACOBI_ARGS = ("-n", "256", "-i", "80", "--pause", "0.3", "--verify", "--json")
#: The busy job: Monte-Carlo pi on GLB.
PI_ARGS = ("-n", "1e9", "--json")
REQUIRED_S = 120.0
ALGORITHM = "malleable"
INTERVAL_S = 0.5


def batch(jacobi: int, glb: int, colocate: bool) -> list[Any]:
    """The batch: ``jacobi`` idle jobs (``#COLOCATE`` as ``colocate``) then ``glb`` busy ones,
    all submitted at time 0 (:class:`scheduler.jobs.BatchEntry`)."""
    from scheduler.jobs import BatchEntry, JobClass, JobSpec

    py = sys.executable
    out = [BatchEntry(JobSpec(name="jacobi", job_class=JobClass.MALLEABLE, nodes=1,
                              min_nodes=1, max_nodes=1, cores_per_node=2, colocate=colocate,
                              required_time_s=REQUIRED_S, program="jacobi", size="idle",
                              command=(py, "-m", "benchmarks.jacobi", *JACOBI_ARGS)), 0.0)
           for i in range(jacobi)]
    out += [BatchEntry(JobSpec(name="pi", cores=2, required_time_s=REQUIRED_S,
                               program="pi", size="busy",
                               command=(py, "-m", "benchmarks.pi", *PI_ARGS)), 0.0)
            for i in range(glb)]
    return out


def _mean_response(records: list[Any]) -> float:
    return statistics.fmean(r.end_s - r.submit_s for r in records) if records else float("nan")


def run_real(entries: list[Any], bound: float | None, out: Path,
             timeout_s: float = 150.0) -> dict[str, Any]:
    """Run ``entries`` on one logical node of 2 cores, with co-location at ``bound`` (None:
    off).  Returns ``{"bound", "makespan_s", "mean_response_s", "jobs": [{name, start_s,
    end_s, run_s, cores, duty, correct, result}], "all_correct", "separations",
    "overloads", "shared_starts", "timed_out", "processes_left"}``.  The idle jobs share one
    name, so that each counts as the duty cycle its predecessors reported until it reports
    its own (docs/guides/colocation.md)."""
    from scheduler.algorithms import make
    from scheduler.demo import job_report, printed_result, serve_batch
    from scheduler.metrics import result_from_records
    from scheduler.nodes import LocalNodes
    from scheduler.server import Server

    out.mkdir(parents=True, exist_ok=True)
    server = Server(LocalNodes(1, cores_per_node=2), make(ALGORITHM), port=0,
                    run_dir=out / "run", log_path=out / "events.jsonl", interval_s=INTERVAL_S,
                    job_env={"APGAS_START_TIMEOUT": "120", "APGAS_LOAD_INTERVAL": "0.5"},
                    colocate_bound=bound)
    timed_out = serve_batch(server, entries, timeout_s=timeout_s, poll_s=0.1, quiet=True)
    status = server.status()
    records = list(server.records())
    left = server.leftover_pids()
    result = result_from_records(records, algorithm=ALGORITHM, total_nodes=1)
    jobs, pi_results = [], set()
    for info in status["jobs"]:
        rep = job_report(info)
        printed = printed_result(info)
        if rep["name"].startswith("pi"):
            pi_results.add(printed.get("result"))
        jobs.append({"id": rep["id"], "name": rep["name"], "start_s": rep["start_s"],
                     "end_s": rep["end_s"], "run_s": rep["run_s"], "state": rep["state"],
                     "duty": info.get("duty_cycle"),
                     "correct": printed.get("correct") is True,
                     "result": printed.get("result")})
    colocation = status.get("colocation") or {}
    return {
        "bound": bound,
        "makespan_s": round(result.makespan_s, 3),
        "mean_response_s": round(_mean_response(records), 3),
        "jobs": jobs,
        "all_correct": (len(jobs) == len(entries) and all(j["correct"] for j in jobs)
                        and len(pi_results) <= 1),
        "separations": colocation.get("separations", 0),
        "overloads": colocation.get("overloads", 0),
        "shared_starts": _shared_starts(jobs),
        "timed_out": timed_out,
        "processes_left": left,
    }


def _shared_starts(jobs: list[dict[str, Any]]) -> int:
    """Jobs that started while another was running (on one node: on its cores)."""
    return sum(1 for j in jobs if j["start_s"] is not None and any(
        i is not j and i["start_s"] is not None and i["end_s"] is not None
        and i["start_s"] < j["start_s"] < i["end_s"] for i in jobs))


def run_sim(entries: list[Any], times: dict[str, float], duty: dict[str, float],
            bound: float | None) -> dict[str, Any]:
    """The simulator on the batch: each program runs ``times[program]`` s alone with duty
    cycle ``duty[program]``.  Returns ``{"bound", "makespan_s", "mean_response_s",
    "colocation" (beta, its source, separations), "jobs": [{name, start_s, end_s}]}``."""
    from scheduler.model import RuntimeModel, ScalingCurve
    from scheduler.simulate import SimConfig, Simulator

    model = RuntimeModel()
    for program, seconds in times.items():
        model.add(program, "idle" if program == "jacobi" else "busy",
                  ScalingCurve({1: seconds}, 0.0))
    config = SimConfig(total_nodes=1, cores_per_node=2, interval_s=INTERVAL_S,
                       colocate_bound=bound, duty=duty)
    result = Simulator(ALGORITHM, entries, config, model=model).run()
    return {"bound": bound, "makespan_s": round(result.makespan_s, 3),
            "mean_response_s": round(_mean_response(list(result.records)), 3),
            "colocation": dict(result.colocation) if result.colocation else None,
            "jobs": [{"name": r.name, "start_s": round(r.start_s, 3),
                      "end_s": round(r.end_s, 3)} for r in result.records]}


def _gain(off: dict[str, Any], on: dict[str, Any]) -> dict[str, float]:
    return {"makespan": round(1 - on["makespan_s"] / off["makespan_s"], 4),
            "mean_response": round(1 - on["mean_response_s"] / off["mean_response_s"], 4)}


def main(argv: list[str] | None = None) -> int:
    """Run the study (module docstring); returns 0, or 1 when an answer is wrong or a run
    timed out."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.colocation_batch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--jacobi", type=int, default=4, help="idle Jacobi jobs (4)")
    parser.add_argument("--glb", type=int, default=2, help="busy GLB pi jobs (2)")
    parser.add_argument("--bound", type=float, default=1.0, help="--colocate-bound (1.0)")
    parser.add_argument("--sim-only", action="store_true",
                        help="no real run: the simulator alone, each job 5 s alone, the idle "
                             "ones at duty 0.15")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"results directory (default {RESULTS_DIR})")
    args = parser.parse_args(argv)
    from scheduler.colocation import read_beta

    beta, source = read_beta()
    data: dict[str, Any] = {
        "batch": {"jacobi": args.jacobi, "glb": args.glb, "jacobi_args": list(JACOBI_ARGS),
                  "pi_args": list(PI_ARGS), "nodes": 1, "cores_per_node": 2,
                  "algorithm": ALGORITHM, "interval_s": INTERVAL_S, "bound": args.bound},
        "beta": beta, "beta_source": source,
    }
    ok = True
    if args.sim_only:
        times, duty = {"jacobi": 5.0, "pi": 5.0}, {"jacobi": 0.15, "pi": 1.0}
    else:
        with tempfile.TemporaryDirectory(prefix="colocation-batch-") as tmp:
            off = run_real(batch(args.jacobi, args.glb, True), None, Path(tmp) / "off")
            on = run_real(batch(args.jacobi, args.glb, True), args.bound, Path(tmp) / "on")
        data["real"] = {"off": off, "on": on, "gain": _gain(off, on)}
        ok = all(r["all_correct"] and not r["timed_out"] for r in (off, on))
        times = {p: statistics.median(j["run_s"] for j in off["jobs"]
                                      if j["name"].startswith(p) and j["run_s"])
                 for p in ("jacobi", "pi")}
        measured = [j["duty"] for j in on["jobs"] if j["name"].startswith("jacobi")
                    and j["duty"] is not None]
        duty = {"jacobi": statistics.median(measured) if measured else 0.15, "pi": 1.0}
        data["duty_source"] = ("median of the idle jobs' last load lines" if measured else
                               "assumed 0.15: no load line reached the scheduler")
    off_sim = run_sim(batch(args.jacobi, args.glb, True), times, duty, None)
    on_sim = run_sim(batch(args.jacobi, args.glb, True), times, duty, args.bound)
    data["sim"] = {"times_s": times, "duty": duty, "off": off_sim, "on": on_sim,
                   "gain": _gain(off_sim, on_sim)}
    path = write_result("colocation_batch", data, args.out)
    for kind in ("real", "sim"):
        if kind in data:
            d = data[kind]
            print(f"{kind}: makespan {d['off']['makespan_s']:.1f} s -> "
                  f"{d['on']['makespan_s']:.1f} s ({d['gain']['makespan']:+.0%}), mean response "
                  f"{d['off']['mean_response_s']:.1f} s -> {d['on']['mean_response_s']:.1f} s")
    print(f"beta {beta} ({source}); all answers exact: {ok}; {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
