"""Places started by per-host launchers: more places than the old ceiling of 128, and a
launcher's death takes its places with it.

Each test runs ``tests/programs/launchers.py`` in the embedded default (place 0 spawns one
launcher per host, which forks that host's places); every process must be gone at the end.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import (
    PROGRAMS,
    ROOT,
    Result,
    descendants,
    env_for,
    kill_tree,
    run_program,
    wait_gone,
)

MANY = 160  # more than the 128 places at which start-up used to fail


@pytest.mark.timeout(150)
def test_more_places_than_the_old_ceiling_start_finish_and_stop():
    """160 places start on this machine (one launcher forks places 1-159), a finish over an
    empty task at every place counts every task, and no process is left."""
    r = run_program("launchers.py", MANY, "spawn", "many", timeout=140,
                    env=env_for(MANY, APGAS_START_TIMEOUT="120"))
    assert r.returncode == 0, r.stderr[-3000:]
    report = r.json_lines()[0]
    assert report["places"] == list(range(MANY))
    assert report["tasks"] == MANY
    launchers = {report["launchers"][str(p)] for p in range(1, MANY)}
    assert len(launchers) == 1, "one launch for the host's places"
    pids = [int(pid) for pid in report["pids"].values()]
    assert len(set(pids)) == MANY
    assert wait_gone(pids + sorted(launchers), 15) == []


@pytest.mark.timeout(90)
def test_a_killed_launcher_leaves_none_of_its_places():
    """SIGKILL to the launcher of places 1-5: each of them dies with it (their parent-death
    signal), the job ends (MPICH's process manager ends it on that abnormal exit, as it did
    for a place's own anchor), and nothing of it is left."""
    proc = subprocess.Popen([sys.executable, str(PROGRAMS / "launchers.py"), "kill"],
                            cwd=ROOT, env=env_for(6), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    seen: set[int] = set()
    try:
        line = proc.stdout.readline()
        seen.update(descendants(proc.pid))
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"the job did not end after its launcher was killed\n{out}\n{err}")
    r = Result(proc.returncode, line + out, err)
    report = r.json_lines()[0]
    places = [int(report["pids"][str(p)]) for p in range(1, 6)]
    launcher = report["launchers"]["1"]
    assert {report["launchers"][str(p)] for p in range(1, 6)} == {launcher}
    assert proc.returncode != 0  # the job did not go on as if nothing happened
    assert wait_gone(sorted(seen | set(places) | {launcher}), 15) == []
