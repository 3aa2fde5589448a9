"""The program that ``benchmarks/runtime_scale.py`` starts with ``APGAS_PLACES=P``: it measures
the runtime at place 0 and prints one JSON line.

    APGAS_PLACES=8 python -m benchmarks._scale_job

Inside ``run()``'s main (every place started, connected and ready), place 0 takes the time
(``time.monotonic()``, CLOCK_MONOTONIC, so the caller can subtract its own start time), then
reads place 0's traffic so far (ZeroMQ frames, messages and bytes, and what it sent its
launchers over MPI), times one ``finish`` over an empty ``async_at`` to every place with the
traffic that reached place 0 (the finish's home) meanwhile, and the same finish three times
more (``finish_again_s``: every place has run a task before; ``finish_again_home_messages``:
the messages place 0 received during each), asks place 1 for its file
descriptors, and reads ``/proc`` for every process of the job (itself and all its
descendants: Hydra's ``mpiexec``, one ``hydra_pmi_proxy``, MPI anchor and place per spawned
place) just before main returns, with the mappings that hold the most resident memory in
place 0, one anchor and one place.  The runtime then shuts every place down.
"""

from __future__ import annotations

import json
import os
import time

from apgaspy import async_at, at, finish, places, run
from apgaspy.traffic import launch_traffic, traffic

from ._procfs import fd_info, job_processes, top_mappings
from ._tasks import noop


def main() -> dict:
    """Measure; returns the JSON data (see the module docstring), all times in seconds."""
    in_main = time.monotonic()
    at_start = traffic()
    launch = launch_traffic()
    everyone = places()
    before = traffic()
    t = time.monotonic()
    with finish():
        for p in everyone:
            async_at(p, noop)
    finish_s = time.monotonic() - t
    after = traffic()
    finish_home = {k: after[k] - before[k] for k in after}
    again, again_home = [], []
    for _ in range(3):  # the same finish again: every place has run a task before
        before = traffic()["messages_in"]
        t = time.monotonic()
        with finish():
            for p in everyone:
                async_at(p, noop)
        again.append(time.monotonic() - t)
        again_home.append(traffic()["messages_in"] - before)
    other = at(everyone[1], fd_info) if len(everyone) > 1 else None
    fds0 = fd_info()
    procs = job_processes(os.getpid())
    sampled = time.monotonic()
    mappings = {}
    for role in ("place0", "anchor", "place"):
        first = next((p for p in procs if p["role"] == role), None)
        if first is not None:
            mappings[role] = top_mappings(first["pid"])
    return {"places": len(everyone), "in_main_monotonic": in_main, "finish_s": finish_s,
            "traffic_place0_at_start": at_start, "launch_traffic": launch,
            "finish_home_traffic": finish_home, "finish_again_s": again,
            "finish_again_home_messages": again_home,
            "fds_place0": fds0, "fds_place1": other, "processes": procs,
            "sampled_monotonic": sampled, "top_mappings": mappings}


if __name__ == "__main__":
    print(json.dumps(run(main)), flush=True)
