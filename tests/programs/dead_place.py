"""Kill a place (SIGKILL) while a finish waits on it; the finish must raise DeadPlaceError.

Prints JSON lines: the pids of the places, then what happened."""

import json
import os
import signal
import time

from apgaspy import DeadPlaceError, MultipleException, async_at, at, finish, here, places, run


def main():
    ps = places()
    pids = {p.id: at(p, os.getpid) for p in ps}
    print(json.dumps({"pids": pids}), flush=True)
    victim = ps[-1].id
    t = time.monotonic()
    errors = []
    try:
        with finish():
            async_at(victim, time.sleep, 60)  # a task that runs until its place dies
            async_at(ps[1].id, time.sleep, 0.2)  # ends on its own
            time.sleep(0.3)  # paces on purpose: the kill comes while the tasks run
            os.kill(pids[victim], signal.SIGKILL)
    except MultipleException as group:
        errors = [(type(e).__name__, getattr(e, "place", None)) for e in group.exceptions]
    waited = time.monotonic() - t
    try:
        at(victim, os.getpid)
        at_error = None
    except DeadPlaceError as exc:
        at_error = exc.place
    survivors = [at(p, lambda: here().id) for p in places()]
    print(json.dumps({"errors": errors, "waited": waited, "places": [p.id for p in places()],
                      "at_error": at_error, "survivors": survivors}), flush=True)


if __name__ == "__main__":
    run(main)
