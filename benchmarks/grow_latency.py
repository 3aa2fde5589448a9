"""Grow latency with the compiled kernels: from a grow order to the first work a new place runs.

    python -m benchmarks.grow_latency [--repeats 3] [--depth 14] [--cold] [--no-write]

This script plays the scheduler (as :mod:`benchmarks.malleability` does): it starts a GLB UTS
job (seed 19, ``--depth``) on ``--places`` logical hosts (default 1), waits until the
computation runs, sends ``grow 1``, and measures, in wall-clock seconds from the moment the
order is sent:

* ``grown_s``: until the job's ``growTimeAPGAS`` notification (the new place runs and GLB
  has made it a worker);
* ``first_work_s``: until the new place has finished its first ``UTSBag.process`` call (its
  first loot arrived, its kernels loaded, one call of work done, about a millisecond with
  the compiled kernel): the figure that a grow must keep short;
* ``new_place_cpu_s``, ``new_place_run_delay_s``: the new place's CPU time up to then, and the
  time its threads waited for a CPU (Linux; ``None`` elsewhere).  On a shared machine the
  wall-clock figures mostly measure the neighbours; these two say how much of them was the
  place's own work.

Places: on a cluster a grown place gets a node of its own.  On a machine with few cores, the
job's places already fill them, so a new place also waits for a CPU: with the default of one
place on a 2-core machine the new place has the second core; ``--places 2`` shows the
contended case (the new place then shares two cores with two busy workers).

Warm (the default): the job warms the kernels up at every place before the computation
(:func:`benchmarks.kernels.warm_up`, as the benchmarks' command line does), so the compiled
kernels are in numba's on-disk cache and the new place loads them.  ``--cold``: a fresh, empty
cache and no warm-up, so the places compile the kernels at their first ``process`` call, the
new one included: what a grow would cost without the cache.

Results: ``benchmarks/results/grow-latency[-cold].json``.  ``APGAS_KERNELS`` is passed on to
the job (the figures mean something with ``numba``; with ``numpy`` nothing is compiled).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._cli import ENVIRONMENT_HELP, positive_int
from ._results import write_result
from .kernels.uts import UTSBag

_PROBE = "APGAS_GROW_PROBE_DIR"
_first_work: float | None = None


def run_delay_s() -> float | None:
    """Seconds this process's threads have waited for a CPU while runnable (the run delay of
    Linux's ``/proc/<pid>/task/<tid>/schedstat``, second field, summed over the threads), or
    ``None`` where that file does not exist.  On a shared machine this is the time that other
    processes took from this one."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        except (OSError, IndexError, ValueError):
            return None
    return total / 1e9


class ProbeBag(UTSBag):
    """A UTS bag that notes, once per process, when its first ``process`` call returned:
    a line ``place wall_clock cpu_s run_delay_s`` in a file ``<pid>`` of the directory
    ``$APGAS_GROW_PROBE_DIR`` (``cpu_s``: the process's CPU time so far, ``time.process_time``;
    ``run_delay_s``: :func:`run_delay_s`, or ``nan``)."""

    __slots__ = ()

    def process(self, n: int, result: Any) -> None:  # noqa: D102
        global _first_work
        super().process(n, result)
        if _first_work is None:
            _first_work = time.time()
            cpu, delay = time.process_time(), run_delay_s()
            from apgaspy import here

            probe = os.environ.get(_PROBE)
            if probe:
                Path(probe, str(os.getpid())).write_text(
                    f"{here().id} {_first_work!r} {cpu!r} "
                    f"{float('nan') if delay is None else delay!r}\n")


def _job(depth: int, warm: bool) -> None:
    """The job's main at place 0: warm up (or not), say so on stdout, compute, print JSON."""
    from apgaspy import async_at, finish, places
    from benchmarks.kernels import warm_up
    from benchmarks.kernels._backend import backend, warm_up_modules
    from benchmarks.uts import KNOWN
    from glb import LongSum, compute_dynamic

    if warm:
        warm_up()
        with finish():
            for p in places()[1:]:
                async_at(p, warm_up, warm_up_modules())
    print("computing", flush=True)
    res = compute_dynamic(ProbeBag(19, depth), LongSum, malleable=True)
    print(json.dumps({"result": res.value, "correct": res.value == KNOWN.get((19, depth)),
                      "seconds": res.seconds, "orders": res.orders, "kernels": backend(),
                      "log": [s.as_dict() for s in res.log]}),
          flush=True)


