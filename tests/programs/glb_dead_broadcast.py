"""GLB's broadcasts fail at once when a target dies: they never wait GLB_REPLY_TIMEOUT.

Run with 4 places, ``APGAS_COMMUNICATOR=schedule`` and
``APGAS_SCHEDULE="after 0.5 s shrink 1"``.  Prints two JSON lines:

1. ``{"part": "broadcast", ...}``: ``glb._broadcast.broadcast`` to place 3, which kills itself
   (SIGKILL) instead of answering: the error and how long it took.
2. ``{"part": "compute", ...}``: a malleable GLB UTS computation on places 0..2; place 2 is
   killed just before the shrink order, whose broadcast to the leaving place 2 then waits on a
   dead place: the errors the computation raised and how long it ran.
"""

import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from apgaspy import MultipleException, at, places, run  # noqa: E402
from benchmarks.kernels.uts import UTSBag  # noqa: E402
from glb import LongSum, compute_dynamic  # noqa: E402
from glb._broadcast import broadcast  # noqa: E402


def _die(reply):
    """A broadcast target that dies instead of answering."""
    os.kill(os.getpid(), signal.SIGKILL)


def _describe(exc):
    excs = exc.exceptions if isinstance(exc, MultipleException) else [exc]
    return [[type(e).__name__, getattr(e, "place", None)] for e in excs]


def main():
    pids = {p.id: at(p, os.getpid) for p in places()}
    victim = max(pids)
    t = time.monotonic()
    try:
        broadcast([victim], _die)
        errors = []
    except Exception as exc:  # noqa: BLE001 - reported
        errors = _describe(exc)
    print(json.dumps({"part": "broadcast", "errors": errors,
                      "seconds": time.monotonic() - t}), flush=True)

    last = max(p.id for p in places())

    def kill_later():
        time.sleep(0.45)
        os.kill(pids[last], signal.SIGKILL)

    killer = threading.Thread(target=kill_later, daemon=True)
    t = time.monotonic()
    killer.start()
    try:
        res = compute_dynamic(UTSBag(19, 13), LongSum, malleable=True)
        errors, value = [], res.value
    except Exception as exc:  # noqa: BLE001 - reported
        errors, value = _describe(exc), None
    killer.join()
    print(json.dumps({"part": "compute", "errors": errors, "value": value, "killed": last,
                      "seconds": time.monotonic() - t,
                      "places": [p.id for p in places()]}), flush=True)


if __name__ == "__main__":
    run(main)
