"""The scheduler survives its own crash: journal, recovery, lock, history, access.

Real ``python -m scheduler serve`` processes on logical nodes, killed with SIGKILL at chosen
points (after submissions and just after a start, during shutdown, during a grow, between the
journal and a launch), and on ssh hosts (the multi-host test cluster) and in Slurm mode (the
test Slurm cluster), which skip where those clusters cannot be had; a restart on the same
state directory must account for every job submitted before the kill (finished, running,
queued, or failed with a reason), never put two jobs on one node at once, and let the jobs
that ran through the crash finish with their exact answers (UTS depth 8: 257,042 nodes).
Also: a torn journal write (a writer killed inside its transaction), the state directory's
lock, ``history``, a full disk under the journal (a small tmpfs), and the control socket's
access rules with a second, unprivileged user (created and removed by the test; root only).

Every job's processes are found again from the journal's pids (their sessions) and killed in
a ``finally``; so is every scheduler the test started.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from conftest import ROOT, kill_tree, wait_until

from scheduler.control_client import ControlError, request
from scheduler.journal import Journal

PY = sys.executable
UTS_D8 = 257_042
#: A short real job: wait a moment (so that the scheduler can be killed while it runs), then
#: UTS depth 8 on its nodes.
UTS_JOB = ["sh", "-c", f"sleep 1.5; exec {PY} -m benchmarks.uts -d 8"]


class Serve:
    """``python -m scheduler serve`` in the background on one run/state directory."""

    def __init__(self, tmp: Path, *args: str, control: Path | None = None,
                 env: dict[str, str] | None = None, popen: Any = None) -> None:
        self.tmp = tmp
        tmp.mkdir(parents=True, exist_ok=True)
        self.control = control or tmp / "control.sock"
        self.run_dir = tmp / "run"
        self.state_dir = self.run_dir / "state"
        self.log = tmp / "events.jsonl"
        n = len(list(tmp.glob("serve*.err")))
        self.err_path = tmp / f"serve{n}.err"
        argv = [PY, "-m", "scheduler", "serve", "--control", str(self.control), "--log",
                str(self.log), "--run-dir", str(self.run_dir), "--interval", "1", "--port",
                "0", "--grace", "2", *args]
        env = dict(os.environ if env is None else env)
        env.pop("APGAS_PLACES", None)
        with open(self.err_path, "wb") as err:
            if popen is None:
                self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                             stdout=err, stderr=err, start_new_session=True)
            else:
                self.proc = popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                  stdout=err, stderr=err)
        wait_until(lambda: self._up() or self.proc.poll() is not None, 30,
                   "the control socket")
        assert self.proc.poll() is None, self.err_path.read_text()

    def _up(self) -> bool:
        try:
            request(self.control, {"op": "ping"}, timeout_s=2)
        except ControlError:
            return False
        return True

    def ask(self, **message: Any) -> dict[str, Any]:
        return request(self.control, message, timeout_s=60)

    def events(self, kind: str, job: int | None = None) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            with contextlib.suppress(ValueError):
                e = json.loads(line)
                if e["event"] == kind and (job is None or e["job"] == job):
                    out.append(e)
        return out

    def crash(self) -> None:
        """SIGKILL the scheduler (not its jobs)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ControlError):
                request(self.control, {"op": "shutdown"}, timeout_s=30)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                kill_tree(self.proc.pid)
                self.proc.wait(timeout=10)


def job_pids(state_dir: Path) -> set[int]:
    """The first pids of every job the journal knows (their session ids)."""
    if not (state_dir / "journal.sqlite").exists():
        return set()
    j = Journal(state_dir, readonly=True)
    try:
        return {r.pid for r in j.rows() if r.pid is not None}
    finally:
        j.close()


def kill_jobs(sessions: set[int]) -> None:
    """SIGKILL every process in the given sessions (the test's jobs only)."""
    for proc in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(proc.pid) in sessions:
                os.kill(proc.pid, signal.SIGKILL)


def stop_all(serve: Serve, *restarted: Serve | None) -> None:
    """End a test's scheduler sessions (``restarted`` ones first, ``None`` skipped) and then
    SIGKILL whatever is left of the jobs ``serve``'s journal knows."""
    sessions = job_pids(serve.state_dir)
    for s in (*restarted, serve):
        if s is not None:
            s.stop()
    kill_jobs(sessions)


