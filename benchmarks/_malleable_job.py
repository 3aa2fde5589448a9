"""The job that benchmarks/malleability.py orders around: malleable, light, idle between orders.

    python -m benchmarks._malleable_job [--glb DEPTH]

Its handler releases the highest places and does nothing else, so the handler share of an
order is the cost of calling it.  With ``--glb DEPTH`` the job instead runs UTS (seed 19) of
that depth on GLB, whose handler moves work and rewires lifelines: the orders then land during
a real computation, and the handler share is GLB's.  On stdin ``stop`` (after the computation,
with ``--glb``) it ends and prints the runtime's order reports (total and handler nanoseconds)
as one JSON line, with the UTS count and whether it is right.
"""

from __future__ import annotations

import json
import sys

from apgaspy import MalleableHandler, define_malleable_handler, places, run
from apgaspy.elastic import order_reports


class Releaser(MalleableHandler):
    """Releases the newest places; keeps no data."""

    def pre_shrink(self, n):  # noqa: D102
        return places()[-n:]

    def post_shrink(self, n, removed):  # noqa: D102
        pass

    def pre_grow(self, n):  # noqa: D102
        pass

    def post_grow(self, n, continued, added):  # noqa: D102
        pass


def main() -> None:
    """Define the handler (or run UTS on GLB), wait for 'stop' on stdin, print the reports."""
    glb_run = None
    if "--glb" in sys.argv:
        from benchmarks.kernels.uts import UTSBag
        from benchmarks.uts import KNOWN
        from glb import LongSum, compute_dynamic

        depth = int(sys.argv[sys.argv.index("--glb") + 1])
        res = compute_dynamic(UTSBag(19, depth), LongSum, malleable=True)
        glb_run = {"depth": depth, "result": res.value, "seconds": res.seconds,
                   "correct": res.value == KNOWN[(19, depth)] if (19, depth) in KNOWN
                   else None}
    else:
        define_malleable_handler(Releaser())
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    reports = [{"kind": r.kind, "hosts": r.hosts, "places": [p.id for p in r.places],
                "total_ns": r.total_ns, "handler_ns": r.handler_ns}
               for r in order_reports()]
    print(json.dumps({"reports": reports, "glb": glb_run}), flush=True)


if __name__ == "__main__":
    run(main)
