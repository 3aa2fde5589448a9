"""Print 300 kB at place 0 after the places are gone (a regression test: MPICH's process
manager made the shared stdout non-blocking and such output was lost)."""

import sys

from apgaspy import places, run

if __name__ == "__main__":
    n = run(lambda: len(places()))
    sys.stdout.write(f"{n}:" + "x" * 300_000 + "\n")
    sys.stdout.flush()
