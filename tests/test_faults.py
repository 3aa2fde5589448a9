"""Fault injection: a place killed with SIGKILL while others wait on it.

The promise: a dead (or released) place is a named state, and every pending wait on it fails
with one named error at once, never a hang.  Each test runs ``tests/programs/faults.py`` (places
spawned, the default embedded mode) with a phase that waits on others, kills a place by its
pid (learnt with ``at(p, os.getpid)``) during it, and checks the outcome, that it came within a
few seconds (death detection is ``APGAS_DEAD_PLACE_TIMEOUT`` = 1 s; before this, shrinks
waited up to 600 s, acknowledgements 60 s, shutdown 10 s), the exit code, and that no process
of the program is left.
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest
from conftest import PROGRAMS, ROOT, Result, descendants, env_for, kill_tree, wait_gone

from apgaspy import ApgasError, BadPlaceError, DeadPlaceError
from communicators.testing import SchedulerEndpoint

FAST_S = 15.0  # a whole program run, start-up and shutdown included (about 2-3 s here)
DETECT_S = 5.0  # from the kill until the wait ends (about 1 s here)
RELEASE_LINGER_S = 10.0  # APGAS_RELEASE_LINGER's default

# Known limit (outside the runtime's waits): a place that sent its last message ('fin') to a
# released place that then died cannot close before that message's linger
# (APGAS_RELEASE_LINGER) expires: zmq keeps it for a peer that never reads it.

def _run(phase: str, places: int = 3, env: dict[str, str] | None = None,
         drain_s: float = FAST_S):
    """Run the phase; return (result, JSON events, seconds until the program ended).

    The program ends when place 0's process exits; its output pipes close when the last
    process of the job (place, MPI process manager) has ended, which must come within
    ``drain_s`` seconds of the start too.
    """
    cmd = [sys.executable, str(PROGRAMS / "faults.py"), phase]
    t = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env or env_for(places), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        proc.wait(timeout=45)  # the output is small: the pipes cannot fill
        elapsed = time.monotonic() - t
        out, err = proc.communicate(timeout=max(1.0, drain_s - elapsed + 5))
        drained = time.monotonic() - t
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end\n--- stdout\n{out}--- stderr\n{err}")
    r = Result(proc.returncode, out, err)
    r.drained = drained  # type: ignore[attr-defined]
    events = r.json_lines()
    assert events and "pids" in events[0], f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    assert drained < drain_s, f"the job's processes ended {drained:.1f} s after the start"
    return r, events, elapsed


def _report(r, events):
    assert len(events) >= 2, f"no report\n--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    return events[-1]


def _assert_nothing_left(events, *more: int) -> None:
    """Every process the program reported (places, anchors, MPI process manager) is gone."""
    pids = set(more)
    for ev in events:
        pids.update(int(p) for p in ev.get("pids", {}).values())
        pids.update(ev.get("tree", []))
        if ev.get("new_pid"):
            pids.add(ev["new_pid"])
    assert wait_gone(sorted(pids), 10) == []


# ---------------------------------------------------------------------- the error class
@pytest.mark.timeout(10)
def test_dead_place_error_is_a_bad_place_error_and_pickles():
    exc = DeadPlaceError(3)
    exc.add_note("raised at place(0)")
    assert isinstance(exc, BadPlaceError) and isinstance(exc, ApgasError)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is DeadPlaceError and back.place == 3 and str(back) == "place(3) died"
    assert back.__notes__ == ["raised at place(0)"]
    bad = pickle.loads(pickle.dumps(BadPlaceError("place(5) was released by a shrink", 5)))
    assert type(bad) is BadPlaceError and bad.place == 5


# ---------------------------------------------------------------------- finish and at
@pytest.mark.timeout(60)
def test_finish_over_all_places_fails_with_dead_place_error():
    r, events, elapsed = _run("finish")
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["errors"] == [["DeadPlaceError", 2]]  # the MultipleException of place 0's finish
    assert rep["waited"] < DETECT_S
    # a finish whose home is place 1 waited on place 2 too: told by place 0, it fails the same
    assert rep["nested"]["errors"] == [["DeadPlaceError", 2]]
    assert rep["nested"]["waited"] < DETECT_S + 0.5
    assert rep["naming"] == ["DeadPlaceError", True]  # place(2) raises it, a BadPlaceError
    assert rep["places"] == [0, 1] and rep["views"] == {"0": [0, 1], "1": [0, 1]}
    # GlobalRef.free() at place 1 freed the object at its home, place 0
    assert rep["freed_after"] is not None and rep["freed_after"] < 2.0
    assert elapsed < FAST_S
    _assert_nothing_left(events)


@pytest.mark.timeout(60)
def test_a_place_dying_during_the_finish_body_fails_the_finish_when_the_body_ends():
    """The death is known while the body still runs (the finish fails then); when the body
    ends, the finish raises at once.  Before the fix, wait_root counted the body's end into
    the cleared counts of the failed finish and waited for ever."""
    r, events, _ = _run("finish-body")
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["errors"] == [["DeadPlaceError", 2]]
    assert rep["known_after"] < DETECT_S and rep["waited"] < 1.0, rep
    assert rep["places"] == [0, 1]
    _assert_nothing_left(events)


@pytest.mark.timeout(60)
def test_at_a_dying_place_raises_dead_place_error():
    r, events, elapsed = _run("at")
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["error"] == ["DeadPlaceError", 2] and rep["waited"] < DETECT_S
    kind, victim, is_bad_place, waited = rep["from_1"]  # an at from place 1, not place 0
    assert (kind, victim, is_bad_place) == ("DeadPlaceError", 2, True) and waited < DETECT_S + 1
    kind, victim, waited = rep["again"]  # an at to a place known dead fails at once
    assert (kind, victim) == ("DeadPlaceError", 2) and waited < 0.1
    assert rep["naming"] == ["DeadPlaceError", True] and rep["places"] == [0, 1]
    assert elapsed < FAST_S
    _assert_nothing_left(events)


# ---------------------------------------------------------------------- orders
@pytest.mark.timeout(60)
def test_shrink_whose_released_place_dies_completes():
    """The place pre_shrink returns is killed there: it counts as released (and as dead), and
    a finish at place 1 that waited on one of its tasks fails with DeadPlaceError."""
    r, events, elapsed = _run("shrink-released", drain_s=FAST_S + RELEASE_LINGER_S)
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["outcome"] == "completed", rep
    assert rep["released"] == [2] and rep["died"] == [2]
    assert rep["calls"] == [["pre_shrink", 1], ["post_shrink", 2, [2]]]
    assert rep["elapsed"] < DETECT_S  # was APGAS_RELEASE_TIMEOUT (600 s)
    assert rep["nested"]["errors"] == [["DeadPlaceError", 2]]  # was: a hang
    assert rep["nested"]["waited"] < DETECT_S + 0.5
    assert rep["places"] == [0, 1] and rep["views"] == {"0": [0, 1], "1": [0, 1]}
    assert rep["naming"] == {"2": ["DeadPlaceError", True]}
    assert "died while it was being released" in r.stderr
    assert elapsed < FAST_S
    _assert_nothing_left(events)
    # place 1 ends with the program, not APGAS_RELEASE_LINGER later (Transport.close bounds
    # the wait for its last message to the dead place)
    assert r.drained - elapsed <= DETECT_S


@pytest.mark.timeout(60)
def test_shrink_of_two_places_one_of_which_dies_completes():
    """4 places; places 2 and 3 are released, 3 is killed in pre_shrink.  Place 2 stops waiting
    for place 3's last message (place 0 sends the 'fin' marker in its name)."""
    r, events, elapsed = _run("shrink-two", 4, drain_s=FAST_S + RELEASE_LINGER_S)
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["outcome"] == "completed", rep
    assert rep["released"] == [2, 3] and rep["died"] == [3]
    assert rep["calls"] == [["pre_shrink", 2], ["post_shrink", 2, [2, 3]]]
    assert rep["elapsed"] < DETECT_S + RELEASE_LINGER_S  # was APGAS_RELEASE_TIMEOUT (600 s)
    assert rep["nested"]["errors"] == [["DeadPlaceError", 3]]
    assert rep["places"] == [0, 1] and rep["views"] == {"0": [0, 1], "1": [0, 1]}
    assert rep["naming"] == {"2": ["BadPlaceError", True], "3": ["DeadPlaceError", True]}
    _assert_nothing_left(events)
    assert rep["elapsed"] <= DETECT_S  # place 2 (released) need not wait out the linger


