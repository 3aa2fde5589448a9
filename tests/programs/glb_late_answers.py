"""A GLB run built to provoke late steal answers: all the work starts at the last place.

    python glb_late_answers.py uts <depth> | nqueens <N>   [--w W]

Every place but the last starts empty, so they all steal from the last place, which a shrink
of the schedule communicator then releases; with ``APGAS_TEST_DELAY`` slowing the answers of
the places that a shrink releases, loot is still on its way when the thief sees its victim go.
Prints one JSON line: the result, the expected count, the orders carried out and the totals
of the per-place statistics.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from apgaspy import run  # noqa: E402
from benchmarks.kernels.nqueens import NQueensBag  # noqa: E402
from benchmarks.kernels.uts import UTSBag  # noqa: E402
from benchmarks.nqueens import KNOWN as QUEENS  # noqa: E402
from benchmarks.uts import KNOWN as UTS  # noqa: E402
from glb import LongSum, compute_static  # noqa: E402


class AtLast:
    """bag_for: the whole work at the last place, nothing elsewhere (picklable)."""

    def __init__(self, kernel: str, size: int) -> None:
        self.kernel = kernel
        self.size = size

    def __call__(self, index: int, count: int):
        if index != count - 1:
            return None
        return UTSBag(19, self.size) if self.kernel == "uts" else NQueensBag(self.size)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kernel", choices=["uts", "nqueens"])
    parser.add_argument("size", type=int)
    parser.add_argument("--w", type=int, default=4)
    args = parser.parse_args()
    expected = UTS[(19, args.size)] if args.kernel == "uts" else QUEENS[args.size]
    bag_class = UTSBag if args.kernel == "uts" else NQueensBag
    res = compute_static(AtLast(args.kernel, args.size), LongSum, w=args.w, malleable=True,
                         bag_class=bag_class)
    totals = {}
    for s in res.log:
        for k, v in s.as_dict().items():
            if isinstance(v, int) and not isinstance(v, bool) and k != "place":
                totals[k] = totals.get(k, 0) + v
    print(json.dumps({"result": res.value, "expected": expected,
                      "correct": res.value == expected, "orders": res.orders,
                      "places": res.places, "seconds": res.seconds, "totals": totals}),
          flush=True)


if __name__ == "__main__":
    run(main)
