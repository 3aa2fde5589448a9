"""Evolving jobs: the program asks for places and gives them back (docs/guides/evolving.md).

The policy is tested alone on sample sequences; the rest against a real job and the Java
scheduler stand-in over real TCP.
"""

from __future__ import annotations

import json
import queue
import threading
import time

import pytest
from conftest import env_for, run_program, wait_gone, wait_until

from apgaspy import MalleabilityError
from apgaspy.elastic import MalleableCommunicator
from apgaspy.elastic._evolving_decision import Decision, EvolvingParams, EvolvingState, decide
from communicators.testing import JavaSchedulerStandIn, free_port

P = EvolvingParams()  # Java's defaults: 1 s, standby 3 s, high 90, low 10


# ------------------------------------------------------------------ the pure policy

def test_policy_waits_through_the_standby():
    s = EvolvingState(started=100.0)
    assert decide({0: 100, 1: 100}, s, 102.9, P) == Decision("wait", reason="standby")
    assert decide({0: 100, 1: 100}, s, 103.0, P).action == "request"


def test_policy_requests_once_while_a_request_is_open():
    busy = {0: 95.0, 1: 92.0}  # average 93.5 > 90
    assert decide(busy, EvolvingState(0.0), 5.0, P).action == "request"
    open_ = EvolvingState(0.0, request_since=5.0)
    d = decide(busy, open_, 6.0, P)
    assert (d.action, d.expired) == ("wait", False)
    # Java waits for ever; apgaspy gives the request up after request_timeout (60 s)
    d = decide(busy, open_, 64.9, P)
    assert (d.action, d.expired) == ("wait", False)
    d = decide(busy, open_, 65.0, P)
    assert (d.action, d.expired) == ("request", True)
    # an expired request is reported even when nothing else happens
    d = decide({0: 50.0, 1: 50.0}, open_, 70.0, P)
    assert (d.action, d.expired) == ("wait", True)


def test_policy_the_average_includes_place_0():
    assert decide({0: 90.0, 1: 90.0}, EvolvingState(0.0), 5.0, P).action == "wait"  # not > 90
    assert decide({0: 100.0, 1: 81.0}, EvolvingState(0.0), 5.0, P).action == "request"
    assert decide({0: 100.0}, EvolvingState(0.0), 5.0, P).action == "request"


def test_policy_releases_the_least_loaded_place_never_place_0():
    # an idle place is released even when the average is high enough
    assert decide({0: 80.0, 1: 60.0, 2: 0.0, 3: 70.0}, EvolvingState(0.0), 5.0, P) == \
        Decision("release", 2, "place(2) is idle")
    # low average: the least loaded other place goes, the newest among equals
    d = decide({0: 1.0, 1: 5.0, 2: 3.0, 3: 3.0}, EvolvingState(0.0), 5.0, P)
    assert (d.action, d.place) == ("release", 3)
    # place 0 idle alone: nothing to release
    assert decide({0: 0.0}, EvolvingState(0.0), 5.0, P).action == "wait"
    # place 0 the least loaded: another one goes
    d = decide({0: 0.0, 1: 4.0}, EvolvingState(0.0), 5.0, P)
    assert (d.action, d.place) == ("release", 1)
    # between the thresholds, nothing
    assert decide({0: 50.0, 1: 20.0}, EvolvingState(0.0), 5.0, P).action == "wait"
    # place 0 idle, the others busy (a sequential phase on place 1): the least loaded other
    # place goes all the same, its work moves (Java keeps both)
    assert decide({0: 0.0, 1: 100.0}, EvolvingState(0.0), 5.0, P) == \
        Decision("release", 1, "place(0) is idle")
    assert decide({0: 0.0, 1: 100.0, 2: 97.0}, EvolvingState(0.0), 5.0, P) == \
        Decision("release", 2, "place(0) is idle")
    # place 0 only short of the idle grace (0.01): nothing
    assert decide({0: 0.01, 1: 100.0}, EvolvingState(0.0), 5.0, P).action == "wait"


