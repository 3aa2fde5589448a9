"""A job's load reports (``APGAS-Load``, docs/guides/scheduler.md#duty-cycle-and-measured-profile).

* the line as data: format and parse, every refusal, how the Java scheduler reads it;
* the runtime's arithmetic: a window's duty cycle, bytes/s, GIL share and memory from two
  samples of the places, and the cores a job holds; a place reads the GIL source a library
  registers (one that fails is logged and reads as none);
* the scheduler's classifier: measured profile, its thresholds, the profile a job is shaped by;
* the real scheduler with real jobs: a GLB job (UTS) reports a duty cycle above 0.5, a Jacobi
  job that sleeps between its steps one far below it, and ``status`` shows both with their
  measured profiles; unsigned, wrongly signed, out-of-range, malformed lines and a line of a
  job that has ended are refused and counted, and change nothing.
"""

from __future__ import annotations

import logging
import socket
import sys

import pytest
from conftest import ROOT, wait_until

from apgaspy.elastic import set_gil_source
from apgaspy.elastic._load_report import PlaceUsage, job_cores, job_load, place_usage
from apgaspy.wire.auth import NOTIFICATION, Counter, load_key, new_key, sign_line
from apgaspy.wire.protocol import (
    LoadReport,
    NotificationKind,
    classify_notification,
    format_load,
    java_classify_notification,
    parse_load,
)
from scheduler import JobSpec
from scheduler.algorithms import make
from scheduler.client_cli import format_status
from scheduler.job_state import LoadSample
from scheduler.jobs import parse_job_script
from scheduler.nodes import LocalNodes
from scheduler.resources import ProfileThresholds, measured_profile, shape_profile
from scheduler.server import Server, job_of

PY = sys.executable


# ------------------------------------------------------------------------------ the line

def test_load_line_round_trip_and_refusals():
    line = format_load(LoadReport(0.87349, 1520.4, 0.41249, 73400320))
    assert line == "APGAS-Load;0.873;1520;0.412;73400320"
    assert parse_load(line) == LoadReport(0.873, 1520.0, 0.412, 73400320)
    assert parse_load("APGAS-Load;0.000;0;-;-") == LoadReport(0.0, 0.0, None, None)
    assert format_load(LoadReport(1.0, 0.0)) == "APGAS-Load;1.000;0;-;-"
    assert classify_notification(line) is NotificationKind.LOAD
    # the Java scheduler answers it 'undefined Message' and goes on
    assert java_classify_notification(line + ":127.0.1.1") is NotificationKind.UNDEFINED
    for bad, why in (("APGAS-Load;1.5;0;-;-", "duty"), ("APGAS-Load;-0.1;0;-;-", "duty"),
                     ("APGAS-Load;nan;0;-;-", "duty"), ("APGAS-Load;0.5;-1;-;-", "bytes"),
                     ("APGAS-Load;0.5;inf;-;-", "bytes"), ("APGAS-Load;0.5;0;1.2;-", "GIL"),
                     ("APGAS-Load;0.5;0;-;-5", "memory"), ("APGAS-Load;x;0;-;-", "number"),
                     ("APGAS-Load;0.5;0;-", "expected"), ("APGAS-Load;0.5;0;-;-;9", "expected"),
                     ("APGAS-Loadx;0.5;0;-;-", "expected")):
        with pytest.raises(ValueError, match=why):
            parse_load(bad)
    with pytest.raises(ValueError, match="duty"):
        format_load(LoadReport(1.2, 0.0))


# ------------------------------------------------------------------------------ the runtime

def _usage(cpu: float, sent: int, held: float | None = None, loop: float | None = None,
           rss: int = 100, wait: float = 0.0) -> PlaceUsage:
    return PlaceUsage(cpu_s=cpu, wait_s=wait, bytes_out=sent, gil_held_s=held, loop_s=loop,
                      rss_bytes=rss)


