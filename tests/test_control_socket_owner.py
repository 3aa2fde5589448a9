"""The control socket no one else can take, and the run directory only its owner reads
(docs/reference/security.md, "The control socket"), on real processes.

Another user (made with ``useradd`` for the test, removed after; its processes run through
``setpriv``) plants what it can in a world-writable temporary directory that root's
``python -m scheduler serve`` and clients use as ``TMPDIR``:

* a symbolic link where the default socket's directory would be, or a directory of its own
  holding a link where the socket would be: ``serve`` refuses in one line and the root-only
  file the links point to is unchanged; with ``XDG_RUNTIME_DIR`` naming that user's directory,
  ``serve`` falls back to the per-user directory it makes itself;
* a socket it listens on where root's client looks: ``submit``, ``status``, ``cancel`` and
  ``shutdown`` (and the Python ``request``) refuse in one line naming the path and the uids,
  and the listener receives not one byte, until ``--server-uid`` names that user;
* a link, a file and a stale socket of its own at a ``--control`` path: ``serve`` refuses
  and each is left as it was.

Without root: the default path's rules on real directories, a stale socket of one's own
replaced while whatever took the socket's place before shutdown is left alone, and after a
small job under ``serve`` the run directory is 0700 and every file in it 0600.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, env_for, kill_tree, wait_until

from scheduler.control_client import (
    UntrustedServerError,
    control_dir,
    default_control_path,
    request,
)
from scheduler.private import UnsafePathError

PY = sys.executable
UID = os.getuid()

#: A Python any user may run (the test's own may live under root's home); the other user's
#: code needs the standard library only.
SYSTEM_PY = next((p for p in ("/usr/bin/python3", "/usr/local/bin/python3")
                  if os.access(p, os.X_OK)), None)

#: Run as the other user: listen on argv[1] (making its directory), write argv[2] when
#: ready, and record each connection's bytes (one JSON line) in argv[3]; a request line is
#: answered as a scheduler would answer ``cancel``.
LISTENER = r'''
import json, os, socket, sys
path, ready, log = sys.argv[1:4]
os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
os.chmod(path, 0o777)
srv.listen(8)
open(ready, "w").close()
while True:
    conn, _ = srv.accept()
    conn.settimeout(10)
    data = b""
    try:
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
            if data.endswith(b"\n"):
                conn.sendall(b'{"ok": true, "job": 1, "was": "queued"}\n')
    except OSError:
        pass
    conn.close()
    with open(log, "a") as fh:
        fh.write(json.dumps({"bytes": len(data), "text": data.decode(errors="replace")}) + "\n")
'''

SECRET = "echo the-secret-of-root-42"


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture
def other_user():
    """A throwaway non-root user (``useradd``, removed with ``userdel -r`` after)."""
    if os.getuid() != 0 or not shutil.which("useradd") or not shutil.which("setpriv"):
        pytest.skip("needs root, useradd and setpriv to act as another user")
    if SYSTEM_PY is None:
        pytest.skip("needs a system python3 that another user may run")
    name = f"apgcs{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True, timeout=30)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", "-r", name], capture_output=True, timeout=30)


@pytest.fixture
def shared_tmp():
    """A world-writable sticky directory (as /tmp is), used as ``TMPDIR``; removed after."""
    d = Path(tempfile.mkdtemp(prefix="apgaspy-ctlsock-"))
    os.chmod(d, 0o1777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def victim():
    """A root's directory (mode 0750) holding a root-only file (what a planted link points
    at)."""
    d = Path(tempfile.mkdtemp(prefix="apgaspy-victim-"))
    d.chmod(0o750)  # root's group only: a chmod to 0700 would show
    f = d / "scheduler.sock"
    f.write_text("root only\n")
    f.chmod(0o600)
    try:
        yield f
    finally:
        shutil.rmtree(d, ignore_errors=True)


def as_user(user: pwd.struct_passwd, code: str, *args: Any,
            background: bool = False) -> subprocess.Popen[str] | subprocess.CompletedProcess[str]:
    """Run ``code`` (the standard library's Python) as ``user`` through ``setpriv``."""
    argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups",
            "--", str(SYSTEM_PY), "-I", "-c", code, *map(str, args)]
    if background:
        return subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
    res = subprocess.run(argv, cwd="/", capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res


def snapshot(path: Path) -> tuple[Any, ...]:
    """What must not change about a file: inode, mode, owner, size, mtime, content."""
    st = os.lstat(path)
    return (st.st_ino, st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, path.read_bytes())


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of root's commands: ``TMPDIR`` is ``tmp``, no other path named."""
    env = env_for()
    env.pop("XDG_RUNTIME_DIR", None)
    env.pop("APGAS_SCHEDULER_CONTROL", None)
    env["TMPDIR"] = str(tmp)
    env.update(extra)
    return env


class Serve:
    """``python -m scheduler serve`` on one logical node, started with umask 022."""

    def __init__(self, tmp: Path, env: dict[str, str], *args: str) -> None:
        self.err_path = tmp / f"serve-{time.monotonic_ns()}.err"
        argv = [PY, "-m", "scheduler", "serve", "--nodes", "2", "--port", "0",
                "--interval", "1", "--run-dir", str(tmp / "run"), *args]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err, start_new_session=True,
                                         umask=0o022)

    @property
    def err(self) -> str:
        return self.err_path.read_text()

    def refused(self) -> str:
        """Wait for it to exit with status 1; return its one error line."""
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"serve did not refuse:\n{self.err}")
        assert self.proc.returncode == 1, self.err
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        return lines[0]

    def control(self) -> Path:
        """Wait until it serves; return its control socket's path (from its stderr)."""
        def found() -> str | None:
            assert self.proc.poll() is None, self.err
            return next((ln.split(" ", 2)[2] for ln in self.err.splitlines()
                         if ln.startswith("control socket ")), None)
        return Path(wait_until(found, 60, "the control socket"))

    def stop(self, control: Path) -> None:
        request(control, {"op": "shutdown"}, timeout_s=30)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == 0, self.err

    def kill(self) -> None:
        if self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait(timeout=10)


