"""The control interface's client side: JSON lines over the server's Unix socket.

The command line (``submit``, ``status``, ``cancel``, ``shutdown``) talks to a running
``python -m scheduler serve`` through :func:`request`.  The socket's path is, in this order:
the ``--control`` option, the ``APGAS_SCHEDULER_CONTROL`` environment variable, or
:func:`default_control_path`: ``$XDG_RUNTIME_DIR/apgaspy-scheduler.sock`` when that directory
is the user's own and closed to others, else ``<tmp>/apgaspy-<uid>/scheduler.sock`` in a
directory of mode 0700 that the server makes and checks (:func:`control_dir`).  The requests
and replies are described in :mod:`scheduler.control_server`.

Before it sends a byte, :func:`request` asks the kernel who listens (``SO_PEERCRED``): a
socket served by any uid but the caller's own, root's or the ``server_uid`` the caller names
(``--server-uid``) is refused (:class:`UntrustedServerError`), so that a process of another
user that listens where the scheduler should cannot read a job script or answer in its name
(docs/reference/security.md, "The control socket")::

    connect(path) ─► SO_PEERCRED uid ∈ {own uid, 0, server_uid}? ─ no ─► UntrustedServerError
                          │ yes                                          (nothing sent)
                          ▼
                     send one JSON line, read one reply line
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from ._exceptions import ControlError, UnsafePathError, UntrustedServerError
from .private import owner_only_dir, peer_uid

__all__ = ["CONTROL_ENV", "ControlError", "UntrustedServerError", "check_server",
           "control_dir", "control_path", "default_control_path", "request"]

#: Environment variable naming the control socket.
CONTROL_ENV = "APGAS_SCHEDULER_CONTROL"


#: What to do when the default directory of the control socket is not safely ours.
_HINT = ("remove it if it is not yours, set XDG_RUNTIME_DIR to a directory of yours "
         "(mode 0700), or give --control PATH")


def _runtime_dir() -> Path | None:
    """``$XDG_RUNTIME_DIR`` when it is set to an absolute, existing directory of this uid
    with no group or other access (not a link); else None."""
    raw = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if not raw or not os.path.isabs(raw):
        return None
    try:
        return owner_only_dir(raw, create=False)
    except OSError:
        return None


def _temp_dir() -> Path:
    """``<tmp>/apgaspy-<uid>``: the per-user directory of the fallback default."""
    return Path(os.path.abspath(tempfile.gettempdir())) / f"apgaspy-{os.getuid()}"


def default_control_path() -> Path:
    """``$XDG_RUNTIME_DIR/apgaspy-scheduler.sock`` when that directory is usable (ours, mode
    without group/other bits), else ``<tmp>/apgaspy-<uid>/scheduler.sock``: one scheduler
    per user by default.  Computes the path only; :func:`control_dir` makes its directory."""
    runtime = _runtime_dir()
    if runtime is not None:
        return runtime / "apgaspy-scheduler.sock"
    return _temp_dir() / "scheduler.sock"


def control_dir(path: str | os.PathLike[str]) -> Path:
    """Make ready the directory of the control socket ``path``: the default per-user
    directory in the temporary directory is made with mode 0700 when missing and checked
    (a real directory, not a link, this uid's, no group/other bits); any other directory is
    the caller's choice and is only required to exist.  Returns it.

    Raises:
        UnsafePathError: the per-user directory is a link, another user's or open to others
            (one line: the path, why, what to do); or a named directory is missing.
        OSError: it cannot be made.
    """
    parent = Path(os.path.abspath(path)).parent
    if parent == _temp_dir():
        return owner_only_dir(parent, create=True, hint=_HINT)
    if not os.path.isdir(parent):
        raise UnsafePathError(f"the directory of the control socket {path} does not exist")
    return parent


def control_path(given: str | os.PathLike[str] | None = None) -> Path:
    """The control socket: ``given``, else ``$APGAS_SCHEDULER_CONTROL``, else the default."""
    if given:
        return Path(given)
    env = os.environ.get(CONTROL_ENV, "").strip()
    return Path(env) if env else default_control_path()


def _who(uid: int) -> str:
    return "root" if uid == 0 else f"uid {uid}"


def check_server(sock: socket.socket, path: str | os.PathLike[str],
                 server_uid: int | None = None) -> int:
    """Check who listens on the connected Unix socket ``sock`` (``SO_PEERCRED``; where the
    kernel does not say, the owner of the socket file ``path``); return that uid.

    Args:
        server_uid: a uid trusted besides the caller's own and root (``--server-uid``).

    Raises:
        UntrustedServerError: another uid listens (the message names the path, the uid found
            and the uids expected).
        ControlError: nobody can be told (no peer credentials and no socket file).
    """
    uid = peer_uid(sock)
    if uid is None:
        try:
            uid = os.lstat(path).st_uid
        except OSError as exc:
            raise ControlError(f"cannot tell who listens on {path}: {exc}") from None
    me = os.getuid()
    trusted = {me, 0} | ({server_uid} if server_uid is not None else set())
    if uid not in trusted:
        expected = [f"uid {me} (yours)"] + ([] if me == 0 else ["root"])
        if server_uid is not None and server_uid not in (me, 0):
            expected.append(f"uid {server_uid} (--server-uid)")
        raise UntrustedServerError(
            f"refused: {path} is served by {_who(uid)}, expected {' or '.join(expected)}; "
            f"nothing was sent (give --server-uid {uid} if you trust that user's scheduler)")
    return uid


def request(path: str | os.PathLike[str], message: dict[str, Any], *,
            timeout_s: float = 60.0, server_uid: int | None = None) -> dict[str, Any]:
    """Send one request, return the reply (``ok`` true); first check who listens
    (:func:`check_server`).

    Args:
        path: the control socket.
        message: the request (``{"op": "status"}`` …).
        timeout_s: seconds to wait for the reply (a shutdown waits for jobs to end).
        server_uid: a uid trusted to serve besides the caller's own and root.

    Raises:
        UntrustedServerError: another user's process listens there (nothing was sent).
        ControlError: nothing listens there, the connection broke, or the reply is
            ``{"ok": false, "error": ...}`` (the message is the error).
    """
    p = Path(path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(p))
            check_server(sock, p, server_uid)
            sock.sendall((json.dumps(message) + "\n").encode("utf-8"))
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
    except (FileNotFoundError, ConnectionRefusedError):
        raise ControlError(f"no scheduler listens on {p} (start one with "
                           "'python -m scheduler serve', or give --control)") from None
    except OSError as exc:
        raise ControlError(f"the scheduler at {p} did not answer: {exc}") from None
    if not data.strip():
        raise ControlError(f"the scheduler at {p} closed the connection without a reply")
    reply = json.loads(data)
    if not reply.get("ok"):
        raise ControlError(str(reply.get("error", "unknown error")))
    return reply
