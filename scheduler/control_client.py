"""The control interface's client side: JSON lines over the server's Unix socket.

The command line (``submit``, ``status``, ``cancel``, ``shutdown``) talks to a running
``python -m scheduler serve`` through :func:`request`.  The socket's path is, in this order:
the ``--control`` option, the ``APGAS_SCHEDULER_CONTROL`` environment variable, or
:func:`default_control_path` (``<tmp>/apgaspy-scheduler-<uid>.sock``).  The requests and
replies are described in :mod:`scheduler.control_server`.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CONTROL_ENV", "ControlError", "control_path", "default_control_path", "request"]

#: Environment variable naming the control socket.
CONTROL_ENV = "APGAS_SCHEDULER_CONTROL"


class ControlError(RuntimeError):
    """The scheduler cannot be reached, or answered a request with an error.

    Raised by :func:`request`; the message is the scheduler's own (``no job 42``, ``… does
    not parse``) or says that nothing listens on the control socket.
    """


def default_control_path() -> Path:
    """``<tmp>/apgaspy-scheduler-<uid>.sock``: one scheduler per user by default."""
    return Path(tempfile.gettempdir()) / f"apgaspy-scheduler-{os.getuid()}.sock"


def control_path(given: str | os.PathLike[str] | None = None) -> Path:
    """The control socket: ``given``, else ``$APGAS_SCHEDULER_CONTROL``, else the default."""
    if given:
        return Path(given)
    env = os.environ.get(CONTROL_ENV, "").strip()
    return Path(env) if env else default_control_path()


def request(path: str | os.PathLike[str], message: dict[str, Any], *,
            timeout_s: float = 60.0) -> dict[str, Any]:
    """Send one request, return the reply (``ok`` true).

    Args:
        path: the control socket.
        message: the request (``{"op": "status"}`` …).
        timeout_s: seconds to wait for the reply (a shutdown waits for jobs to end).

    Raises:
        ControlError: nothing listens there, the connection broke, or the reply is
            ``{"ok": false, "error": ...}`` (the message is the error).
    """
    p = Path(path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(p))
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
