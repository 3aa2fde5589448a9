"""Authenticated scheduler lines (docs/reference/security.md), on real processes.

* the MAC, the counter and the key files as plain data;
* a keyed apgaspy job under a test that plays the scheduler: its notifications carry valid
  MACs; an unsigned order, a malformed MAC, another key, another job's id, a line signed for
  the other direction and a replay of a captured valid order are refused, and the places
  stay as the orders that were carried out left them;
* the real scheduler: forged ``Evolving;Release`` lines from an unrelated process, a replay
  of a captured valid notification, a line for another job and a malformed MAC change
  nothing (counted, logged with their peer);
* ``serve --algorithm malleable`` with a malleable UTS job on 2 nodes: ``shrink 1`` from an
  unrelated process is refused, the job computes the exact answer on both nodes and the
  scheduler's view agrees;
* a second (non-root) user can neither use the control socket to cancel another's job nor
  the notification path to take its nodes, nor read its key;
* a job started through ssh gets its key from an owner-only file, never on a command line
  (``ps`` does not show it);
* a job without a key takes notifications from its first node's address only.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT, env_for, wait_decisions, wait_until

from apgaspy.wire.auth import (
    NOTIFICATION,
    ORDER,
    Counter,
    LineAuthError,
    RefusalLog,
    ReplayGuard,
    encode_key,
    load_key,
    new_key,
    sign_line,
    split_mac,
    verify_line,
    write_key_file,
)
from communicators.testing import SchedulerEndpoint
from scheduler import JobSpec
from scheduler.algorithms import make
from scheduler.jobs import parse_job_script
from scheduler.nodes import JobLaunch, LocalNodes, SshHosts
from scheduler.notifications import peer_may_notify
from scheduler.server import Server, job_of
from scheduler.state import ServerJob

PY = sys.executable
UTS_D12 = 66_106_929


def _send(port: int, line: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line.encode() + b"\n")


# ------------------------------------------------------------------------------ as data

def test_sign_verify_and_every_refusal():
    key, other = new_key(), new_key()
    c = Counter()
    line = sign_line(key, ORDER, "7", "grow 2 h1 h2 \n", c.next())
    body, field = split_mac(line)
    assert body == "grow 2 h1 h2" and field is not None and line.startswith("grow 2 h1 h2 mac=")
    guard = ReplayGuard()
    assert verify_line(key, ORDER, "7", line, guard) == "grow 2 h1 h2"
    refusals = {
        "replay": (key, ORDER, "7", line),
        "other key": (key, ORDER, "7", sign_line(other, ORDER, "7", "shrink 1", c.next())),
        "other job": (key, ORDER, "7", sign_line(key, ORDER, "8", "shrink 1", c.next())),
        "other direction": (key, ORDER, "7", sign_line(key, NOTIFICATION, "7", "shrink 1",
                                                       c.next())),
        "changed": (key, ORDER, "7", sign_line(key, ORDER, "7", "shrink 1", c.next())
                    .replace("shrink 1", "shrink 2")),
        "no mac": (key, ORDER, "7", "shrink 1"),
        "malformed": (key, ORDER, "7", "shrink 1 mac=12.zz"),
        "short": (key, ORDER, "7", "shrink 1 mac=12"),
    }
    expect = {"replay": "replay", "no mac": "no MAC", "malformed": "malformed",
              "short": "malformed"}
    for name, (k, d, j, text) in refusals.items():
        with pytest.raises(LineAuthError, match=expect.get(name, "wrong MAC")):
            verify_line(k, d, j, text, guard)
    # the other-key line verifies with its own key: it is the key that differs
    assert verify_line(other, ORDER, "7", refusals["other key"][3], ReplayGuard()) == "shrink 1"
    assert not split_mac("APGAS-Ready:127.0.1.1")[1]


def test_replay_window_takes_late_lines_once_and_refuses_old_ones():
    g = ReplayGuard(window_ns=100)
    assert g.accept(1000) and g.accept(990) and g.accept(1001)  # 990: late, but new
    assert not g.accept(990) and not g.accept(1000)  # seen
    assert not g.accept(901)  # below the window
    assert g.accept(5000) and not g.accept(1002)
    floor = ReplayGuard(floor=10**9)
    assert not floor.accept(10**9) and floor.accept(10**9 + 1)
    small = ReplayGuard(window_ns=10**6, keep=3)
    assert all(small.accept(x) for x in (10, 20, 30, 40))
    assert small.floor == 10 and not small.accept(10)  # forgotten: the floor rose to it
    assert small.accept(15) and not small.accept(20)
    log = RefusalLog(burst=2, period_s=60)
    assert [log.refuse() for _ in range(4)] == [0, 0, None, None] and log.total == 4


def test_key_files_are_owner_only_and_load_key(tmp_path):
    key = new_key()
    path = write_key_file(tmp_path / "job.key", key)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key({"SCHEDULER_KEY_FILE": str(path)}) == key
    assert load_key({"SCHEDULER_KEY": encode_key(key)}) == key
    assert load_key({}) is None
    path.chmod(0o640)
    with pytest.raises(ValueError, match="readable by others"):
        load_key({"SCHEDULER_KEY_FILE": str(path)})
    for bad in ("xyz", "abcd"):
        with pytest.raises(ValueError, match="scheduler key"):
            load_key({"SCHEDULER_KEY": bad})
    assert parse_job_script("#AUTH plain\n#NODES 1\n").auth == "plain"
    assert parse_job_script("#NODES 1\n").auth == "key"
    with pytest.raises(ValueError, match="AUTH"):
        parse_job_script("#AUTH maybe\n#NODES 1\n")


def test_a_keyless_job_is_checked_by_peer_address():
    job = ServerJob(1, JobSpec(nodes=1, auth="plain"), ("true",), 0.0, address="10.1.2.3")
    assert peer_may_notify(job, "10.1.2.3") and not peer_may_notify(job, "10.1.2.4")
    assert not peer_may_notify(job, "127.0.0.1")
    local = ServerJob(2, JobSpec(nodes=1), ("true",), 0.0, address="127.0.1.1")
    assert peer_may_notify(local, "127.0.0.1") and not peer_may_notify(local, "10.1.2.3")
    secret = new_key()
    shown = repr(ServerJob(3, JobSpec(nodes=1), ("true",), 0.0, key=secret))
    assert repr(secret) not in shown and secret.hex() not in shown


# ------------------------------------------------------------------------------ the job side

def _event(prog, name):
    while True:
        ev = json.loads(prog.readline(timeout=60))
        if ev.get("event") == name:
            return ev


@pytest.mark.timeout(90)
def test_a_keyed_job_signs_its_lines_and_refuses_bad_and_replayed_orders(tmp_path,
                                                                         program_factory):
    sched = SchedulerEndpoint()
    key = new_key()
    try:
        node_file = tmp_path / "nodes"
        node_file.write_text("127.0.1.1\n127.0.1.2\n")
        env = env_for(None, NODE_FILE=str(node_file), NODES="2", JOBNAME="7",
                      APGAS_ORDER_TIMEOUT="1", SCHEDULER_KEY=encode_key(key), **sched.env())
        prog = program_factory("malleable.py", 2, "spawn", env=env)
        assert sorted(_event(prog, "ready")["pids"]) == ["0", "1"]
        seen = ReplayGuard()
        ready = sched.wait_for("APGAS-Ready:127.0.1.1 mac=")
        assert verify_line(key, NOTIFICATION, "7", ready, seen) == "APGAS-Ready:127.0.1.1"
        job = ("127.0.1.1", sched.port)
        c = Counter()
        other = new_key()
        for payload, words in [
            ("shrink 1\n", "no MAC"),  # the attack: a plain order from a local process
            ("shrink 1 mac=1.zz\n", "malformed"),
            (sign_line(other, ORDER, "7", "shrink 1", c.next()) + "\n", "wrong MAC"),
            (sign_line(key, ORDER, "8", "shrink 1", c.next()) + "\n", "wrong MAC"),
            (sign_line(key, NOTIFICATION, "7", "shrink 1", c.next()) + "\n", "wrong MAC"),
        ]:
            reply = sched.order(job, payload, timeout=30)
            assert len(reply) == 1 and "authentication failed" in reply[0] \
                and words in reply[0], reply
        # the order tool signs with the key of its environment: the job reads the order
        # (and refuses it for what it asks, not for its MAC)
        tool = subprocess.run(
            [PY, "-m", "communicators.order_cli", "shrink", "5", "--job", f"127.0.1.1:{sched.port}",
             "--job-id", "7"], cwd=ROOT, capture_output=True, text=True, timeout=30,
            env=dict(os.environ, SCHEDULER_KEY=encode_key(key)))
        assert tool.returncode == 1 and "cannot release 5 hosts" in tool.stdout, tool
        valid = sign_line(key, ORDER, "7", "shrink 1", c.next()) + "\n"
        assert sched.order(job, valid) == ["127.0.1.2"]
        assert _event(prog, "post_shrink")["removed"] == [1]
        timing = sched.wait_for("shrinkTimeAPGAS;1;")
        assert verify_line(key, NOTIFICATION, "7", timing, seen).endswith(":127.0.1.1")
        with pytest.raises(LineAuthError, match="replay"):  # the scheduler's side of a replay
            verify_line(key, NOTIFICATION, "7", timing, seen)
        # the captured valid order, sent again: refused, nothing released
        reply = sched.order(job, valid, timeout=30)
        assert len(reply) == 1 and "replay" in reply[0], reply
        prog.send("stop\n")
        report = _event(prog, "report")
        assert report["calls"] == [["pre_shrink", 1], ["post_shrink", 1, [1]]]
        assert report["views"] == {"0": [0]}
        result = prog.finish()
        assert result.returncode == 0, result.stderr
        assert "refused an order from 127.0.0.1: authentication failed" in result.stderr
        assert encode_key(key) not in result.stderr + result.stdout
    finally:
        sched.close()


# ------------------------------------------------------------------------------ the scheduler

@pytest.mark.timeout(60)
def test_forged_and_replayed_notifications_change_nothing(tmp_path):
    """The first attack: ``serve --nodes 3 --algorithm evolving-easy``, an evolving job on 3
    nodes (min 2), a rigid 2-node job waiting; two ``Evolving;Release`` lines from an
    unrelated process are refused.  Then a valid line signed with the job's key is taken
    once; its replay, a line for another job and a malformed MAC are refused."""
    server = Server(LocalNodes(3), make("evolving-easy"), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0)
    server.start()
    try:
        a = server.submit(JobSpec(name="evo", job_class="evolving", min_nodes=2, max_nodes=3,
                                  command=("sleep", "30"), required_time_s=60))
        wait_until(lambda: job_of(server.status(), a)["state"] == "running", 15, "the start")
        b = server.submit(JobSpec(name="rigid", nodes=2, command=("sleep", "1"),
                                  required_time_s=60))
        key_file = server.run_dir / f"job-{a}.key"
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        key = load_key({"SCHEDULER_KEY_FILE": str(key_file)})
        assert key is not None

        def refused() -> list[dict]:
            return [e for e in list(server.events) if e["event"] == "line_refused"]

        for line in ("Evolving;Release;127.0.1.2:127.0.1.1",
                     "Evolving;Release;127.0.1.3:127.0.1.1"):
            _send(server.port, line)
        wait_until(lambda: len(refused()) == 2, 10, "two refusals")
        st = server.status()
        assert job_of(st, a)["nodes"] == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        assert job_of(st, b)["state"] == "waiting" and st["free"] == 0
        assert st["refused_lines"] == 2 and job_of(st, a)["authenticated"]
        assert {e["peer"] for e in refused()} == {"127.0.0.1"}
        assert all("no MAC" in e["reason"] and e["job"] == a for e in refused())

        c = Counter()
        valid = sign_line(key, NOTIFICATION, str(a), "Evolving;Release;127.0.1.3:127.0.1.1",
                          c.next())
        _send(server.port, valid)
        wait_until(lambda: server.status()["free"] == 1, 10, "the valid release")
        for line in (valid,  # a replay of the captured line
                     sign_line(key, NOTIFICATION, str(b), "Evolving;Release;127.0.1.2:127.0.1.1",
                               c.next()),  # signed for another job
                     "Evolving;Release;127.0.1.2:127.0.1.1 mac=99.beef"):
            _send(server.port, line)
        wait_until(lambda: len(refused()) == 5, 10, "three more refusals")
        reasons = [e["reason"] for e in refused()[2:]]
        assert sum("replay" in r for r in reasons) == 1
        assert sum("wrong MAC" in r for r in reasons) == 1
        assert sum("malformed" in r for r in reasons) == 1
        wait_decisions(server, 2)  # two periods of the algorithm: nothing more happens
        st = server.status()
        assert job_of(st, a)["nodes"] == ["127.0.1.1", "127.0.1.2"]
        assert job_of(st, a)["releases"] == 1 and st["refused_lines"] == 5
        assert job_of(st, b)["state"] == "waiting" and st["free"] == 1
        # the key is nowhere in what the scheduler shows or writes
        text = encode_key(key)
        assert text not in json.dumps(st) and text not in (tmp_path / "events.jsonl").read_text()
        server.cancel(a)
        wait_until(server.all_done, 20, "both jobs")
        assert not key_file.exists()  # removed at the job's end
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(120)
def test_a_stranger_cannot_shrink_a_malleable_job(tmp_path):
    """The second attack: ``serve --algorithm malleable``, a malleable UTS job grown onto
    both nodes (a signed grow); ``shrink 1`` from an unrelated local process to the job's
    order port is refused; the job ends with the exact count on both nodes and the
    scheduler's view (2 nodes, one grow, no shrink) agrees."""
    from test_scheduler_real import Serve, job_json, kill_all

    serve = Serve(tmp_path, "--nodes", "2", "--port", "0", "--algorithm", "malleable")
    try:
        uts = serve.ask(op="submit", job={
            "name": "uts12", "command": [PY, "-m", "benchmarks.uts", "-d", "12", "--json"],
            "required_time_s": 120, "job_class": "malleable", "min_nodes": 1,
            "max_nodes": 2})["jobs"][0]
        wait_until(lambda: serve.events("grow_done", uts), 30, "the grow onto node 2")
        st = serve.ask(op="status")
        port = st["port"]
        assert job_of(st, uts)["nodes"] == ["127.0.1.1", "127.0.1.2"]
        with socket.create_connection(("127.0.1.1", port), timeout=10) as conn:
            conn.sendall(b"shrink 1\n")
            conn.settimeout(30)
            reply = b""
            while chunk := conn.recv(4096):
                reply += chunk
        assert reply.startswith(b"ERROR authentication failed: no MAC"), reply
        wait_until(lambda: job_of(serve.ask(op="status"), uts)["state"] != "running", 90,
                   "the job's end")
        job = job_of(serve.ask(op="status"), uts)
        assert (job["state"], job["shrinks"], job["grows"]) == ("done", 0, 1)
        assert job["authenticated"] and not serve.events("shrink_order")
        res = job_json(job["stdout"])
        assert res["result"] == UTS_D12 and res["correct"] is True
        assert res["orders"] == [["grow", [1]]] and res["places_at_end"] == 2, res
    finally:
        kill_all(serve.close())


