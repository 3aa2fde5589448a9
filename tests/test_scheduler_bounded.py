"""The scheduler's notification port under attack (docs/reference/security.md, "Denial of
service"), on real processes and real sockets on loopback addresses.

* the listener alone: past its total cap and its per-peer cap a connection is closed at
  once; a connection is closed for an idle deadline, one line too many, or a line too long;
  the lines within the bounds arrive, and one thread serves them all;
* ``python -m scheduler serve`` with a malleable UTS job running: 2,000 slow connections (a
  newline every 3 s, opened again when closed) and 20 MB of junk lines for addresses where no
  job ran leave its thread count bounded, ``status`` answers within 1 s, the job ends with
  its exact answer, the junk is counted but not logged, and the scheduler's memory is back
  within 20 MB of where it was once the connections are gone;
* a timing line for an address where no job ran is counted and never reaches the event log
  (a job's own timing line does);
* the limits: positive, read from their variables; ``serve`` stops on a bad one.

Every socket and process a test opens is closed or ended by it.
"""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, wait_until

from scheduler import JobSpec
from scheduler.algorithms import make
from scheduler.nodes import LocalNodes
from scheduler.notification_listener import ListenerLimits, NotificationListener
from scheduler.server import Server, job_of

PY = sys.executable
UTS_D12 = 66_106_929
MB = 1 << 20


def _connect(port: int, source: str) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5,
                                    source_address=(source, 0))


def _refused(port: int, source: str) -> None:
    """Connect from ``source`` and expect the connection to be closed at once (the reset may
    reach the client while it connects, or when it reads)."""
    try:
        with _connect(port, source) as sock:
            assert sock.recv(1) == b""
    except ConnectionResetError:
        pass


def _send(port: int, line: str, source: str = "127.0.0.1") -> None:
    with _connect(port, source) as sock:
        sock.sendall(line.encode() + b"\n")


# ------------------------------------------------------------------------------ the listener


def test_the_listener_caps_connections_and_cuts_idle_long_and_chatty_ones():
    """Caps 6 in total and 3 a peer, 0.5 s idle, 4 lines, 64 bytes: the 4th connection of a
    peer and the 7th in all are closed at once; held connections are cut at their deadline;
    a 5th line and a 65-byte line cut theirs; the lines within the bounds arrive (a last
    line without its end too), all on the listener's one thread."""
    got: list[tuple[str, str]] = []
    limits = ListenerLimits(max_connections=6, max_connections_per_peer=3, idle_s=0.5,
                            max_lines=4, max_line_bytes=64)
    listener = NotificationListener("127.0.0.1", 0, lambda line, peer: got.append(
        (line, peer)), limits=limits)
    held: list[socket.socket] = []
    try:
        assert [t.name for t in threading.enumerate()].count("scheduler-notify") == 1
        held += [_connect(listener.port, "127.0.4.1") for _ in range(3)]
        wait_until(lambda: listener.open_connections == 3, 5, "three connections")
        _refused(listener.port, "127.0.4.1")
        wait_until(lambda: listener.refused_connections == 1, 5, "the per-peer refusal")
        held += [_connect(listener.port, "127.0.4.2") for _ in range(3)]
        wait_until(lambda: listener.open_connections == 6, 5, "six connections")
        _refused(listener.port, "127.0.4.3")
        wait_until(lambda: listener.refused_connections == 2, 5, "the total refusal")
        assert listener.open_connections == 6
        wait_until(lambda: listener.open_connections == 0, 5, "the idle deadline")
        assert listener.cut_connections == 6
        for sock in held:
            sock.close()

        with _connect(listener.port, "127.0.4.4") as sock:  # one line too many
            sock.sendall(b"".join(b"line%d:10.0.0.1\n" % i for i in range(1, 7)))
            wait_until(lambda: listener.cut_connections == 7, 5, "the cut after 4 lines")
        with _connect(listener.port, "127.0.4.4") as sock:  # a line too long
            sock.sendall(b"x" * 65)
            wait_until(lambda: listener.cut_connections == 8, 5, "the cut of a long line")
        _send(listener.port, "APGAS-Ready:127.0.1.1", "127.0.4.5")
        with _connect(listener.port, "127.0.4.5") as sock:  # the last line needs no end
            sock.sendall(b"APGAS-Disabled:127.0.1.1")
        wait_until(lambda: len(got) == 6, 5, "the lines within the bounds")
        assert got == [(f"line{i}:10.0.0.1", "127.0.4.4") for i in range(1, 5)] + [
            ("APGAS-Ready:127.0.1.1", "127.0.4.5"), ("APGAS-Disabled:127.0.1.1", "127.0.4.5")]
        assert (listener.refused_connections, listener.cut_connections) == (2, 8)
        assert [t.name for t in threading.enumerate()].count("scheduler-notify") == 1
    finally:
        for sock in held:
            sock.close()
        listener.close()
    assert "scheduler-notify" not in [t.name for t in threading.enumerate()]