def cli(env: dict[str, str], *args: str, stdin: str | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "scheduler", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------ links at the default


def test_links_planted_at_the_default_path_are_refused(other_user, shared_tmp, victim,
                                                       tmp_path):
    """A link where the default directory would be, then the other user's own directory with
    a link where the socket would be: ``serve`` refuses in one line each time, the root-only
    file is unchanged and the links stay; with ``XDG_RUNTIME_DIR`` naming the other user's
    directory it uses the per-user directory it makes itself instead."""
    env = clean_env(shared_tmp)
    default_dir = shared_tmp / f"apgaspy-{UID}"
    before = snapshot(victim)
    listing = sorted(os.listdir(victim.parent))

    as_user(other_user, "import os, sys; os.symlink(sys.argv[1], sys.argv[2])",
            victim.parent, default_dir)
    line = Serve(tmp_path, env).refused()
    assert str(default_dir) in line and "symbolic link" in line and "--control" in line
    assert os.readlink(default_dir) == str(victim.parent)
    os.unlink(default_dir)

    as_user(other_user, "import os, sys; os.mkdir(sys.argv[1], 0o777); os.chmod(sys.argv[1], "
            "0o777); os.symlink(sys.argv[2], os.path.join(sys.argv[1], 'scheduler.sock'))",
            default_dir, victim)
    line = Serve(tmp_path, env).refused()
    assert str(default_dir) in line and f"belongs to uid {other_user.pw_uid}" in line
    assert os.readlink(default_dir / "scheduler.sock") == str(victim)
    assert snapshot(victim) == before and sorted(os.listdir(victim.parent)) == listing

    # XDG_RUNTIME_DIR is the other user's: not used; the per-user directory is made instead.
    (shared_tmp / "fresh").mkdir()
    (shared_tmp / "fresh").chmod(0o1777)
    serve = Serve(tmp_path, clean_env(shared_tmp / "fresh", XDG_RUNTIME_DIR=str(default_dir)))
    try:
        path = serve.control()
        assert path == shared_tmp / "fresh" / f"apgaspy-{UID}" / "scheduler.sock"
        st = os.lstat(path.parent)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == UID
        assert stat.S_IMODE(st.st_mode) == 0o700
        serve.stop(path)
    finally:
        serve.kill()
    assert not os.path.lexists(path)
    assert snapshot(victim) == before and sorted(os.listdir(victim.parent)) == listing


# ------------------------------------------------------------------ listening there first


def test_a_listener_of_another_user_receives_nothing(other_user, shared_tmp, tmp_path):
    """The other user makes the default directory first and listens at the default socket:
    every client command of root's refuses in one line before sending a byte, as the Python
    ``request`` does, until ``--server-uid`` names that user; ``serve`` refuses to use that
    directory and leaves the socket alone."""
    env = clean_env(shared_tmp)
    sock = shared_tmp / f"apgaspy-{UID}" / "scheduler.sock"
    box = shared_tmp / "box"  # the other user's own directory for its records
    box.mkdir()
    box.chmod(0o1777)
    ready, log = box / "ready", box / "log"
    listener = as_user(other_user, LISTENER, sock, ready, log, background=True)
    try:
        wait_until(lambda: ready.exists() or listener.poll() is not None, 30, "the listener")
        assert listener.poll() is None, listener.stderr.read()
        assert os.lstat(sock).st_uid == other_user.pw_uid
        commands = [(["submit", "-"], f"#NODES 1\n{SECRET}\n"), (["status"], None),
                    (["cancel", "1"], None), (["shutdown"], None)]
        for argv, stdin in commands:
            res = cli(env, *argv, stdin=stdin)
            assert res.returncode == 1, (argv, res.stdout, res.stderr)
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1, (argv, res.stderr)
            assert str(sock) in lines[0] and f"uid {other_user.pw_uid}" in lines[0]
            assert "expected uid 0" in lines[0] and "nothing was sent" in lines[0]
            assert res.stdout == ""
        with pytest.raises(UntrustedServerError, match=f"uid {other_user.pw_uid}"):
            request(sock, {"op": "ping"})

        def records() -> list[dict[str, Any]]:
            return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() \
                else []

        wait_until(lambda: len(records()) == len(commands) + 1, 30, "the connections")
        assert [r["bytes"] for r in records()] == [0] * (len(commands) + 1)

        # Trusted by name: the same listener gets the request and answers it.
        res = cli(env, "cancel", "1", "--server-uid", str(other_user.pw_uid))
        assert res.returncode == 0 and res.stdout.strip() == "cancelled job 1 (was queued)"
        wait_until(lambda: len(records()) == len(commands) + 2, 30, "the trusted request")
        assert json.loads(records()[-1]["text"]) == {"op": "cancel", "job": 1}
        assert all(SECRET not in r["text"] for r in records())

        before = snapshot_socket(sock)
        line = Serve(tmp_path, env).refused()
        assert str(sock.parent) in line and f"belongs to uid {other_user.pw_uid}" in line
        assert snapshot_socket(sock) == before and len(records()) == len(commands) + 2
    finally:
        listener.terminate()
        listener.wait(timeout=10)
        listener.stderr.close()


def snapshot_socket(path: Path) -> tuple[int, int, int]:
    st = os.lstat(path)
    assert stat.S_ISSOCK(st.st_mode)
    return (st.st_dev, st.st_ino, st.st_uid)


# --------------------------------------------------------------- nothing deleted, replaced


def test_serve_deletes_and_replaces_nothing_at_a_control_path(other_user, shared_tmp, victim,
                                                              tmp_path):
    """At ``--control`` paths in the shared directory the other user plants a link to a
    root-only file, a file of its own, and a socket it bound and left: ``serve`` refuses each
    in one line and leaves it as it was; links as ``--log`` and ``--run-dir`` are refused
    too."""
    env = clean_env(shared_tmp)
    before = snapshot(victim)
    link, plain, stale = (shared_tmp / n for n in ("link.sock", "file.sock", "stale.sock"))
    as_user(other_user, "import os, socket, sys\n"
            "os.symlink(sys.argv[1], sys.argv[2])\n"
            "open(sys.argv[3], 'w').write('mine\\n')\n"
            "socket.socket(socket.AF_UNIX).bind(sys.argv[4])\n",
            victim, link, plain, stale)
    planted = {p: snapshot_socket(p) if p is stale else (os.lstat(p).st_ino, os.readlink(p)
                                                         if p is link else p.read_text())
               for p in (link, plain, stale)}
    for path, why in ((link, "is a symbolic link"), (plain, "is a regular file"),
                      (stale, f"is a socket of uid {other_user.pw_uid}")):
        line = Serve(tmp_path, env, "--control", str(path)).refused()
        assert str(path) in line and why in line and "left alone" in line
    assert {p: snapshot_socket(p) if p is stale else (os.lstat(p).st_ino, os.readlink(p)
                                                      if p is link else p.read_text())
            for p in (link, plain, stale)} == planted

    # The same links as --log and --run-dir: refused, not followed.
    log, run = shared_tmp / "log.jsonl", shared_tmp / "run"
    as_user(other_user, "import os, sys; os.symlink(sys.argv[1], sys.argv[2]); "
            "os.symlink(os.path.dirname(sys.argv[1]), sys.argv[3])", victim, log, run)
    control = tmp_path / "ctl.sock"
    line = Serve(tmp_path, env, "--control", str(control), "--log", str(log)).refused()
    assert str(log) in line and f"symbolic link of uid {other_user.pw_uid}" in line
    serve = Serve(tmp_path, env, "--control", str(control), "--run-dir", str(run))
    line = serve.refused()
    assert str(run) in line and "symbolic link" in line
    assert os.readlink(log) == str(victim) and os.readlink(run) == str(victim.parent)
    assert snapshot(victim) == before and os.listdir(victim.parent) == [victim.name]
    assert stat.S_IMODE(os.lstat(victim.parent).st_mode) == 0o750


# ----------------------------------------------------------------------- without root


def test_serve_replaces_its_own_stale_socket_and_removes_only_its_own(tmp_path):
    """A stale socket of this user (nobody listens) is replaced; a file that took the
    socket's place while ``serve`` ran is left at shutdown (same inode or nothing)."""
    path = tmp_path / "ctl.sock"
    old = socket.socket(socket.AF_UNIX)
    old.bind(str(path))
    old.close()  # the file stays: a scheduler that was killed
    serve = Serve(tmp_path, clean_env(tmp_path), "--control", str(path))
    try:
        assert serve.control() == path
        assert request(path, {"op": "ping"}) == {"ok": True}
        moved = tmp_path / "moved.sock"
        os.rename(path, moved)
        path.write_text("not the scheduler's\n")
        serve.stop(moved)
    finally:
        serve.kill()
    assert path.read_text() == "not the scheduler's\n"
    assert stat.S_ISSOCK(os.lstat(moved).st_mode)  # renamed away: no longer its path


def test_the_default_path_on_real_directories(tmp_path, monkeypatch):
    """``XDG_RUNTIME_DIR`` is used only when it is a real directory of ours with mode 0700;
    else the per-user directory in the temporary directory, made 0700 and refused when it is
    a link, wider than 0700 or not a directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    good = tmp_path / "run-user"
    good.mkdir(mode=0o700)
    wide = tmp_path / "wide"
    wide.mkdir()
    wide.chmod(0o755)
    link = tmp_path / "link"
    link.symlink_to(good)
    fallback = tmp_path / f"apgaspy-{UID}" / "scheduler.sock"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(good))
    assert default_control_path() == good / "apgaspy-scheduler.sock"
    for bad in (wide, link, tmp_path / "missing", Path("relative")):
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(bad))
        assert default_control_path() == fallback
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert default_control_path() == fallback

    assert control_dir(fallback) == fallback.parent
    assert stat.S_IMODE(os.lstat(fallback.parent).st_mode) == 0o700
    fallback.parent.rmdir()
    fallback.parent.symlink_to(good)
    with pytest.raises(UnsafePathError, match="symbolic link.*XDG_RUNTIME_DIR"):
        control_dir(fallback)
    fallback.parent.unlink()
    fallback.parent.mkdir()
    fallback.parent.chmod(0o755)
    with pytest.raises(UnsafePathError, match="open to others .mode 0755"):
        control_dir(fallback)
    fallback.parent.rmdir()
    fallback.parent.write_text("")
    with pytest.raises(UnsafePathError, match="regular file, not a directory"):
        control_dir(fallback)


def test_the_run_directory_and_every_file_in_it_are_owner_only(tmp_path):
    """After a small job under ``serve`` (umask 022, a run directory that existed with mode
    0755, its event log inside it), the run directory and its state directory are 0700 and
    every file in them 0600; the job wrote its output and read its key file."""
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(0o755)
    control = tmp_path / "ctl.sock"
    serve = Serve(tmp_path, clean_env(tmp_path), "--control", str(control),
                  "--log", str(run / "events.jsonl"))
    try:
        serve.control()
        script = ('#NODES 1\necho hello; echo oops >&2; stat -c "key %a" '
                  '"$SCHEDULER_KEY_FILE"; stat -c "nodes %a" "$NODE_FILE"\n')
        res = cli(clean_env(tmp_path), "submit", "-", "--control", str(control), stdin=script)
        assert res.returncode == 0, res.stderr

        def done() -> bool:
            jobs = request(control, {"op": "status"})["jobs"]
            return bool(jobs) and jobs[0]["state"] in ("done", "failed")
        wait_until(done, 60, "the job to end")
        assert request(control, {"op": "status"})["jobs"][0]["state"] == "done"
        serve.stop(control)
    finally:
        serve.kill()
    assert (run / "job-1.out").read_text().split("\n") == ["hello", "key 600", "nodes 600", ""]
    assert (run / "job-1.err").read_text() == "oops\n"
    modes = {str(p.relative_to(run)): stat.S_IMODE(os.lstat(p).st_mode)
             for p in sorted(run.rglob("*"))}
    assert {"job-1.out", "job-1.err", "job-1.nodes", "job-1.pid", "job-1.status",
            "events.jsonl", "state", "state/journal.sqlite", "state/lock"} <= set(modes)
    assert any(name.startswith("script-1-") for name in modes)  # the script from stdin
    want = {name: 0o700 if (run / name).is_dir() else 0o600 for name in modes}
    assert modes == want
    assert stat.S_IMODE(os.lstat(run).st_mode) == 0o700