# ------------------------------------------------------------------------------ other users

@pytest.fixture
def other_user():
    """A throwaway non-root user (created with useradd, removed after)."""
    if os.getuid() != 0 or not shutil.which("useradd") or not SYSTEM_PY:
        pytest.skip("needs root, useradd and a system python3 another user may run")
    name = f"apgt{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True, timeout=30)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=30)


#: A Python any user may run (the test's own may live under root's home); the stranger's
#: script needs the standard library only.
SYSTEM_PY = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3")
                  if os.access(p, os.X_OK)), None)

STRANGER = r'''
import json, socket, sys
control, port, key_file, job = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
out = {}
try:
    open(key_file).read()
    out["key"] = "read"
except OSError as exc:
    out["key"] = type(exc).__name__
try:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(control)
        s.sendall(json.dumps({"op": "cancel", "id": job}).encode() + b"\n")
        out["cancel"] = s.makefile().readline()
except OSError as exc:
    out["cancel"] = type(exc).__name__
for line in ("Evolving;Release;127.0.1.3:127.0.1.1", "Evolving;Release;127.0.1.2:127.0.1.1"):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(line.encode() + b"\n")
print(json.dumps(out))
'''


@pytest.mark.timeout(60)
def test_a_second_user_can_neither_cancel_nor_release_nor_read_the_key(other_user):
    """The control socket is the owner's (0600): another user cannot connect; with a
    control group, a member may connect but not cancel another user's job; through the
    notification port (open to every local user) the same user cannot take the job's nodes
    either, nor read its key file."""
    base = Path(tempfile.mkdtemp(prefix="apgaspy-auth-"))
    base.chmod(0o755)  # the stranger may look in; the key and control files are guarded
    server = Server(LocalNodes(3), make("evolving-easy"), port=0, run_dir=base / "run",
                    interval_s=0.5, grace_s=1.0)
    server.start()
    try:
        (base / "run").chmod(0o755)
        path = server.serve_control(base / "control.sock")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        a = server.submit(JobSpec(name="evo", job_class="evolving", min_nodes=2, max_nodes=3,
                                  command=("sleep", "30"), required_time_s=60),
                          user=os.getuid())
        wait_until(lambda: job_of(server.status(), a)["state"] == "running", 15, "the start")
        script = base / "stranger.py"
        script.write_text(STRANGER)
        script.chmod(0o644)

        def as_stranger() -> dict:
            r = subprocess.run(
                [str(SYSTEM_PY), "-I", str(script), str(path), str(server.port),
                 str(server.run_dir / f"job-{a}.key"), str(a)],
                user=other_user.pw_uid, group=other_user.pw_gid, extra_groups=[],
                capture_output=True, text=True, timeout=30, cwd="/")
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        first = as_stranger()
        assert first == {"key": "PermissionError", "cancel": "PermissionError"}, first
        server._control.close()  # the same socket, now open to the stranger's group
        path = server.serve_control(base / "control.sock",
                                    group=grp.getgrgid(other_user.pw_gid).gr_name)
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        second = as_stranger()
        assert second["key"] == "PermissionError"
        assert json.loads(second["cancel"])["ok"] is False, second
        wait_until(lambda: server.status()["refused_lines"] == 4, 10, "four refusals")
        st = server.status()
        assert job_of(st, a)["state"] == "running" and st["free"] == 0
        assert job_of(st, a)["nodes"] == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        server.cancel(a)
        wait_until(server.all_done, 20, "the cancel")
    finally:
        server.shutdown()
        shutil.rmtree(base, ignore_errors=True)
    assert server.leftover_pids() == []


