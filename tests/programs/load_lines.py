"""A malleable job that reports the load it is told to, for the co-location tests
(docs/guides/colocation.md).

    python load_lines.py LOW HIGH SECONDS

Every 0.2 s place 0 sends ``APGAS-Load;<duty>;0;-;-`` through the communicator
(``notify_scheduler``): ``LOW`` while the job holds one host, ``HIGH`` once a grow has given
it a second.  It ends after ``SECONDS``, or as soon as a shrink has taken the grown host
back; it prints one JSON line a resize and a last one with its hosts.  Run it with
``APGAS_LOAD_INTERVAL=0``, so that the runtime's own measurement does not speak too.
"""

import json
import sys
import threading
import time

from apgaspy import (
    MalleableHandler,
    define_malleable_handler,
    disable_malleable_handler,
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

    def post_shrink(self, n, removed):
        emit(event="post_shrink", n=n, places=len(places()))
        if self.grown:
            SEPARATED.set()

    def pre_grow(self, n):
        pass

    def post_grow(self, n, continued, added):
        self.grown = True
        emit(event="post_grow", n=n, places=len(places()))


def main():
    low, high, seconds = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    handler = Handler()
    define_malleable_handler(handler)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not SEPARATED.is_set():
        duty = high if handler.grown and not SEPARATED.is_set() else low
        notify_scheduler(format_load(LoadReport(duty, 0.0)))
        SEPARATED.wait(0.2)  # paces on purpose: a load line every 0.2 s
    disable_malleable_handler()
    emit(event="end", places=len(places()), separated=SEPARATED.is_set())


if __name__ == "__main__":
    run(main)
