"""A main module whose import starts a thread that holds a lock for half a second, as a kernel
module's background warm-up does; ``main`` takes the lock at every place and prints
``{"pids": {id: pid}, "parents": {id: parent pid}}``.

A launcher that imports the main module before it forks its places
(``APGAS_LAUNCH_IMPORTS_MAIN=1``) must not fork while the thread holds the lock: a place would
inherit it locked and hang in ``take``.
"""

import json
import os
import threading
import time

from apgaspy import at, places, run

_lock = threading.Lock()


def _hold():
    with _lock:
        time.sleep(0.5)  # paces on purpose: the lock is held while the import runs


threading.Thread(target=_hold, daemon=True).start()


def take():
    """Take the lock (waiting for the import's thread where it holds it); this pid."""
    with _lock:
        return os.getpid()


def main():
    everyone = places()
    print(json.dumps({"pids": {p.id: at(p, take) for p in everyone},
                      "parents": {p.id: at(p, os.getppid) for p in everyone[1:]}}), flush=True)


if __name__ == "__main__":
    run(main)
