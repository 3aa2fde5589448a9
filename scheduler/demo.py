"""``python -m scheduler demo``: a real batch of benchmark jobs on 4 logical nodes.

The default batch, :data:`DEMO_PLAN`, is sized by time, not by problem size: at start one
short Pi run on one place measures this machine's samples a second with the kernels the
jobs will use (:func:`pi_rate`), and each Pi job throws as many samples as last its share
of work in job-seconds (``--job-seconds S``, 10 by default; :func:`demo_batch`).  The
batch is four jobs, rigid and malleable, run by the real scheduler
(:class:`~scheduler.server.Server`) with the Malleable algorithm on logical nodes
127.0.1.1 … 127.0.1.4 of this machine, in an order that needs both kinds of resize: a
malleable job grows onto idle nodes, is shrunk to start a rigid job that arrives while it
holds every node, and grows again when that job ends.  On 2 to 64 cores every run shows at
least one shrink and one grow; fewer cores stretch every job alike.  Every answer is checked
(Pi's estimate is the same whatever the places; UTS's node count is known).

``demo --evolving`` runs :data:`EVOLVING_DEMO_BATCH` instead: LifelineGLB's evotree (tree,
sequential branch, tree; docs/guides/evotree.md) as rigid, moldable, malleable and evolving
jobs under an evolving policy (``--algorithm``, default ``evolving-smallest``).  The evolving
jobs run apgaspy's evolving monitor in ``task`` mode (GLB's busy share on splittable work,
docs/guides/evolving.md): they ask for a node in the trees and give nodes back in the branch.
Their tasks wait their time out (``--sleep``): a logical node stands for a node's compute
time, which two cores could not give to several busy loops at once.  Each job's line also
has ``requests``, ``requests_served`` and ``releases``; the Gantt chart marks every grant and
release.

The per-job order cool-down is 10 s (``--cooldown``; the Java scheduler's 60 s, ``serve``'s
default, is longer than these jobs: with it a small batch shows no resize at all).  Each
benchmark prints one JSON object (``--json``): its answer, whether it is correct, and the
orders it carried out.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._argtypes import port, positive_int, positive_seconds, seconds
from ._table import format_table
from .algorithms import make
from .jobs import BatchEntry, JobClass, JobSpec
from .nodes import LocalNodes
from .serve_cli import format_event
from .server import Server

__all__ = ["DEMO_PLAN", "EVOLVING_DEMO_BATCH", "EVOLVING_JOB_ENV", "HELP", "JOB_SECONDS",
           "DemoJob", "TimedJob", "add_arguments", "demo_batch", "demo_entries",
           "evotree_command", "job_report", "pi_rate", "printed_result", "run", "run_batch",
           "serve_batch"]

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


@dataclass(frozen=True)
class TimedJob:
    """One job of the default demo, sized by time rather than by problem size.

    Attributes:
        submit: submission time, in job-seconds (``--job-seconds``, S).
        name: the job's name.
        job_class: ``"rigid"`` or ``"malleable"``.
        min_nodes, max_nodes: its node range (equal for a rigid job).
        node_s: its work in node-seconds, in units of S: a Pi run whose sample count is the
            measured rate of one place (:func:`pi_rate`) times ``node_s × S``.
    """

    submit: float
    name: str
    job_class: str
    min_nodes: int
    max_nodes: int
    node_s: float


#: The default demo on 4 nodes, in job-seconds S (10 by default).  ``pi-m`` starts on one
#: node and grows onto the three idle ones; ``pi-r3`` arrives at 3 S while ``pi-m`` holds
#: every node, so the algorithm shrinks ``pi-m`` to start it; when ``pi-r3`` ends (S seconds
#: of work on 3 nodes) ``pi-m``, still far from done (24 node-S), grows again onto the freed
#: nodes, which ``uts-d10`` (a fixed size, a second or less) and the malleable ``pi-m2``
#: share with it.  Slower or shared cores stretch every job alike, so the order holds.
DEMO_PLAN: tuple[TimedJob, ...] = (
    TimedJob(0, "pi-m", "malleable", 1, 4, 24),
    TimedJob(3, "pi-r3", "rigid", 3, 3, 3),
    TimedJob(4, "uts-d10", "rigid", 1, 1, 0),
    TimedJob(5, "pi-m2", "malleable", 1, 2, 4),
)

JOB_SECONDS = 10.0
"""The default job-second S of :data:`DEMO_PLAN` (``--job-seconds``): with the default
10 s cool-down and 5 s period, the batch lasts about 80-100 s where 4 cores are free."""

CALIBRATION_SAMPLES = 500_000_000
"""Pi samples of :func:`pi_rate`'s measured run (about 2 s on one core with numpy, 0.5 s
compiled)."""


def pi_rate(samples: int = CALIBRATION_SAMPLES) -> float:
    """Pi samples a second of one place on this machine, with the kernels the jobs will use:
    one ``python -m benchmarks.pi --places 1 --json`` run (it inherits this environment,
    ``APGAS_KERNELS`` included, as the jobs do), its ``throughput``.

    Raises:
        ValueError: the run failed (its last line of stderr: a bad ``APGAS_KERNELS``, say).
    """
    done = subprocess.run([sys.executable, "-m", "benchmarks.pi", "-n", str(samples),
                           "--places", "1", "--json", "--quiet"], capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["the calibration run failed"]
        raise ValueError(lines[-1])
    return float(json.loads(done.stdout.strip().splitlines()[-1])["throughput"])


def demo_batch(rate: float, job_s: float = JOB_SECONDS) -> tuple[DemoJob, ...]:
    """:data:`DEMO_PLAN` as jobs: each Pi job throws ``rate × node_s × job_s`` samples (its
    own seed), so that it lasts ``node_s × job_s`` seconds on one core (``rate``: samples a
    second of one place, :func:`pi_rate`); submission times are ``submit × job_s``.

    Raises:
        ValueError: ``rate`` or ``job_s`` is not positive.
    """
    if not rate > 0 or not job_s > 0:
        raise ValueError(f"the rate and the job-second must be positive, got {rate}, {job_s}")
    jobs = []
    for seed, t in enumerate(DEMO_PLAN):
        if t.node_s > 0:
            samples = max(10**6, int(rate * t.node_s * job_s))
            command = f"python -m benchmarks.pi -n {samples} --seed {seed}"
        else:
            command = "python -m benchmarks.uts -d 10"
        limit = 60 + 10 * max(t.node_s, 1) * job_s / t.min_nodes  # EASY's reservations
        jobs.append(DemoJob(t.submit * job_s, t.name, command, t.job_class, t.min_nodes,
                            t.max_nodes, required_time_s=limit))
    return tuple(jobs)


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


def demo_entries(batch: tuple[DemoJob, ...] | None = None) -> list[BatchEntry]:
    """The batch as scheduler entries (each command with ``--json`` added; a job's stderr
    file shows its orders as they happened); ``None``: :func:`demo_batch` for this machine's
    measured rate (:func:`pi_rate`)."""
    if batch is None:
        batch = demo_batch(pi_rate())
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


def printed_result(info: dict[str, Any]) -> dict[str, Any]:
    """The last benchmark report a job printed: the last line of its output file that is a
    JSON object with a ``benchmark`` key (what ``--json`` prints, :mod:`benchmarks._cli`).

    Args:
        info: the job's entry in the server's ``status()["jobs"]``; its ``stdout`` is the path
            of the job's output file (``None`` or absent: none).

    Returns:
        That object, or ``{}`` when there is no output file, it cannot be read, or it has no
        such line (a job that failed before its report, or a program that is no benchmark).
        Never raises.
    """
    path = info.get("stdout")
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    printed: dict[str, Any] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "benchmark" in obj:
                printed = obj
    return printed


def job_report(info: dict[str, Any]) -> dict[str, Any]:
    """One job's line of the report: the scheduler's view plus what the job printed
    (:func:`printed_result`; ``job_seconds``: the computation's own time, which ``run_s``
    exceeds by the start-up and the shutdown)."""
    printed = printed_result(info)
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

    p.add_argument("--nodes", type=positive_int, default=4, help="logical nodes (default 4)")
    p.add_argument("--evolving", action="store_true",
                   help="run the evolving batch: evotree jobs, rigid, moldable, malleable and "
                        "evolving, under an evolving policy (see --algorithm)")
    p.add_argument("--algorithm", choices=EVOLVING_ALGORITHMS, default="evolving-smallest",
                   help="the evolving policy of --evolving (default evolving-smallest)")
    p.add_argument("--port", type=port, default=8081,
                   help="SCHEDULER_PORT (default 8081; 0: a free one)")
    p.add_argument("--cooldown", type=seconds, default=10.0,
                   help="seconds between two orders to one job (default 10)")
    p.add_argument("--job-seconds", type=positive_seconds, default=JOB_SECONDS, metavar="S",
                   help="the default batch's time unit: jobs are sized from a measured run "
                        "to last multiples of S seconds a core, and submitted at multiples "
                        f"of S (default {JOB_SECONDS:g}; not with --evolving)")
    p.add_argument("--interval", type=positive_seconds, default=5.0,
                   help="seconds between algorithm runs (default 5)")
    p.add_argument("--out", type=Path, default=None,
                   help="directory for the log, job output and charts (default: a new "
                        "temporary directory)")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="give up (and end every job) after this many seconds (default 600)")
    p.add_argument("--no-plots", action="store_true", help="write no charts")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")


def _table(jobs: list[dict[str, Any]], *, evolving: bool = False) -> str:
    def f(x: Any) -> str:
        return "-" if x is None else f"{x:.1f}"

    head = ["ID", "NAME", "CLASS", "RANGE", "SUBMIT", "START", "END", "WAIT", "RUN", "SHRINK",
            "GROW", "PLACES", "CORRECT"] + (["REQ", "SERVED", "RELEASED"] if evolving else []) \
        + ["ORDERS (seen by the job)"]
    rows = []
    for j in jobs:
        wait = None if j["start_s"] is None else j["start_s"] - j["submit_s"]
        places = f"{j['places_at_start']}->{j['places_at_end']}" \
            if j["places_at_start"] is not None else "-"
        rows.append([j["id"], j["name"], j["class"], f"{j['range'][0]}-{j['range'][1]}",
                     f(j["submit_s"]), f(j["start_s"]), f(j["end_s"]), f(wait), f(j["run_s"]),
                     j["shrinks"], j["grows"], places, j["correct"]]
                    + ([j["requests"], j["requests_served"], j["releases"]] if evolving else [])
                    + [json.dumps(j["job_orders"])])
    return "\n".join(format_table(head, rows, "><<<>>>>>>><<" + (">>>" if evolving else "")
                                   + "<"))


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
        try:
            rate = pi_rate()
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        if not args.quiet:
            print(f"measured {rate:.3g} Pi samples/s on one place; jobs sized for "
                  f"S = {args.job_seconds:g} s", file=sys.stderr, flush=True)
        entries = demo_entries(demo_batch(rate, args.job_seconds))
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