def rows(state_dir: Path) -> dict[int, Any]:
    j = Journal(state_dir, readonly=True)
    try:
        return {r.id: r for r in j.rows()}
    finally:
        j.close()


def assert_no_double_booking(state_dir: Path) -> None:
    """No node is held by two jobs at once, by the journal's allotments."""
    spans: dict[str, list[tuple[float, float, int]]] = {}
    for r in rows(state_dir).values():
        allot = r.allotment
        for k, (t, nodes) in enumerate(allot):
            end = allot[k + 1][0] if k + 1 < len(allot) else (r.end_wall or time.time())
            for n in nodes:
                spans.setdefault(n, []).append((t, end, r.id))
    for node, s in spans.items():
        s.sort()
        for (_a0, a1, ja), (b0, _b1, jb) in zip(s, s[1:], strict=False):
            assert b0 >= a1 - 1e-6, f"{node} held by jobs {ja} and {jb} at once"


def uts_count(path: Path) -> int:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("result:"):
            return int(line.split()[1].replace(",", ""))
    raise AssertionError(f"no result in {path}: {path.read_text()[-500:]}")


# ------------------------------------------------------------------------------ crash tests


@pytest.mark.timeout(90)
def test_kill_after_submissions_and_just_after_a_start(tmp_path):
    """4 nodes, EASY: six rigid 2-node UTS jobs and one delayed; SIGKILL right after the
    second start.  A restart on the same state directory adopts the 2 running jobs (their
    nodes stay busy), queues the 4 waiting ones again in order and the delayed one at its
    time; all 7 end ``done`` with 257,042 nodes, and no node was double booked."""
    serve = Serve(tmp_path, "--nodes", "4", "--algorithm", "easy")
    second = None
    # only the two that run at the kill need UTS_JOB's pause; the others start after the
    # restart and run UTS d=8 at once (the same count checked)
    quick = [PY, "-m", "benchmarks.uts", "-d", "8"]
    try:
        ids = [serve.ask(op="submit", job={"name": f"uts{k}",
                                           "command": UTS_JOB if k < 2 else quick,
                                           "nodes": 2, "required_time_s": 120})["jobs"][0]
               for k in range(6)]
        ids += serve.ask(op="submit", job={"name": "late", "command": quick, "nodes": 2,
                                           "required_time_s": 120, "submit_s": 4})["jobs"]
        wait_until(lambda: serve.events("start", ids[1]), 30, "the second start")
        serve.crash()
        before = rows(serve.state_dir)
        assert [before[i].state for i in ids] == ["running"] * 2 + ["waiting"] * 4 + \
            ["pending"]
        second = Serve(tmp_path, "--nodes", "4", "--algorithm", "easy")
        st = second.ask(op="status")
        running = {j["id"]: j for j in st["jobs"] if j["state"] == "running"}
        assert set(running) == set(ids[:2]) and all(j["adopted"] for j in running.values())
        assert st["free"] == 0  # the adopted jobs hold all 4 nodes
        assert [j["id"] for j in st["jobs"] if j["state"] == "waiting"] == ids[2:6]
        wait_until(lambda: all(j["state"] in ("done", "failed") for j in
                               second.ask(op="status")["jobs"]), 70, "every job's end")
        final = second.ask(op="status")["jobs"]
        assert [(j["id"], j["state"], j["returncode"]) for j in final] == \
            [(i, "done", 0) for i in ids]
        for i in ids:
            assert uts_count(second.run_dir / f"job-{i}.out") == UTS_D8
        starts = [e["job"] for e in second.events("start")]
        assert starts[:2] == ids[:2] and sorted(starts[2:]) == sorted(ids[2:])
        assert_no_double_booking(second.state_dir)
        hist = subprocess.run([PY, "-m", "scheduler", "history", "--run-dir",
                               str(second.run_dir), "--json"], cwd=ROOT, capture_output=True,
                              text=True, timeout=30)
        assert hist.returncode == 0, hist.stderr
        h = json.loads(hist.stdout)
        assert [(r["id"], r["state"], r["returncode"], r["max_nodes_held"]) for r in h] == \
            [(i, "done", 0, 2) for i in ids]
        assert all(r["wait_s"] >= 0 and r["turnaround_s"] >= r["run_s"] > 0 for r in h)
    finally:
        stop_all(serve, second)


