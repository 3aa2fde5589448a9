"""Runtime micro-benchmarks: ``at`` round trip and ``async_at`` throughput, apgaspy against
``mpi4py.futures.MPIPoolExecutor``, measured in one run on this machine.

    python -m benchmarks.runtime [--rounds 2000] [--tasks 20000] [--repeats 5]

Figures (written to ``benchmarks/results/runtime.json``):

* ``at_rtt_us``: median round trip of ``at(place(1), noop)`` from place 0, microseconds.
* ``async_tasks_per_s``: empty ``async_at(place(1), noop)`` tasks in one ``finish`` from
  place 0, divided by the time until the finish returns (median of the repeats).
* ``mpi4py_futures``: the same two figures for ``MPIPoolExecutor(max_workers=1)``:
  ``submit(noop).result()`` round trip and a burst of ``submit`` then waiting for all.
* ``bare_pyzmq``: the floor under any runtime built on pyzmq: a ping-pong of one 100-byte
  message between two processes over TCP loopback (PUSH/PULL each way, as apgaspy's places
  connect), a blocking ``recv`` in each main thread, no serialization, no threads of ours.
  Measured before and after apgaspy; the figure is the median of both runs.

Guard and goal (``benchmarks.references.TARGETS``), both judged in this one run:

* regression guard: the ``at`` round trip within 2.5× the bare pyzmq ping-pong of the same
  run (``at_over_bare``); printed as PASS or FAIL and recorded under ``guard`` in the JSON;
  ``--check`` makes a FAIL the exit status (1);
* goal: at least 60,000 empty tasks/s.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Callable
from typing import Any

from apgaspy import async_at, at, finish, place, run

from ._results import write_result
from ._tasks import noop
from .references import TARGETS, pick


def guard(at_over_bare: float) -> dict[str, Any]:
    """The ``at`` round-trip guard judged on one run's ratio.

    Args:
        at_over_bare: ``at`` round trip over the bare pyzmq ping-pong of the same run (× ≥ 0).

    Returns:
        ``{"name", "ratio", "limit", "pass", "text"}``; ``pass`` is ``ratio <= limit``, the
        limit being ``TARGETS["at_over_bare"]`` (2.5×).
    """
    limit = TARGETS["at_over_bare"]["value"]
    ok = at_over_bare <= limit
    return {"name": "at round trip within the guard over bare pyzmq", "ratio": at_over_bare,
            "limit": limit, "pass": ok,
            "text": f"{'PASS' if ok else 'FAIL'}: at round trip {at_over_bare:.2f}× bare pyzmq "
                    f"({'≤' if ok else '>'} {limit:g}×, same run)"}


def _measure(round_trip: Callable[[], Any], burst: Callable[[int], Any], rounds: int,
             tasks: int, repeats: int) -> dict[str, Any]:
    """Median round trip and burst throughput of one peer.

    Args:
        round_trip: runs one empty task remotely and waits for it.
        burst: runs ``n`` empty tasks remotely and waits for all of them.
    """
    for _ in range(200):  # warm up connections and code paths
        round_trip()
    rtts = []
    for _ in range(rounds):
        t = time.perf_counter()
        round_trip()
        rtts.append(time.perf_counter() - t)
    rates = []
    for _ in range(repeats):
        t = time.perf_counter()
        burst(tasks)
        rates.append(tasks / (time.perf_counter() - t))
    return {
        "at_rtt_us": statistics.median(rtts) * 1e6,
        "at_rtt_p90_us": statistics.quantiles(rtts, n=10)[-1] * 1e6,
        "async_tasks_per_s": statistics.median(rates),
        "async_tasks_per_s_all": rates,
    }


def _apgaspy_burst(n: int) -> None:
    p1 = place(1)
    with finish():
        for _ in range(n):
            async_at(p1, noop)


def _measure_apgaspy(rounds: int, tasks: int, repeats: int) -> dict[str, Any]:
    p1 = place(1)
    return _measure(lambda: at(p1, noop), _apgaspy_burst, rounds, tasks, repeats)


def _measure_mpi4py(rounds: int, tasks: int, repeats: int) -> dict[str, Any]:
    from mpi4py.futures import MPIPoolExecutor, wait

    with MPIPoolExecutor(max_workers=1) as pool:
        return _measure(lambda: pool.submit(noop).result(),
                        lambda n: wait([pool.submit(noop) for _ in range(n)]),
                        rounds, tasks, repeats)


def _echo(port_in: int, port_out: int) -> None:
    """The far side of the bare ping-pong: PULL on ``port_in``, PUSH every message back."""
    import zmq

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(f"tcp://127.0.0.1:{port_in}")
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port_out}")
    while (m := pull.recv()) != b"":
        push.send(m)
    push.close(0)
    pull.close(0)
    ctx.term()


def _measure_bare_pyzmq(rounds: int) -> dict[str, Any]:
    """Median round trip of a 100-byte pyzmq ping-pong with a second process, microseconds."""
    import zmq

    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    port_out = pull.bind_to_random_port("tcp://127.0.0.1")
    probe = ctx.socket(zmq.PULL)
    port_in = probe.bind_to_random_port("tcp://127.0.0.1")
    probe.close(0)  # a free port for the echo process to bind
    echo = multiprocessing.get_context("spawn").Process(target=_echo, args=(port_in, port_out))
    echo.start()
    push = ctx.socket(zmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port_in}")
    msg = b"x" * 100
    try:
        for _ in range(200):  # also waits until the echo process is up
            push.send(msg)
            pull.recv()
        rtts = []
        for _ in range(rounds):
            t = time.perf_counter()
            push.send(msg)
            pull.recv()
            rtts.append(time.perf_counter() - t)
        push.send(b"")
    finally:
        echo.join(10)
        if echo.is_alive():
            echo.kill()
        push.close(0)
        pull.close(0)
        ctx.term()
    return {"rtt_us": statistics.median(rtts) * 1e6,
            "rtt_p90_us": statistics.quantiles(rtts, n=10)[-1] * 1e6}


def main(argv: list[str] | None = None) -> int:
    """Run both measurements, print a table and write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.runtime",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2000, help="round trips to time")
    parser.add_argument("--tasks", type=int, default=20000, help="tasks in one burst")
    parser.add_argument("--repeats", type=int, default=5, help="bursts to time")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 when the at round-trip guard fails")
    args = parser.parse_args(argv)
    for name in ("rounds", "tasks", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    bare_runs = [_measure_bare_pyzmq(args.rounds)]
    ours = run(_measure_apgaspy, args.rounds, args.tasks, args.repeats, places=2)
    bare_runs.append(_measure_bare_pyzmq(args.rounds))
    theirs = _measure_mpi4py(args.rounds, args.tasks, args.repeats)
    bare = {"rtt_us": statistics.median(b["rtt_us"] for b in bare_runs),
            "rtt_us_runs": [b["rtt_us"] for b in bare_runs]}
    ours["at_over_bare"] = ours["at_rtt_us"] / bare["rtt_us"]
    print(f"{'':24}{'apgaspy':>12}{'mpi4py.futures':>16}{'bare pyzmq':>12}")
    print(f"{'round trip (us)':24}{ours['at_rtt_us']:12.0f}{theirs['at_rtt_us']:16.0f}"
          f"{bare['rtt_us']:12.0f}")
    print(f"{'empty tasks/s':24}{ours['async_tasks_per_s']:12.0f}"
          f"{theirs['async_tasks_per_s']:16.0f}")
    verdict = guard(ours["at_over_bare"])
    print(verdict["text"])
    if not args.no_write:
        path = write_result("runtime", {
            "params": vars(args),
            "apgaspy": ours,
            "mpi4py_futures": theirs,
            "bare_pyzmq": bare,
            "guard": verdict,
            **pick("at_over_bare", "async_tasks_per_s", "peers_round_trip_us",
                   "peers_tasks_per_s"),
        })
        print(f"wrote {path}")
    return 1 if args.check and not verdict["pass"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
