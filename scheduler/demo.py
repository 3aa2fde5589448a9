"""``python -m scheduler demo``: a real batch of benchmark jobs on 4 logical nodes.

The embedded default: :data:`DEMO_BATCH`, 9 jobs of the repository's benchmarks (UTS,
N-Queens, BC, Pi), rigid and malleable (node ranges 1-4), submitted over the first minute,
run by the real scheduler (:class:`~scheduler.server.Server`) with the Malleable algorithm on
logical nodes 127.0.1.1 … 127.0.1.4 of this machine.  The mix makes the algorithm grow the
first malleable job onto idle nodes, then shrink it to start rigid jobs that arrive later.
Sized for a 2-core machine: each job runs 10-60 s, the batch about 2-4 minutes.  The UTS jobs'
depth follows the kernels the jobs will run (``APGAS_KERNELS``, inherited by the jobs): d = 15
with the compiled kernel, which counts about nine times faster than the numpy one (d = 13);
see :func:`demo_batch`.

``demo --evolving`` runs :data:`EVOLVING_DEMO_BATCH` instead: LifelineGLB's evotree (tree,
sequential branch, tree; docs/guides/evotree.md) as rigid, moldable, malleable and evolving
jobs under an evolving policy (``--algorithm``, default ``evolving-smallest``).  The evolving
jobs run apgaspy's evolving monitor in ``task`` mode (GLB's busy share on splittable work,
docs/guides/evolving.md): they ask for a node in the trees and give nodes back in the branch.
Their tasks wait their time out (``--sleep``): a logical node stands for a node's compute
time, which two cores could not give to several busy loops at once.  Each job's line also
has ``requests``, ``requests_served`` and ``releases``; the Gantt chart marks every grant and
release.

The per-job order cool-down is 10 s (``--cooldown``; the Java scheduler's 60 s is longer
than most of these jobs).  Each benchmark prints one JSON object (``--json``): its answer,
whether it is correct, and the orders it carried out.

Prints progress to stderr, then a table of the jobs and the metrics (makespan, utilisation,
mean wait, mean turnaround: the simulator's definitions, :mod:`scheduler.metrics`), and
writes to ``--out`` the event log, the jobs' output, a Gantt chart of the nodes and the
utilisation curve (:mod:`scheduler.plots`).  ``--json`` prints one JSON object instead of
the table.  Exit status 0 when every job ended with the correct answer and no process is
left, else 1.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .algorithms import make
from .jobs import BatchEntry, JobClass, JobSpec
from .nodes import LocalNodes
from .serve_cli import format_event
from .server import Server

__all__ = ["DEMO_BATCH", "EVOLVING_DEMO_BATCH", "EVOLVING_JOB_ENV", "HELP", "UTS_DEPTH",
           "DemoJob", "add_arguments", "demo_batch", "demo_entries", "evotree_command",
           "job_report", "run", "run_batch", "serve_batch"]

HELP = ("run a real batch of benchmark jobs on 4 logical nodes (malleable algorithm; "
        "--evolving: evotree jobs under an evolving policy)")


@dataclass(frozen=True)
class DemoJob:
    """One job of the demo batch: submission time (s), command, class and node range."""

    submit_s: float
    name: str
    command: str
    job_class: str
    min_nodes: int
    max_nodes: int
    required_time_s: float = 180.0


#: The demo batch with the numpy kernels (the Java GLB benchmarks' command lines: -n is the
#: problem size, -d UTS's depth).
DEMO_BATCH: tuple[DemoJob, ...] = (
    DemoJob(0, "uts-d13", "python -m benchmarks.uts -d 13", "malleable", 1, 4),
    DemoJob(8, "nqueens-16", "python -m benchmarks.nqueens -n 16", "rigid", 1, 1),
    DemoJob(15, "pi-6e9", "python -m benchmarks.pi -n 6e9", "malleable", 1, 4),
    DemoJob(22, "bc-13", "python -m benchmarks.bc -n 13 --verify", "rigid", 2, 2),
    DemoJob(30, "uts-d13r", "python -m benchmarks.uts -d 13", "rigid", 2, 2),
    DemoJob(38, "nqueens-16m", "python -m benchmarks.nqueens -n 16", "malleable", 1, 4),
    DemoJob(45, "pi-6e9r", "python -m benchmarks.pi -n 6e9", "rigid", 3, 3),
    DemoJob(52, "bc-14", "python -m benchmarks.bc -n 14 --verify", "malleable", 2, 4),
    DemoJob(60, "uts-d13r1", "python -m benchmarks.uts -d 13", "rigid", 1, 1),
)


def evotree_command(size: int, g_s: float, *, tasks: int = 1000, branch: int = 200,
                    sleep: bool = True) -> str:
    """The command line of one evotree job (docs/guides/evotree.md): trees sized for
    ``size`` places (``-s``, >= 1) of ``g_s`` seconds each (``-g``, > 0), ``tasks`` tasks per
    worker (``-t``), a sequential branch of ``branch`` tasks, 20 % duration variance;
    ``sleep``: tasks wait their time out (``--sleep``).  Its exact answer is
    ``2 × tasks × size + branch`` tasks.

    Raises:
        ValueError: ``size < 1``, ``g_s <= 0``, ``tasks < 1`` or ``branch < 1``.
    """
    if size < 1 or not g_s > 0 or tasks < 1 or branch < 1:
        raise ValueError(f"evotree needs size, g, tasks and branch > 0, got {size}, {g_s}, "
                         f"{tasks}, {branch}")
    return (f"python -m benchmarks.evotree -g {g_s * 1000:g} -t {tasks} -u 20 -s {size} "
            f"--branch {branch}" + (" --sleep" if sleep else ""))


#: ``demo --evolving``: evotree jobs of 40 s on their rigid size (g = 10 s: tree 10 s,
#: branch 20 s, tree 10 s), rigid, moldable, malleable and evolving, over the first minute.
EVOLVING_DEMO_BATCH: tuple[DemoJob, ...] = (
    DemoJob(0, "evo-2", evotree_command(2, 10), "evolving", 1, 4),
    DemoJob(0, "rigid-1", evotree_command(1, 10), "rigid", 1, 1),
    DemoJob(10, "mall-2", evotree_command(2, 10), "malleable", 1, 3),
    DemoJob(20, "evo-2b", evotree_command(2, 10), "evolving", 1, 4),
    DemoJob(30, "rigid-2", evotree_command(2, 10), "rigid", 2, 2),
    DemoJob(40, "evo-1", evotree_command(1, 10), "evolving", 1, 2),
    DemoJob(50, "mold-2", evotree_command(2, 10), "moldable", 1, 3),
)

EVOLVING_JOB_ENV = {"APGAS_EVOLVING_MODE": "task", "APGAS_EVOLVING_IDLE_GRACE": "2"}
"""The evolving monitor's settings for the demo's and the real evaluation's evotree jobs
(docs/guides/evolving.md): the load is GLB's busy share on splittable work (the Java
evaluation's ``task`` mode); a place reads idle after 2 s without work (Java's 10 s, scaled
with the jobs: their branch lasts 20 s, not 100 s)."""


UTS_DEPTH = {"numpy": 13, "numba": 15}
"""The UTS jobs' depth per kernel backend: about 12 s (d = 13, 264 M nodes, numpy) and 20 s
(d = 15, 4.2 G nodes, compiled) on one core of the reference machine."""


def jobs_kernels() -> str:
    """The kernel backend (``"numba"`` or ``"numpy"``) the demo's jobs will use.

    The jobs are ``python -m benchmarks...`` processes that inherit this environment
    (``APGAS_KERNELS``), so one such process is asked, as the jobs will ask: the scheduler
    runs the benchmarks' programs but does not import them.

    Raises:
        ValueError: ``APGAS_KERNELS`` is invalid, or asks for numba where it does not import
            (the child's one-line error).
    """
    ask = "from benchmarks.kernels import backend; print(backend())"
    done = subprocess.run([sys.executable, "-c", ask], capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["the kernels' backend is unknown"]
        raise ValueError(lines[-1])
    return done.stdout.strip()


def demo_batch(kernels: str | None = None) -> tuple[DemoJob, ...]:
    """:data:`DEMO_BATCH` with its UTS jobs sized for ``kernels`` (``"numpy"`` or
    ``"numba"``; ``None``: the backend the jobs will use, :func:`jobs_kernels`).

    Raises:
        ValueError: ``kernels`` is ``None`` and ``APGAS_KERNELS`` is invalid, or asks for
            numba where it does not import.
    """
    if kernels is None:
        kernels = jobs_kernels()
    depth = UTS_DEPTH[kernels]
    return tuple(replace(job, name=job.name.replace("d13", f"d{depth}"),
                         command=job.command.replace("-d 13", f"-d {depth}"))
                 if "benchmarks.uts" in job.command else job for job in DEMO_BATCH)


def demo_entries(batch: tuple[DemoJob, ...] | None = None) -> list[BatchEntry]:
    """The batch as scheduler entries (each command with ``--json`` added); ``None``:
    :func:`demo_batch` for this process's kernels."""
    if batch is None:
        batch = demo_batch()
    out = []
    for job in batch:
        argv = (*shlex.split(job.command), "--json")
        program = argv[2].rsplit(".", 1)[-1]
        size = argv[argv.index("-s") + 1] if program == "evotree" else argv[4]
        if job.job_class == "rigid":
            spec = JobSpec(name=job.name, job_class=JobClass.RIGID, nodes=job.min_nodes,
                           required_time_s=job.required_time_s, command=argv, program=program,
                           size=size)
        else:
            spec = JobSpec(name=job.name, job_class=JobClass.parse(job.job_class),
                           min_nodes=job.min_nodes,
                           max_nodes=job.max_nodes, required_time_s=job.required_time_s,
                           command=argv, program=program, size=size)
        out.append(BatchEntry(spec, float(job.submit_s)))
    return out


def job_report(info: dict[str, Any]) -> dict[str, Any]:
    """One job's line of the report: the scheduler's view plus what the job printed
    (``job_seconds``: the computation's own time, which ``run_s`` exceeds by the start-up and
    the shutdown)."""
    printed: dict[str, Any] = {}
    if info.get("stdout"):
        try:
            text = Path(info["stdout"]).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and "benchmark" in obj:
                    printed = obj
    return {
        "id": info["id"],
        "name": info["name"],
        "class": info["class"],
        "range": [info["min_nodes"], info["max_nodes"]],
        "state": info["state"],
        "returncode": info["returncode"],
        "submit_s": info["submit_s"],
        "start_s": info["start_s"],
        "end_s": info["end_s"],
        "run_s": info["run_s"],
        "job_seconds": printed.get("seconds"),
        "shrinks": info["shrinks"],
        "grows": info["grows"],
        "requests": info.get("requests", 0),
        "requests_served": info.get("requests_served", 0),
        "releases": info.get("releases", 0),
        "scheduler_orders": info["orders"],
        "job_orders": printed.get("orders"),
        "places_at_start": printed.get("places"),
        "places_at_end": printed.get("places_at_end"),
        "nodes_at_end": info.get("nodes_at_end"),
        "result": printed.get("result") if not isinstance(printed.get("result"), list)
        else f"{len(printed['result'])} values",
        "correct": printed.get("correct"),
        "command": shlex.join(info["command"]),
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``demo``'s options."""
    from .algorithms import EVOLVING_ALGORITHMS

    p.add_argument("--nodes", type=int, default=4, help="logical nodes (default 4)")
    p.add_argument("--evolving", action="store_true",
                   help="run the evolving batch: evotree jobs, rigid, moldable, malleable and "
                        "evolving, under an evolving policy (see --algorithm)")
    p.add_argument("--algorithm", choices=EVOLVING_ALGORITHMS, default="evolving-smallest",
                   help="the evolving policy of --evolving (default evolving-smallest)")
    p.add_argument("--port", type=int, default=8081,
                   help="SCHEDULER_PORT (default 8081; 0: a free one)")
    p.add_argument("--cooldown", type=float, default=10.0,
                   help="seconds between two orders to one job (default 10)")
    p.add_argument("--interval", type=float, default=5.0,
                   help="seconds between algorithm runs (default 5)")
    p.add_argument("--out", type=Path, default=None,
                   help="directory for the log, job output and charts (default: a new "
                        "temporary directory)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="give up (and end every job) after this many seconds (default 600)")
    p.add_argument("--no-plots", action="store_true", help="write no charts")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")


def _table(jobs: list[dict[str, Any]], *, evolving: bool = False) -> str:
    head = (f"{'ID':>3} {'NAME':<12}{'CLASS':<10}{'RANGE':<6}{'SUBMIT':>7}{'START':>7}"
            f"{'END':>7}{'WAIT':>6}{'RUN':>6}  {'SHRINK':>6}{'GROW':>5}  {'PLACES':<7}"
            f"{'CORRECT':<8}" + ("REQ SERVED RELEASED  " if evolving else "")
            + "ORDERS (seen by the job)")
    lines = [head]
    for j in jobs:
        def f(x: Any) -> str:
            return "-" if x is None else f"{x:.1f}"
        wait = None if j["start_s"] is None else j["start_s"] - j["submit_s"]
        places = f"{j['places_at_start']}->{j['places_at_end']}" \
            if j["places_at_start"] is not None else "-"
        rng = f"{j['range'][0]}-{j['range'][1]}"
        lines.append(
            f"{j['id']:>3} {j['name'][:11]:<12}{j['class']:<10}{rng:<6}{f(j['submit_s']):>7}"
            f"{f(j['start_s']):>7}{f(j['end_s']):>7}{f(wait):>6}{f(j['run_s']):>6}  "
            f"{j['shrinks']:>6}{j['grows']:>5}  {places:<7}{str(j['correct']):<8}"
            + (f"{j['requests']:>3} {j['requests_served']:>6} {j['releases']:>8}  "
               if evolving else "")
            + f"{json.dumps(j['job_orders'])}")
    return "\n".join(lines)


def serve_batch(server: Server, entries: list[BatchEntry], *, timeout_s: float,
                poll_s: float = 0.5, quiet: bool = False) -> bool:
    """Start ``server``, submit ``entries``, wait until every job has ended, shut it down.

    Args:
        server: a :class:`~scheduler.server.Server` not started yet.
        entries: the batch (submission times in seconds from now).
        timeout_s: seconds after which every job still running is ended.
        poll_s: seconds between two looks at the jobs.
        quiet: no message on stderr when the batch times out or is interrupted.

    Returns ``True`` when the batch did not end by itself (time-out or Ctrl-C), else
    ``False``.  The server is shut down in every case (its jobs ended, nothing left).
    """
    server.start()
    timed_out = False
    try:
        server.submit_batch(entries)
        deadline = time.monotonic() + timeout_s
        while not server.all_done():
            if time.monotonic() > deadline:
                timed_out = True
                if not quiet:
                    print(f"error: the batch did not end within {timeout_s:g} s; ending it",
                          file=sys.stderr)
                break
            time.sleep(poll_s)
    except KeyboardInterrupt:
        if not quiet:
            print("interrupted: ending every job", file=sys.stderr)
        timed_out = True
    finally:
        server.shutdown()
    return timed_out


def run_batch(entries: list[BatchEntry], algorithm: str, *, nodes: int, out: Path,
              port: int = 0, cooldown_s: float = 10.0, interval_s: float = 5.0,
              timeout_s: float = 600.0, job_env: dict[str, str] | None = None,
              on_event: Any = None) -> tuple[dict[str, Any], Any]:
    """Run ``entries`` for real on ``nodes`` logical nodes under ``algorithm``.

    The real scheduler (:class:`~scheduler.server.Server`) on ``port`` (0: a free one) with
    the run directory, event log (``events.jsonl``) under ``out``; ``cooldown_s`` goes to
    the algorithm (:func:`~scheduler.algorithms.make`), ``interval_s`` is the scheduler's
    period (s), ``job_env`` extra environment for every job, ``on_event`` the server's event
    callback.  Ends every job after ``timeout_s`` seconds.

    Returns:
        ``(report, result)``: ``report`` has ``jobs`` (:func:`job_report` each), the metrics
        (``makespan_s``, ``utilisation``, ``mean_wait_s``, ``mean_turnaround_s``: the
        simulator's definitions, :mod:`scheduler.metrics`), ``shrinks``, ``grows``,
        ``requests``, ``requests_served``, ``releases`` (sums over the jobs),
        ``processes_left``, ``timed_out`` and ``ok`` (every job done with the correct answer,
        no time-out, no process left); ``result`` is the run's
        :class:`~scheduler.simulate.SimResult` (for the charts).

    Raises:
        OSError: the scheduler cannot listen on ``port``.
        ValueError: an unknown algorithm.
    """
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    server = Server(LocalNodes(nodes), make(algorithm, cooldown_s=cooldown_s), port=port,
                    run_dir=out / "run", log_path=out / "events.jsonl", interval_s=interval_s,
                    job_env={"APGAS_START_TIMEOUT": "60", **(job_env or {})},
                    on_event=on_event)
    timed_out = serve_batch(server, entries, timeout_s=timeout_s)
    left = server.leftover_pids()
    status = server.status()
    held = {r.job_id: list(r.allotment[-2][1]) if len(r.allotment) > 1 else []
            for r in server.records()}
    jobs = []
    for info in status["jobs"]:
        info = dict(info, nodes_at_end=held.get(info["id"]))
        jobs.append(job_report(info))
    result = server.result()
    report: dict[str, Any] = {
        "algorithm": algorithm,
        "jobs": jobs,
        "makespan_s": round(result.makespan_s, 3),
        "utilisation": round(result.utilisation, 4),
        "mean_wait_s": round(result.mean_wait_s, 3),
        "mean_turnaround_s": round(result.mean_turnaround_s, 3),
    }
    for key in ("shrinks", "grows", "requests", "requests_served", "releases"):
        report[key] = sum(j[key] for j in jobs)
    report.update({
        "nodes": nodes,
        "cooldown_s": cooldown_s,
        "elapsed_s": round(time.monotonic() - started, 3),
        "processes_left": left,
        "timed_out": timed_out,
        "out": str(out),
        "log": str(out / "events.jsonl"),
    })
    report["ok"] = (not timed_out and not left and all(j["correct"] is True for j in jobs)
                    and all(j["state"] == "done" for j in jobs))
    return report, result


def run(args: argparse.Namespace) -> int:
    """Run the demo batch (``--evolving``: the evolving one); print the report; 0 when every
    job was correct and no process is left, else 1."""
    out = (args.out or Path(tempfile.mkdtemp(prefix="apgaspy-demo-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.evolving:
        entries = demo_entries(EVOLVING_DEMO_BATCH)
        algorithm, job_env = args.algorithm, dict(EVOLVING_JOB_ENV)
    else:
        entries = demo_entries()
        algorithm, job_env = "malleable", {}
    bar = None
    if not args.quiet and sys.stderr.isatty():
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(entries), desc="jobs done", unit="job", file=sys.stderr)
        except ImportError:
            bar = None

    def show(ev: dict[str, Any]) -> None:
        if args.quiet:
            return
        line = format_event(ev)
        if line:
            if bar is not None:
                bar.write(line, file=sys.stderr)
            else:
                print(line, file=sys.stderr, flush=True)
        if bar is not None and ev.get("event") == "end":
            bar.update(1)

    try:
        report, result = run_batch(entries, algorithm, nodes=args.nodes, out=out,
                                   port=args.port, cooldown_s=args.cooldown,
                                   interval_s=args.interval, timeout_s=args.timeout,
                                   job_env=job_env, on_event=show)
    except OSError as exc:
        print(f"error: {exc} (another scheduler? try --port 0)", file=sys.stderr)
        return 1
    finally:
        if bar is not None:
            bar.close()
    jobs = report["jobs"]
    plots: list[str] = []
    if not args.no_plots:
        try:
            from . import plots as charts

            plots.append(str(charts.gantt(
                result, out / "gantt.png",
                title=f"real run, {args.nodes} logical nodes, {algorithm}: makespan "
                      f"{result.makespan_s:.0f} s, utilisation {result.utilisation:.1%}")))
            plots.append(str(charts.usage({f"{algorithm} (real)": result},
                                          out / "utilisation.png", total_nodes=args.nodes,
                                          title="busy nodes over time (real run)")))
        except RuntimeError as exc:
            print(f"no charts: {exc}", file=sys.stderr)
    report["plots"] = plots
    left = report["processes_left"]
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(_table(jobs, evolving=args.evolving))
        extra = (f", {report['requests']} requests, {report['requests_served']} served, "
                 f"{report['releases']} releases" if args.evolving else "")
        print(f"\nmakespan {result.makespan_s:.1f} s, utilisation {result.utilisation:.1%}, "
              f"mean wait {result.mean_wait_s:.1f} s, mean turnaround "
              f"{result.mean_turnaround_s:.1f} s; {report['shrinks']} shrinks, "
              f"{report['grows']} grows{extra}; {report['elapsed_s']:.0f} s in all")
        print(f"processes left: {left or 'none'}")
        print(f"log, output and charts in {out}")
    return 0 if report["ok"] else 1
