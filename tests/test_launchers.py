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
    """160 places start on this machine (one launcher, one forker for places 1-159), a
    finish over an empty task at every place counts every task, and no process is left."""
    r = run_program("launchers.py", MANY, "spawn", "many", timeout=140,
                    env=env_for(MANY, APGAS_START_TIMEOUT="120"))
    assert r.returncode == 0, r.stderr[-3000:]
    report = r.json_lines()[0]
    assert report["places"] == list(range(MANY))
    assert report["tasks"] == MANY
    launchers = set(report["launchers"].values())
    forkers = set(report["parents"].values())
    assert len(launchers) == 1 and len(forkers) == 1, "one launch for the host's places"
    assert launchers != forkers
    pids = [int(pid) for pid in report["pids"].values()]
    assert len(set(pids)) == MANY
    assert wait_gone(pids + sorted(launchers | forkers), 15) == []


def _kill(who: str) -> tuple[Result, dict, set[int]]:
    """Run ``launchers.py kill WHO`` with 6 places; its result, first report and every process
    seen below it."""
    proc = subprocess.Popen([sys.executable, str(PROGRAMS / "launchers.py"), "kill", who],
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
        pytest.fail(f"the job did not end after its {who} was killed\n{out}\n{err}")
    r = Result(proc.returncode, line + out, err)
    report = r.json_lines()[0]
    assert set(report["launchers"].values()) == {report["launchers"]["1"]}
    assert set(report["parents"].values()) == {report["parents"]["1"]}
    return r, report, seen | {int(v) for v in report["pids"].values()}


@pytest.mark.timeout(90)
def test_a_killed_forker_takes_its_places_and_the_job_runs_on():
    """SIGKILL to the process that forked places 1-5: they die with it (their parent-death
    signal), the launcher then ends normally, so place 0 runs on alone, and nothing of the
    job is left at its end."""
    r, report, seen = _kill("forker")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.json_lines()[1] == {"after": [0]}
    assert wait_gone(sorted(seen), 15) == []


@pytest.mark.timeout(90)
def test_a_killed_launcher_leaves_none_of_its_places():
    """SIGKILL to the launcher (the MPI process) of places 1-5: its forker dies with it and
    the places with the forker; the job ends (MPICH's process manager ends it on that
    abnormal exit, as it did for a place's own anchor), and nothing of it is left."""
    r, report, seen = _kill("launcher")
    assert r.returncode != 0 or r.json_lines()[1:] == [{"after": [0]}], r.stderr[-2000:]
    assert wait_gone(sorted(seen), 15) == []


@pytest.mark.timeout(120)
def test_a_grow_by_a_host_of_four_places_is_one_launch_and_its_shrink_ends_them():
    """A grow by one host with APGAS_PLACES_PER_HOST=4 adds places 1-4 with one
    MPI_Comm_spawn (one forker is their parent); a shrink by one host then releases the four,
    whose processes are gone (checked half a second after they left the table).  (A shrink
    of one place among several of a launcher is in tests/test_faults.py and
    tests/test_malleability.py: their places 1 and 2 share one.)"""
    env = env_for(1, APGAS_COMMUNICATOR="schedule", APGAS_PLACES_PER_HOST="4",
                  APGAS_SCHEDULE="after 1 s grow 1 on localhost; after 6 s shrink 1")
    r = run_program("launchers.py", 1, "spawn", "grow", timeout=110, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    grown, shrunk = r.json_lines()
    assert grown["grown"] == [0, 1, 2, 3, 4]
    assert grown["launches"] == 1
    assert len(set(grown["parents"].values())) == 1
    assert shrunk == {"shrunk": [0], "alive": {"1": False, "2": False, "3": False,
                                               "4": False}}


def test_launch_groups_are_per_host_and_bounded():
    """One group per host, in order, split at the group size; 1 is a launch per place."""
    from apgaspy._spawn import launch_groups

    specs = [(1, "a"), (2, "b"), (3, "a"), (4, "a"), (5, "b")]
    assert launch_groups(specs, 256) == [[(1, "a"), (3, "a"), (4, "a")], [(2, "b"), (5, "b")]]
    assert launch_groups(specs, 2) == [[(1, "a"), (3, "a")], [(4, "a")], [(2, "b"), (5, "b")]]
    assert launch_groups(specs, 1) == [[s] for s in [(1, "a"), (3, "a"), (4, "a"), (2, "b"),
                                                     (5, "b")]]
    with pytest.raises(ValueError, match="at least one place"):
        launch_groups(specs, 0)


@pytest.mark.timeout(30)
def test_too_low_a_hard_file_limit_is_one_clear_error_and_a_low_soft_one_is_raised():
    """Place 0 raises its soft limit on open files to what the places need; a hard limit
    below that is a StartupError that says how many are needed."""
    code = ("import resource\n"
            "from apgaspy._launch import ensure_fd_limit\n"
            "from apgaspy import StartupError\n"
            "resource.setrlimit(resource.RLIMIT_NOFILE, (300, 1200))\n"
            "ensure_fd_limit(100)\n"
            "print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
            "try:\n"
            "    ensure_fd_limit(1000)\n"
            "except StartupError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=25, check=True).stdout.splitlines()
    assert out[0] == "856"
    assert out[1] == ("1000 places need about 6256 open files at place 0, but the hard limit "
                      "is 1200: raise it (ulimit -Hn 6256, or nofile in "
                      "/etc/security/limits.conf) or start fewer places")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("imports", ["0", "1"])
def test_a_main_module_that_starts_a_thread_at_import(imports):
    """The main module's import starts a thread that holds a lock for a moment: with
    APGAS_LAUNCH_IMPORTS_MAIN=1 the launcher waits for it before forking places 1-3 (one
    forker), so every place takes the lock; with 0 every place imports the module itself."""
    r = run_program("import_thread.py", 4, timeout=110,
                    env=env_for(4, APGAS_LAUNCH_IMPORTS_MAIN=imports))
    assert r.returncode == 0, r.stderr[-3000:]
    (out,) = r.json_lines()
    assert sorted(out["pids"]) == ["0", "1", "2", "3"]
    assert len(set(out["pids"].values())) == 4
    assert len(set(out["parents"].values())) == 1  # one launcher's forker