@pytest.mark.timeout(60)
def test_shrink_during_which_another_place_dies_completes():
    """Place 1 is killed in pre_shrink, place 2 is released: place 1's acknowledgement is not
    waited for, and place 2 stops waiting for place 1's last message."""
    r, events, elapsed = _run("shrink-other")
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["outcome"] == "completed", rep
    assert rep["released"] == [2] and rep["died"] == [1]
    assert rep["calls"] == [["pre_shrink", 1], ["post_shrink", 1, [2]]]
    assert rep["elapsed"] < DETECT_S  # was 60 s (acks) + 600 s (release)
    assert rep["places"] == [0] and rep["views"] == {"0": [0]}
    assert rep["naming"] == {"1": ["DeadPlaceError", True], "2": ["BadPlaceError", True]}
    assert elapsed < FAST_S
    _assert_nothing_left(events)


@pytest.mark.timeout(60)
def test_grow_during_which_an_existing_place_dies_completes():
    """Place 2 is killed in pre_grow; the grow's acknowledgements do not wait for it and every
    place, the new one included, learns that it died."""
    r, events, elapsed = _run("grow-existing")
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["outcome"] == "completed", rep
    assert rep["released"] == [3] and rep["died"] == [2]  # "released": the report's places
    assert rep["calls"] == [["pre_grow", 1], ["post_grow", 3, [0, 1, 2], [3]]]
    assert rep["elapsed"] < DETECT_S + 2  # detection plus one spawn; was 60 s (acks)
    assert rep["places"] == [0, 1, 3]
    assert rep["views"] == {str(p): [0, 1, 3] for p in (0, 1, 3)}
    assert rep["naming"] == ["DeadPlaceError", True]
    assert elapsed < FAST_S
    _assert_nothing_left(events)


