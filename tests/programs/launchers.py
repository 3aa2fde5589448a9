"""Many places from per-host launchers: ``launchers.py many`` or ``launchers.py kill WHO``.

``many``: runs one ``finish`` over an empty ``async_at`` to every place, then prints
``{"places": [ids], "tasks": n, "pids": {id: pid}, "parents": {id: parent pid},
"launchers": {id: launcher pid}}`` and ends normally (a place's parent is the forker of its
launcher, or the launcher itself for a launcher of one place).

``kill forker`` / ``kill launcher``: prints the same ``pids``, ``parents`` and ``launchers``
(no finish), then kills place 1's forker or launcher with SIGKILL, waits up to 20 s until no
place but place 0 is left, and prints ``{"after": [ids]}``.

``grow``: run with ``APGAS_COMMUNICATOR=schedule`` and a schedule that grows by one host
(``APGAS_PLACES_PER_HOST`` places) and then shrinks by one host (releasing the highest
places): waits until the grow has
come, prints ``{"grown": [ids], "launches": n, "parents": {id: parent pid}}`` (``launches``:
the ``MPI_Comm_spawn`` calls the grow made), waits until the shrink has come, and prints
``{"shrunk": [ids], "alive": {id: bool}}``: whether each grown place's process still runs.
``grow again`` then waits for a second grow (a schedule of three orders), prints
``{"grown_again": [ids], "pids": {id: pid}, "launchers": {id: launcher pid}}``, waits up to
30 s until no place but place 0 is left (the test kills the launcher), and prints
``{"after": [ids]}``.
"""

import json
import os
import signal
import sys
import threading
import time

from apgaspy import MalleableHandler, async_at, at, define_malleable_handler, finish, places, run
from apgaspy.traffic import launch_traffic

_count = 0
_lock = threading.Lock()


def _tick():
    global _count
    with _lock:
        _count += 1


def _empty():
    at(places()[0], _tick)


def _launcher():
    """The MPI process that launched this place: the parent of the forker, or the parent.

    A launcher replaces its image with a waiter right after the handshake; while it is inside
    ``execve`` its ``/proc/PID/cmdline`` reads empty, so an empty one is read again (≤ 5 s)."""
    parent = os.getppid()
    with open(f"/proc/{parent}/stat") as fh:
        grand = int(fh.read().rsplit(")", 1)[1].split()[1])
    deadline = time.monotonic() + 5
    while True:
        with open(f"/proc/{grand}/cmdline", "rb") as fh:
            argv = [a for a in fh.read().split(b"\0") if a]
        if argv or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    return grand if any(b"_child.py" in a or b"apgaspy-anchor" in a for a in argv) else parent


class _Handler(MalleableHandler):
    """Releases the highest place of a shrink; records nothing."""

    def pre_shrink(self, n):
        return places()[-n:]

    def post_shrink(self, n, removed):
        pass

    def pre_grow(self, n):
        pass

    def post_grow(self, n, continued, added):
        pass


def _wait_places(test, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not test(len(places())) and time.monotonic() < deadline:
        time.sleep(0.05)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def _grow():
    define_malleable_handler(_Handler())
    before = launch_traffic()["launches"]
    _wait_places(lambda n: n > 1)
    grown = places()
    pids = {p.id: at(p, os.getpid) for p in grown}
    print(json.dumps({"grown": [p.id for p in grown],
                      "launches": launch_traffic()["launches"] - before,
                      "parents": {p.id: at(p, os.getppid) for p in grown[1:]}}), flush=True)
    _wait_places(lambda n: n < len(grown))
    deadline = time.monotonic() + 10  # the released places' processes end soon after
    while any(_alive(pid) for i, pid in pids.items() if i) and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"shrunk": [p.id for p in places()],
                      "alive": {i: _alive(pid) for i, pid in pids.items() if i}}), flush=True)
    if "again" not in sys.argv:
        return
    _wait_places(lambda n: n > 1)
    grown = places()
    print(json.dumps({"grown_again": [p.id for p in grown],
                      "pids": {p.id: at(p, os.getpid) for p in grown[1:]},
                      "launchers": {p.id: at(p, _launcher) for p in grown[1:]}}), flush=True)
    _wait_places(lambda n: n == 1, timeout=30.0)
    print(json.dumps({"after": [p.id for p in places()]}), flush=True)


def main():
    if sys.argv[1] == "grow":
        _grow()
        return
    everyone = places()
    pids = {p.id: at(p, os.getpid) for p in everyone}
    parents = {p.id: at(p, os.getppid) for p in everyone[1:]}
    launchers = {p.id: at(p, _launcher) for p in everyone[1:]}
    if sys.argv[1] == "many":
        with finish():
            for p in everyone:
                async_at(p, _empty)
        print(json.dumps({"places": [p.id for p in everyone], "tasks": _count, "pids": pids,
                          "parents": parents, "launchers": launchers}), flush=True)
        return
    print(json.dumps({"pids": pids, "parents": parents, "launchers": launchers}), flush=True)
    victim = parents[1] if sys.argv[2] == "forker" else launchers[1]
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while len(places()) > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"after": [p.id for p in places()]}), flush=True)


if __name__ == "__main__":
    run(main)
