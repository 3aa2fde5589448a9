"""Authentication: print place 1's endpoint, wait for a line on stdin (meanwhile a test
sends forged messages to that endpoint), then report how many batches place 1 dropped."""

import json
import sys

from apgaspy import at, places, run
from apgaspy._runtime import runtime


def dropped():
    return runtime().transport.dropped


def main():
    p = places()[1]
    print(json.dumps({"endpoint": runtime().table[p.id].endpoint}), flush=True)
    sys.stdin.readline()
    print(json.dumps({"dropped": at(p, dropped), "still_works": at(p, lambda: 42)}), flush=True)


if __name__ == "__main__":
    run(main)
