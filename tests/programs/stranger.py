"""Authentication: print place 1's endpoint, then answer lines on stdin (meanwhile a test
sends forged messages to that endpoint): ``count`` prints how many frames place 1 has dropped
so far, ``go`` prints that count and the answer of an ``at`` to place 1, and ends."""

import json
import sys

from apgaspy import at, places, run
from apgaspy._runtime import runtime


def dropped():
    return runtime().transport.dropped


def main():
    p = places()[1]
    print(json.dumps({"endpoint": runtime().table[p.id].endpoint}), flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            print(json.dumps({"dropped": at(p, dropped)}), flush=True)
        elif line.strip() == "go":
            break
    print(json.dumps({"dropped": at(p, dropped), "still_works": at(p, lambda: 42)}), flush=True)


if __name__ == "__main__":
    run(main)
