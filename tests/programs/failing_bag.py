"""A GLB computation whose bag raises at place 1 (tests/test_typos.py): what a user sees of
an uncaught failure, short by default and whole with ``APGAS_DEBUG=1``.

    python failing_bag.py            (APGAS_PLACES=2 or more)
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from apgaspy import here, run  # noqa: E402
from glb import Bag, LongSum, compute_dynamic  # noqa: E402


class FailingBag(Bag):
    """Counts n units; ``process`` divides by zero at place 1."""

    def __init__(self, n: int) -> None:
        self.n = n

    def process(self, n, result):
        if here().id == 1:
            print(1 / 0)
        k = min(n, self.n)
        self.n -= k
        result.add(k)

    def split(self, take_all):
        if self.n < 2:
            return None
        half = self.n // 2
        self.n -= half
        return FailingBag(half)

    def merge(self, other):
        self.n += other.n

    def is_empty(self):
        return self.n == 0

    def is_splittable(self):
        return self.n >= 2


def main() -> None:
    print(compute_dynamic(FailingBag(10**6), LongSum, n=10).value)


if __name__ == "__main__":
    run(main)
