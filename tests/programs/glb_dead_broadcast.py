"""GLB's broadcasts fail at once when a target dies: they never wait GLB_REPLY_TIMEOUT.

Run with 4 places and ``APGAS_COMMUNICATOR=__main__:KillThenShrink``.  Prints two JSON lines:

1. ``{"part": "broadcast", ...}``: ``glb._broadcast.broadcast`` to place 3, which kills itself
   (SIGKILL) instead of answering: the error and how long it took.
2. ``{"part": "compute", ...}``: a malleable GLB UTS computation on places 0..2; its
   communicator kills place 2 and then orders a shrink of one host, whose broadcast to the
   leaving place 2 waits on a dead place: the errors the computation raised, how long it ran,
   and the error of the order.
"""

import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from apgaspy import MultipleException, at, places, run  # noqa: E402
from apgaspy.elastic import MalleableCommunicator  # noqa: E402
from benchmarks.kernels.uts import UTSBag  # noqa: E402
from glb import LongSum, compute_dynamic  # noqa: E402
from glb._broadcast import broadcast  # noqa: E402

VICTIM: dict[str, int] = {}  # the pid of the place the communicator kills (set by main)
ORDER: dict[str, object] = {}  # what the shrink order raised


class KillThenShrink(MalleableCommunicator):
    """Once GLB defines its handler: kill the victim, then order a shrink of one host (the
    last place, the victim, leaves) at once."""

    def __init__(self):
        self.thread = threading.Thread(target=self.play, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.thread.join(60)

    def play(self):
        os.kill(VICTIM["pid"], signal.SIGKILL)
        try:
            self.shrink(1)
            ORDER["error"] = None
        except Exception as exc:  # noqa: BLE001 - reported
            ORDER["error"] = _describe(exc)


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
    VICTIM["pid"] = pids[last]
    t = time.monotonic()
    try:
        res = compute_dynamic(UTSBag(19, 13), LongSum, malleable=True)
        errors, value = [], res.value
    except Exception as exc:  # noqa: BLE001 - reported
        errors, value = _describe(exc), None
    print(json.dumps({"part": "compute", "errors": errors, "value": value, "killed": last,
                      "order_error": ORDER.get("error", "no order"),
                      "seconds": time.monotonic() - t,
                      "places": [p.id for p in places()]}), flush=True)


if __name__ == "__main__":
    run(main)
