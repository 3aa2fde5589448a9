"""Many places from per-host launchers: ``launchers.py many`` or ``launchers.py kill``.

``many``: runs one ``finish`` over an empty ``async_at`` to every place, then prints
``{"places": [ids], "tasks": n, "pids": {id: pid}, "launchers": {id: parent pid}}`` and ends
normally.

``kill``: prints the same ``pids`` and ``launchers`` (no finish), then kills place 1's launcher
with SIGKILL and waits up to 30 s for the job to notice (the places of that launcher die with
it; MPICH's Hydra ends the job on its abnormal exit).
"""

import json
import os
import signal
import sys
import threading
import time

from apgaspy import async_at, at, finish, places, run

_count = 0
_lock = threading.Lock()


def _tick():
    global _count
    with _lock:
        _count += 1


def _empty():
    at(places()[0], _tick)


def main():
    everyone = places()
    pids = {p.id: at(p, os.getpid) for p in everyone}
    launchers = {p.id: at(p, os.getppid) for p in everyone}
    if sys.argv[1] == "many":
        with finish():
            for p in everyone:
                async_at(p, _empty)
        print(json.dumps({"places": [p.id for p in everyone], "tasks": _count, "pids": pids,
                          "launchers": launchers}), flush=True)
        return
    print(json.dumps({"pids": pids, "launchers": launchers}), flush=True)
    os.kill(launchers[1], signal.SIGKILL)
    time.sleep(30)


if __name__ == "__main__":
    run(main)
