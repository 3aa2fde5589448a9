"""A malleable job that reports the load it is told to, for the co-location tests
(docs/guides/colocation.md).

    python load_lines.py LOW HIGH SECONDS [GO]

Every 0.2 s place 0 sends ``APGAS-Load;<duty>;0;-;-`` through the communicator
(``notify_scheduler``): ``LOW`` while the job holds one host, ``HIGH`` once a grow has given
it a second (and, with ``GO``, a file, only while that file exists).  It ends after
``SECONDS``, or as soon as a shrink has taken a grown host back (with ``GO``: once the file
is gone again); it prints one JSON line a resize and a last one with its places and an
answer computed on all of them (the sum of 0..N-1 in one share a place, ``correct``: it is
N(N-1)/2).  Run it with ``APGAS_LOAD_INTERVAL=0``, so that the runtime's own measurement
does not speak too.
"""

import json
import os
import sys
import threading
import time

from apgaspy import (
    MalleableHandler,
    define_malleable_handler,
    disable_malleable_handler,
    at,
    places,
    run,
)
from apgaspy.elastic import notify_scheduler
from apgaspy.wire.protocol import LoadReport, format_load

SEPARATED = threading.Event()


def emit(**event):
    print(json.dumps(event), flush=True)


class Handler(MalleableHandler):
    def __init__(self):
        self.grown = False

    def pre_shrink(self, n):
        return places()[-n:]

    def pre_release(self, chosen):
        return chosen  # a named shrink: exactly those places

    def post_shrink(self, n, removed):
        emit(event="post_shrink", n=n, places=len(places()))
        if self.grown:
            SEPARATED.set()

    def pre_grow(self, n):
        pass

    def post_grow(self, n, continued, added):
        self.grown = True
        emit(event="post_grow", n=n, places=len(places()))


N = 1_000_000


def share(i, k):
    """Place i's share of sum(range(N)) split k ways."""
    return sum(range(i * N // k, (i + 1) * N // k))


def main():
    low, high, seconds = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    go = sys.argv[4] if len(sys.argv) > 4 else None
    handler = Handler()
    define_malleable_handler(handler)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not SEPARATED.is_set():
        rise = handler.grown and (go is None or os.path.exists(go))
        duty = high if rise and not SEPARATED.is_set() else low
        notify_scheduler(format_load(LoadReport(duty, 0.0)))
        SEPARATED.wait(0.2)  # paces on purpose: a load line every 0.2 s
    disable_malleable_handler()
    while go is not None and os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.1)  # the test looks at the processes first
    ps = places()
    answer = sum(at(p, share, i, len(ps)) for i, p in enumerate(ps))
    emit(event="end", places=len(ps), separated=SEPARATED.is_set(), answer=answer,
         correct=answer == N * (N - 1) // 2)


if __name__ == "__main__":
    run(main)