def test_limits_are_checked_and_read_from_the_environment():
    """Each limit must be positive; ``from_env`` reads the ``APGAS_SCHEDULER_*`` variables
    and names a bad one."""
    with pytest.raises(ValueError, match="max_connections_per_peer"):
        ListenerLimits(max_connections_per_peer=0)
    limits = ListenerLimits.from_env({"APGAS_SCHEDULER_MAX_CONNECTIONS": "9",
                                      "APGAS_SCHEDULER_CONNECTION_IDLE": "2.5"})
    assert limits == ListenerLimits(max_connections=9, idle_s=2.5)
    with pytest.raises(ValueError, match="APGAS_SCHEDULER_MAX_LINE_BYTES"):
        ListenerLimits.from_env({"APGAS_SCHEDULER_MAX_LINE_BYTES": "-1"})
    with pytest.raises(ValueError, match="APGAS_SCHEDULER_MAX_CONNECTIONS"):
        ListenerLimits.from_env({"APGAS_SCHEDULER_MAX_CONNECTIONS": "many"})



def test_serve_refuses_a_bad_limit_variable(tmp_path):
    """``serve`` with ``APGAS_SCHEDULER_MAX_CONNECTIONS=0`` stops before it listens: one
    line naming the variable, exit status 2."""
    env = dict(os.environ, APGAS_SCHEDULER_MAX_CONNECTIONS="0")
    proc = subprocess.run([PY, "-m", "scheduler", "serve", "--port", "0", "--run-dir",
                           str(tmp_path / "run"), "--control", str(tmp_path / "c.sock")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "error: APGAS_SCHEDULER_MAX_CONNECTIONS must be > 0, got '0'"


# ------------------------------------------------------------------------------ attackers


class SlowCrowd:
    """``n`` connections to ``port`` from ``sources`` (in turn), each sending one newline
    every ``period_s`` seconds, on a thread; a connection the scheduler closed is opened
    again at the next round (``reopened`` counts them).  At most ``rounds`` rounds."""

    def __init__(self, port: int, sources: list[str], n: int, *, period_s: float = 3.0,
                 rounds: int = 30) -> None:
        self.port = port
        self.sources = sources
        self.period_s = period_s
        self.rounds = rounds
        self.reopened = 0
        self._socks = [self._open(i) for i in range(n)]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-crowd", daemon=True)
        self._thread.start()

    def _open(self, i: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.bind((self.sources[i % len(self.sources)], 0))
        sock.connect_ex(("127.0.0.1", self.port))  # EINPROGRESS: completes in the kernel
        return sock

    def _run(self) -> None:
        for _ in range(self.rounds):
            for i, sock in enumerate(self._socks):
                if self._stop.is_set():
                    return
                try:
                    sock.send(b"\n")
                except BlockingIOError:
                    pass  # not connected yet: the scheduler's backlog is full
                except OSError:  # closed by the scheduler: come back
                    sock.close()
                    self._socks[i] = self._open(i)
                    self.reopened += 1
            if self._stop.wait(self.period_s):
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        for sock in self._socks:
            sock.close()


class Junk:
    """Junk lines for addresses where no job ran, on a thread: connections of 16 lines of
    4 KiB (a bogus timing line among them), one after the other from ``sources`` in turn,
    until ``total`` bytes went out on connections the scheduler read to their end; and a
    few connections of 200 short lines (the line cap cuts them).  Stops at ``deadline_s``."""

    LINE = b"J" * 3980 + b":10.66.0.1\n"
    BLOCK = LINE * 15 + b"shrinkTimeAPGAS;1;123:10.66.0.2\n"
    CHATTY = b"junk:10.66.0.3\n" * 200

    def __init__(self, port: int, sources: list[str], total: int, deadline_s: float) -> None:
        self.port = port
        self.sources = sources
        self.total = total
        self.deadline = time.monotonic() + deadline_s
        self.sent = 0
        self.read = 0  # connections the scheduler read to their end
        self._thread = threading.Thread(target=self._run, name="junk", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while self.sent < self.total and time.monotonic() < self.deadline:
            source = self.sources[i % len(self.sources)]
            payload = self.CHATTY if i % 100 == 0 else self.BLOCK
            i += 1
            try:
                with _connect(self.port, source) as sock:
                    sock.sendall(payload)
                    sock.shutdown(socket.SHUT_WR)
                    if sock.recv(1) == b"" and payload is self.BLOCK:  # closed in order
                        self.sent += len(payload)
                        self.read += 1
            except OSError:
                pass  # refused over a cap, or cut: the next one

    def join(self) -> None:
        self._thread.join(timeout=max(1.0, self.deadline - time.monotonic() + 10))

    def alive(self) -> bool:
        return self._thread.is_alive()


def _raise_open_files(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        if hard != resource.RLIM_INFINITY and hard < n:
            pytest.skip(f"needs {n} open files, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


# ------------------------------------------------------------------------------ the attack


@pytest.mark.timeout(180)
def test_slow_connections_and_junk_leave_the_scheduler_bounded(tmp_path):
    """``serve --nodes 2`` runs a malleable UTS d=12 job (1-2 nodes) when 2,000 slow
    connections from 7 addresses (a newline every 3 s) and 20 MB of junk lines from 8 others
    arrive.  During the attack the scheduler has fewer than 64 threads and answers every
    ``status`` within 1 s; connections are refused over the caps; every junk line is counted
    (``dropped_lines``) and none is logged (at most one ``lines_dropped`` event a 10 s).
    Afterwards its connections close, its memory is within 20 MB of where it was before, and
    the job ends with the exact count.

    The attack lasts at least 7 s: every slow connection sends three newlines (one every
    3 s), refused ones come back, the first ``lines_dropped`` event is written and a second
    one is due only after 10 s; the job (a few seconds of work) computes under the attack and
    its last lines may come during it.  (An attack of 13 s and a UTS d=13 job checked the
    same, in twice the time.)"""
    from test_scheduler_real import Serve, job_json, kill_all

    _raise_open_files(8192)
    serve = Serve(tmp_path, "--nodes", "2", "--port", "0", "--cooldown", "0")
    crowd: SlowCrowd | None = None
    try:
        proc = psutil.Process(serve.proc.pid)
        uts = serve.ask(op="submit", job={
            "name": "uts12", "command": [PY, "-m", "benchmarks.uts", "-d", "12", "--json"],
            "required_time_s": 170, "job_class": "malleable", "min_nodes": 1,
            "max_nodes": 2})["jobs"][0]
        wait_until(lambda: serve.events("start", uts), 30, "the job's start")
        st = serve.ask(op="status")
        port = st["port"]
        wait_until(lambda: serve.events("ready", uts), 30, "the job's APGAS-Ready")
        rss_before, threads_before = proc.memory_info().rss, proc.num_threads()

        t0 = time.monotonic()
        assert job_of(serve.ask(op="status"), uts)["state"] == "running"
        crowd = SlowCrowd(port, [f"127.0.2.{i}" for i in range(1, 8)], 2000)
        junk = Junk(port, [f"127.0.3.{i}" for i in range(1, 9)], 20 * MB, deadline_s=60)
        threads, latencies, rss_peak = [], [], rss_before
        while (junk.alive() or time.monotonic() - t0 < 7) and time.monotonic() - t0 < 75:
            threads.append(proc.num_threads())
            rss_peak = max(rss_peak, proc.memory_info().rss)
            start = time.monotonic()
            st = serve.ask(op="status")
            latencies.append(time.monotonic() - start)
            time.sleep(0.5)  # paces on purpose: a sample every half second of the attack
        attack_s = time.monotonic() - t0
        st = serve.ask(op="status")
        crowd.stop()
        junk.join()
        print(f"\nattack {attack_s:.1f} s: threads {threads_before} before, max "
              f"{max(threads)}; status max {max(latencies) * 1000:.0f} ms over "
              f"{len(latencies)}; RSS {rss_before / MB:.1f} MB before, peak "
              f"{rss_peak / MB:.1f} MB; junk {junk.sent / MB:.1f} MB on {junk.read} "
              f"connections; crowd reopened {crowd.reopened}; status {st['open_connections']} "
              f"open, {st['refused_connections']} refused, {st['cut_connections']} cut, "
              f"{st['dropped_lines']} dropped")

        assert max(threads) < 64, threads
        assert max(latencies) < 1.0, latencies
        assert junk.sent >= 20 * MB, (junk.sent, junk.read)
        assert st["refused_connections"] >= crowd.reopened > 0
        assert st["cut_connections"] >= 1  # the chatty junk connections
        assert st["dropped_lines"] >= 16 * junk.read
        assert st["open_connections"] <= 256

        wait_until(lambda: serve.ask(op="status")["open_connections"] == 0, 15,
                   "the attack's connections to close")
        wait_until(lambda: proc.memory_info().rss <= rss_before + 20 * MB, 10,
                   "the scheduler's memory to come back")

        wait_until(lambda: job_of(serve.ask(op="status"), uts)["state"] != "running", 120,
                   "the job's end")
        job = job_of(serve.ask(op="status"), uts)
        res = job_json(job["stdout"])
        assert job["state"] == "done" and res["result"] == UTS_D12 and res["correct"] is True

        log_text = serve.log.read_text()
        assert "10.66.0." not in log_text  # no junk line, no bogus timing line
        assert not [e for e in serve.events("timing") if e["job"] is None]
        drops = serve.events("lines_dropped")
        assert 1 <= len(drops) <= attack_s / 10 + 2, drops
        assert len(log_text) < MB
    finally:
        if crowd is not None:
            crowd.stop()
        kill_all(serve.close())
    assert serve.proc.returncode == 0, serve.err_path.read_text()[-3000:]


# ------------------------------------------------------------------------------ the event log


@pytest.mark.timeout(60)
def test_a_timing_line_for_an_address_where_no_job_ran_is_not_logged(tmp_path):
    """A keyless job runs at 127.0.1.1: its timing line is logged under its id; a timing
    line, a release and a junk line for 10.77.0.1 (no job ever ran there) are counted in
    ``dropped_lines`` and none of them reaches the event log (one ``lines_dropped`` event
    says that one was dropped; the next two fall in its 10 s)."""
    log = tmp_path / "events.jsonl"
    server = Server(LocalNodes(2), make("fcfs"), port=0, run_dir=tmp_path / "run",
                    log_path=log, interval_s=0.5, grace_s=1.0)
    server.start()
    try:
        a = server.submit(JobSpec(name="plain", nodes=1, command=("sleep", "30"),
                                  required_time_s=60, auth="plain"))
        wait_until(lambda: job_of(server.status(), a)["state"] == "running", 15, "the start")
        assert job_of(server.status(), a)["nodes"] == ["127.0.1.1"]
        for line in ("growTimeAPGAS;1;4242:10.77.0.1", "Evolving;Release;127.0.1.2:10.77.0.1",
                     "hello:10.77.0.1", "shrinkTimeAPGAS;1;777:127.0.1.1"):
            _send(server.port, line)
        wait_until(lambda: server.status()["dropped_lines"] == 3, 10, "three drops")
        wait_until(lambda: [e for e in list(server.events) if e["event"] == "timing"], 10,
                   "the job's timing line")
        timing = [e for e in list(server.events) if e["event"] == "timing"]
        assert [(e["job"], e["fields"][:3]) for e in timing] == [
            (a, ["shrinkTimeAPGAS", "1", "777"])]
        drops = [e for e in list(server.events) if e["event"] == "lines_dropped"]
        assert [(e["dropped"], e["total"], e["peer"]) for e in drops] == [
            (1, 1, "127.0.0.1")]
        text = Path(log).read_text()
        assert "10.77.0.1" not in text and "4242" not in text
        assert server.status()["refused_lines"] == 0
        server.cancel(a)
        wait_until(server.all_done, 20, "the cancel")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
