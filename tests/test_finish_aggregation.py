"""A finish's updates aggregated per host: the places of one host slot send their updates for a
finish through one of them, which forwards them to the finish's home in batches.

Runs ``tests/programs/finish_agg.py`` with 8 places, ``APGAS_PLACES_PER_HOST=4`` (two host
slots: places 0-3 and 4-7): the messages that reach the home, a place killed during an
aggregated finish, and an aggregator killed while it holds updates (the places that sent them
send them again to the home, which applies each once).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import PROGRAMS, ROOT, Result, env_for, kill_tree

DETECT_S = 5.0  # from the kill until the wait ends (death detection is about 1 s)


def _run(phase: str, per_host: int = 4) -> tuple[Result, list]:
    cmd = [sys.executable, str(PROGRAMS / "finish_agg.py"), phase]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env_for(8, APGAS_PLACES_PER_HOST=str(per_host)),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end\n--- stdout\n{out}--- stderr\n{err}")
    r = Result(proc.returncode, out, err)
    events = r.json_lines()
    assert r.returncode == 0 and events, f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    for ev in events:  # no place of the program is left
        for pid in ev.get("pids", {}).values():
            t = time.monotonic() + 5
            while psutil.pid_exists(int(pid)) and time.monotonic() < t:
                time.sleep(0.05)
            if psutil.pid_exists(int(pid)):
                try:
                    if psutil.Process(int(pid)).status() != psutil.STATUS_ZOMBIE:
                        os.kill(int(pid), signal.SIGKILL)
                        pytest.fail(f"process {pid} of the program was left")
                except psutil.NoSuchProcess:
                    pass
    return r, events


@pytest.mark.timeout(120)
def test_an_empty_finish_sends_fewer_messages_into_its_home_than_places():
    # one place a host: every other place sends its update to the home, 7 messages each time
    _, events = _run("count", per_host=1)
    assert events[-1]["home_messages"] == [7] * 5
    # two hosts of 4: a batch from each host's aggregator (places 1 and 4), rarely a few more
    # when an update misses its batch's window on a loaded machine
    _, events = _run("count", per_host=4)
    assert events[-1]["raised"] == [["ValueError", "raised at 6"]]  # through the aggregator
    counts = events[-1]["home_messages"]
    assert min(counts) <= 3 and sum(counts) < 7 * 5, counts


@pytest.mark.timeout(120)
def test_a_place_killed_during_an_aggregated_finish_fails_it_with_dead_place_error():
    _, events = _run("member-dies")
    rep = events[-1]
    assert rep["errors"] == [["DeadPlaceError", 6]]
    assert rep["waited"] < DETECT_S
    assert rep["places"] == [0, 1, 2, 3, 4, 5, 7]


@pytest.mark.timeout(120)
def test_a_killed_aggregator_loses_none_of_the_updates_it_held():
    _, events = _run("aggregator-dies")
    rep = events[-1]
    assert rep["errors"] == []  # the finish spawned nothing at place 4: it just ends
    assert rep["waited"] < DETECT_S
    assert rep["places"] == [0, 1, 2, 3, 5, 6, 7]
