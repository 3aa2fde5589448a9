"""A malleable program for the end-to-end scheduler tests.

Defines a handler that records every call (releasing the highest places), keeps tasks running
on all places, prints JSON events as orders are carried out, and on stdin:

    bad   -> the next pre_shrink answers with place 0 (a wrong answer)
    slow  -> the next pre_shrink takes 3 s
    stop  -> disable the handler, print the final report and end
"""

import json
import os
import sys
import threading
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
    here,
    places,
    run,
)

STOP = threading.Event()
BAD = threading.Event()
SLOW = threading.Event()


def emit(**event):
    print(json.dumps(event), flush=True)


def views():
    return {p.id: at(p, lambda: [q.id for q in places()]) for p in places()}


class Recorder(MalleableHandler):
    def __init__(self):
        self.calls = []

    def pre_shrink(self, n):
        self.calls.append(["pre_shrink", n])
        if BAD.is_set():
            BAD.clear()
            return [here()] * n
        if SLOW.is_set():
            SLOW.clear()
            time.sleep(3)  # paces on purpose: a slow shrink
        return places()[-n:]

    def post_shrink(self, n, removed):
        self.calls.append(["post_shrink", n, [p.id for p in removed]])
        refused = None
        if removed:  # a task aimed at a released place fails at once, at the sender
            try:
                at(removed[0], os.getpid)
            except BadPlaceError as exc:
                refused = str(exc)
        emit(event="post_shrink", n=n, removed=[p.id for p in removed], views=views(),
             refused=refused)

    def pre_grow(self, n):
        self.calls.append(["pre_grow", n])

    def post_grow(self, n, continued, added):
        self.calls.append(["post_grow", n, [p.id for p in continued], [p.id for p in added]])
        emit(event="post_grow", n=n, added={p.id: at(p, os.getpid) for p in added},
             views=views())


def read_stdin():
    for line in sys.stdin:
        if line.strip() == "bad":
            BAD.set()
            emit(event="bad armed")
        elif line.strip() == "slow":
            SLOW.set()
            emit(event="slow armed")
        elif line.strip() == "stop":
            STOP.set()
            return
    STOP.set()


def work(i):
    time.sleep(0.001 * (i % 3))  # paces on purpose: tasks of unequal length
    return i


def main():
    pids = {p.id: at(p, os.getpid) for p in places()}
    handler = Recorder()
    define_malleable_handler(handler)
    emit(event="ready", pids=pids)
    threading.Thread(target=read_stdin, daemon=True).start()
    rounds = refused = 0
    while not STOP.is_set():
        try:
            with finish():
                for p in places():
                    async_at(p, work, rounds)
        except MultipleException as group:  # a place released between places() and async_at
            if not all(isinstance(e, BadPlaceError) for e in group.exceptions):
                raise
            refused += 1
        rounds += 1
        time.sleep(0.01)  # paces on purpose: rounds of work until told to stop
    disable_malleable_handler()
    emit(event="report", calls=handler.calls, views=views(), rounds=rounds, refused=refused,
         pids={p.id: at(p, os.getpid) for p in places()})


if __name__ == "__main__":
    run(main)