def test_a_windows_duty_cycle_traffic_gil_and_memory():
    before = {0: _usage(10.0, 1000, 1.0, 4.0), 1: _usage(5.0, 0, 2.0, 2.0)}
    after = {0: _usage(11.0, 3000, 2.0, 6.0, rss=300), 1: _usage(5.5, 1000, 2.0, 4.0, rss=200,
                                                                  wait=0.5),
             2: _usage(99.0, 10**9, rss=50)}  # joined in the window: memory only
    r = job_load(before, after, wall_s=2.0, cores=2)
    assert r.duty == pytest.approx((1.0 + 0.5 + 0.5) / (2.0 * 2))  # CPU and run-queue wait
    assert r.bytes_per_s == pytest.approx(3000 / 2.0)
    assert r.gil == pytest.approx(1.0 / 4.0)  # held 1 s of 4 s in the loops
    assert r.rss_bytes == 550
    busy = job_load(before, {0: _usage(30.0, 1000)}, wall_s=1.0, cores=1)
    assert busy.duty == 1.0 and busy.gil is None and busy.bytes_per_s == 0.0  # clipped
    with pytest.raises(ValueError):
        job_load(before, after, wall_s=0.0, cores=1)


def test_a_place_reads_its_registered_gil_source():
    logged: list[str] = []
    keep = logging.Handler(logging.ERROR)
    keep.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("apgaspy")  # it may not propagate (apgaspy._logging)
    logger.addHandler(keep)
    before = set_gil_source(None)
    try:
        assert place_usage().gil_held_s is None  # nothing registered
        assert set_gil_source(lambda: (1, 4.5)) is None
        usage = place_usage()
        assert (usage.gil_held_s, usage.loop_s) == (1.0, 4.5) and usage.cpu_s > 0
        for broken in (lambda: 1 / 0, lambda: (1.0, 2.0, 3.0)):  # it raises; not two numbers
            set_gil_source(broken)
            assert (place_usage().gil_held_s, place_usage().loop_s) == (None, None)
        assert logged == ["the registered GIL source failed"] * 4  # each read, logged
        with pytest.raises(TypeError, match="callable or None"):
            set_gil_source(42)
    finally:
        set_gil_source(before)
        logger.removeHandler(keep)


def test_the_cores_a_job_holds():
    cores = {"node1": [0, 1, 2, 3], "node2": [0, 1], "node3": [5]}
    assert job_cores(["node1", "node1", "node2"], 3, 1, cores) == 6  # distinct hosts
    assert job_cores(["other"], 4, 2, cores) == 8  # no host named: places x threads
    assert job_cores(["node1"], 2, 3, None) == 6
    assert job_cores([], 0, 1, None) == 1


# ------------------------------------------------------------------------------ the classifier

def test_measured_profile_thresholds_and_the_shape_profile():
    t = ProfileThresholds()
    assert measured_profile(LoadSample(0.9, 900.0, 0.1, 170 << 20, 0.0), 1, t) == "cpu"
    assert measured_profile(LoadSample(0.9, 2.9e6, None, 170 << 20, 0.0), 1, t) == "network"
    assert measured_profile(LoadSample(0.9, 2.9e6, None, None, 0.0), 4, t) == "cpu"  # per core
    assert measured_profile(LoadReport(0.5, 0.0, None, 3 << 30), 2, t) == "memory"
    assert measured_profile(LoadReport(0.5, 0.0, None, 3 << 30), 4, t) == "cpu"
    env = {"APGAS_SCHEDULER_NETWORK_BYTES_PER_CORE": "500",
           "APGAS_SCHEDULER_MEMORY_BYTES_PER_CORE": ""}
    assert ProfileThresholds.from_env(env) == ProfileThresholds(network_bytes_per_s=500.0)
    for value in ("0", "-1", "lots", "inf"):
        with pytest.raises(ValueError, match="APGAS_SCHEDULER_MEMORY_BYTES_PER_CORE"):
            ProfileThresholds.from_env({"APGAS_SCHEDULER_MEMORY_BYTES_PER_CORE": value})
    # a job's own #PROFILE wins; without one the measured profile, once there is one
    assert shape_profile("cpu", False, "network") == "network"
    assert shape_profile("cpu", False, None) == "cpu"
    assert shape_profile("memory", True, "network") == "memory"
    assert parse_job_script("#NODES 1\n#PROFILE network\n").profile_declared
    assert not parse_job_script("#NODES 1\n").profile_declared


# ------------------------------------------------------------------------------ real jobs

def _send(port: int, line: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line.encode() + b"\n")


