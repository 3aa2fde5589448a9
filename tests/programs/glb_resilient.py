"""A resilient GLB run during which places are killed with SIGKILL (tests/test_glb_resilient.py).

    python glb_resilient.py <kernel> <size> [--kill PLACE@SECONDS ...] [--static]
                            [--backup S] [--w W]

Kernels: ``uts`` (depth, seed 19), ``nqueens`` (N), ``bc`` (scale; the result is compared with
the sequential Brandes over the same graph), ``pi`` (samples; the exact hit count is the
sequential run's).  Each ``--kill`` kills that place (by its pid, learnt with
``at(p, os.getpid)``) that many seconds after the computation started; ``--kill`` with
``@shrink`` kills it in its ``pre_shrink`` broadcast (the place a shrink releases, on its way
out: set ``APGAS_COMMUNICATOR=schedule`` with a shrink).  Prints JSON lines: first
``{"pids": ..., "tree": ...}``, then the report: result, expected, correct, recovered places,
rounds, orders, places at the end, seconds, and when each kill happened.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

from apgaspy import at, here, places, run  # noqa: E402
from benchmarks.kernels.bc import BCBag, betweenness, rmat_graph  # noqa: E402
from benchmarks.kernels.nqueens import NQueensBag  # noqa: E402
from benchmarks.kernels.pi import PiBag  # noqa: E402
from benchmarks.kernels.uts import UTSBag  # noqa: E402
from benchmarks.nqueens import KNOWN as QUEENS  # noqa: E402
from benchmarks.uts import KNOWN as UTS  # noqa: E402
from glb import ArraySum, LongSum, compute_dynamic, compute_static, process_all  # noqa: E402


class Share:
    """bag_for of a static run (picklable): Pi, an equal share of the samples at each place;
    UTS, the whole tree at the last place (which holds all the work at first)."""

    def __init__(self, kernel: str, size: int) -> None:
        self.kernel, self.size = kernel, size

    def __call__(self, index: int, count: int):
        if self.kernel == "pi":
            return PiBag.share(self.size, 7, index, count)
        return UTSBag(19, self.size) if index == count - 1 else None  # all work far from 0


class BCResult:
    """result_factory of BC (picklable)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self) -> ArraySum:
        return ArraySum(self.n)


def _pids() -> dict[int, int]:
    return {p.id: at(p, os.getpid) for p in places()}


def _tree() -> list[int]:
    """Pids of every process below this one."""
    import psutil

    return [p.pid for p in psutil.Process().children(recursive=True)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kernel", choices=["uts", "nqueens", "bc", "pi"])
    parser.add_argument("size", type=int)
    parser.add_argument("--kill", action="append", default=[], metavar="PLACE@SECONDS")
    parser.add_argument("--static", action="store_true")
    parser.add_argument("--w", type=int, default=1)
    args = parser.parse_args()
    pids = _pids()
    print(json.dumps({"pids": pids, "tree": _tree()}), flush=True)
    kills = [(int(k.split("@")[0]), float(k.split("@")[1])) for k in args.kill]
    killed: list[tuple[int, float]] = []
    t0 = time.perf_counter()

    def killer() -> None:
        for p, delay in sorted(kills, key=lambda k: k[1]):
            time.sleep(max(0.0, t0 + delay - time.perf_counter()))  # kills at set times
            try:
                os.kill(pids[p], signal.SIGKILL)
            except ProcessLookupError:
                continue  # gone already (a shrink released it): not killed, not reported
            killed.append((p, round(time.perf_counter() - t0, 3)))

    assert here().id == 0
    k = args.kernel
    if k == "uts":
        expected = UTS[(19, args.size)]
        bag, factory = UTSBag(19, args.size), LongSum
    elif k == "nqueens":
        expected = QUEENS[args.size]
        bag, factory = NQueensBag(args.size), LongSum
    elif k == "bc":
        graph = rmat_graph(args.size)
        expected = betweenness(args.size)
        bag, factory = BCBag(graph), BCResult(graph.N)
    else:
        expected = process_all(PiBag(args.size, 7), LongSum(), 1 << 20).value()
        bag, factory = PiBag(args.size, 7), LongSum
    thread = threading.Thread(target=killer, daemon=True)
    t0 = time.perf_counter()
    thread.start()
    if args.static:
        res = compute_static(Share(k, args.size), factory, w=args.w, resilient=True,
                             bag_class=type(bag))
    else:
        res = compute_dynamic(bag, factory, w=args.w, resilient=True)
    value = res.value
    if k == "bc":
        correct = bool(np.allclose(value, expected, rtol=1e-9, atol=1e-9))
        value, expected = float(np.sum(value)), float(np.sum(expected))
    else:
        value, expected = int(value), int(expected)
        correct = value == expected
    print(json.dumps({"result": value, "expected": expected, "correct": correct,
                      "recovered": res.recovered, "rounds": res.rounds, "orders": res.orders,
                      "places": res.places, "seconds": res.seconds, "killed": killed,
                      "died": sorted(s.place for s in res.log if s.died)}), flush=True)


if __name__ == "__main__":
    run(main)
