"""A finish over places that share hosts: its updates travel through one place per host
(tests/test_finish_aggregation.py).

    APGAS_PLACES=8 APGAS_PLACES_PER_HOST=4 python tests/programs/finish_agg.py <phase>

Phases: ``count`` (a task at place 6 raises: its exception reaches the finish; then the
messages that reach place 0, the home, during each of five empty finishes over all places),
``member-dies`` (place 6, a member of the second host, is killed while the finish waits on
it), ``aggregator-dies`` (place 4, which forwards the second host's updates, is stopped, the
finish's tasks at places 5-7 end and their updates wait at place 4, then place 4 is killed:
the finish, which spawned nothing at place 4, must still end, with no error).
Prints JSON lines: first ``{"pids": ...}`` (place id -> pid), then the phase's report.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from apgaspy import MultipleException, async_at, at, finish, places, run
from apgaspy.traffic import traffic


def emit(**event):
    print(json.dumps(event), flush=True)


def leaves(exc):
    """The exceptions inside (nested) exception groups, as (type name, place) pairs."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [[type(exc).__name__, getattr(exc, "place", None)]]


def noop():
    pass


def fail_at(place_id):
    from apgaspy import here
    if here().id == place_id:
        raise ValueError(f"raised at {place_id}")


def phase_count():
    raised = []
    try:
        with finish():
            for p in places():
                async_at(p, fail_at, 6)
    except MultipleException as group:
        raised = [[type(e).__name__, str(e)] for e in group.exceptions]
    home = []
    for _ in range(5):
        before = traffic()["messages_in"]
        with finish():
            for p in places():
                async_at(p, time.sleep, 0.2)  # paces on purpose: tasks that take a moment
        home.append(traffic()["messages_in"] - before)
    emit(phase="count", home_messages=home, places=len(places()), raised=raised)


def phase_member_dies(pids):
    errors, t_kill = [], None
    try:
        with finish():
            for p in places():
                async_at(p, time.sleep, 60 if p.id == 6 else 0.1)
            time.sleep(0.5)  # paces on purpose: the kill comes while place 6's task runs
            os.kill(pids[6], signal.SIGKILL)
            t_kill = time.monotonic()
    except MultipleException as group:
        errors = leaves(group)
    emit(phase="member-dies", errors=errors, waited=time.monotonic() - t_kill,
         places=[p.id for p in places()])


def phase_aggregator_dies(pids):
    with finish():  # every place has run a task: connections are open
        for p in places():
            async_at(p, noop)
    os.kill(pids[4], signal.SIGSTOP)
    errors, t_kill = [], None
    try:
        with finish():
            for p in places():
                if p.id != 4:
                    async_at(p, time.sleep, 0.1)  # paces on purpose
            time.sleep(0.5)  # paces on purpose: the updates of places 5-7 wait at place 4
            os.kill(pids[4], signal.SIGKILL)
            t_kill = time.monotonic()
    except MultipleException as group:
        errors = leaves(group)
    waited = time.monotonic() - t_kill
    with finish():  # and the next finish over the places left
        for p in places():
            async_at(p, noop)
    emit(phase="aggregator-dies", errors=errors, waited=waited,
         places=[p.id for p in places()])


def main(phase):
    if phase == "count":
        phase_count()
        return
    pids = {p.id: at(p, os.getpid) for p in places()}
    emit(pids=pids)
    if phase == "member-dies":
        phase_member_dies(pids)
    elif phase == "aggregator-dies":
        phase_aggregator_dies(pids)
    else:
        raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    run(main, sys.argv[1])