@pytest.mark.timeout(150)
def test_the_scheduler_keeps_each_jobs_duty_cycle_and_refuses_bad_load_lines(tmp_path):
    """3 logical nodes: UTS (GLB) and Jacobi with ``--pause`` report every second; a
    ``sleep`` job, which reports nothing, is the target of forged and bad lines."""
    server = Server(LocalNodes(3), make("malleable"), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0,
                    cwd=str(ROOT), job_env={"APGAS_LOAD_INTERVAL": "1"})
    server.start()
    try:
        uts = server.submit(JobSpec(name="uts", job_class="malleable", min_nodes=1,
                                    max_nodes=1, command=(PY, "-m", "benchmarks.uts", "-d",
                                                          "16"), required_time_s=120))
        jac = server.submit(JobSpec(name="jacobi", job_class="malleable", min_nodes=1,
                                    max_nodes=1, required_time_s=120,
                                    command=(PY, "-m", "benchmarks.jacobi", "-n", "64", "-i",
                                             "100000", "--batch", "1", "--pause", "0.3")))
        quiet = server.submit(JobSpec(name="quiet", nodes=1, command=("sleep", "60"),
                                      required_time_s=120))
        wait_until(lambda: job_of(server.status(), quiet)["state"] == "running", 20,
                   "the sleep job's start")
        address = job_of(server.status(), quiet)["nodes"][0]
        key = load_key({"SCHEDULER_KEY_FILE": str(server.run_dir / f"job-{quiet}.key")})
        assert key is not None
        counter = Counter()

        def signed(message: str, with_key: bytes = key) -> str:
            return sign_line(with_key, NOTIFICATION, str(quiet), f"{message}:{address}",
                             counter.next())

        # unsigned, and signed with another key: the job's check refuses them
        _send(server.port, f"APGAS-Load;0.123;0;-;-:{address}")
        _send(server.port, signed("APGAS-Load;0.123;0;-;-", new_key()))
        wait_until(lambda: server.status()["refused_lines"] == 2, 10, "two refused lines")
        assert job_of(server.status(), quiet)["duty_cycle"] is None
        # a valid one is kept; out-of-range and malformed ones are refused and change nothing
        _send(server.port, signed("APGAS-Load;0.250;1000;-;1048576"))
        wait_until(lambda: job_of(server.status(), quiet)["duty_cycle"] == 0.25, 10,
                   "the valid load line")
        for bad in ("APGAS-Load;1.500;0;-;-", "APGAS-Load;0.5;0;2;-", "APGAS-Load;0.5;-1;-;-",
                    "APGAS-Load;lots"):
            _send(server.port, signed(bad))
        wait_until(lambda: server.status()["refused_load_lines"] == 4, 10, "four refusals")
        st = server.status()
        q = job_of(st, quiet)
        assert (q["duty_cycle"], q["bytes_per_s"], q["rss_bytes"]) == (0.25, 1000, 1048576)
        assert q["measured_profile"] == "cpu" and st["refused_lines"] == 2

        # the real jobs' own reports
        def reported() -> bool:
            s = server.status()
            u, j = job_of(s, uts), job_of(s, jac)
            return (u["duty_cycle"] or 0) > 0.5 and j["duty_cycle"] is not None
        wait_until(reported, 90, "load reports of both jobs")
        st = server.status()
        u, j = job_of(st, uts), job_of(st, jac)
        assert u["duty_cycle"] > 0.5 and u["gil"] is not None, u
        assert j["duty_cycle"] < 0.3 and j["duty_cycle"] < u["duty_cycle"] - 0.3, (u, j)
        assert u["measured_profile"] == "cpu" and not u["profile_declared"]
        assert st["refused_load_lines"] == 4  # the jobs' own lines are all taken
        table = format_status(st)
        assert "DUTY" in table and "cpu (measured)" in table
        # one event when the measured profile is first known, none a report
        events = [e for e in server.events if e["event"] == "profile_measured"]
        assert [e["job"] for e in events].count(uts) == 1, events

        server.cancel(quiet)
        wait_until(lambda: job_of(server.status(), quiet)["state"] == "cancelled", 20,
                   "the sleep job's end")
        _send(server.port, signed("APGAS-Load;0.500;0;-;-"))  # a job that is not running
        wait_until(lambda: server.status()["refused_load_lines"] == 5, 10, "the fifth")
        assert job_of(server.status(), quiet)["duty_cycle"] == 0.25
        server.cancel(uts)
        server.cancel(jac)
        wait_until(server.all_done, 30, "every job's end")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
