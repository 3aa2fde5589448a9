"""A run to interrupt (tests/test_interrupts.py): a long GLB computation, or an ``at`` that
blocks place 0.

    python interrupted.py glb|at|stuck

``glb``: UTS of depth 17 on GLB (minutes on a 2-core machine with either kernel); ``at``: an
``at`` to place 1 whose body sleeps 120 s; ``stuck``: the same ``at``, and main's ``finally``
block then sleeps 120 s (only a second signal ends the run soon).  Prints ``{"pids": {place:
pid}}`` once the work has started, and ``finally ran at place 0`` from main's ``finally``
block.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from apgaspy import at, places, run  # noqa: E402
from benchmarks.kernels.uts import UTSBag  # noqa: E402
from glb import LongSum, compute_dynamic  # noqa: E402


def main(kind):
    pids = {p.id: at(p, os.getpid) for p in places()}
    print(json.dumps({"pids": pids}), flush=True)
    try:
        if kind == "glb":
            compute_dynamic(UTSBag(19, 17), LongSum)
        else:
            at(places()[1], time.sleep, 120)  # runs until interrupted
    finally:
        print("finally ran at place 0", flush=True)
        if kind == "stuck":
            time.sleep(120)  # only a 2nd signal ends it


if __name__ == "__main__":
    run(main, sys.argv[1])
