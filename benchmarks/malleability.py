"""Malleability benchmark: start-up until a job accepts orders, grow and shrink times.

    python -m benchmarks.malleability [--repeats 3] [--initial 2]

This script plays the scheduler (``communicators.testing``): it starts
``benchmarks/_malleable_job.py`` with ``NODE_FILE`` listing ``--initial`` logical hosts
(127.0.1.x), times the job's start until its ``APGAS-Ready`` notification arrives, then sends
grow and shrink orders of 1, 2, 4 and 16 hosts over TCP.  Each order's time is split into the
runtime's share and the handler's (the handler here does nothing, so its share is the cost
of the calls); the order's whole time is what the job reports in its ``growTimeAPGAS`` /
``shrinkTimeAPGAS`` notification.  Results: ``benchmarks/results/malleability.json``.

Targets on the 2-core development machine: ready within 1.5 s, grow of 4 places within 1.0 s,
shrink of 2 places within 0.5 s.  APGAS for Java (Finnerty et al. 2024): 6.04 s
to accept orders, 14.55 s to grow 3.8 places, 7.41 s to shrink 2.55 places on average.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from communicators.testing import SchedulerEndpoint

from ._cli import ENVIRONMENT_HELP
from ._results import write_result
from .references import pick

SIZES = (1, 2, 4, 16)
# GLB's own phase notifications (a GLB job sends them besides the runtime's)
_GLB_PHASES = ("preGrowTimeGLB", "postGrowTimeGLB", "preShrinkTimeGLB", "postShrinkTimeGLB")


def _host(i: int) -> str:
    return f"127.0.1.{i}"


def _one_run(initial: int, glb_depth: int | None = None,
             sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    sched = SchedulerEndpoint()
    with tempfile.TemporaryDirectory() as tmp:
        node_file = Path(tmp) / "nodes"
        node_file.write_text("".join(f"{_host(i + 1)}\n" for i in range(initial)))
        env = {**os.environ, **sched.env(), "NODE_FILE": str(node_file),
               "NODES": str(initial), "PYTHONUNBUFFERED": "1"}
        env.pop("APGAS_PLACES", None)
        fresh = iter(range(initial + 1, 256))
        try:
            return measure_orders(
                lambda: subprocess.Popen([sys.executable, "-m", "benchmarks._malleable_job",
                                          *(["--glb", str(glb_depth)] if glb_depth else [])],
                                         env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, text=True,
                                         start_new_session=True),
                sched, (_host(1), sched.port),
                lambda n: [_host(next(fresh)) for _ in range(n)], sizes,
                stop_timeout=600 if glb_depth else 60)
        finally:
            sched.close()


def measure_orders(start_job: Callable[[], subprocess.Popen[str]], sched: SchedulerEndpoint,
                   job: tuple[str, int], new_hosts: Callable[[int], list[str]],
                   sizes: Sequence[int] = SIZES,
                   send: Callable[[tuple[str, int], str], list[str]] | None = None,
                   stop_timeout: float = 60) -> dict[str, Any]:
    """Start ``benchmarks/_malleable_job.py`` and time it: start until ``APGAS-Ready``, then
    a grow onto ``new_hosts(n)`` and a shrink of ``n`` hosts for each ``n`` of ``sizes``.

    Args:
        start_job: starts the job (stdin and stdout pipes, text) and returns it.
        sched: the scheduler endpoint the job notifies.
        job: the job's order address (its first host, ``SCHEDULER_PORT``).
        new_hosts: the hosts of a grow of ``n``.
        send: sends an order and returns the reply lines (default ``sched.order``).
        stop_timeout: seconds the job may take to end after the orders (a GLB job computes
            on).

    Returns:
        ``{"ready_s": seconds, "orders": [{"kind", "hosts", "seen_s", "total_s",
        "runtime_s", "handler_s"}, ...], "glb": the job's GLB run or None}``, all in
        seconds.

    Raises:
        RuntimeError: an order was refused.
    """
    send = send or sched.order
    t0 = time.monotonic()
    proc = start_job()
    try:
        ready_at, _ = sched.wait_for_timed("APGAS-Ready", timeout=60)
        orders: list[dict[str, Any]] = []
        for n in sizes:
            t = time.monotonic()
            reply = send(job, f"grow {n} {' '.join(new_hosts(n))}\n")
            if reply:
                raise RuntimeError(f"grow {n} failed: {reply}")
            orders.append({"kind": "grow", "hosts": n, "seen_s": time.monotonic() - t})
            sched.wait_for("growTimeAPGAS", skip=_GLB_PHASES)
            t = time.monotonic()
            reply = send(job, f"shrink {n}\n")
            if len(reply) != n or any(r.startswith("ERROR") for r in reply):
                raise RuntimeError(f"shrink {n} failed: {reply}")
            orders.append({"kind": "shrink", "hosts": n, "seen_s": time.monotonic() - t})
            sched.wait_for("shrinkTimeAPGAS", skip=_GLB_PHASES)
        out, _ = proc.communicate("stop\n", timeout=stop_timeout)
        sched.wait_for("APGAS-Disabled", timeout=10, skip=_GLB_PHASES)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    final = json.loads(out.strip().splitlines()[-1])
    for o, r in zip(orders, final["reports"], strict=True):
        o["total_s"] = r["total_ns"] / 1e9
        o["handler_s"] = r["handler_ns"] / 1e9
        o["runtime_s"] = (r["total_ns"] - r["handler_ns"]) / 1e9
    return {"ready_s": ready_at - t0, "orders": orders, "glb": final.get("glb")}


def summarize(runs: list[dict[str, Any]], sizes: Sequence[int] = SIZES) -> dict[str, Any]:
    """Medians over ``runs`` of :func:`measure_orders`, printed as a table."""
    summary: dict[str, Any] = {"ready_s": statistics.median(r["ready_s"] for r in runs)}
    print(f"ready (start until APGAS-Ready): {summary['ready_s']:.3f} s")
    print(f"{'order':12}{'total s':>10}{'runtime s':>12}{'handler s':>12}")
    for i, (kind, n) in enumerate((k, n) for n in sizes for k in ("grow", "shrink")):
        cell = {key: statistics.median(r["orders"][i][key] for r in runs)
                for key in ("total_s", "runtime_s", "handler_s", "seen_s")}
        summary[f"{kind}_{n}"] = cell
        print(f"{kind + ' ' + str(n):12}{cell['total_s']:10.3f}{cell['runtime_s']:12.3f}"
              f"{cell['handler_s']:12.4f}")
    return summary


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print a table, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.malleability",
        description=__doc__.split("\n\n")[0],
        epilog=ENVIRONMENT_HELP)
    parser.add_argument("--repeats", type=int, default=3, help="runs to take the median of")
    parser.add_argument("--initial", type=int, default=2, help="hosts (places) at start")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument("--glb", type=int, default=None, metavar="DEPTH",
                        help="order a job that runs UTS of this depth on GLB (grow and shrink "
                             "of 1 and 2 places during the run): GLB's handler share; writes "
                             "malleability-glb.json")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.initial < 1:
        parser.error("--repeats and --initial must be at least 1")
    if args.glb is not None and not 1 <= args.glb <= 20:
        parser.error("--glb takes a UTS depth of 1 to 20")
    if args.glb is not None:
        runs = [_one_run(args.initial, args.glb, (1, 2)) for _ in range(args.repeats)]
        wrong = [r["glb"] for r in runs if r["glb"]["correct"] is not True]
        if wrong:
            raise RuntimeError(f"UTS on GLB gave a wrong count while orders came: {wrong}")
        summary = summarize(runs, (1, 2))
        if not args.no_write:
            path = write_result("malleability-glb", {
                "params": vars(args), "median": summary, "runs": runs,
                **pick("java_apgas_grow", "java_apgas_shrink"),
            })
            print(f"wrote {path}")
        return 0
    runs = [_one_run(args.initial) for _ in range(args.repeats)]
    summary = summarize(runs)
    if not args.no_write:
        path = write_result("malleability", {
            "params": vars(args), "median": summary, "runs": runs,
            **pick("ready_s", "grow_4_s", "shrink_2_s", "java_apgas_ready", "java_apgas_grow",
                   "java_apgas_shrink"),
        })
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