def one_run(depth: int, cold: bool, delay_s: float = 0.3, places: int = 1) -> dict[str, Any]:
    """One job on ``places`` logical hosts, one grow order ``delay_s`` seconds into the
    computation; the timings (s)."""
    from communicators.testing import SchedulerEndpoint

    sched = SchedulerEndpoint()
    with tempfile.TemporaryDirectory() as tmp:
        node_file = Path(tmp) / "nodes"
        node_file.write_text("".join(f"127.0.1.{i}\n" for i in range(1, places + 1)))
        probe = Path(tmp) / "probe"
        probe.mkdir()
        env = {**os.environ, **sched.env(), "NODE_FILE": str(node_file),
               "NODES": str(places),
               "PYTHONUNBUFFERED": "1", _PROBE: str(probe)}
        env.pop("APGAS_PLACES", None)
        if cold:
            env["NUMBA_CACHE_DIR"] = str(Path(tmp) / "numba-cache")
        cmd = [sys.executable, "-m", "benchmarks.grow_latency", "--job", str(depth)]
        if cold:
            cmd.append("--no-warm-up")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            sched.wait_for("APGAS-Ready", timeout=120)
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "computing":
                raise RuntimeError(f"the job said {line!r}")
            time.sleep(delay_s)
            t_order = time.time()
            reply = sched.order(("127.0.1.1", sched.port), f"grow 1 127.0.1.{places + 1}\n")
            if reply:
                raise RuntimeError(f"grow refused: {reply}")
            sched.wait_for("growTimeAPGAS", timeout=600,
                           skip=("preGrowTimeGLB", "postGrowTimeGLB"))
            t_grown = time.time()
            out, _ = proc.communicate(timeout=900)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            sched.close()
        report = json.loads(out.strip().splitlines()[-1])
        firsts: dict[int, tuple[float, float, float]] = {}
        for f in probe.iterdir():
            place, stamp, cpu, delay = f.read_text().split()
            firsts[int(place)] = (float(stamp), float(cpu), float(delay))
    new = [p for grow in report["orders"] if grow[0] == "grow" for p in grow[1]]
    first = firsts.get(new[0]) if new else None
    return {"cold": cold, "depth": depth, "places": places, "correct": report["correct"],
            "kernels": report["kernels"], "grown_s": t_grown - t_order,
            "first_work_s": None if first is None else first[0] - t_order,
            "new_place_cpu_s": None if first is None else first[1],
            "new_place_run_delay_s": None if first is None or first[2] != first[2]
            else first[2],
            "computation_s": report["seconds"]}


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.3f}"


def main(argv: list[str] | None = None) -> int:
    """Run, print a line per run and the medians, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.grow_latency",
        description=__doc__.split("\n\n")[0],
        epilog=ENVIRONMENT_HELP)
    parser.add_argument("--repeats", type=int, default=3, help="runs to take the median of")
    parser.add_argument("--depth", type=int, default=None,
                        help="UTS depth of the job (default 14 warm, 13 cold)")
    parser.add_argument("--cold", action="store_true",
                        help="empty kernel cache and no warm-up: the places compile")
    parser.add_argument("--places", type=positive_int, default=1,
                        help="places of the job before the grow (default 1: the new place "
                             "has a core of its own on a 2-core machine)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument("--job", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-warm-up", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job is not None:
        from apgaspy import run

        run(_job, args.job, not args.no_warm_up)
        return 0
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    depth = args.depth or (13 if args.cold else 14)
    runs = []
    for _ in range(args.repeats):
        r = one_run(depth, args.cold, places=args.places)
        runs.append(r)
        print(f"{'cold' if args.cold else 'warm'} d={depth}, {args.places} -> "
              f"{args.places + 1} places: grown {r['grown_s']:.3f} s, "
              f"first work {_s(r['first_work_s'])} s (new place: CPU "
              f"{_s(r['new_place_cpu_s'])} s, waited for a CPU "
              f"{_s(r['new_place_run_delay_s'])} s), correct {r['correct']}, "
              f"kernels {r['kernels']}", flush=True)
    if any(r["correct"] is not True or r["first_work_s"] is None for r in runs):
        print("a run was wrong or its new place never worked", file=sys.stderr)
        return 1
    median = {k: statistics.median(r[k] for r in runs) for k in ("grown_s", "first_work_s")}
    print(f"median: grown {median['grown_s']:.3f} s, first work {median['first_work_s']:.3f} s")
    if not args.no_write:
        suffix = ("-cold" if args.cold else "") + ("" if args.places == 1 else
                                                    f"-{args.places}places")
        path = write_result("grow-latency" + suffix,
                            {"params": vars(args), "median": median, "runs": runs,
                             "target_first_work_s": 1.0})
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