def test_policy_a_release_under_way_blocks_for_at_most_the_block():
    s = EvolvingState(0.0, release_since=10.0)
    assert decide({0: 0.0, 1: 0.0}, s, 19.9, P).reason == "a release is under way"
    assert decide({0: 0.0, 1: 0.0}, s, 20.0, P).action == "release"


def test_policy_on_a_sample_sequence():
    """A job that starts busy, gets a place, and goes idle: request, wait, release."""
    params = EvolvingParams(interval=1, standby=3, high=90, low=10, request_timeout=60)
    started = 0.0
    request_since = release_since = None
    actions = []
    sequence = [{0: 99.0}] * 5 + [{0: 99.0, 1: 95.0}] * 3 + [{0: 3.0, 1: 2.0}] * 2
    for t, samples in enumerate(sequence, start=1):
        if t == 6:  # the grow arrived before this sample: the request is answered
            request_since = None
        d = decide(samples, EvolvingState(started, request_since, release_since), float(t),
                   params)
        actions.append(d.action if d.place is None else f"{d.action} {d.place}")
        if d.action == "request":
            request_since = float(t)
        elif d.action == "release":
            release_since = float(t)
    assert actions == ["wait", "wait", "request", "wait", "wait",
                       "request", "wait", "wait", "release 1", "wait"]


def test_policy_rejects_bad_samples_and_parameters():
    for bad in (-1, 101, float("nan"), "50", None, True):
        with pytest.raises(ValueError, match=r"place\(1\)"):
            decide({0: 50, 1: bad}, EvolvingState(0.0), 5.0, P)
    with pytest.raises(ValueError, match="low <= high"):
        EvolvingParams(high=10, low=20)
    with pytest.raises(ValueError, match="interval"):
        EvolvingParams(interval=0)
    assert decide({}, EvolvingState(0.0), 5.0, P) == Decision("wait", reason="no samples")


def test_a_communicator_without_support_refuses_clearly():
    class Plain(MalleableCommunicator):
        def start(self):
            pass

        def stop(self):
            pass

    with pytest.raises(MalleabilityError, match="does not support evolving requests"):
        Plain().request(1)
    with pytest.raises(MalleabilityError, match="does not support evolving requests"):
        Plain().release(["h"])


def test_task_mode_reads_the_registered_load_source(monkeypatch):
    from apgaspy.elastic import set_load_source
    from apgaspy.elastic._evolving_monitor import place_load

    monkeypatch.setenv("APGAS_EVOLVING_IDLE_GRACE", "0")
    before = set_load_source(None)
    try:
        assert place_load("task") == 0.0  # nothing registered: idle
        assert set_load_source(lambda: 42.5) is None
        assert place_load("task") == 42.5
        set_load_source(lambda: 250)
        assert place_load("task") == 100.0  # clamped
        set_load_source(lambda: 1 / 0)
        assert place_load("task") == 0.0  # a failing source reads as idle (and is logged)
        with pytest.raises(TypeError, match="callable or None"):
            set_load_source(42)
        # below 1 % a place reads 0.01 until the idle grace has passed, then 0
        monkeypatch.setenv("APGAS_EVOLVING_IDLE_GRACE", "0.3")
        set_load_source(lambda: 50.0)
        assert place_load("task") == 50.0
        set_load_source(lambda: 0.5)
        assert place_load("task") == 0.01
        time.sleep(0.35)  # paces on purpose: the grace is a time, let it pass
        assert place_load("task") == 0.0
        set_load_source(lambda: 2.0)
        assert place_load("task") == 2.0
        set_load_source(lambda: 0.0)
        assert place_load("task") == 0.01  # the grace starts again
    finally:
        set_load_source(before)