# ------------------------------------------------------------------------------ ssh launches

SSH_STAND_IN = """#!/bin/sh
# an ssh stand-in: [-t -t] HOST COMMAND, run here by sh as sshd would
while [ "$1" = "-t" ]; do shift; done
shift
exec sh -c "$*"
"""

# runs on until the test has looked at ``ps`` (it creates the file ``<probe>.done``), at most
# 30 s: its command line must be there while the test looks
KEY_PROBE = r'''
import json, os, sys, time
from apgaspy.wire.auth import load_key
key = load_key()
print(json.dumps({"env_key": "SCHEDULER_KEY" in os.environ, "key": key.hex() if key else None}),
      flush=True)
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[0] + ".done") and time.monotonic() < deadline:
    time.sleep(0.05)
'''


@pytest.mark.timeout(60)
def test_an_ssh_job_gets_its_key_from_a_file_and_ps_never_shows_it(tmp_path):
    ssh = tmp_path / "ssh"
    ssh.write_text(SSH_STAND_IN)
    ssh.chmod(0o755)
    probe = tmp_path / "probe.py"
    probe.write_text(KEY_PROBE)
    nodes = SshHosts(["127.0.1.1", "127.0.1.2"], ssh=str(ssh), listen="127.0.0.1", tty=False)
    server = Server(nodes, make("malleable"), port=0, run_dir=tmp_path / "run",
                    interval_s=0.5, grace_s=1.0, cwd=str(ROOT),
                    job_env={"PYTHONPATH": str(ROOT)})
    server.start()
    try:
        a = server.submit(JobSpec(name="probe", nodes=1, command=(PY, str(probe)),
                                  required_time_s=30))
        out = server.run_dir / f"job-{a}.out"
        wait_until(lambda: out.exists() and out.read_text().strip(), 20, "the probe")
        key = (server.run_dir / f"job-{a}.key").read_text().strip()
        ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True,
                            timeout=10, check=True).stdout
        Path(f"{probe}.done").touch()  # the probe may end
        assert str(probe) in ps and key not in ps
        assert json.loads(out.read_text()) == {"env_key": False, "key": key}
        launch = JobLaunch(a, ("true",), str(ROOT), out, out)
        line = " ".join(nodes.command(launch, "h1", {"SCHEDULER_KEY": key,
                                                      "SCHEDULER_KEY_FILE": "/run/k"}))
        assert key not in line and "SCHEDULER_KEY_FILE=/run/k" in line
        wait_until(server.all_done, 20, "the probe's end")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(30)
