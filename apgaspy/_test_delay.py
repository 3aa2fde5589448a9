"""The test hook that delays messages between chosen places: **off by default**.

``APGAS_TEST_DELAY`` delays the messages between chosen places, to provoke races that real
networks only show now and then (a steal answer overtaken by a shrink, say)::

    APGAS_TEST_DELAY="2>1:0.3,3>1:0.3"

means: every message that place 2 sends to place 1, and every message place 3 sends to
place 1, is delivered 0.3 s late.  The format is ``<src>><dst>:<seconds>`` entries separated
by commas (seconds ≥ 0, a decimal number; spaces allowed around the parts).  The variable is
read once per process, at its first message.  Unset or empty (the default), nothing changes:
:func:`delay_send` is not even called after the first message of the process.

How it works: ``Runtime.send`` hands a message of a delayed pair to :func:`delay_send`, which
queues it on the pair's delay line (one queue and one daemon thread per pair, started at the
pair's first message).  The thread sends each message through the real ``Runtime.send``
once its time has come, so the messages of one pair keep their order; only the order across
pairs (and against pairs without delay) changes.  A delayed send that fails (the destination
left meanwhile) is logged, not raised.  A message to a place that is not in the sender's
table at the time of the call is not delayed: the real send raises the right error at once.

A place's last words (the ``Released`` report of a place released by a shrink, and the
``Bye`` at shutdown) wait until every delay line of the process is empty, so that the process
does not exit with delayed messages still queued.

Limits: the ``Fin`` markers of a shrink are sent below ``Runtime.send`` and are therefore
never delayed; delay the messages *from* places that a shrink releases, not the messages *to*
them (a delayed message to a released place could arrive after its ``Fin`` marker, too late).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from typing import Any

from ._config import parse_delays, setting
from ._messages import Bye, Ctrl, Released, control_message, decode

__all__ = ["ACTIVE", "parse_delays", "delays", "delay_send", "drain"]

log = logging.getLogger("apgaspy")

#: False once this process knows that it delays nothing (``Runtime.send`` then skips the
#: hook).  True until the first message of the process has been looked at.
ACTIVE = True

_LAST_WORDS = (Released, Bye)
_DRAIN_LIMIT_S = 60.0

_lock = threading.Lock()
_pid: int | None = None
_delays: dict[tuple[int, int], float] = {}
_lines: dict[tuple[int, int, int], _Line] = {}
_local = threading.local()


def delays() -> dict[tuple[int, int], float]:
    """This process's delays, ``{(src, dst): seconds}``, read from ``APGAS_TEST_DELAY`` once
    per process (again in a forked child).

    Raises:
        ConfigurationError: the variable is malformed.
    """
    global _pid, _delays, ACTIVE
    pid = os.getpid()
    if _pid != pid:
        with _lock:
            if _pid != pid:
                _delays = parse_delays(setting("TEST_DELAY"))
                _lines.clear()
                _pid = pid
                ACTIVE = bool(_delays)
    return _delays


class _Line:
    """The delay line of one (source runtime, destination) pair: a queue and its thread."""

    def __init__(self, rt: Any, dest: int) -> None:
        self.rt = rt
        self.dest = dest
        self.queue: deque[tuple[float, bytes]] = deque()
        self.cv = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name=f"apgaspy-test-delay-{rt.here}>{dest}")
        self.thread.start()

    def put(self, msg: bytes, seconds: float) -> None:
        with self.cv:
            self.queue.append((time.monotonic() + seconds, msg))
            self.cv.notify_all()

    def drain(self, timeout: float) -> bool:
        with self.cv:
            return self.cv.wait_for(lambda: not self.queue, timeout)

    def _run(self) -> None:
        _local.bypass = True  # this thread's sends are the real ones
        while True:
            with self.cv:
                while not self.queue:
                    self.cv.wait()
                due, msg = self.queue[0]
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                self.rt.send(self.dest, msg)
            except Exception as exc:  # noqa: BLE001 - a test hook: log, never raise
                log.warning("test delay: a message from place(%d) to place(%d) was lost: %r",
                            self.rt.here, self.dest, exc)
            with self.cv:
                self.queue.popleft()
                self.cv.notify_all()


def _line(rt: Any, dest: int) -> _Line:
    key = (id(rt), rt.here, dest)
    line = _lines.get(key)
    if line is None or line.rt is not rt:
        with _lock:
            line = _lines.get(key)
            if line is None or line.rt is not rt:
                line = _lines[key] = _Line(rt, dest)
    return line


def drain(timeout: float = _DRAIN_LIMIT_S) -> bool:
    """Wait until every delay line of this process has sent its messages.

    Args:
        timeout: seconds to wait at most, for all lines together.

    Returns:
        True when the lines are empty, False after ``timeout``.
    """
    deadline = time.monotonic() + timeout
    for line in list(_lines.values()):
        if not line.drain(max(0.0, deadline - time.monotonic())):
            return False
    return True


def _is_last_word(msg: bytes) -> bool:
    if len(msg) > 256:  # a last word is a few dozen bytes
        return False
    try:
        decoded = decode(msg)
        return isinstance(decoded, Ctrl) and type(control_message(decoded)) in _LAST_WORDS
    except Exception:  # noqa: BLE001 - not a message
        return False


def delay_send(rt: Any, dest: int, msg: bytes) -> bool:
    """The hook of ``Runtime.send``: take ``msg`` for later delivery if its pair is delayed.

    Args:
        rt: the sending :class:`~apgaspy._runtime.Runtime` (its ``here`` is the source).
        dest: the destination place id.
        msg: the encoded message.

    Returns:
        True when the message was taken (a delay thread sends it later); False when the
        caller must send it now.  A place's last words (see the module docstring) first wait
        for the delay lines to empty, at most 60 s.

    Raises:
        ConfigurationError: ``APGAS_TEST_DELAY`` is malformed (at the first message).
    """
    table = delays()
    if not table or getattr(_local, "bypass", False):
        return False
    last = dest == 0 and bool(_lines) and _is_last_word(msg)
    seconds = table.get((rt.here, dest))
    if seconds is None or dest not in rt.table:
        if last and not drain():
            log.warning("test delay: delayed messages still queued at place(%d)'s end", rt.here)
        return False
    _line(rt, dest).put(msg, seconds)
    if last and not drain():
        log.warning("test delay: delayed messages still queued at place(%d)'s end", rt.here)
    return True