@pytest.mark.timeout(60)
def test_grow_whose_new_place_dies_is_refused():
    """The new place kills itself while importing the program (before it is ready): the grow
    is refused like a failed start, post_grow gets no place, the program runs on."""
    r, events, elapsed = _run("grow-new")
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr
    assert rep["outcome"].startswith("refused: could not start place(3) on host localhost")
    assert rep["calls"] == [["pre_grow", 1], ["post_grow", 3, [0, 1, 2], []]]
    assert rep["elapsed"] < 10  # at worst the connect grace (5 s); was 60 s
    assert rep["places"] == [0, 1, 2]
    assert rep["views"] == {str(p): [0, 1, 2] for p in (0, 1, 2)}
    assert rep["naming"] == ["DeadPlaceError", True]  # place(3) was given up
    assert elapsed < FAST_S
    _assert_nothing_left(events)


# ---------------------------------------------------------------------- GLB, shutdown
@pytest.mark.timeout(60)
def test_glb_computation_fails_with_dead_place_error():
    """UTS (depth 13, seconds of work) on GLB; a place is killed 0.5 s in.  compute_dynamic
    raises the MultipleException of its finish; main lets it out: the program exits 1."""
    r, events, elapsed = _run("glb")
    rep = _report(r, events)
    assert rep["errors"] == [["DeadPlaceError", 2]] and rep["waited"] < DETECT_S
    assert r.returncode == 1
    assert "MultipleException" in r.stderr and "DeadPlaceError: place(2) died" in r.stderr
    assert elapsed < FAST_S
    _assert_nothing_left(events)


@pytest.mark.timeout(60)
def test_place_killed_right_before_run_returns():
    r, events, _ = _run("shutdown")
    ended = time.time()
    rep = _report(r, events)
    assert r.returncode == 0, r.stderr  # main returned: the documented code, 0
    assert ended - rep["killed_at"] < DETECT_S  # was APGAS_SHUTDOWN_TIMEOUT (10 s)
    assert "did not confirm shutdown" not in r.stderr
    _assert_nothing_left(events)


# ---------------------------------------------------------------------- start-up
@pytest.mark.timeout(60)
def test_place_killed_while_starting_is_a_startup_error():
    """A spawned place is killed from outside while the program starts, 0.5 s after its process
    appeared (it takes 2 s to import the program, so it is surely not ready yet; it has
    usually answered MPI's handshake by then, on a loaded machine not always).  run() raises
    StartupError naming that place as soon as its death is detected, the program exits 1,
    nothing is left."""
    env = env_for(3, APGAS_TEST_FAULTS_IMPORT="sleep:2")
    t = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(PROGRAMS / "faults.py"), "start"], cwd=ROOT,
                            env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    seen: set[int] = set()
    first_seen: dict[int, float] = {}
    killed = None
    try:
        while killed is None and time.monotonic() - t < 20 and proc.poll() is None:
            below = descendants(proc.pid)
            seen.update(below)
            now = time.monotonic()
            for pid in below:
                if _is_place_process(pid) and now - first_seen.setdefault(pid, now) > 0.5:
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
                    break
            time.sleep(0.01)
        seen.update(descendants(proc.pid))
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"the program did not end\n--- stdout\n{out}--- stderr\n{err}")
    elapsed = time.monotonic() - t
    assert killed is not None, "no place process appeared"
    assert proc.returncode == 1, err
    assert '"phase": "start"' not in out  # main never ran
    named = (r"StartupError: (1 place\(s\) did not start|could not start 1 of 2 places): "
             r"place\([12]\) on host \S+: (its connection broke|its process died while starting)")
    assert re.search(named, err), err  # killed after / during the handshake
    assert elapsed < FAST_S
    assert wait_gone(sorted(seen), 10) == []


