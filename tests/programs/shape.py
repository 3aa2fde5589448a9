"""The shape a scheduler gave a job, and the places it really ran
(tests/test_scheduler_cores_real.py).

    python shape.py [malleable SECONDS]

Prints JSON lines.  The first: ``{"env": {...}, "places": {host: places there}, "workers":
{place id: GLB workers there}, "cores": {host: CPUs}}``: the shape variables the job was
started with, then what its places see.  With ``malleable SECONDS``: a malleable handler
prints ``{"event": "grown" | "shrunk", "places": ..., "workers": ..., "cores": ...}`` after
each order carried out (``cores`` read from ``APGAS_CORES_FILE``, which the scheduler
rewrites for the job's new hosts), and the job ends after its first shrink (once that order
is finished: a grow then a shrink is all the test looks at), or after SECONDS at the
latest.
"""

import json
import os
import sys
import threading

from apgaspy import (
    MalleableHandler,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    places,
    run,
)
from apgaspy.wire.cores import parse_cores_env

SHAPE_VARS = ("APGAS_PLACES_PER_HOST", "GLB_WORKERS", "APGAS_CORES", "NODES", "ELASTIC")


def emit(**event):
    print(json.dumps(event), flush=True)


def place_workers():
    from glb._config import workers_per_place

    return workers_per_place()


def layout():
    from apgaspy._runtime import runtime

    table = runtime().membership.table
    hosts = {}
    for p in places():
        host = table[p.id].host
        hosts[host] = hosts.get(host, 0) + 1
    workers = {p.id: at(p, place_workers) for p in places()}
    return {"places": hosts, "workers": workers, "cores": cores_file()}


def cores_file():
    path = os.environ.get("APGAS_CORES_FILE")
    if not path:
        return None
    with open(path, encoding="ascii") as fh:
        return parse_cores_env(";".join(line.strip() for line in fh))


SHRUNK = threading.Event()


class Shape(MalleableHandler):
    def pre_shrink(self, n):
        return places()[-n:]

    def pre_grow(self, n):
        pass

    def post_shrink(self, n, removed):
        emit(event="shrunk", **layout())
        SHRUNK.set()

    def post_grow(self, n, continued, added):
        emit(event="grown", **layout())


def main():
    emit(env={k: os.environ.get(k) for k in SHAPE_VARS}, **layout())
    if len(sys.argv) > 2 and sys.argv[1] == "malleable":
        define_malleable_handler(Shape())
        SHRUNK.wait(float(sys.argv[2]))  # the scheduler grows and shrinks the job meanwhile
        disable_malleable_handler()  # the shrink under way (its reply) finishes first


if __name__ == "__main__":
    run(main)