def test_a_keyless_jobs_lines_from_another_address_are_refused(tmp_path):
    """A job without a key (``#AUTH plain``) on a host that is not this machine (TEST-NET
    192.0.2.1; the ssh stand-in starts it here): a plain ``APGAS-Ready`` from this machine
    is refused (not the job's first node's address) and the job stays not ready."""
    ssh = tmp_path / "ssh"
    ssh.write_text(SSH_STAND_IN)
    ssh.chmod(0o755)
    server = Server(SshHosts(["192.0.2.1"], ssh=str(ssh), listen="127.0.0.1", tty=False),
                    make("malleable"), port=0, run_dir=tmp_path / "run", interval_s=0.5,
                    grace_s=1.0)
    server.start()
    try:
        a = server.submit(JobSpec(name="java", job_class="malleable", min_nodes=1,
                                  max_nodes=1, command=("sleep", "20"), required_time_s=30,
                                  auth="plain"))
        wait_until(lambda: job_of(server.status(), a)["state"] == "running", 15, "the start")
        assert not (server.run_dir / f"job-{a}.key").exists()
        _send(server.port, "APGAS-Ready:192.0.2.1")
        wait_until(lambda: server.status()["refused_lines"] == 1, 10, "the refusal")
        (ev,) = [e for e in list(server.events) if e["event"] == "line_refused"]
        assert ev["peer"] == "127.0.0.1" and "192.0.2.1" in ev["reason"] and ev["job"] == a
        job = job_of(server.status(), a)
        assert not job["ready"] and not job["authenticated"]
        server.cancel(a)
        wait_until(server.all_done, 15, "the cancel")
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