@pytest.mark.timeout(60)
def test_kill_during_shutdown_then_restart_accounts_for_every_job(tmp_path):
    """SIGKILL while a shutdown ends the jobs: after a restart, the two jobs that ran are
    ``cancelled`` (their end recorded from their status files or seen on adoption), the
    queued ones ``cancelled`` with the shutdown as reason; nothing runs, every node free."""
    serve = Serve(tmp_path, "--nodes", "2", "--algorithm", "easy")
    second = None
    try:
        long = ["sh", "-c", "sleep 30"]
        ids = [serve.ask(op="submit", job={"name": f"s{k}", "command": long, "nodes": 1,
                                           "required_time_s": 120})["jobs"][0]
               for k in range(4)]
        wait_until(lambda: len(serve.events("start")) == 2, 30, "two starts")
        # shutdown blocks in its reply; the scheduler is killed once it has begun.
        client = subprocess.Popen([PY, "-m", "scheduler", "shutdown", "--control",
                                   str(serve.control)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: serve.events("shutdown"), 20, "the shutdown")
            serve.crash()
        finally:
            client.wait(timeout=20)
        second = Serve(tmp_path, "--nodes", "2", "--algorithm", "easy")
        wait_until(lambda: all(j["state"] == "cancelled" for j in
                               second.ask(op="status")["jobs"]), 20, "every job's end")
        st = second.ask(op="status")
        assert [j["id"] for j in st["jobs"]] == ids
        assert st["free"] == 2
        assert [j["reason"] for j in st["jobs"][2:]] == ["the scheduler was shut down"] * 2
        assert_no_double_booking(second.state_dir)
    finally:
        stop_all(serve, second)


@pytest.mark.timeout(60)
def test_torn_write_lock_and_stale_lock(tmp_path):
    """Three delayed jobs are journaled, the scheduler is killed; a writer killed inside an
    open write transaction leaves the journal as it was (WAL); a scheduler on the same state
    directory is refused while another holds it, and starts after that one is killed (the
    kernel releases a crashed scheduler's lock)."""
    serve = Serve(tmp_path, "--nodes", "2")
    second = third = None
    try:
        ids = [serve.ask(op="submit", job={"name": f"later{k}", "command": ["true"],
                                           "nodes": 1, "submit_s": 300})["jobs"][0]
               for k in range(3)]
        # A second scheduler on the same state directory is refused with a clear message.
        refused = subprocess.run(
            [PY, "-m", "scheduler", "serve", "--nodes", "2", "--port", "0", "--control",
             str(tmp_path / "other.sock"), "--run-dir", str(serve.run_dir), "--quiet"],
            cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert refused.returncode == 1
        assert f"another scheduler (pid {serve.proc.pid}) uses the state directory" in \
            refused.stderr
        serve.crash()
        writer = subprocess.Popen([PY, "-c", (
            "import sqlite3, sys\n"
            f"db = sqlite3.connect({str(serve.state_dir / 'journal.sqlite')!r}, "
            "isolation_level=None)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "db.execute(\"UPDATE jobs SET state = 'garbage', spec = 'not json'\")\n"
            "db.execute(\"INSERT INTO jobs (id, spec, argv, state, submit_wall) "
            "VALUES (99, 'x', '[]', 'waiting', 0)\")\n"
            "print('written', flush=True)\n"
            "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout.readline().strip() == "written"
        finally:
            writer.kill()
            writer.wait(timeout=10)
        second = Serve(tmp_path, "--nodes", "2")  # the stale lock does not stop it
        st = second.ask(op="status")
        assert [(j["id"], j["name"], j["state"]) for j in st["jobs"]] == \
            [(i, f"later{k}", "pending") for k, i in enumerate(ids)]
        new = second.ask(op="submit", job={"name": "now", "command": ["true"],
                                           "nodes": 1})["jobs"][0]
        assert new == ids[-1] + 1
        wait_until(lambda: second.ask(op="status")["jobs"][-1]["state"] == "done", 20,
                   "the new job's end")
        second.stop()
        third = Serve(tmp_path, "--nodes", "2")  # a clean stop leaves it usable too
        assert [j["state"] for j in third.ask(op="status")["jobs"]] == ["cancelled"] * 3 + \
            ["done"]
    finally:
        for s in (third, second, serve):
            if s is not None:
                s.stop()


# ------------------------------------------------------------------------------ access


@pytest.mark.timeout(60)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a second user")
def test_control_socket_access_and_cancel_rights(tmp_path):
    """The control socket is owner-only (0600) whatever the umask, so a second user cannot
    reach it; with ``--control-group`` that user can, its submissions are recorded under its
    uid, and it may cancel its own job but not the owner's."""
    name = f"apgt{os.getpid() % 100000}"
    created = False
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", "--user-group", name], check=True,
                       capture_output=True, timeout=30)
        created = True
    sock_dir = Path(tempfile.mkdtemp(prefix="apgt-sock-"))
    os.chmod(sock_dir, 0o755)
    serve = grouped = None
    try:
        user = pwd.getpwnam(name)
        old = os.umask(0o000)
        try:
            serve = Serve(tmp_path / "a", "--nodes", "1", control=sock_dir / "a.sock")
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(serve.control).st_mode) == 0o600

        def as_user(sock: Path, message: dict[str, Any]) -> dict[str, Any]:
            """One control request from a forked child that has become the second user
            (``{"error": ...}`` when it cannot connect)."""
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: drop to the user, ask, report, exit
                code = 0
                try:
                    os.close(r)
                    os.setgroups([])
                    os.setgid(user.pw_gid)
                    os.setuid(user.pw_uid)
                    try:
                        reply = request(sock, message, timeout_s=20)
                    except ControlError as exc:
                        reply = {"ok": False, "error": str(exc)}
                    os.write(w, json.dumps(reply).encode())
                except BaseException:  # noqa: BLE001 - the child must exit
                    code = 1
                finally:
                    os._exit(code)
            os.close(w)
            with os.fdopen(r, "rb") as fh:
                data = fh.read()
            _, status = os.waitpid(pid, 0)
            assert status == 0 and data, "the child as the second user failed"
            return dict(json.loads(data))

        denied = as_user(serve.control, {"op": "status"})
        assert not denied["ok"] and "Permission denied" in denied["error"], denied
        serve.stop()
        grouped = Serve(tmp_path / "b", "--nodes", "1", "--control-group",
                        grp.getgrgid(user.pw_gid).gr_name, control=sock_dir / "b.sock")
        assert stat.S_IMODE(os.stat(grouped.control).st_mode) == 0o660
        mine = grouped.ask(op="submit", job={"name": "root-job", "command": ["true"],
                                             "nodes": 1, "submit_s": 300})["jobs"][0]
        sub = as_user(grouped.control, {"op": "submit", "text": "#NODES 1\ntrue\n",
                                        "name": "theirs", "delay_s": 300})
        assert sub["ok"], sub
        theirs = sub["jobs"][0]
        refused = as_user(grouped.control, {"op": "cancel", "job": mine})
        assert not refused["ok"] and "is not yours" in refused["error"], refused
        ok = as_user(grouped.control, {"op": "cancel", "job": theirs})
        assert ok["ok"] and ok["was"] == "pending", ok
        jobs = {j["id"]: j for j in grouped.ask(op="status")["jobs"]}
        assert (jobs[mine]["user"], jobs[mine]["state"]) == (0, "pending")
        assert (jobs[theirs]["user"], jobs[theirs]["state"]) == (user.pw_uid, "cancelled")
        down = as_user(grouped.control, {"op": "shutdown"})
        assert not down["ok"] and "owner" in down["error"], down
    finally:
        for s in (grouped, serve):
            if s is not None:
                s.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
        if created:
            subprocess.run(["userdel", name], capture_output=True, timeout=30)
            with contextlib.suppress(KeyError, subprocess.SubprocessError, OSError):
                grp.getgrnam(name)
                subprocess.run(["groupdel", name], capture_output=True, timeout=30)


UTS_D12 = 66_106_929


@pytest.mark.timeout(120)
def test_kill_during_a_grow(tmp_path):
    """3 nodes, malleable: a malleable UTS d=12 (1-3) is ordered to grow onto the 2 idle
    nodes and the scheduler is killed right after the order was journaled.  The restarted
    scheduler adopts the job with all 3 nodes (the order's outcome is unknown, so the job is
    treated as rigid from then on); a rigid job submitted then waits until UTS has ended, and
    UTS ends ``done`` with the exact count."""
    args = ("--nodes", "3", "--cooldown", "0")
    serve = Serve(tmp_path, *args)
    second = None
    try:
        uts = serve.ask(op="submit", job={
            "name": "uts12", "command": [PY, "-m", "benchmarks.uts", "-d", "12", "--json"],
            "job_class": "malleable", "min_nodes": 1, "max_nodes": 3,
            "required_time_s": 120})["jobs"][0]
        wait_until(lambda: serve.events("grow_order", uts), 40, "the grow order")
        serve.crash()
        assert rows(serve.state_dir)[uts].nodes == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        second = Serve(tmp_path, *args)
        st = second.ask(op="status")
        (u,) = st["jobs"]
        assert (u["state"], u["adopted"], u["reachable"], st["free"]) == \
            ("running", True, False, 0)
        rigid = second.ask(op="submit", job={"name": "after", "command": ["true"],
                                             "nodes": 1})["jobs"][0]
        wait_until(lambda: all(j["state"] in ("done", "failed") for j in
                               second.ask(op="status")["jobs"]), 90, "both ends")
        jobs = {j["id"]: j for j in second.ask(op="status")["jobs"]}
        assert (jobs[uts]["state"], jobs[uts]["returncode"]) == ("done", 0)
        assert jobs[rigid]["state"] == "done"
        assert jobs[rigid]["start_s"] >= jobs[uts]["end_s"]
        out = [json.loads(line) for line in
               (second.run_dir / f"job-{uts}.out").read_text().splitlines()
               if line.startswith("{") and '"benchmark"' in line]
        assert out and out[0]["result"] == UTS_D12 and out[0]["correct"] is True
        assert_no_double_booking(second.state_dir)
    finally:
        stop_all(serve, second)


@pytest.mark.timeout(60)
def test_kill_with_two_core_jobs_on_one_node(tmp_path):
    """One logical node of 4 cores holds two ``#CORES`` jobs (1 and 2 cores) when the
    scheduler is killed.  The restarted scheduler adopts both on exactly the cores they had
    (the journal records them), and a third job asking for 1 core gets the one core left,
    at once."""
    args = ("--nodes", "1", "--cores-per-node", "4")
    serve = Serve(tmp_path, *args)
    second = None
    try:
        ids = [serve.ask(op="submit", job={"name": f"c{n}", "command": ["sleep", "40"],
                                           "cores": n})["jobs"][0] for n in (1, 2)]

        def held(server: Serve) -> dict[int, Any]:
            jobs = {j["id"]: j for j in server.ask(op="status")["jobs"]}
            return {i: (jobs[i]["state"], jobs[i].get("cores")) for i in jobs}

        wait_until(lambda: all(st == "running" for st, _ in held(serve).values()), 20,
                   "both starts")
        before = held(serve)
        assert before == {ids[0]: ("running", {"127.0.1.1": [0]}),
                          ids[1]: ("running", {"127.0.1.1": [1, 2]})}
        serve.crash()
        second = Serve(tmp_path, *args)
        assert held(second) == before
        st = second.ask(op="status")
        assert all(j["adopted"] for j in st["jobs"])
        (node,) = st["nodes"]
        assert (node["cores"], node["free_cores"], node["job"] in ids) == (4, 1, True)
        third = second.ask(op="submit", job={"name": "c3", "command": ["sleep", "40"],
                                             "cores": 1})["jobs"][0]
        wait_until(lambda: held(second)[third][0] == "running", 20, "the third start")
        assert held(second) == {**before, third: ("running", {"127.0.1.1": [3]})}
    finally:
        stop_all(serve, second)


@pytest.mark.timeout(60)
def test_kill_between_the_journal_and_the_launch(tmp_path):
    """A start is journaled ``starting`` with its nodes before the launch and ``running`` with
    its pid after; a kill between the two leaves the row as this test makes it (the window
    is too short to hit with a signal).  Job A's wrapper had run: it is found by the pid its
    wrapper wrote and adopted, and ends with the exact answer; job B's launch never
    happened: it is queued again and runs."""
    serve = Serve(tmp_path, "--nodes", "2", "--algorithm", "easy")
    second = None
    try:
        a = serve.ask(op="submit", job={"name": "a", "command": UTS_JOB, "nodes": 1,
                                        "required_time_s": 120})["jobs"][0]
        b = serve.ask(op="submit", job={"name": "b", "command": UTS_JOB, "nodes": 1,
                                        "required_time_s": 120, "submit_s": 300})["jobs"][0]
        wait_until(lambda: serve.events("start", a), 30, "A's start")
        serve.crash()
        db = sqlite3.connect(serve.state_dir / "journal.sqlite", isolation_level=None)
        try:
            db.execute("UPDATE jobs SET state = 'starting', pid = NULL, pid_start = NULL "
                       "WHERE id = ?", (a,))
            files = json.dumps({"pidfile": str(serve.run_dir / f"job-{b}.pid"),
                                "status": str(serve.run_dir / f"job-{b}.status")})
            db.execute("UPDATE jobs SET state = 'starting', nodes = '[\"127.0.1.2\"]', "
                       "files = ? WHERE id = ?", (files, b))
        finally:
            db.close()
        second = Serve(tmp_path, "--nodes", "2", "--algorithm", "easy")
        recovered = second.events("recovered")[-1]
        assert (recovered["adopted"], recovered["requeued"]) == (1, 1)
        wait_until(lambda: all(j["state"] in ("done", "failed") for j in
                               second.ask(op="status")["jobs"]), 40, "both ends")
        jobs = {j["id"]: j for j in second.ask(op="status")["jobs"]}
        assert (jobs[a]["state"], jobs[a]["adopted"]) == ("done", True)
        assert jobs[b]["state"] == "done"
        for i in (a, b):
            assert uts_count(second.run_dir / f"job-{i}.out") == UTS_D8
        assert_no_double_booking(second.state_dir)
    finally:
        stop_all(serve, second)


@pytest.mark.timeout(120)
def test_kill_in_slurm_mode(slurm_cluster, tmp_path):
    """Slurm mode on the test cluster (4 nodes): two rigid 2-node UTS jobs run as Slurm jobs
    when the scheduler is killed.  The restarted scheduler adopts both (their watchers and
    Slurm job ids), a third job waits for their nodes, all three end ``done`` with 257,042,
    and no Slurm job of the run is left."""
    from slurm_serve import marked_pids, slurm_env

    mark = f"durable-{os.getpid()}"
    env = slurm_env(slurm_cluster, tmp_path, mark)
    args = ("--slurm", "--algorithm", "easy")
    serve = Serve(tmp_path, *args, env=env)
    second = None
    slurm_ids: set[int] = set()
    try:
        ids = [serve.ask(op="submit", job={"name": f"uts{k}", "command": UTS_JOB,
                                           "nodes": 2, "required_time_s": 120})["jobs"][0]
               for k in range(2)]
        starts = wait_until(lambda: len(serve.events("start")) == 2 and serve.events("start"),
                            60, "two Slurm starts")
        slurm_ids = {int(e["slurm_job"]) for e in starts}
        serve.crash()
        second = Serve(tmp_path, *args, env=env)
        # it starts once the adopted jobs end: no pause needed (the same count checked)
        third = second.ask(op="submit", job={"name": "after",
                                             "command": [PY, "-m", "benchmarks.uts", "-d", "8"],
                                             "nodes": 2, "required_time_s": 120})["jobs"][0]
        st = second.ask(op="status")
        adopted = {j["id"]: j for j in st["jobs"] if j["adopted"]}
        assert sorted(adopted) == ids and st["free"] == 0
        assert {a["slurm_job"] for a in adopted.values()} == slurm_ids
        wait_until(lambda: all(j["state"] in ("done", "failed") for j in
                               second.ask(op="status")["jobs"]), 90, "every job's end")
        final = second.ask(op="status")["jobs"]
        assert [(j["id"], j["state"]) for j in final] == [(i, "done") for i in [*ids, third]]
        for i in (*ids, third):
            assert uts_count(second.run_dir / f"job-{i}.out") == UTS_D8
        slurm_ids |= {int(e["slurm_job"]) for e in second.events("start")}
        second.stop()
        left = slurm_cluster.run("squeue", "-h", "-o", "%i", check=False).stdout.split()
        assert not slurm_ids & {int(x) for x in left if x.isdigit()}
        assert_no_double_booking(second.state_dir)
    finally:
        for s in (second, serve):
            if s is not None:
                s.stop()
        if slurm_ids:
            slurm_cluster.run("scancel", *map(str, sorted(slurm_ids)), check=False)
        for pid in marked_pids(mark):
            kill_tree(pid)


@pytest.mark.timeout(60)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")
def test_a_full_disk_refuses_submissions_and_the_scheduler_goes_on(tmp_path):
    """The state directory on a 512 KiB tmpfs, filled up: a submission is refused with a
    clear error (and ``journal_error`` in the log) rather than accepted unjournaled; once
    space is freed, the next one is accepted and runs, and a restart finds every accepted
    job."""
    from scheduler import JobSpec
    from scheduler._exceptions import SubmissionError
    from scheduler.algorithms import make
    from scheduler.nodes import LocalNodes
    from scheduler.server import Server

    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)],
                      capture_output=True, timeout=30).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    server = None
    try:
        def new_server() -> Server:
            return Server(LocalNodes(1), make("easy"), port=0, run_dir=tmp_path / "run",
                          state_dir=mnt / "state", interval_s=1.0, grace_s=1.0)

        server = new_server()
        server.start()
        spec = JobSpec(name="t", nodes=1, command=("true",))
        first = server.submit(spec, delay_s=300)
        fd = os.open(mnt / "fill", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"x" * 65536)
        except OSError:
            pass
        finally:
            os.close(fd)
        with pytest.raises(SubmissionError, match="journal cannot be written"):
            for _ in range(200):  # the first page that does not fit
                server.submit(spec, delay_s=300)
        assert any(e["event"] == "journal_error" for e in server.events)
        accepted = [j["id"] for j in server.status()["jobs"]]
        os.unlink(mnt / "fill")
        now = server.submit(spec)
        wait_until(lambda: server.status()["jobs"][-1]["state"] == "done", 20, "its end")
        server.detach()
        server = new_server()
        server.start()
        st = server.status()["jobs"]
        assert [j["id"] for j in st] == [*accepted, now]
        assert [j["state"] for j in st] == ["pending"] * len(accepted) + ["done"]
        assert first == accepted[0]
    finally:
        if server is not None:
            server.shutdown()
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


@pytest.mark.timeout(120)
def test_kill_with_ssh_hosts(netns_cluster, tmp_path):
    """The scheduler on h3 with hosts h1, h2 reached by ssh: two 1-node UTS jobs run when it
    is killed.  The restart (on h3, same run directory) adopts both through their local ssh
    processes, reads their exit status from the files their wrappers wrote on the hosts,
    and both end ``done`` with 257,042; nothing is left on any host."""
    cluster = netns_cluster
    h3 = cluster.host("h3")
    args = ("--hosts", "h1,h2", "--ssh", cluster.ssh, "--listen", h3.address,
            "--algorithm", "easy", "--env", f"HYDRA_LAUNCHER_EXEC={cluster.ssh}",
            "--env", "APGAS_START_TIMEOUT=20")
    serve = Serve(tmp_path, *args, popen=h3.popen)
    second = None
    try:
        ids = [serve.ask(op="submit", job={"name": f"uts{k}", "command": UTS_JOB,
                                           "nodes": 1, "required_time_s": 120})["jobs"][0]
               for k in range(2)]
        wait_until(lambda: len(serve.events("start")) == 2, 30, "two starts")
        serve.crash()
        second = Serve(tmp_path, *args, popen=h3.popen)
        st = second.ask(op="status")
        assert sorted(j["id"] for j in st["jobs"] if j["adopted"]) == ids
        assert st["free"] == 0
        wait_until(lambda: all(j["state"] in ("done", "failed") for j in
                               second.ask(op="status")["jobs"]), 60, "both ends")
        final = second.ask(op="status")["jobs"]
        assert [(j["id"], j["state"], j["returncode"]) for j in final] == \
            [(i, "done", 0) for i in ids]
        for i in ids:
            assert uts_count(second.run_dir / f"job-{i}.out") == UTS_D8
    finally:
        stop_all(serve, second)
        deadline = time.monotonic() + 15
        while any(h.pids() for h in cluster.hosts) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {h.name: h.pids() for h in cluster.hosts}
        for pids in left.values():
            for pid in pids:
                kill_tree(pid)
    assert not any(left.values()), f"processes left on the hosts: {left}"
