"""A GLB broadcast to a place that neither answers nor dies ends after GLB_REPLY_TIMEOUT.

Run with 2 places and ``GLB_REPLY_TIMEOUT=1``.  Prints one JSON line per kind of wait (the
plain one, and a resilient computation's, which does not wait for dead places): the error it
raised (or ``null``) and how long it took, in seconds.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from apgaspy import run  # noqa: E402
from glb._broadcast import broadcast  # noqa: E402


def _silent(reply):
    """A broadcast target that stays alive and never answers."""


def main():
    for skip_dead in (False, True):
        t = time.monotonic()
        try:
            broadcast([1], _silent, skip_dead=skip_dead)
            error = None
        except Exception as exc:  # noqa: BLE001 - reported
            error = type(exc).__name__
        print(json.dumps({"skip_dead": skip_dead, "error": error,
                          "seconds": time.monotonic() - t}), flush=True)


if __name__ == "__main__":
    run(main)
