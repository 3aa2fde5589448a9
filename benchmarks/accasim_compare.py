"""Job-by-job comparison of the scheduler's simulator with AccaSim on a synthetic SWF trace.

    python -m benchmarks.accasim_compare [--jobs 2000] [--nodes 64] [--seed 1]
        [--accasim-python /tmp/accasim-venv/bin/python] [--json] [--out DIR]

1. Writes a synthetic trace of rigid jobs on one-core nodes
   (:func:`scheduler.workload.synthetic_swf`: exponential arrivals, log-normal run times,
   requested times 1-3x the run time, sizes 1..nodes).
2. Simulates it with FCFS and EASY here (:mod:`scheduler.simulate`) and, when AccaSim
   (Galleguillos et al., "AccaSim: a customizable workload management simulator for job
   dispatching research in HPC systems", Cluster Computing 2020; PyPI ``accasim``) can be
   run, with AccaSim's ``FirstInFirstOut`` and ``EASYBackfilling`` dispatchers and its
   ``FirstFit`` allocator on the same machine.
3. Reports, per algorithm: how many jobs start at the same second in both, the mean waits,
   the first job whose start differs, and the run times of both simulators.
4. Audits both EASY schedules against EASY's rules (Lifka 1995), replaying each schedule
   event by event with an independent implementation (:func:`easy_audit`): at each time,
   does the schedule start exactly the jobs EASY starts (the queue's fitting prefix, then
   the backfills that do not delay the head's reservation)?  Each departure is classified:

   * ``head_held``: the head of the queue fits the free nodes and is not started;
   * ``reservation_broken``: a job behind the head starts although it would delay the head
     (it ends after the head's shadow time and uses more than the extra nodes);
   * ``missed_backfill``: a job EASY would backfill is not started;
   * ``late_head``: a job started after the reservation it got when it first became head
     (an EASY head never does: running jobs end by their requested times).

   Differences between the two schedules that come before AccaSim's first departure are
   counted too (``diffs_before_first_departure``): when that is 0, every difference is a
   consequence of AccaSim leaving EASY's rules.

AccaSim 1.1.3 runs on Python 3.11 only with ``collections.Mapping`` put back (done here at
run time) and jobs that request memory (the trace asks for 1,024 KB a processor).  Keep it out
of the project's environment: install it in its own virtual environment and name that
interpreter with ``--accasim-python`` (the script then runs itself there, in a worker mode
that imports only AccaSim and the standard library)::

    python3.11 -m venv /tmp/accasim-venv && /tmp/accasim-venv/bin/pip install accasim==1.1.3

Without AccaSim the script says so and reports this simulator's side alone.  Results and the
explanation of the EASY differences: docs/guides/simulation.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["AuditJob", "Departure", "easy_audit", "main", "run_accasim"]

ALGORITHMS = ("fcfs", "easy")
_ACCASIM_DISPATCHER = {"fcfs": "FirstInFirstOut", "easy": "EASYBackfilling"}


# ------------------------------------------------------------------------- the audit


@dataclass(frozen=True)
class AuditJob:
    """One rigid job of a schedule: SWF number, submit/start/end times (s), size (nodes),
    requested time (s)."""

    number: int
    submit: float
    start: float
    end: float
    size: int
    requested: float


@dataclass(frozen=True)
class Departure:
    """A time at which a schedule departs from EASY's rules.

    Attributes:
        time: the time (seconds).
        kind: ``head_held``, ``reservation_broken`` or ``missed_backfill`` (module docstring).
        jobs: the SWF numbers of the jobs concerned.
        head: EASY's blocked head at that time: the first queued job that does not fit once
            the queue's fitting prefix has started (SWF number; ``None`` when none).
        shadow: that head's shadow time at that moment (seconds; ``inf`` when none).
    """

    time: float
    kind: str
    jobs: tuple[int, ...]
    head: int | None
    shadow: float


def easy_audit(
    jobs: list[AuditJob], nodes: int
) -> tuple[list[Departure], dict[int, float]]:
    """Replay a rigid schedule on ``nodes`` identical nodes and check EASY's rules.

    An implementation of EASY (Lifka 1995) independent of :mod:`scheduler.algorithms`: at
    each submission, start or end time ``t`` (ends free their nodes first), the queue (jobs
    submitted by ``t`` and not started before ``t``, in submission order) starts its
    fitting prefix; the first job that does not fit, the head, gets the shadow time at which
    the free nodes plus the nodes of running jobs at their expected ends
    (``max(t, start + requested)``, in time order) first cover its size; a later job is
    backfilled when it fits and ends by the shadow time (``t + requested <= shadow``) or uses
    only nodes the head will not need then (the extra nodes).

    Args:
        jobs: the schedule (every job started and ended).
        nodes: the machine's size (nodes, one job unit each).

    Returns:
        The departures, in time order, and for each job that was ever a blocked head its
        first reservation (SWF number -> shadow time, seconds).

    Raises:
        ValueError: a job larger than the machine, or one that starts before its submission.
    """
    for job in jobs:
        if job.size > nodes or job.start < job.submit:
            raise ValueError(f"job {job.number}: size {job.size} on {nodes} nodes, "
                             f"submit {job.submit}, start {job.start}")
    times = sorted({j.submit for j in jobs} | {j.start for j in jobs} | {j.end for j in jobs})
    by_submit = sorted(jobs, key=lambda j: (j.submit, j.number))
    by_start = sorted(jobs, key=lambda j: j.start)
    by_end = sorted(jobs, key=lambda j: j.end)
    waiting: dict[int, AuditJob] = {}
    running: dict[int, AuditJob] = {}
    used = 0
    i_sub = i_start = i_end = 0
    departures: list[Departure] = []
    first_shadow: dict[int, float] = {}
    for t in times:
        while i_end < len(by_end) and by_end[i_end].end <= t:
            job = by_end[i_end]
            if running.pop(job.number, None) is not None:
                used -= job.size
            i_end += 1
        while i_sub < len(by_submit) and by_submit[i_sub].submit <= t:
            waiting[by_submit[i_sub].number] = by_submit[i_sub]
            i_sub += 1
        starting = set()
        while i_start < len(by_start) and by_start[i_start].start <= t:
            starting.add(by_start[i_start].number)
            i_start += 1
        # What EASY starts at t.
        free = nodes - used
        queue = list(waiting.values())
        expected: list[AuditJob] = []
        index = 0
        while index < len(queue) and queue[index].size <= free:
            expected.append(queue[index])
            free -= queue[index].size
            index += 1
        head, shadow, backfill = None, math.inf, []
        if index < len(queue):
            head = queue[index]
            releases = sorted(
                [(max(t, j.start + j.requested), j.size) for j in running.values()]
                + [(t + j.requested, j.size) for j in expected]
            )
            available, extra = free, 0
            for when, count in releases:
                available += count
                if available >= head.size:
                    shadow, extra = when, available - head.size
                    break
            first_shadow.setdefault(head.number, shadow)
            for job in queue[index + 1:]:
                if job.size > free:
                    continue
                if t + job.requested <= shadow:
                    backfill.append(job)
                    free -= job.size
                elif job.size <= extra:
                    backfill.append(job)
                    free -= job.size
                    extra -= job.size
        prefix = {j.number for j in expected}
        wanted = prefix | {j.number for j in backfill}
        head_number = head.number if head is not None else None
        held = sorted(prefix - starting)
        if held:
            departures.append(Departure(t, "head_held", tuple(held), head_number, shadow))
        broken = sorted(starting - wanted)
        if broken:
            departures.append(
                Departure(t, "reservation_broken", tuple(broken), head_number, shadow))
        missed = sorted((wanted - prefix) - starting)
        if missed:
            departures.append(
                Departure(t, "missed_backfill", tuple(missed), head_number, shadow))
        for number in starting:
            job = waiting.pop(number)
            running[number] = job
            used += job.size
    return departures, first_shadow


def _late_heads(jobs: list[AuditJob], first_shadow: dict[int, float]) -> list[int]:
    starts = {j.number: j.start for j in jobs}
    return sorted(n for n, s in first_shadow.items() if starts[n] > s + 1e-9)


# -------------------------------------------------------------------------- AccaSim


def _accasim_worker(trace: str, algorithm: str, nodes: int, workdir: str) -> None:
    """Worker mode, in AccaSim's interpreter: simulate and print one JSON line
    ``{"elapsed_s": ..., "schedule": {number: [start, end]}}``."""
    import collections
    import collections.abc

    for name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    import logging

    from accasim.base import scheduler_class
    from accasim.base.allocator_class import FirstFit
    from accasim.base.simulator_class import Simulator as AccaSimulator

    logging.disable(logging.CRITICAL)
    config = Path(workdir) / "system.config"
    config.write_text(json.dumps({
        "groups": {"node": {"core": 1, "mem": 10**12}},
        "resources": {"node": nodes},
        "equivalence": {"processor": {"core": 1}},
        "start_time": 0,
    }))
    dispatcher = getattr(scheduler_class, _ACCASIM_DISPATCHER[algorithm])(FirstFit())
    out_format = {
        "format": "{job_id};{start_time};{end_time}",
        "attributes": {"job_id": ("id", "str"), "start_time": ("start_time", "int"),
                       "end_time": ("end_time", "int")},
    }
    results = Path(workdir) / f"results-{algorithm}"
    started = time.perf_counter()
    sim = AccaSimulator(trace, str(config), dispatcher, RESULTS_FOLDER_NAME=str(results),
                        SCHEDULE_OUTPUT=out_format, statistics_output=False,
                        show_statistics=False)
    files = sim.start_simulation()
    elapsed = time.perf_counter() - started
    schedule = {}
    for line in Path(files["sched-"]).read_text().splitlines():
        if line.strip():
            number, start, end = line.strip().rstrip(";").split(";")[:3]
            schedule[int(number)] = [float(start), float(end)]
    print(json.dumps({"elapsed_s": elapsed, "schedule": schedule}))


def run_accasim(
    python: str, trace: Path, algorithm: str, nodes: int, workdir: Path, timeout_s: float = 1800
) -> dict[str, Any]:
    """Run AccaSim on ``trace`` in the interpreter ``python`` (this file's worker mode).

    Returns ``{"elapsed_s": float, "schedule": {number: (start_s, end_s)}}``.

    Raises:
        RuntimeError: AccaSim could not be run there (its error output is in the message).
    """
    proc = subprocess.run(
        [python, __file__, "--accasim-worker", str(trace), algorithm, str(nodes), str(workdir)],
        capture_output=True, text=True, timeout=timeout_s, cwd=workdir, check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"AccaSim ({python}) failed: {(proc.stderr or proc.stdout)[-2000:]}")
    data = json.loads(lines[-1])
    data["schedule"] = {int(k): tuple(v) for k, v in data["schedule"].items()}
    return data


def _accasim_python(requested: str | None) -> tuple[str | None, str]:
    """The interpreter to run AccaSim with, and why (or why none)."""
    candidates = [requested] if requested else [sys.executable, "/tmp/accasim-venv/bin/python"]
    for python in candidates:
        if not python or not Path(python).exists():
            continue
        probe = subprocess.run(
            [python, "-c", "import importlib.util as u; print(bool(u.find_spec('accasim')))"],
            capture_output=True, text=True, check=False)
        if probe.stdout.strip() == "True":
            return python, f"AccaSim importable by {python}"
    return None, ("AccaSim is not importable (tried " + ", ".join(c for c in candidates if c)
                  + "): install it in its own venv, e.g. python3.11 -m venv /tmp/accasim-venv "
                  "&& /tmp/accasim-venv/bin/pip install accasim==1.1.3, and pass "
                  "--accasim-python /tmp/accasim-venv/bin/python")


# ----------------------------------------------------------------------------- main


def _ours(trace: Path, algorithm: str, nodes: int) -> tuple[dict[int, tuple[float, float]], float]:
    from scheduler.simulate import SimConfig, Simulator
    from scheduler.workload import swf_workload

    started = time.perf_counter()
    workload = swf_workload(trace, total_nodes=nodes)
    result = Simulator(algorithm, workload, SimConfig(total_nodes=nodes)).run()
    elapsed = time.perf_counter() - started
    return {int(r.size): (r.start_s, r.end_s) for r in result.records}, elapsed  # type: ignore[arg-type]


def _audit_jobs(trace: Path, schedule: dict[int, tuple[float, float]]) -> list[AuditJob]:
    from scheduler.workload import read_swf

    out = []
    for job in read_swf(trace):
        if job.number in schedule:
            start, end = schedule[job.number]
            out.append(AuditJob(job.number, job.submit_s, start, end, job.processors,
                                max(job.requested_s or job.run_s, job.run_s)))
    return out


def _summary(departures: list[Departure], late: list[int]) -> dict[str, Any]:
    kinds: dict[str, dict[str, int]] = {}
    for d in departures:
        entry = kinds.setdefault(d.kind, {"times": 0, "jobs": 0})
        entry["times"] += 1
        entry["jobs"] += len(d.jobs)
    return {
        "departures": kinds,
        "late_heads": len(late),
        "first_departure": asdict(departures[0]) if departures else None,
    }


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Run the comparison the options describe; return the report (module docstring)."""
    from scheduler.workload import read_swf, synthetic_swf

    out_dir = Path(args.out or tempfile.mkdtemp(prefix="accasim-compare-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    trace = synthetic_swf(out_dir / f"synthetic-{args.jobs}-seed{args.seed}.swf", jobs=args.jobs,
                          nodes=args.nodes, seed=args.seed,
                          mean_interarrival_s=args.mean_interarrival_s)
    submits = {j.number: j.submit_s for j in read_swf(trace)}
    python, why = _accasim_python(args.accasim_python)
    report: dict[str, Any] = {
        "trace": {"path": str(trace), "jobs": args.jobs, "nodes": args.nodes, "seed": args.seed,
                  "mean_interarrival_s": args.mean_interarrival_s},
        "accasim": why,
        "algorithms": {},
    }
    for algorithm in args.algorithms:
        ours, ours_s = _ours(trace, algorithm, args.nodes)
        row: dict[str, Any] = {
            "ours_elapsed_s": round(ours_s, 3),
            "ours_mean_wait_s": sum(s - submits[n] for n, (s, _) in ours.items()) / len(ours),
        }
        if algorithm == "easy":
            jobs = _audit_jobs(trace, ours)
            departures, shadows = easy_audit(jobs, args.nodes)
            row["ours_audit"] = _summary(departures, _late_heads(jobs, shadows))
        if python is not None:
            acc = run_accasim(python, trace, algorithm, args.nodes, out_dir)
            theirs = acc["schedule"]
            same = [n for n in ours if n in theirs and ours[n][0] == theirs[n][0]]
            differ = sorted((n for n in ours if n in theirs and ours[n][0] != theirs[n][0]),
                            key=lambda n: (min(ours[n][0], theirs[n][0]), n))
            row.update(
                accasim_elapsed_s=round(acc["elapsed_s"], 3),
                accasim_mean_wait_s=sum(s - submits[n] for n, (s, _) in theirs.items())
                / len(theirs),
                jobs_compared=len(set(ours) & set(theirs)),
                same_start=len(same),
                first_difference=(
                    {"job": differ[0], "ours_start_s": ours[differ[0]][0],
                     "accasim_start_s": theirs[differ[0]][0]} if differ else None),
            )
            if algorithm == "easy":
                jobs = _audit_jobs(trace, theirs)
                departures, shadows = easy_audit(jobs, args.nodes)
                row["accasim_audit"] = _summary(departures, _late_heads(jobs, shadows))
                first = departures[0].time if departures else math.inf
                row["diffs_before_first_departure"] = sum(
                    1 for n in differ if min(ours[n][0], theirs[n][0]) < first)
        report["algorithms"][algorithm] = row
    return report


def _print(report: dict[str, Any]) -> None:
    t = report["trace"]
    print(f"trace: {t['jobs']} rigid jobs on {t['nodes']} one-core nodes, seed {t['seed']} "
          f"({t['path']})")
    print(report["accasim"])
    for algorithm, row in report["algorithms"].items():
        print(f"\n{algorithm}: here {row['ours_elapsed_s']:.2f} s, mean wait "
              f"{row['ours_mean_wait_s']:,.0f} s", end="")
        if "accasim_elapsed_s" in row:
            print(f"; AccaSim {row['accasim_elapsed_s']:.2f} s, mean wait "
                  f"{row['accasim_mean_wait_s']:,.0f} s")
            print(f"  same start time: {row['same_start']} of {row['jobs_compared']} jobs")
            if row["first_difference"]:
                d = row["first_difference"]
                print(f"  first difference: job {d['job']} starts at {d['ours_start_s']:g} s "
                      f"here, {d['accasim_start_s']:g} s in AccaSim")
        else:
            print()
        for side in ("ours", "accasim"):
            audit = row.get(f"{side}_audit")
            if audit is None:
                continue
            name = "here" if side == "ours" else "AccaSim"
            kinds = ", ".join(f"{k} {v['times']} times ({v['jobs']} jobs)"
                              for k, v in audit["departures"].items()) or "none"
            print(f"  EASY audit, {name}: departures from EASY's rules: {kinds}; heads "
                  f"started after their first reservation: {audit['late_heads']}")
            if audit["first_departure"]:
                d = audit["first_departure"]
                print(f"    first: {d['kind']} at {d['time']:g} s, jobs {list(d['jobs'])}, "
                      f"head {d['head']} (shadow {d['shadow']:g} s)")
        if "diffs_before_first_departure" in row:
            print(f"  differences before AccaSim's first departure: "
                  f"{row['diffs_before_first_departure']}")


def main(argv: list[str] | None = None) -> int:
    """Command line (module docstring).  Returns 0."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--accasim-worker"]:
        trace, algorithm, nodes, workdir = argv[1:5]
        _accasim_worker(trace, algorithm, int(nodes), workdir)
        return 0
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.accasim_compare",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=2000, help="jobs in the trace (2000)")
    p.add_argument("--nodes", type=int, default=64, help="one-core nodes (64)")
    p.add_argument("--seed", type=int, default=1, help="seed of the trace (1)")
    p.add_argument("--mean-interarrival-s", type=float, default=3000.0,
                   help="mean time between submissions, seconds (3000)")
    p.add_argument("--algorithms", default="fcfs,easy",
                   type=lambda s: [a for a in s.split(",") if a in ALGORITHMS] or
                   p.error(f"--algorithms: choose among {', '.join(ALGORITHMS)}"),
                   help="comma-separated, among fcfs,easy (both)")
    p.add_argument("--accasim-python", metavar="PYTHON",
                   help="interpreter that can import accasim (default: this one, or "
                        "/tmp/accasim-venv/bin/python)")
    p.add_argument("--out", metavar="DIR", help="where the trace and AccaSim's files go")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.nodes < 1:
        p.error("--jobs and --nodes must be >= 1")
    report = compare(args)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        _print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