def test_the_socket_communicator_asks_for_one_host_at_a_time(monkeypatch):
    from communicators.socket import SocketMalleableCommunicator

    monkeypatch.setenv("SCHEDULER_IP", "127.0.0.1")
    monkeypatch.setenv("SCHEDULER_PORT", str(free_port()))
    comm = SocketMalleableCommunicator()
    with pytest.raises(MalleabilityError, match="one host at a time"):
        comm.request(2)
    # nobody listens on the scheduler's port: the request fails clearly
    with pytest.raises(MalleabilityError, match="could not send 'Evolving;Request;1'"):
        comm.request(1)


# ------------------------------------------------------------------ real jobs

@pytest.fixture
def java():
    port = free_port()
    stand_in = JavaSchedulerStandIn("127.0.0.1", port, free_nodes=["127.0.1.2"],
                                    listen_ip="127.0.0.1")
    yield stand_in
    stand_in.close()


def _job_env(java, tmp_path, hosts, **extra):
    node_file = tmp_path / "nodes"
    node_file.write_text("".join(f"{h}\n" for h in hosts))
    return env_for(None, NODE_FILE=str(node_file), NODES=str(len(hosts)),
                   SCHEDULER_IP=java.ip, SCHEDULER_PORT=str(java.port),
                   APGAS_ORDER_TIMEOUT="1", **extra)


