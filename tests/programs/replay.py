"""Replays: every place records each frame it puts on the wire during a computation (100
counted tasks to every place); place 0 then sends every recorded frame, unchanged, to every
place's socket from a plain ZeroMQ socket, as an attacker who captured them would; the counts
must not change and every replayed frame must be dropped.  Prints one JSON line."""

import json
import time

import zmq

from apgaspy import async_at, at, finish, places, run
from apgaspy._runtime import runtime
from apgaspy._transport import Transport, split_endpoint

RECORDED: list[bytes] = []
RECORDING = [True]
COUNT = [0]
MARKER = [0]
_seal = Transport._seal


def _recording_seal(self, messages, box):
    frame = _seal(self, messages, box)
    if RECORDING[0]:
        RECORDED.append(frame)
    return frame


Transport._seal = _recording_seal  # every place imports this module: all of them record


def bump():
    COUNT[0] += 1


def marker():
    MARKER[0] += 1


def count():
    return COUNT[0]


def stop_and_take():
    RECORDING[0] = False
    return list(RECORDED)


def dropped():
    return runtime().transport.dropped


def main():
    ps = places()
    with finish():
        for p in ps:
            for _ in range(100):
                async_at(p, bump)
    before = [at(p, count) for p in ps]
    frames = [f for p in ps for f in at(p, stop_and_take)]
    dropped_before = [at(p, dropped) for p in ps]
    runs_before = sum(at(p, lambda: MARKER[0]) for p in ps)
    ctx = zmq.Context()
    sent = 0
    for p in ps:
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 5000)
        sock.connect(split_endpoint(runtime().table[p.id].endpoint)[0])
        for f in frames:
            sock.send(f)
            sent += 1
        sock.close()
    ctx.term()
    deadline = time.monotonic() + 20
    while sum(at(p, dropped) for p in ps) - sum(dropped_before) < sent:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print(json.dumps({
        "frames": len(frames), "sent": sent,
        "counts_before": before, "counts_after": [at(p, count) for p in ps],
        "marker_runs": sum(at(p, lambda: MARKER[0]) for p in ps) - runs_before,
        "dropped_before": dropped_before, "dropped": [at(p, dropped) for p in ps],
    }), flush=True)


if __name__ == "__main__":
    run(main)
