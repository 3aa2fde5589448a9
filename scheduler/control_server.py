"""The control interface's server side: JSON lines on a Unix socket (the client side is
:mod:`scheduler.control_client`).

Requests (one JSON object a line; replies likewise, ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``)::

    {"op": "submit", "script": PATH}          one job script file
    {"op": "submit", "text": SCRIPT, "name"?} an inline job script
    {"op": "submit", "batch": PATH}           a batch file (JSON or CSV)
    {"op": "submit", "job": {JobSpec fields, "submit_s"?}}
    {"op": "status"}
    {"op": "cancel", "job": ID}
    {"op": "shutdown"}                        replies once everything has ended
    {"op": "ping"}

Each request is carried out through the :class:`~scheduler.server.Server` façade, on behalf
of the connecting user: the socket's peer credentials (``SO_PEERCRED``) give the uid, which
is recorded with each submitted job; a user may cancel only their own jobs (root and the
scheduler's owner any).  The socket is made owner-only (mode 0600, whatever the umask), or
0660 with a group (``serve --control-group``).

The server never follows a link on the socket's path and never removes what is not its own
socket (docs/reference/security.md, "The control socket")::

    prepare_control_path: the default per-user directory made 0700 and checked
        (scheduler.control_client.control_dir); lstat(path):
        missing ─► bind
        a socket of ours that nobody listens on (a scheduler that is gone) ─► unlink ─► bind
        a socket of ours that answers ─► OSError "a scheduler already listens"
        anything else (a link, a file, another user's socket) ─► UnsafePathError, left alone
    bind (umask 0177, or 0117 with a group) ─► lstat: remember (st_dev, st_ino)
    close ─► unlink only if the path is still that socket (same st_dev, st_ino)
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import shlex
import socket
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from ._exceptions import SubmissionError
from .control_client import control_dir
from .jobs import JobSpec
from .private import UnsafePathError, describe, peer_uid

__all__ = ["ControlServer", "ControlledServer", "handle_request", "peer_uid",
           "prepare_control_path"]


class ControlledServer(Protocol):
    """What the control socket needs from the scheduler: the requests it carries out.

    :class:`scheduler.server.Server` is one (PEP 544: structurally, without naming this
    class), so that the server imports its control socket and not the other way round.
    """

    @property
    def stopping(self) -> bool:
        """Shutdown has begun: submissions are refused."""
        ...

    def status(self) -> dict[str, Any]:
        """The nodes, the jobs and the refused submissions, as JSON data."""
        ...

    def submit(self, spec: JobSpec, *, delay_s: float = 0.0, user: int | None = None) -> int:
        """Submit one job; return its id."""
        ...

    def submit_script(self, path: str, *, delay_s: float = 0.0, user: int | None = None,
                      priority: int | None = None) -> int:
        """Submit a job script file; return the job's id."""
        ...

    def submit_text(self, text: str, *, name: str | None = None, delay_s: float = 0.0,
                    user: int | None = None, priority: int | None = None) -> int:
        """Submit a job script given as text; return the job's id."""
        ...

    def submit_batch(self, entries: str, *,
                     user: int | None = None) -> tuple[list[int], list[tuple[str, str]]]:
        """Submit a batch file; return the accepted ids and the refused ``(name, reason)``."""
        ...

    def cancel(self, job_id: int, *, user: int | None = None) -> str:
        """Cancel a job; return the state it was in."""
        ...

    def shutdown(self) -> list[int]:
        """End every job and stop; return the ids of the jobs it ended."""
        ...


def handle_request(server: ControlledServer, request: Mapping[str, Any], *,
                   user: int | None = None) -> dict[str, Any]:
    """Answer one control request (module docstring) from ``user`` (a uid; None: trusted,
    as the Python API); never raises for bad input: the reply says
    ``{"ok": false, "error": ...}``."""
    op = request.get("op")
    try:
        if op == "status":
            return {"ok": True, **server.status()}
        if op == "submit":
            return _submit(server, request, user)
        if op == "cancel":
            raw = request.get("job")
            try:
                job_id = int(raw)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                return {"ok": False, "error": f"a job id is a number, got {raw!r}"}
            before = server.cancel(job_id, user=user)
            return {"ok": True, "job": job_id, "was": before}
        if op == "shutdown":
            if user is not None and user not in (0, os.getuid()):
                return {"ok": False, "error": "only root or the scheduler's owner may shut "
                                              "it down"}
            ended = server.shutdown()
            return {"ok": True, "ended": ended}
        if op == "ping":
            return {"ok": True}
        return {"ok": False, "error": f"unknown op {op!r}: use submit, status, cancel, "
                                      "shutdown or ping"}
    except SubmissionError as exc:
        return {"ok": False, "error": str(exc)}


