"""Where each place and each GLB worker thread may run (tests/test_pinning.py).

    python pinned.py [--glb WORKERS] [--malleable SECONDS]

Prints one JSON line: for each place, its pid, the ``Cpus_allowed_list`` of its process read
by place 0 from ``/proc/<pid>/status`` (the places share place 0's machine), and the lists of
all the place's threads read by the place itself (``/proc/self/task/<tid>/status``).  With
``--glb W``: a GLB computation with W workers a place whose bag notes, at every ``process``
call, the native id of the thread that runs it and that thread's ``Cpus_allowed_list``; the
line then has ``workers``: place → {thread id: list}, and the count.  With ``--malleable
S``: a recording handler takes the orders of the configured communicator for S seconds;
``grown`` then lists, for each place a grow added, its ``Cpus_allowed_list`` read when
``post_grow`` ran, and ``calls`` the handler's calls.
"""

import argparse
import json
import os
import threading
import time

from apgaspy import (
    MalleableHandler,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    places,
    run,
)
from glb import Bag, LongSum, compute_dynamic

SEEN: dict[int, str] = {}  # at each place: native thread id → its Cpus_allowed_list


def allowed(path: str) -> str:
    """The ``Cpus_allowed_list`` field of a ``/proc/.../status`` file."""
    with open(path, encoding="ascii") as fh:
        return next(line.split(":", 1)[1].strip() for line in fh
                    if line.startswith("Cpus_allowed_list:"))


def me() -> dict:
    threads = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            threads[tid] = allowed(f"/proc/self/task/{tid}/status")
        except (OSError, StopIteration):
            continue
    return {"pid": os.getpid(), "threads": threads}


class Noting(Bag):
    """Counts the integers of [lo, hi); notes which thread runs each ``process`` call."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def process(self, n, result):
        tid = threading.get_native_id()
        SEEN[tid] = allowed(f"/proc/self/task/{tid}/status")
        k = min(n, self.hi - self.lo)
        time.sleep(0.002)  # the GIL released: the other workers get to run
        result.add(k)
        self.lo += k

    def split(self, take_all):
        half = (self.hi - self.lo) // 2
        if half == 0 and not (take_all and self.hi > self.lo):
            return None
        half = half or self.hi - self.lo
        self.hi -= half
        return Noting(self.hi, self.hi + half)

    def merge(self, other):
        self.lo -= other.hi - other.lo
        other.lo = other.hi

    def is_empty(self):
        return self.lo >= self.hi

    def is_splittable(self):
        return self.hi - self.lo >= 2


def seen() -> dict[int, str]:
    return dict(SEEN)


class Recorder(MalleableHandler):
    """Releases the highest places; notes each grown place's cores."""

    def __init__(self):
        self.calls, self.grown = [], []

    def pre_shrink(self, n):
        self.calls.append(["pre_shrink", n])
        return places()[-n:]

    def post_shrink(self, n, removed):
        self.calls.append(["post_shrink", n, [p.id for p in removed]])

    def pre_grow(self, n):
        self.calls.append(["pre_grow", n])

    def post_grow(self, n, continued, added):
        self.calls.append(["post_grow", n, [p.id for p in added]])
        for p in added:
            pid = at(p, os.getpid)
            self.grown.append([p.id, allowed(f"/proc/{pid}/status")])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--glb", type=int, default=0, metavar="WORKERS")
    parser.add_argument("--malleable", type=float, default=0.0, metavar="SECONDS")
    args = parser.parse_args()
    if args.malleable:
        handler = Recorder()
        define_malleable_handler(handler)
        time.sleep(args.malleable)
        disable_malleable_handler()
    out: dict = {"places": {}}
    for p in places():
        info = at(p, me)
        info["process"] = allowed(f"/proc/{info['pid']}/status")
        out["places"][p.id] = info
    if args.glb:
        res = compute_dynamic(Noting(0, 4000), LongSum, n=10, workers=args.glb)
        out["count"] = int(res.value)
        out["workers"] = {p.id: at(p, seen) for p in places()}
    if args.malleable:
        out["calls"], out["grown"] = handler.calls, handler.grown
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    run(main)
