"""GLB with several workers a place (tests/test_glb_workers.py): the four benchmarks' bags at
W = 1, 2, 3 in one job, then a bag that raises in one worker.

    python glb_workers.py [--raising-only]

``APGAS_KERNELS`` picks the kernels.  Prints one JSON line per computation: the bag, W, the
result against the exact answer (BC: the sequential Brandes within float rounding; Pi: the
sequential hit count of the same streams), each place's ``workers`` and ``per_worker``
statistics, and the GLB worker threads still alive at each place afterwards.  The last line
is the raising bag's: the exceptions the computation failed with, how long it took to fail,
and the threads left.
"""

import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import numpy as np  # noqa: E402

from apgaspy import MultipleException, at, here, places, run  # noqa: E402
from benchmarks.kernels._backend import backend  # noqa: E402
from benchmarks.kernels.bc import BCBag, betweenness, rmat_graph  # noqa: E402
from benchmarks.kernels.nqueens import NQueensBag  # noqa: E402
from benchmarks.kernels.pi import PiBag  # noqa: E402
from benchmarks.kernels.uts import UTSBag  # noqa: E402
from benchmarks.nqueens import KNOWN as QUEENS  # noqa: E402
from benchmarks.uts import KNOWN as UTS  # noqa: E402
from glb import ArraySum, Bag, LongSum, compute_dynamic, process_all  # noqa: E402


class BCResult:
    """result_factory of BC (picklable)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __call__(self) -> ArraySum:
        return ArraySum(self.n)


class Raising(Bag):
    """Counts the integers of [lo, hi) in pure Python; raises in ``process`` when it runs on
    a worker other than 0 at place 0 (a thread named ``glb-worker-0-<i>``)."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def process(self, n, result):
        if threading.current_thread().name.startswith("glb-worker-0-"):
            raise ValueError("a bag failed on purpose in a worker of place 0")
        k = min(n, self.hi - self.lo)
        time.sleep(0.0005)  # some time per call, so that the others get to run
        result.add(k)
        self.lo += k

    def split(self, take_all):
        half = (self.hi - self.lo) // 2
        if half == 0 and not (take_all and self.hi > self.lo):
            return None
        half = half or self.hi - self.lo
        self.hi -= half
        return Raising(self.hi, self.hi + half)

    def merge(self, other):
        # loot from elsewhere: keep both ranges by processing the other's first
        extra = other.hi - other.lo
        self.lo -= extra  # the count is all that matters: shift the range
        other.lo = other.hi

    def is_empty(self):
        return self.lo >= self.hi

    def is_splittable(self):
        return self.hi - self.lo >= 2


def worker_threads() -> list[str]:
    """Names of the GLB worker threads alive at this place (after a short grace period)."""
    deadline = time.monotonic() + 5
    while True:
        names = [t.name for t in threading.enumerate() if t.name.startswith("glb-worker-")]
        if not names or time.monotonic() > deadline:
            return names
        time.sleep(0.05)


def threads_left() -> dict[int, list[str]]:
    return {p.id: at(p, worker_threads) for p in places()}


def cases():
    """(name, bag, result_factory, expected, n)"""
    yield "uts", UTSBag(19, 9), LongSum, UTS[(19, 9)], 256
    yield "nqueens", NQueensBag(11), LongSum, QUEENS[11], 4096
    graph = rmat_graph(7)
    yield "bc", BCBag(graph), BCResult(graph.N), betweenness(7), 4
    pi_hits = process_all(PiBag(2 * 10**7, 7), LongSum(), 1 << 20).value()
    yield "pi", PiBag(2 * 10**7, 7), LongSum, pi_hits, 1 << 18


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--raising-only", action="store_true")
    args = parser.parse_args()
    if not args.raising_only:
        for name, bag, factory, expected, n in cases():
            for workers in (1, 2, 3):
                res = compute_dynamic(bag if workers == 3 else _copy(bag), factory, n=n,
                                      workers=workers)
                value = res.value
                if isinstance(value, np.ndarray):
                    correct = bool(np.allclose(value, expected, rtol=1e-9, atol=1e-9))
                    value = float(np.sum(value))
                else:
                    value, correct = int(value), int(value) == int(expected)
                print(json.dumps({"bag": name, "workers": workers, "kernels": backend(),
                                  "result": value, "correct": correct,
                                  "log": [s.as_dict() for s in res.log],
                                  "threads_left": threads_left()}), flush=True)
    t = time.perf_counter()
    errors: list[str] = []
    try:
        compute_dynamic(Raising(0, 200_000), LongSum, n=50, workers=3)
    except MultipleException as exc:
        errors = [f"{type(e).__name__}: {e}" for e in exc.exceptions]
    print(json.dumps({"bag": "raising", "errors": errors, "here": here().id,
                      "seconds": time.perf_counter() - t, "threads_left": threads_left()}),
          flush=True)


def _copy(bag):
    import pickle

    return pickle.loads(pickle.dumps(bag))


if __name__ == "__main__":
    run(main)
