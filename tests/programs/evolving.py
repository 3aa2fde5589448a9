"""An evolving program for tests/test_evolving.py: asks for and gives back places on stdin.

Prints JSON events.  Commands on stdin (one a line):

    request [n]   -> request_places(n); prints {"event": "requested"} or the error
    release <id>  -> release_places([id]); prints {"event": "released", ...} or the error
    release_async <id> -> the same on a thread of its own (the next commands run meanwhile)
    busy / idle   -> start / stop a busy loop at place 0 (for the evolving monitor)
    shrinkorder   -> nothing (the test sends a shrink order itself)
    stop          -> disable the handler, print the final report and end

``SLOW_RELEASE=<s>`` in the environment: ``pre_release`` prints ``{"event": "pre_release"}``
and then takes that long, so that commands arrive while a release is under way.

With the argument ``unsupported`` it only tries request_places/release_places once and ends.
"""

import json
import os
import sys
import threading
import time

from apgaspy import (
    MalleabilityError,
    MalleableHandler,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    places,
    release_places,
    request_places,
    run,
)

BUSY = threading.Event()
ENDED = threading.Event()


def emit(**event):
    print(json.dumps(event), flush=True)


class Recorder(MalleableHandler):
    def __init__(self):
        self.calls = []

    def pre_shrink(self, n):
        self.calls.append(["pre_shrink", n])
        return places()[-n:]

    def pre_release(self, chosen):
        self.calls.append(["pre_release", [p.id for p in chosen]])
        if os.environ.get("SLOW_RELEASE"):
            emit(event="pre_release", places=[p.id for p in chosen])
            time.sleep(float(os.environ["SLOW_RELEASE"]))  # paces on purpose: a slow release
        return chosen

    def post_shrink(self, n, removed):
        self.calls.append(["post_shrink", n, [p.id for p in removed]])
        emit(event="post_shrink", n=n, removed=[p.id for p in removed])

    def pre_grow(self, n):
        self.calls.append(["pre_grow", n])

    def post_grow(self, n, continued, added):
        self.calls.append(["post_grow", n, [p.id for p in continued], [p.id for p in added]])
        emit(event="post_grow", n=n, added={p.id: at(p, os.getpid) for p in added},
             views={p.id: at(p, lambda: [q.id for q in places()]) for p in places()})


def spin():
    x = 0
    while not ENDED.is_set():
        if BUSY.is_set():
            for i in range(20000):
                x += i
        else:
            BUSY.wait(0.1)


def release(ids):
    try:
        report = release_places(ids)
    except MalleabilityError as exc:
        emit(event="error", error=str(exc))
        return
    emit(event="released", kind=report.kind, hosts=report.host_names,
         places=[p.id for p in report.places])


def main(mode):
    handler = Recorder()
    define_malleable_handler(handler)
    if mode == "unsupported":
        for call in (lambda: request_places(), lambda: release_places([1])):
            try:
                call()
                emit(event="no error")
            except MalleabilityError as exc:
                emit(event="error", error=str(exc))
        disable_malleable_handler()
        return
    threading.Thread(target=spin, daemon=True).start()
    emit(event="ready", pids={p.id: at(p, os.getpid) for p in places()})
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "request":
                request_places(int(words[1]) if len(words) > 1 else 1)
                emit(event="requested")
            elif words[0] == "release":
                release([int(w) for w in words[1:]])
            elif words[0] == "release_async":
                threading.Thread(target=release, args=([int(w) for w in words[1:]],),
                                 daemon=True).start()
            elif words[0] == "busy":
                BUSY.set()
                emit(event="busy")
            elif words[0] == "idle":
                BUSY.clear()
                emit(event="idle")
            elif words[0] == "stop":
                break
        except MalleabilityError as exc:
            emit(event="error", error=str(exc))
    ENDED.set()
    disable_malleable_handler()
    emit(event="report", calls=handler.calls, places=[p.id for p in places()])


if __name__ == "__main__":
    run(main, sys.argv[1] if len(sys.argv) > 1 else "")
