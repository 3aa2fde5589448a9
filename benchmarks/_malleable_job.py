"""The job that benchmarks/malleability.py orders around: malleable, light, idle between orders.

Its handler releases the highest places and does nothing else, so the handler share of an
order is the cost of calling it.  On stdin ``stop`` it ends and prints the runtime's order
reports (total and handler nanoseconds) as one JSON line.
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
    """Define the handler, wait for 'stop' on stdin, print the order reports."""
    define_malleable_handler(Releaser())
    for line in sys.stdin:
        if line.strip() == "stop":
            break
    reports = [{"kind": r.kind, "hosts": r.hosts, "places": [p.id for p in r.places],
                "total_ns": r.total_ns, "handler_ns": r.handler_ns}
               for r in order_reports()]
    print(json.dumps({"reports": reports}), flush=True)


if __name__ == "__main__":
    run(main)
