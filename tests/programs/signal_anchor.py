"""SIGTERM (or the signal named in argv[1]) to the MPI anchor of place 2 after start-up.

The anchor is then the small waiter (``apgaspy-anchor``); an exit on a signal would be an
abnormal exit, for which MPICH's Hydra kills the whole job, place 0 included.  Prints
``{"anchor": argv[0], "place2": "alive" | error name, "ignored": whether the anchor ignores
the signal, "places": [...]}`` and ends normally.
"""

import json
import os
import signal
import sys
import time

from apgaspy import DeadPlaceError, at, places, run


def main():
    anchor = at(places()[2], os.getppid)
    deadline = time.monotonic() + 5
    while True:  # the anchor finalizes MPI, then becomes the waiter
        with open(f"/proc/{anchor}/cmdline", "rb") as fh:
            argv0 = fh.read().split(b"\0")[0].decode()
        if "apgaspy-anchor" in argv0 or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    sig = getattr(signal, sys.argv[1] if len(sys.argv) > 1 else "SIGTERM")
    # an ignored signal is discarded when it is sent (nothing can come of it later), so the
    # anchor's ignored set, read before the signal, is what shows that the job survives it
    with open(f"/proc/{anchor}/status", encoding="ascii") as fh:
        ignored = int(next(ln for ln in fh if ln.startswith("SigIgn:")).split()[1], 16)
    os.kill(anchor, sig)
    try:
        state = "alive" if at(places()[2], os.getpid) > 0 else "?"
    except DeadPlaceError:
        state = "DeadPlaceError"
    print(json.dumps({"anchor": argv0, "place2": state, "anchor_pid": anchor,
                      "ignored": bool(ignored & (1 << (sig - 1))),
                      "places": [p.id for p in places()]}), flush=True)


if __name__ == "__main__":
    run(main)
