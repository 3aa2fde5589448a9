"""Interrupts: the first SIGINT (Ctrl-C) or SIGTERM anywhere ends the whole run, in seconds.

One semantics for every start: embedded (``python prog.py``, place 0 spawns the others),
``mpiexec`` or ``srun`` (the process manager forwards the signal to every rank), a scheduler
job (SIGTERM to every process of the job).  Each place installs :func:`_on_signal` for
SIGINT and SIGTERM when it joins (:func:`install`; a signal the program handles itself or
ignores is left alone)::

    place k ≠ 0 (SIGINT or SIGTERM)            place 0 (SIGINT or SIGTERM, or 'interrupt')
    ───────────────────────────────            ──────────────────────────────────────────
    handler: 'interrupt'(signal) ═══════════►  receiver (ctrl_interrupt): the same signal
      to place 0; serves on                      to the main thread
                                               handler: Interrupted in the main thread,
                                                 which unwinds (the program's finally blocks)
                                               session: one line on stderr, then
    'shutdown'(128 + signal): the place  ◄════   shutdown(128 + signal) (bounded), and
      exits with 128 + signal                    SystemExit(128 + signal): 130 for SIGINT,
                                                 143 for SIGTERM

A second signal at place 0 forces the end: SIGKILL to every process below place 0 (the
places it spawned, their launchers, MPICH's process manager) and exit at once with 128 +
signal; a second signal at another place ends that place at once.  (A SIGTERM within
:data:`_SAME_SIGNAL_S` after a SIGINT, or the other way round, is not a second signal: srun
sends both on a double Ctrl-C.)  Where the signal reaches
place 0 and the other places together (Ctrl-C in a terminal reaches the whole process group;
mpiexec forwards it to every rank), the others' 'interrupt' messages, and place 0's own signal
arriving within :data:`_SAME_SIGNAL_S` after one of them, are the same interrupt, not a second.

The process manager of the embedded start: MPICH forks its ``mpiexec`` at place 0's first
``MPI_Comm_spawn``, in the terminal's process group.  On Ctrl-C it used to SIGKILL place 0
(exit 137, no word from Python).  :func:`shielded` blocks SIGINT and SIGTERM in the threads
that spawn; a signal mask survives ``fork`` and ``exec``, so the process manager and its proxies
never see those signals (they end when the places and place 0 have ended).  Each launcher
unblocks them first thing (``_child.main``), so the places get their signals as before.

A place that dies of any other signal (SIGKILL, SIGSEGV) is a dead place, as before
(docs/concepts/failures.md).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ._config import setting
from ._exceptions import ApgasError, Interrupted
from ._messages import Interrupt

__all__ = ["INTERRUPTS", "install", "uninstall", "shielded", "ctrl_interrupt", "begin_ending",
           "received", "received_late", "exit_code", "is_interrupt_code", "report"]

log = logging.getLogger("apgaspy")

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
"""The signals that end a run."""

_SAME_SIGNAL_S = 1.0
"""Seconds after an interrupt that another place reported during which place 0's own signal
counts as the same interrupt (one Ctrl-C reaching every process), not as a second."""


class _State:
    """This process's interrupt state (one per process: one place per process)."""

    def __init__(self) -> None:
        self.rt: Any = None  # the runtime while installed
        self.here: int | None = None
        self.previous: dict[int, Any] = {}  # signal → the handler before install
        self.signum: int | None = None  # the first interrupt's signal
        self.place = 0  # where it was received
        self.at = 0.0  # when (time.monotonic)
        self.by_place = False  # place 0 learned it from another place's message
        self.pending_from: int | None = None  # ctrl_interrupt's place, for the handler
        self.ending = False  # place 0 is ending the run: a first signal no longer raises
        self.late = False  # the first signal came while place 0 was ending the run


_STATE = _State()


def install(rt: Any) -> bool:
    """Handle SIGINT and SIGTERM at this place (``rt``'s) as the module docstring says.

    Only from the main thread (Python runs signal handlers there), and only for a signal
    whose handler is still Python's default (``default_int_handler`` for SIGINT, ``SIG_DFL``
    for SIGTERM): a program that handles or ignores one keeps its choice.

    Args:
        rt: the place's runtime (a ``Runtime``; its ``here`` and ``membership`` are used).

    Returns:
        Whether a handler was installed for at least one of the signals.
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    st = _STATE
    st.__init__()  # type: ignore[misc]
    st.rt, st.here = rt, rt.here
    for sig in INTERRUPTS:
        default = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
        previous = signal.getsignal(sig)
        if previous is not default:
            continue
        st.previous[sig] = previous
        signal.signal(sig, _on_signal)
    return bool(st.previous)


def uninstall() -> None:
    """Give SIGINT and SIGTERM back the handlers they had before :func:`install`."""
    st = _STATE
    if threading.current_thread() is threading.main_thread():
        for sig, previous in st.previous.items():
            signal.signal(sig, previous)
    st.previous = {}
    st.rt = None


@contextmanager
def shielded() -> Iterator[None]:
    """Block SIGINT and SIGTERM in the calling thread for the block: the threads it starts
    inherit the mask, and so do the processes they fork (MPICH's process manager, started
    by the first ``MPI_Comm_spawn``: see the module docstring)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _on_signal(signum: int, _frame: Any) -> None:
    """The handler of SIGINT and SIGTERM at every place (run in the main thread)."""
    st = _STATE
    if st.here == 0:
        _at_place_zero(signum)
    else:
        _at_other_place(signum)


