"""A GLB program with a bag of its own: count the primes below N; malleable for free (try
APGAS_COMMUNICATOR=schedule APGAS_SCHEDULE="after 1 s grow 2; after 2 s shrink 1")."""
import math
import sys

import numpy as np

from apgaspy import run
from glb import Bag, LongSum, compute_dynamic


def count_primes(lo, hi):  # a segmented sieve of [lo, hi)
    small = np.ones(max(2, math.isqrt(hi) + 1), dtype=bool)  # sieve for the primes <= √hi
    for p in range(2, math.isqrt(len(small)) + 1):
        small[p * p :: p] = False
    candidates = np.ones(hi - lo, dtype=bool)
    candidates[: max(0, 2 - lo)] = False  # 0 and 1
    for p in np.flatnonzero(small)[2:]:
        candidates[max(p * p, -(-lo // p) * p) - lo :: p] = False
    return int(candidates.sum())


class PrimeBag(Bag):
    """The numbers still to test, as intervals [lo, hi); one work unit is one number."""
    DEFAULT_WORK_UNITS = 1 << 20

    def __init__(self, intervals):
        self.intervals = list(intervals)

    def process(self, n, result):
        lo, hi = self.intervals.pop()
        if lo + n < hi:
            self.intervals.append((lo + n, hi))
        result.add(count_primes(lo, min(hi, lo + n)))

    def split(self, take_all):
        if not self.is_splittable():
            give, self.intervals = (self.intervals, []) if take_all else ([], self.intervals)
            return PrimeBag(give) if give else None
        lo, hi = max(self.intervals, key=lambda iv: iv[1] - iv[0])
        self.intervals[self.intervals.index((lo, hi))] = (lo, (lo + hi) // 2)
        return PrimeBag([((lo + hi) // 2, hi)])

    def merge(self, other):
        self.intervals.extend(other.intervals)

    def is_empty(self):
        return not self.intervals

    def is_splittable(self):
        return sum(hi - lo for lo, hi in self.intervals) >= 2 * self.DEFAULT_WORK_UNITS


def main(limit):  # pi(10**8) = 5761455, pi(10**9) = 50847534
    print(compute_dynamic(PrimeBag([(0, limit)]), LongSum).value, "primes below", limit)


if __name__ == "__main__":
    run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 10**8)
