"""Entry point of a place started with ``MPI_Comm_spawn`` (``python -m apgaspy._child``).

The spawned MPI process forks before it initializes MPI::

    MPI_Comm_spawn ─► anchor (MPI process)          place (plain process, never touches MPI)
                       │ fork ─────────────────────► waits on a pipe
                       │ MPI_Init, recv init data ──► binds its ZeroMQ socket, answers its
                       │ ◄─────────────────────────── endpoint and pid
                       │ send endpoint to parent,
                       │ recv table ────────────────► joins the computation, serves tasks
                       │ MPI_Comm_disconnect
                       │ waitpid(place) ... (no CPU)    ... until shutdown, release or crash
                       └ MPI_Finalize, exit 0  ◄──────── exits

Why: MPICH's process manager (Hydra) ends the whole job, place 0 included, when one of its
processes dies abnormally, even with ``-disable-auto-cleanup``.  With an anchor in between,
Hydra only ever sees clean exits, so a crashed place becomes a :class:`DeadPlaceError` that
the program can handle, and a released place's process exits on its own.  The place dies with
its anchor (``PR_SET_PDEATHSIG``), so nothing is left behind if the anchor is killed.
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing.spawn
import os
import pickle
import signal
import socket
import sys
from typing import Any, BinaryIO

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the place still exits when place 0 goes
        pass


def _place(down: BinaryIO, up: BinaryIO, anchor: int) -> None:
    """The place process: never uses MPI."""
    from ._hosts import choose_address
    from ._logging import configure_logging
    from ._runtime import Runtime, set_runtime

    _die_with_parent()
    if os.getppid() != anchor:  # the anchor died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    place_id, host, secret, prep, env, toward = pickle.load(down)
    os.environ.update(env)
    configure_logging(place_id)
    rt = Runtime(place_id, secret, choose_address(host, toward))
    pickle.dump((rt.transport.endpoint, os.getpid(), socket.gethostname()), up)
    up.flush()
    table = pickle.load(down)
    if table is None:  # the start of the group failed elsewhere
        rt.close()
        os._exit(0)
    code = 1
    try:
        from . import _launch

        _launch.PLACE_IMPORTING_MAIN = place_id
        try:
            multiprocessing.spawn.prepare(prep)
        except BaseException:
            logging.getLogger("apgaspy").exception(
                "place(%d) could not import the program's main module", place_id)
            raise
        finally:
            _launch.PLACE_IMPORTING_MAIN = None
        set_runtime(rt)
        rt.start(table)
        rt.membership.report_ready()
        rt.membership.stopped.wait()
        code = rt.membership.exit_code
    finally:
        try:
            rt.close()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _anchor(child: int, down: BinaryIO, up: BinaryIO) -> None:
    """The MPI process: relays the handshake, then waits for the place to end."""
    def forward(signum: int, _frame: Any) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:  # the place has already ended
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    from mpi4py import MPI

    from ._launch import _TAG, _sleepy_recv

    parent = MPI.Comm.Get_parent()
    answer: Any = None
    try:
        pickle.dump(_sleepy_recv(parent, 0, _TAG), down)
        down.flush()
        answer = pickle.load(up)
    except (EOFError, OSError, pickle.UnpicklingError):
        answer = None  # the place died during the handshake
    parent.send(answer, dest=0, tag=_TAG)
    table = _sleepy_recv(parent, 0, _TAG, max_sleep=0.05)  # comes once every place started
    if answer is not None:
        try:
            pickle.dump(table, down)
            down.flush()
        except OSError:
            pass
    parent.Disconnect()
    while True:
        try:
            os.waitpid(child, 0)
            break
        except ChildProcessError:
            break
        except InterruptedError:
            continue
    MPI.Finalize()
    os._exit(0)


def main() -> None:
    """Fork into anchor and place; never returns."""
    if "mpi4py.MPI" in sys.modules:
        sys.exit("apgaspy._child must fork before MPI starts")
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    anchor = os.getpid()
    child = os.fork()
    if child == 0:
        os.close(down_w)
        os.close(up_r)
        _place(os.fdopen(down_r, "rb"), os.fdopen(up_w, "wb"), anchor)
    else:
        os.close(down_r)
        os.close(up_w)
        _anchor(child, os.fdopen(down_w, "wb"), os.fdopen(up_r, "rb"))


if __name__ == "__main__":
    main()