def _at_place_zero(signum: int) -> None:
    st = _STATE
    now = time.monotonic()
    src, st.pending_from = st.pending_from, None
    if st.signum is None:
        st.signum, st.at = signum, now
        st.place = 0 if src is None else src
        st.by_place = src is not None
        if not st.ending:
            raise Interrupted(signum, st.place)
        st.late = True  # the run ends already: the exit code says it (received_late)
        return
    if src is not None or (st.by_place and now - st.at < _SAME_SIGNAL_S):
        return  # the same interrupt, reported by another place or reaching place 0 too
    if not _second(signum, now):
        return
    _force(signum)


def _second(signum: int, now: float) -> bool:
    """Whether ``signum``, after the first interrupt, is a second one that forces the end:
    the same signal again, or another one more than :data:`_SAME_SIGNAL_S` later.  A
    different signal right after the first is one batch system's way of ending a job (srun
    on Ctrl-C twice: SIGINT to every task, then SIGTERM)."""
    st = _STATE
    return signum == st.signum or now - st.at >= _SAME_SIGNAL_S


def _at_other_place(signum: int) -> None:
    st = _STATE
    if st.signum is not None:
        if _second(signum, time.monotonic()):
            _force(signum)
        return
    st.signum, st.at = signum, time.monotonic()
    rt = st.rt
    if rt is None or rt.membership.stopping:
        return  # ending already
    log.debug("place(%d): %s: telling place(0)", st.here, _name(signum))
    try:
        rt.send_ctrl(0, Interrupt(signal=signum))
    except ApgasError:  # place 0 is gone: this place ends on its own (on_peer_lost)
        pass


def ctrl_interrupt(src: int, message: Interrupt) -> None:
    """Control message :class:`~apgaspy._messages.Interrupt` (at place 0, receiver thread):
    place ``src`` received ``message.signal``; interrupt the main thread as that signal
    would (or as SIGINT, if the program handles that signal itself)."""
    st = _STATE
    if st.here != 0 or st.signum is not None or st.ending:
        return  # not running, or ending already
    sig = message.signal if message.signal in st.previous else signal.SIGINT
    if sig not in st.previous:
        log.warning("place(%d) received %s; the program handles SIGINT and SIGTERM itself, "
                    "so the run goes on", src, _name(message.signal))
        return
    st.pending_from = src
    # A real signal, not _thread.interrupt_main: it also wakes a main thread blocked in a
    # lock's acquire (a finish's wait), which only a signal interrupts.
    signal.pthread_kill(threading.main_thread().ident, sig)  # type: ignore[arg-type]


def _force(signum: int) -> None:
    """A second signal: end now (place 0: SIGKILL every process below it first)."""
    st = _STATE
    _say(f"apgaspy: {_name(signum)} again at place {st.here}: ending at once")
    if st.here == 0:
        _kill_descendants()
    os._exit(128 + signum)


def _kill_descendants() -> None:
    """SIGKILL every process below this one (the places it spawned, their launchers and
    MPICH's process manager), deepest first."""
    import psutil

    try:
        below = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for proc in reversed(below):
        try:
            proc.kill()
        except psutil.Error:
            pass


def begin_ending() -> None:
    """Place 0 is ending the run (its main returned, raised or was interrupted): from now on,
    a first signal is only recorded (:func:`received`); a second one still forces."""
    _STATE.ending = True


def received() -> tuple[int, int] | None:
    """``(signal, place)`` of the first interrupt of this run, or ``None``."""
    st = _STATE
    return None if st.signum is None else (st.signum, st.place)


def received_late() -> bool:
    """Whether the first interrupt came while place 0 was already ending the run (after
    :func:`begin_ending`): the run still exits as interrupted."""
    return _STATE.late


def exit_code(exc: BaseException | None = None) -> int:
    """The exit status of an interrupted run: 128 + the signal (130 for SIGINT, 143 for
    SIGTERM); ``exc``, a ``KeyboardInterrupt`` that no signal of this module raised (the
    program's own), counts as SIGINT."""
    if isinstance(exc, Interrupted):
        return 128 + exc.signal
    first = received()
    return 128 + (first[0] if first is not None and exc is None else signal.SIGINT)


def is_interrupt_code(code: int) -> bool:
    """Whether exit status ``code`` is an interrupted run's (:func:`exit_code`)."""
    return code - 128 in INTERRUPTS


def report(exc: BaseException | None, places: int) -> None:
    """Say on stderr, in one line, that the run was interrupted and is ending ``places``
    places; with ``APGAS_DEBUG=1``, also where place 0's main thread was (``exc``'s
    traceback)."""
    if isinstance(exc, Interrupted):
        signum, where = exc.signal, exc.place
    else:
        first = received()
        signum, where = first if first is not None and exc is None else (signal.SIGINT, 0)
    if exc is not None and setting("DEBUG"):
        _say("".join(traceback.format_exception(exc)).rstrip("\n"))
    _say(f"apgaspy: interrupted ({_name(signum)}) at place {where}; ending {places} "
         f"place{'s' if places != 1 else ''}")


def _say(line: str) -> None:
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