def _is_place_process(pid: int) -> bool:
    """A place: an ``apgaspy/_child.py N`` process below its launcher's anchor (``_child.py``
    during the handshake, then a waiter with the argument ``apgaspy-anchor``: argv[0] of GNU
    ``tail``, or a later argument of the ``python -I -S`` fallback).  With N = 1 the anchor
    forks the place; with N > 1 it forks a forker (the same command line), which forks the
    places: then a place has two such ancestors, the forker one."""
    def cmdline(p: int) -> list[str]:
        try:
            return psutil.Process(p).cmdline()
        except psutil.Error:
            return []

    def parent(p: int) -> int:
        try:
            return psutil.Process(p).ppid()
        except psutil.Error:
            return 0

    def launcher_process(argv: list[str]) -> bool:
        return any("apgaspy/_child.py" in a for a in argv) or "apgaspy-anchor" in argv

    own = cmdline(pid)
    if not any("apgaspy/_child.py" in a for a in own):
        return False
    script = next(i for i, a in enumerate(own) if "apgaspy/_child.py" in a)
    count = int(own[script + 1]) if len(own) > script + 1 and own[script + 1].isdigit() else 1
    ancestors, p = 0, parent(pid)
    while p and launcher_process(cmdline(p)):
        ancestors += 1
        p = parent(p)
    return ancestors == (1 if count == 1 else 2)


# ---------------------------------------------------------------------- notifications
@pytest.mark.timeout(60)
def test_notify_scheduler_drops_what_it_cannot_send(tmp_path):
    """':' and line breaks (the protocol splits on them) and non-ASCII text are logged and
    dropped by notify_scheduler; the program and its other notifications go on."""
    scheduler = SchedulerEndpoint()
    try:
        nodes = tmp_path / "nodes"
        nodes.write_text("127.0.1.1\n")
        env = env_for(2, NODE_FILE=str(nodes), **scheduler.env())
        r, events, elapsed = _run("notify", 2, env)
        rep = _report(r, events)
        assert r.returncode == 0, r.stderr
        assert rep["raised"] == []
        assert scheduler.wait_for("APGAS-Ready", 5) == "APGAS-Ready:127.0.1.1"
        assert scheduler.wait_for("faults-ok", 5) == "faults-ok:127.0.1.1"
        assert scheduler.wait_for("APGAS-Disabled", 5) == "APGAS-Disabled:127.0.1.1"
        assert r.stderr.count("to the scheduler dropped") == 3, r.stderr
        assert elapsed < FAST_S
        _assert_nothing_left(events)
    finally:
        scheduler.close()


@pytest.mark.timeout(10)
def test_notify_scheduler_survives_a_failing_communicator():
    from apgaspy._runtime import Runtime, set_runtime
    from apgaspy.elastic import notify_scheduler
    from apgaspy.elastic._malleability import Malleability

    class Broken:
        def notify(self, message: str) -> None:
            raise RuntimeError("the link is down")

    class Keep(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.records: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record.getMessage())

    keep = Keep()
    logger = logging.getLogger("apgaspy")
    logger.addHandler(keep)
    rt = Runtime(0, os.urandom(32), "127.0.0.1")  # place 0's runtime, not started
    rt.malleability = Malleability(rt)
    rt.malleability.communicator = Broken()
    set_runtime(rt)
    try:
        notify_scheduler("anything")  # logged, not raised
    finally:
        set_runtime(None)
        rt.close()
        logger.removeHandler(keep)
    assert any("the link is down" in m for m in keep.records), keep.records


@pytest.mark.timeout(10)
def test_the_end_of_a_program_survives_parts_that_fail_to_stop():
    from apgaspy._runtime import Runtime
    from apgaspy.elastic._malleability import Malleability

    class Broken:
        def stop(self) -> None:
            raise RuntimeError("already gone")

    logged: list[str] = []
    keep = logging.Handler(logging.ERROR)
    keep.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("apgaspy")
    logger.addHandler(keep)
    rt = Runtime(0, os.urandom(32), "127.0.0.1")  # place 0's runtime, not started
    try:
        m = Malleability(rt)
        m.communicator, m.notifier = Broken(), Broken()
        m.close()  # both logged, not raised; both let go
        assert m.communicator is None and m.notifier is None
    finally:
        rt.close()
        logger.removeHandler(keep)
    assert logged == ["error while stopping the load reports",
                      "error while stopping the malleable communicator"], logged