@pytest.mark.timeout(60)
def test_a_restarted_scheduler_reads_the_key_back_and_refuses_older_lines(tmp_path):
    """A scheduler with a journal is detached (its evolving job runs on) and a second one
    adopts the job: it has read the key back from the job's file; a line signed before the
    restart (captured, never sent) is refused as too old, one signed after is taken."""
    def server() -> Server:
        return Server(LocalNodes(3), make("evolving-easy"), port=0, run_dir=tmp_path / "run",
                      state_dir=tmp_path / "state", interval_s=0.5, grace_s=1.0)

    first = server()
    first.start()
    second = None
    try:
        a = first.submit(JobSpec(name="evo", job_class="evolving", min_nodes=2, max_nodes=3,
                                 command=("sleep", "30"), required_time_s=60))
        wait_until(lambda: job_of(first.status(), a)["state"] == "running", 15, "the start")
        key = load_key({"SCHEDULER_KEY_FILE": str(first.run_dir / f"job-{a}.key")})
        assert key is not None
        c = Counter()
        old = sign_line(key, NOTIFICATION, str(a), "Evolving;Release;127.0.1.3:127.0.1.1",
                        c.next())
        port = first.port
        first.detach()
        second = Server(LocalNodes(3), make("evolving-easy"), port=port,
                        run_dir=tmp_path / "run", state_dir=tmp_path / "state",
                        interval_s=0.5, grace_s=1.0)
        second.start()
        job = job_of(second.status(), a)
        assert job["adopted"] and job["authenticated"] and len(job["nodes"]) == 3
        _send(second.port, old)
        wait_until(lambda: second.status()["refused_lines"] == 1, 10, "the old line refused")
        _send(second.port, sign_line(key, NOTIFICATION, str(a),
                                     "Evolving;Release;127.0.1.3:127.0.1.1", c.next()))
        wait_until(lambda: second.status()["free"] == 1, 10, "the new line taken")
        assert job_of(second.status(), a)["nodes"] == ["127.0.1.1", "127.0.1.2"]
        second.cancel(a)
        wait_until(second.all_done, 20, "the cancel")
    finally:
        if second is not None:
            second.shutdown()
        first.shutdown()
    assert second is not None and second.leftover_pids() == []