def _submit(server: ControlledServer, request: Mapping[str, Any],
            user: int | None) -> dict[str, Any]:
    if server.stopping:
        return {"ok": False, "error": "the scheduler is shutting down"}
    delay = float(request.get("delay_s", 0.0) or 0.0)
    priority = request.get("priority")  # 1-5: replaces the script's #PRIORITY
    if "script" in request:
        return {"ok": True, "jobs": [server.submit_script(str(request["script"]),
                                                          delay_s=delay, user=user,
                                                          priority=priority)],
                "refused": []}
    if "text" in request:
        name = request.get("name")
        return {"ok": True, "jobs": [server.submit_text(str(request["text"]),
                                                        name=str(name) if name else None,
                                                        delay_s=delay, user=user,
                                                        priority=priority)],
                "refused": []}
    if "batch" in request:
        ids, refused = server.submit_batch(str(request["batch"]), user=user)
        return {"ok": True, "jobs": ids, "refused": [list(r) for r in refused]}
    if "job" in request:
        raw = dict(request["job"])
        delay = float(raw.pop("submit_s", delay) or 0.0)
        if isinstance(raw.get("command"), str):
            raw["command"] = tuple(shlex.split(raw["command"]))
        elif raw.get("command") is not None:
            raw["command"] = tuple(raw["command"])
        raw.setdefault("profile_declared", "profile" in raw)
        try:
            spec = JobSpec(**raw)
        except (TypeError, ValueError) as exc:
            raise SubmissionError(f"not a valid job: {exc}") from None
        return {"ok": True, "jobs": [server.submit(spec, delay_s=delay, user=user)],
                "refused": []}
    return {"ok": False, "error": "submit needs one of script, text, batch, job"}


def prepare_control_path(path: str | os.PathLike[str]) -> Path:
    """Make ``path`` ready to be bound as the control socket (module docstring): its default
    directory made and checked, a stale socket of ours removed.  Returns ``path`` absolute
    (not resolved: a link on it is never followed).

    Raises:
        OSError: a scheduler already listens there.
        UnsafePathError: the path is a link, a file, a directory or another uid's socket
            (left alone), or its default directory is not safely ours.
    """
    p = Path(os.path.abspath(path))
    control_dir(p)
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    me = os.getuid()
    leave = "left alone: remove it yourself if it is yours to remove, or give another --control"
    if not stat.S_ISSOCK(st.st_mode):
        raise UnsafePathError(f"{p} is {describe(st)}, not a scheduler's socket; {leave}")
    if st.st_uid != me:
        raise UnsafePathError(f"{p} is a socket of uid {st.st_uid}, not of uid {me}; {leave}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(p))
        except ConnectionRefusedError:
            pass  # a stale socket of a scheduler that is gone
        else:
            raise OSError(f"a scheduler already listens on {p} (uid {peer_uid(probe)})")
    again = os.lstat(p)
    if (again.st_dev, again.st_ino) == (st.st_dev, st.st_ino):
        os.unlink(p)
    return p


class ControlServer:
    """Listens on a Unix socket and answers each connection's requests on its own thread.

    Args:
        server: the scheduler the requests go to.
        path: the socket's path.
        group: a group whose members may use it too (mode 0660), or None (0600).

    Raises:
        OSError: the path is taken by a live scheduler, or cannot be bound.
        UnsafePathError: the path is not free for a socket of ours
            (:func:`prepare_control_path`); nothing there is changed.
        KeyError: no such group.
    """

    def __init__(self, server: ControlledServer, path: str | Path, *,
                 group: str | None = None) -> None:
        gid = grp.getgrnam(group).gr_gid if group is not None else None
        p = prepare_control_path(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Owner-only (0600), or 0660 for the group, from the first moment: bind makes the
        # file with 0777 less the umask, so nothing is changed through the path afterwards.
        old_umask = os.umask(0o177 if gid is None else 0o117)
        try:
            sock.bind(str(p))
        except OSError:
            sock.close()
            raise
        finally:
            os.umask(old_umask)
        st = os.lstat(p)
        self._ident = (st.st_dev, st.st_ino)  # close removes this socket and nothing else
        try:
            if gid is not None:
                os.chown(p, -1, gid, follow_symlinks=False)
        except OSError:
            sock.close()
            self._unlink_own(p)
            raise
        sock.listen(64)
        sock.settimeout(0.2)
        self.path = p
        self._server = server
        self._sock: socket.socket | None = sock
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="scheduler-control",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, close the socket and remove its path.  Idempotent; may be called
        from a connection's thread (a ``shutdown`` request)."""
        sock, self._sock = self._sock, None
        self._closed.set()
        if sock is not None:
            if self._thread is not threading.current_thread():
                self._thread.join(timeout=5)
            sock.close()
        self._unlink_own(self.path)

    def _unlink_own(self, path: Path) -> None:
        """Remove ``path`` if it is still the socket this server bound (same device and
        inode); anything put there since is left alone."""
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self._ident:
                os.unlink(path)

    def _accept(self) -> None:
        while not self._closed.is_set():
            sock = self._sock
            if sock is None:
                return
            try:
                conn, _ = sock.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="scheduler-control-conn").start()

    def _serve(self, conn: socket.socket) -> None:
        user = peer_uid(conn)
        with conn, conn.makefile("rw", encoding="utf-8", newline="\n") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    request = json.loads(line)
                    if not isinstance(request, dict):
                        raise ValueError("a request is a JSON object")
                    reply = handle_request(self._server, request, user=user)
                except (ValueError, TypeError) as exc:
                    reply = {"ok": False, "error": str(exc)}
                try:
                    fh.write(json.dumps(reply) + "\n")
                    fh.flush()
                except OSError:
                    return