class _Events:
    """The JSON events a program prints, read by a thread (two events printed at once both
    arrive: a select() on the pipe would miss the second one, already buffered)."""

    def __init__(self, prog):
        self.prog = prog
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.prog.proc.stdout:
            self.lines.put(line)

    def __call__(self, name, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.prog.kill()
                pytest.fail(f"no event {name!r} within {timeout} s")
            if line.startswith("{") and name in (None, json.loads(line).get("event")):
                return json.loads(line)

    def next(self, timeout=60):
        """The next event, whatever its name."""
        return self(None, timeout)


@pytest.mark.timeout(120)
def test_request_and_release_against_the_java_stand_in(java, tmp_path, program_factory):
    # evolving mode (as the Java scheduler's ELASTIC=evolving), the monitor kept quiet
    java.free_nodes.clear()  # at first the scheduler has nothing to give
    env = _job_env(java, tmp_path, ["127.0.1.1"], ELASTIC="evolving",
                   APGAS_EVOLVING_STANDBY="3600", APGAS_MAX_HOSTS="2",
                   APGAS_EVOLVING_REQUEST_TIMEOUT="1.5")
    prog = program_factory("evolving.py", 1, "spawn", env=env)
    _event = _Events(prog)
    ready = _event("ready")
    assert list(ready["pids"]) == ["0"]
    assert java.wait_for("APGAS-Ready") == "APGAS-Ready:127.0.1.1"
    job = ("127.0.1.1", java.port)

    # bad input first: nothing is sent, the job runs on
    prog.send("release 0\n")
    assert "place(0) is never released" in _event("error")["error"]
    prog.send("release 7\n")
    assert "not part of the computation" in _event("error")["error"]
    prog.send("request 2\n")
    assert "cannot request 2 more host(s): the job has 1 and at most 2" in \
        _event("error")["error"]

    # the request: the stand-in sees the Java line; no free node, so it stays pending
    prog.send("request\n")
    _event("requested")
    assert java.wait_for("Evolving;Request;1") == "Evolving;Request;1:127.0.1.1"
    prog.send("request\n")  # one open at a time
    assert "already open" in _event("error")["error"]

    def asked_again():
        prog.send("request\n")
        ev = _event.next()
        assert ev["event"] == "requested" or "already open" in ev["error"], ev
        return ev["event"] == "requested"

    # the scheduler never answers: after 1.5 s the job gives the request up and may ask again
    wait_until(asked_again, 20, "the job to give its request up")
    assert java.wait_for("Evolving;Request;1") == "Evolving;Request;1:127.0.1.1"
    assert java.pending == ["127.0.1.1"]  # once per job
    # a node frees up: the stand-in grows the job by it
    java.free_nodes.append("127.0.1.2")
    assert java.serve_requests() == [("127.0.1.1", "127.0.1.2")]
    grown = _event("post_grow")
    assert grown["n"] == 2 and list(grown["added"]) == ["1"]
    assert grown["views"] == {"0": [0, 1], "1": [0, 1]}
    assert java.wait_for("growTimeAPGAS;1;").endswith(":127.0.1.1")
    assert java.granted == {"127.0.1.1": ["127.0.1.2"]} and java.free_nodes == []
    place1_pid = int(grown["added"]["1"])

    # at its maximum (APGAS_MAX_HOSTS=2) a request is refused
    prog.send("request\n")
    assert "at most 2" in _event("error")["error"]
    # an evolving job ignores shrink orders (refused, nothing released)
    reply = java.order(job, "shrink 1\n", timeout=30)
    assert len(reply) == 1 and reply[0].startswith("ERROR ") and "evolving" in reply[0], reply

    # the release: the place ends first, then the Java lines
    prog.send("release 1\n")
    released = _event("released")
    assert released == {"event": "released", "kind": "release", "hosts": ["127.0.1.2"],
                        "places": [1]}
    assert wait_gone([place1_pid], 10) == []
    assert java.wait_for("Evolving;Release;") == "Evolving;Release;127.0.1.2:127.0.1.1"
    assert java.wait_for("shrinkTimeAPGAS;1;").endswith(":127.0.1.1")
    assert java.released == [("127.0.1.1", "127.0.1.2")] and java.free_nodes == ["127.0.1.2"]
    prog.send("release 1\n")
    assert "already released" in _event("error")["error"]

    prog.send("stop\n")
    report = _event("report")
    assert java.wait_for("APGAS-Disabled") == "APGAS-Disabled:127.0.1.1"
    result = prog.finish()
    assert result.returncode == 0, result.stderr
    assert report["calls"] == [["pre_grow", 1], ["post_grow", 2, [0], [1]],
                               ["pre_release", [1]], ["post_shrink", 1, [1]]]
    assert report["places"] == [0]
    assert "shrink orders are ignored" in result.stderr
    assert "did not answer the request for places sent" in result.stderr
    # the Java scheduler knows every line but apgaspy's own APGAS-Disabled
    assert java.undefined == ["APGAS-Disabled:127.0.1.1"]


def test_a_communicator_without_evolving_support_is_refused_clearly():
    env = env_for(None, APGAS_COMMUNICATOR="schedule", APGAS_SCHEDULE="after 600 s shrink 1",
                  APGAS_PLACES="1")
    r = run_program("evolving.py", 1, "spawn", "unsupported", env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    errors = [e["error"] for e in r.json_lines()]
    assert len(errors) == 2
    assert all("does not support evolving requests" in e for e in errors), errors


@pytest.mark.timeout(120)
def test_the_cpu_monitor_requests_under_load_and_releases_when_idle(java, tmp_path,
                                                                    program_factory):
    env = _job_env(java, tmp_path, ["127.0.1.1"], APGAS_ELASTIC="evolving",
                   APGAS_EVOLVING_MODE="cpu", APGAS_EVOLVING_INTERVAL="0.5",
                   APGAS_EVOLVING_STANDBY="0.5", APGAS_EVOLVING_HIGH="60",
                   APGAS_EVOLVING_LOW="10", APGAS_EVOLVING_IDLE_GRACE="1",
                   APGAS_LOG_LEVEL="INFO")
    prog = program_factory("evolving.py", 1, "spawn", env=env)
    _event = _Events(prog)
    _event("ready")
    assert java.wait_for("APGAS-Ready") == "APGAS-Ready:127.0.1.1"
    prog.send("busy\n")
    _event("busy")
    assert java.wait_for("Evolving;Request;1", timeout=30) == "Evolving;Request;1:127.0.1.1"
    grown = _event("post_grow")
    assert list(grown["added"]) == ["1"]
    prog.send("idle\n")
    _event("idle")
    shrunk = _event("post_shrink")
    assert shrunk == {"event": "post_shrink", "n": 1, "removed": [1]}
    assert wait_gone([int(grown["added"]["1"])], 10) == []
    assert java.wait_for("Evolving;Release;", timeout=30,
                         skip=("growTimeAPGAS", "Evolving;Request")) \
        == "Evolving;Release;127.0.1.2:127.0.1.1"
    prog.send("stop\n")
    report = _event("report")
    result = prog.finish()
    assert result.returncode == 0, result.stderr
    assert report["places"] == [0]
    assert ["pre_release", [1]] in report["calls"]
    assert "evolving monitor: request" in result.stderr
    assert "evolving monitor: release place(1)" in result.stderr


@pytest.mark.timeout(180)
def test_a_glb_benchmark_in_task_mode_asks_for_a_place(java, tmp_path):
    """UTS under the evolving monitor in task mode (GLB's busy share on splittable work, a
    tree's): busy at one place, it asks for one, is grown, and still counts the tree
    exactly."""
    from conftest import run_benchmark

    env = _job_env(java, tmp_path, ["127.0.1.1"], ELASTIC="evolving",
                   APGAS_EVOLVING_MODE="task", APGAS_EVOLVING_INTERVAL="0.5",
                   APGAS_EVOLVING_STANDBY="0.5", APGAS_EVOLVING_HIGH="50")
    # UTS d=13 (11 CPU s with the numpy kernels on one place, a quarter of d=14) is still
    # busy long after the request (0.5 s standby, 0.5 s samples) and the grow it brings: a
    # grow that missed the run fails the orders check
    report = run_benchmark("uts", ["--depth", "13"], 1, env=env, timeout=150)
    assert report["correct"] is True and report["result"] == 264_459_392
    assert report["orders"][0] == ["grow", [1]]
    lines = [line for _, line in list(java.notifications.queue)]
    assert lines[:2] == ["APGAS-Ready:127.0.1.1", "Evolving;Request;1:127.0.1.1"]
    assert "growTimeAPGAS;1;" in "".join(lines)
    assert java.granted["127.0.1.1"][:1] == ["127.0.1.2"] or \
        ("127.0.1.1", "127.0.1.2") in java.released


#: One place runs a GLB bag of 10 ms tasks (2 s in all); a thread reads the place's task load
#: (``place_load``, what the evolving monitor asks each place for) over one second of it.
#: ``python PROGRAM yes|no``: the tasks can be shared with another place (a tree's pending
#: tasks) or not (a sequential chain).
LOAD_PROGRAM = '''
import json, sys, threading, time

from apgaspy import run
from apgaspy.elastic._evolving_monitor import place_load
from glb import Bag, LongSum, compute_dynamic
from glb._worker import current_worker


class Tasks(Bag):
    def __init__(self, left, shareable):
        self.left, self.shareable = left, shareable

    def process(self, n, result):
        time.sleep(0.01)  # paces on purpose: each task takes some time
        self.left -= 1
        result.add(1)

    def split(self, take_all):
        if self.is_splittable():
            half = self.left // 2
            self.left -= half
            return Tasks(half, True)
        if take_all and self.left:
            give, self.left = Tasks(self.left, self.shareable), 0
            return give
        return None

    def merge(self, other):
        self.left += other.left

    def is_empty(self):
        return self.left == 0

    def is_splittable(self):
        return self.shareable and self.left >= 2


def sample(out):
    while True:  # until the worker processes
        try:
            if current_worker().stats.process_calls:
                break
        except KeyError:
            pass
        time.sleep(0.01)
    place_load("task")
    time.sleep(1.0)  # paces on purpose: the span the load is measured over
    out.append(place_load("task"))


def main(shareable):
    out = []
    sampler = threading.Thread(target=sample, args=(out,))
    sampler.start()
    res = compute_dynamic(Tasks(200, shareable == "yes"), LongSum)
    sampler.join()
    stats = res.log[0]
    print(json.dumps({"count": res.result.value(), "load": out[0], "busy_s": stats.busy_s,
                      "splittable_busy_s": stats.splittable_busy_s}))


if __name__ == "__main__":
    run(main, sys.argv[1])
'''


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shareable", [True, False])
def test_the_task_load_counts_only_work_another_place_could_take(tmp_path, shareable):
    """A real GLB computation at one place, its worker busy for 2 s: on tasks another place
    could take (a splittable bag) the place reads above 90 %; on a chain nobody else can take
    (an unsplittable bag, the evotree's sequential branch) below 10 %, so that the monitor
    does not ask for a host that would only sit idle (docs/guides/evolving.md)."""
    program = tmp_path / "task_load.py"
    program.write_text(LOAD_PROGRAM)
    r = run_program(program, 1, "spawn", "yes" if shareable else "no", timeout=100,
                    env=env_for(1, APGAS_EVOLVING_IDLE_GRACE="10"))
    assert r.returncode == 0, r.stderr
    (out,) = r.json_lines()
    assert out["count"] == 200
    assert out["busy_s"] >= 2.0
    if shareable:
        assert out["load"] > 90, out
        # every task but the last one started while another remained to share
        assert out["busy_s"] - out["splittable_busy_s"] < 0.1, out
    else:
        assert out["load"] < 10, out
        assert out["splittable_busy_s"] == 0.0, out


@pytest.mark.timeout(120)
def test_a_one_place_evotree_job_does_not_request_in_its_branch(java, tmp_path):
    """The evotree on one place under the evolving monitor in task mode, with no node to
    grant and a request given up after 1 s, so that the job asks again whenever its load
    stays above 90 %: it asks in tree 1 and in tree 2 (splittable bags), never inside the
    sequential branch (one task at a time, nothing to share), which one place suffices for.

    The arrival times of the request lines are compared with the evotree's phases, counted
    from ``APGAS-Ready`` (sent when GLB defines its handler, just after the evotree's clock
    starts); the window checked leaves 0.5 s at both ends of the branch for that offset."""
    from conftest import run_benchmark

    java.free_nodes.clear()
    env = _job_env(java, tmp_path, ["127.0.1.1"], ELASTIC="evolving",
                   APGAS_EVOLVING_MODE="task", APGAS_EVOLVING_INTERVAL="0.5",
                   APGAS_EVOLVING_STANDBY="0.5", APGAS_EVOLVING_REQUEST_TIMEOUT="1")
    # tree 1 2.5 s, branch 5 s (30 tasks of 1/6 s), tree 2 2.5 s, all on the one place: the
    # first request comes about 1 s into tree 1, and the branch still holds the 4 s window
    # (trees of 3 s checked the same)
    report = run_benchmark("evotree", ["-g", "2500", "-t", "60", "-u", "20", "-s", "1",
                                       "--branch", "30", "--sleep"], 1, env=env, timeout=100)
    assert (report["result"], report["correct"], report["orders"]) == (2 * 60 + 30, True, [])
    phases = report["evotree"]["phases"]
    assert phases["branch_s"] > 4.0, phases  # the window below holds several samples
    lines = list(java.notifications.queue)
    (ready,) = [t for t, line in lines if line.startswith("APGAS-Ready")]
    requests = [t - ready for t, line in lines if line.startswith("Evolving;Request;1")]
    lo, hi = phases["tree1_end_s"] + 0.5, phases["branch_end_s"] - 0.5
    assert [t for t in requests if lo < t < hi] == [], (requests, phases)
    assert any(t <= lo for t in requests), (requests, phases)  # tree 1 asks
    assert any(t >= hi for t in requests), (requests, phases)  # tree 2 asks
