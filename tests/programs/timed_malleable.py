"""Runs tasks for a fixed time with a recording handler (orders come from configuration).

    python timed_malleable.py SECONDS [ORDERS]

With ``ORDERS``, the tasks stop as soon as that many orders have been carried out (their
``post_grow`` or ``post_shrink`` called), at the latest after ``SECONDS``."""

import json
import os
import sys
import time

from apgaspy import (
    BadPlaceError,
    MalleableHandler,
    MultipleException,
    async_at,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    finish,
    places,
    run,
)


class Recorder(MalleableHandler):
    def __init__(self):
        self.calls = []

    def pre_shrink(self, n):
        self.calls.append(["pre_shrink", n])
        return places()[-n:]

    def post_shrink(self, n, removed):
        self.calls.append(["post_shrink", n, [p.id for p in removed]])

    def pre_grow(self, n):
        self.calls.append(["pre_grow", n])

    def post_grow(self, n, continued, added):
        self.calls.append(["post_grow", n, [p.id for p in added]])


def main(seconds, orders=None):
    handler = Recorder()
    define_malleable_handler(handler)
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (
            orders is not None
            and sum(c[0].startswith("post_") for c in handler.calls) >= orders):
        try:
            with finish():
                for p in places():
                    async_at(p, time.sleep, 0.005)  # paces on purpose
        except MultipleException as group:
            assert all(isinstance(e, BadPlaceError) for e in group.exceptions), group
    disable_malleable_handler()
    print(json.dumps({"calls": handler.calls, "places": [p.id for p in places()],
                      "pids": {p.id: at(p, os.getpid) for p in places()}}), flush=True)


if __name__ == "__main__":
    run(main, float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else None)
