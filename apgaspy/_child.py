"""Entry point of a host's launcher started with ``MPI_Comm_spawn``
(``python -P …/apgaspy/_child.py N``): it starts N places of one host.

The file runs as a script, not as ``-m apgaspy._child``, so that the MPI process imports
nothing of apgaspy: the places, forked from it, import the package; the MPI process (the
*anchor*) keeps only the interpreter, mpi4py and MPICH until the handshake is over, and then
becomes a tiny waiter.  It forks before it initializes MPI.  One place (N = 1)::

    MPI_Comm_spawn ─► anchor (MPI process)          place (plain process, never touches MPI)
                       │ fork ─────────────────────► imports apgaspy, waits on a pipe
                       │ MPI_Init, recv init data ──► binds its ZeroMQ socket, answers its
                       │ ◄─────────────────────────── endpoint and pid, imports the
                       │ send endpoint to parent,     program's main module
                       │ recv table ────────────────► joins the computation, serves tasks
                       │ MPI_Comm_disconnect, MPI_Finalize
                       │ exec a small waiter ("apgaspy-anchor" in its argv)
                       │ ... (no CPU)                 ... until shutdown, release or crash
                       └ exit 0  ◄────────────────────── exits

Several places (N > 1, the places of one host in one launch, see ``APGAS_LAUNCH_GROUP``): the
anchor first forks a *forker*, which imports apgaspy while the anchor starts MPI, then forks
the N places (they skip the imports and share those pages) and becomes a waiter too.  The
anchor relays the handshake of all N at once (one message in, one list of answers out, one
table), each place through its own pair of pipes::

    anchor ──fork──► forker: import apgaspy ──fork──► place 1 ... place N
      │ MPI_Init, handshake for the N places            (each as above)
      │ exec waiter                    exec waiter (ends when its places have ended)
      └ exit 0 when the forker has ended

A place is never an MPI process, so a shrink ends any one place alone: its process exits, and
the waiters wait for the others.

Why: MPICH's process manager (Hydra) ends the whole job, place 0 included, when one of its
processes dies abnormally, even with ``-disable-auto-cleanup``.  With an anchor in between,
Hydra only ever sees clean exits, so a crashed place becomes a :class:`DeadPlaceError` that
the program can handle, and a released place's process exits on its own.  The place dies with
its parent (``PR_SET_PDEATHSIG``: the anchor, or the forker, which dies with the anchor), so
nothing is left behind if either is killed.

Memory: the anchor used to keep what it had loaded for MPI, about 38 MB RSS per
place; once MPI is finalized it replaces its image (``execv``, same pid, so Hydra and the
place's ``PR_SET_PDEATHSIG`` see no change) with a small waiter (:func:`_become_waiter`):
about 1.8 MB RSS for the host's places together (a launcher of several places has two: the
anchor and the forker).  A process may go on after ``MPI_Finalize`` as long as it makes no MPI call
(MPI-4.0 §11.2.2); Hydra only looks at how it exits.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from typing import Any, BinaryIO, NamedTuple

_STARTED = time.monotonic()  # when the launcher's script began (after the interpreter's start)
_STARTED_WALL = time.time()  # the same moment on the wall clock (hosts share it, roughly)
_CREATED_WALL = float("nan")  # when the launcher's process was created (set by main)
_PR_SET_PDEATHSIG = 1
TAG = 4711
"""The MPI tag of the spawn handshake (place 0 ↔ anchor)."""


class LaunchOrder(NamedTuple):
    """The spawn handshake, place 0 → a launcher: start ``specs``, one ``(place id, host)``
    per place, with the main module's preparation data ``prep`` (``multiprocessing.spawn``),
    the ``env`` to set, and ``toward``, an address of place 0 the places bind toward
    (``None``: the same machine).  Sent as a plain tuple (the launcher's MPI process runs
    this file as a script and imports nothing of apgaspy).  The job secret is not in it: it
    comes with the table, sealed to each place's public key (:mod:`apgaspy._keys`).
    ``cores``: the cores each place of ``specs`` binds to (a list of CPU numbers each, in
    ``specs``' order), or empty when the job is not pinned (:mod:`apgaspy._pinning`)."""

    specs: list[tuple[int, str]]
    prep: dict[str, Any]
    env: dict[str, str]
    toward: str | None
    cores: tuple[list[int], ...] = ()


class StartData(NamedTuple):
    """The spawn handshake, a launcher → one of its places: the place's id and host, and the
    rest of its :class:`LaunchOrder` (``cores``: its own, or ``None``: not pinned).  Sent as
    a plain tuple through the place's pipe."""

    place_id: int
    host: str
    prep: dict[str, Any]
    env: dict[str, str]
    toward: str | None
    cores: list[int] | None = None


class PlaceAnswer(NamedTuple):
    """The spawn handshake, a place → its launcher → place 0: its ZeroMQ ``endpoint``, its
    process id ``pid``, its machine's ``host`` name and ``public_key``, the one-time key
    (32 bytes) to which place 0 seals the job secret (:mod:`apgaspy._keys`).  Sent as a plain
    tuple (the launcher's list of answers has ``None`` for a place that died while it
    started).  ``error``: why the place cannot start (one line: its cores could not be bound),
    else ``None``; a place that answers one exits."""

    endpoint: str
    pid: int
    host: str
    public_key: bytes
    error: str | None = None
ANCHOR_MARK = "apgaspy-anchor"
"""In the waiting anchor's argv, so tools (and tests) can tell it from the place."""
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

importing_main: int | None = None
"""This place's id while it imports the program's main module, else ``None`` (written here
only; :func:`apgaspy._launch.start` reads it): a main module that starts a computation at
import would otherwise make the place start one of its own (and hang in MPI start-up)."""


def sleepy_recv(comm: Any, source: int, tag: int, max_sleep: float = 0.005) -> Any:
    """``comm.recv(source=source, tag=tag)`` (a pickled object) without spinning.

    A blocking receive busy-polls in MPICH: with many places starting at once, every anchor
    waiting for its place table burnt a core's worth of polling (the CPU per place grew 3×
    from 8 to 64 places).  This probes (``MPI_Improbe``) with a sleep that doubles
    from 0.1 ms to ``max_sleep`` seconds, then receives the matched message, whatever its
    size.  A probe costs about as much as a poll of the progress engine, so a long wait
    wants a long ``max_sleep`` (the anchor's wait for the place table: 50 ms).

    Args:
        comm: an mpi4py communicator (place 0's intercommunicator to an anchor, or back).
        source: the rank to receive from; tag: the MPI tag.
        max_sleep: the longest sleep between probes, in seconds.

    Returns:
        The received object.  Raises what ``mpi4py`` raises (``MPI.Exception``).
    """
    delay = 0.0001
    while True:
        msg = comm.improbe(source=source, tag=tag)
        if msg is not None:
            return msg.recv()
        time.sleep(delay)
        delay = min(delay * 2, max_sleep)


def _process_created() -> float:
    """The wall-clock time the launcher's process was created (the interpreter's start), from
    ``/proc``: this process's start in clock ticks after boot (``CLOCK_BOOTTIME``), plus the
    boot time on the wall clock; ``nan`` where ``/proc`` cannot tell.  Called by the launcher
    before it forks (a forked place's own start is its fork).  The boot time is the wall clock
    less ``CLOCK_BOOTTIME`` now (``/proc/stat``'s ``btime`` is whole seconds: up to a second
    off)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as fh:
            ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        boot = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)  # Linux, as /proc is
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return float("nan")


_THREADS_TIMEOUT = 60.0
"""Seconds a forker waits for the threads that importing the main module started."""


def encode_main(prep: dict[str, Any]) -> str:
    """The part of ``multiprocessing``'s preparation data ``prep`` that imports the program's
    main module (its ``sys.path``, working directory and main module's name or path), as one
    command-line argument for a launcher (:func:`import_main` reads it)."""
    import base64
    import json

    keys = ("sys_path", "dir", "init_main_from_name", "init_main_from_path")
    return base64.urlsafe_b64encode(
        json.dumps({k: prep[k] for k in keys if k in prep}).encode()).decode("ascii")


def import_main(arg: str) -> bool:
    """In a launcher's forker, before it forks the places: import the program's main module as
    ``multiprocessing``'s spawn start method does (``__mp_main__``), from ``arg``
    (:func:`encode_main`), so the places find it imported and skip the import (``prepare``
    sees the module in place).  Returns whether it worked; a module that fails to import is
    left to the places, which then report the error as before.  Threads the import started
    are waited for (up to :data:`_THREADS_TIMEOUT` seconds) before the forker forks: False if
    one is still running then.

    Why: the main module of a computation imports its kernels (numba, numpy: 0.6 s of a
    place's start on a loaded 2-core machine); 16 places importing it at once cost 16 times
    that CPU, once here.
    """
    global importing_main
    import base64
    import json
    import multiprocessing.spawn

    try:
        prep = json.loads(base64.urlsafe_b64decode(arg.encode("ascii")))
    except ValueError:
        return False
    import threading

    saved = (list(sys.path), os.getcwd())
    importing_main = -1
    try:
        multiprocessing.spawn.prepare(prep)
    except BaseException:  # noqa: BLE001 - the places import it again and report it
        sys.path[:] = saved[0]
        os.chdir(saved[1])
        return False
    finally:
        importing_main = None
    # A thread the import started (a kernel module's warm-up, say, which loads the compiled
    # kernels in the background while a place starts) may hold a lock: a place forked then
    # would inherit it locked and hang at its first use.  So the forker waits for such
    # threads to end before it forks (the places then get the kernels loaded, too).
    deadline = time.monotonic() + _THREADS_TIMEOUT
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(max(0.0, deadline - time.monotonic()))
    return all(t is threading.main_thread() or not t.is_alive() for t in threading.enumerate())


def _die_with_parent() -> None:
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the place still exits when place 0 goes
        pass


def _place(down: BinaryIO, up: BinaryIO, anchor: int) -> None:
    """The place process: never uses MPI."""
    global importing_main
    import logging
    import multiprocessing.spawn
    import socket

    from . import _interrupt as interrupts
    from ._hosts import choose_address
    from ._keys import KeyPair
    from ._exceptions import StartupError
    from ._logging import configure_logging
    from ._pinning import bind_place
    from ._runtime import Runtime, set_runtime

    _die_with_parent()
    if os.getppid() != anchor:  # the anchor died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    # Wall-clock stamps of the place's start, logged at DEBUG once it is ready (a grow's
    # phases: docs/design/scale.md): the launcher process created, its script begun, this
    # place forked with apgaspy imported, start data, handshake answered, main module
    # imported, table received, ready.
    stamps = {"launcher": _CREATED_WALL, "script": _STARTED_WALL, "forked": time.time()}
    start = StartData(*pickle.load(down))
    stamps["data"] = time.time()
    place_id = start.place_id
    os.environ.update(start.env)
    configure_logging(place_id)
    logger = logging.getLogger("apgaspy")
    logger.debug("place(%d): start data %.3f s after its launcher's script began", place_id,
                 time.monotonic() - _STARTED)
    if start.cores is not None:  # before the runtime's threads start: they inherit the cores
        try:
            bind_place(place_id, start.host, start.cores)
        except StartupError as exc:  # place 0 reports it for this place, in one line
            cause = exc.places.get(place_id, (start.host, str(exc)))[1]
            pickle.dump(tuple(PlaceAnswer("", os.getpid(), socket.gethostname(), b"",
                                          cause)), up)
            up.flush()
            os._exit(1)
    rt = Runtime(place_id, None, choose_address(start.host, start.toward))
    pair = KeyPair()
    pickle.dump(tuple(PlaceAnswer(endpoint=rt.transport.endpoint, pid=os.getpid(),
                                  host=socket.gethostname(), public_key=pair.public)), up)
    up.flush()
    stamps["answered"] = time.time()
    code = 1
    try:
        # The program's main module is imported while place 0 finishes the spawn and sends
        # the table (a wait of 0.1-0.3 s): a grown place is ready that much sooner
        # (docs/guides/compiled-kernels.md, "Grow latency").
        importing_main = place_id
        try:
            multiprocessing.spawn.prepare(start.prep)
        except BaseException:
            logging.getLogger("apgaspy").exception(
                "place(%d) could not import the program's main module", place_id)
            raise
        finally:
            importing_main = None
        stamps["main"] = time.time()
        logger.debug("place(%d): main module imported %.3f s after its launcher's script "
                     "began", place_id, time.monotonic() - _STARTED)
        table, boxes = pickle.load(down)
        logger.debug("place(%d): table %.3f s after its launcher's script began", place_id,
                     time.monotonic() - _STARTED)
        if table is None:  # the start of the group failed elsewhere
            code = 0
            return
        stamps["table"] = time.time()
        rt.set_secret(pair.open(boxes[place_id]))
        set_runtime(rt)
        rt.start(table)
        interrupts.install(rt)  # SIGINT, SIGTERM: tell place 0, which ends the run
        rt.membership.report_ready()
        if logger.isEnabledFor(logging.DEBUG):
            stamps["ready"] = time.time()
            logger.debug("place(%d): wall clock %s", place_id,
                         " ".join(f"{k}={v:.6f}" for k, v in stamps.items()))
        rt.membership.stopped.wait()
        code = rt.membership.exit_code
    finally:
        try:
            rt.close()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _forward_to(children: list[int]) -> Any:
    """A signal handler that sends the signal on to ``children`` (the places)."""
    def forward(signum: int, _frame: Any) -> None:
        for child in children:
            try:
                os.kill(child, signum)
            except ProcessLookupError:  # the place has already ended
                pass

    return forward


def _wait_for(children: list[int]) -> None:
    """Forward SIGINT, SIGTERM and SIGHUP to ``children``, wait until they all end, exit 0.

    The waiter of :func:`_become_waiter` where there is no GNU ``tail`` (this script run
    again as ``python -I -S _child.py apgaspy-anchor <pid> [<pid> ...]``), and its last
    resort."""
    for sig in _FORWARDED:
        signal.signal(sig, _forward_to(children))
    left = set(children)
    while left:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:  # no child left (or none of these was ours)
            break
        except InterruptedError:
            continue
        left.discard(pid)
    os._exit(0)


def _anchor(children: list[int], downs: list[BinaryIO], ups: list[BinaryIO],
            alive: int) -> None:
    """The MPI process: relays the handshake of its places, then waits for them to end.

    Place 0 sends a :class:`LaunchOrder`, its ``specs`` one ``(place id, host)`` per forked
    place; each place gets its own :class:`StartData`, binds its socket and answers (a
    :class:`PlaceAnswer`); the anchor sends back the list of answers (``None`` for a place
    that died meanwhile), then relays the table, to every place that answered, once place 0
    has it.
    """
    for sig in _FORWARDED:
        signal.signal(sig, _forward_to(children))
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    from mpi4py import MPI

    parent = MPI.Comm.Get_parent()
    answers: list[Any] = [None] * len(downs)
    try:
        order = LaunchOrder(*sleepy_recv(parent, 0, TAG))
    except (TypeError, ValueError):  # not a launch message: nothing can start
        order = LaunchOrder([], {}, {}, None)
    _bind_anchor(order.cores)
    for i, down in enumerate(downs):  # every place first: they bind their sockets at once
        try:
            place_id, host = order.specs[i]
            cores = order.cores[i] if order.cores else None
            pickle.dump(tuple(StartData(place_id, host, order.prep, order.env,
                                        order.toward, cores)), down)
            down.flush()
        except (IndexError, OSError):
            pass
    for i, up in enumerate(ups):
        try:
            answers[i] = pickle.load(up)
        except (EOFError, OSError, pickle.UnpicklingError):
            answers[i] = None  # the place died during the handshake
    parent.send(answers, dest=0, tag=TAG)
    table = sleepy_recv(parent, 0, TAG, max_sleep=0.05)  # comes once every place started
    table_bytes = pickle.dumps(table, protocol=pickle.HIGHEST_PROTOCOL)  # once for all
    for answer, down in zip(answers, downs, strict=True):
        if answer is not None:
            try:
                down.write(table_bytes)
                down.flush()
            except OSError:
                pass
    parent.Disconnect()
    MPI.Finalize()
    for stream in (*downs, *ups):
        try:
            stream.close()
        except OSError:  # a place that died left its pipe broken: nothing more to say to it
            pass
    _become_waiter(children, alive)


def _bind_anchor(cores: tuple[list[int], ...]) -> None:
    """Keep the anchor (and the waiter it becomes) on the cores of its places, the job's
    (best effort: a refusal is its places' to report)."""
    union = {c for share in cores for c in share}
    if union:
        try:
            os.sched_setaffinity(0, union)
        except (OSError, ValueError, AttributeError):
            pass


def _gnu_tail() -> str | None:
    """The path of a GNU ``tail`` (it has ``--pid``), or ``None``."""
    import shutil
    import subprocess

    path = shutil.which("tail")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=5,
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if b"GNU coreutils" in out else None


def _become_waiter(children: list[int], alive: int) -> None:
    """Replace this process (MPI finalized) with a small one that ends when its places end.

    GNU ``tail`` (about 1.8 MB RSS) where there is one.  One place: ``tail --pid``;
    ``SIGCHLD`` ignored, which ``execv`` keeps, lets the kernel reap the place, so ``tail``
    sees it gone (within 0.1 s); a place that ended before is reaped here.  Several places
    (``tail --pid`` takes one pid before coreutils 9.5): ``tail -c 1`` reading the pipe
    ``alive``, whose write end only the places hold; it reads end of file, and exits 0, when
    the last of them has ended (the kernel closes a process's descriptors at its exit), and
    reaping is the kernel's again.  ``tail`` cannot forward signals, and if one ended it,
    Hydra would see an abnormal exit and kill the whole job, place 0 included (MPICH does
    that even after ``MPI_Finalize``): so SIGINT, SIGTERM and SIGHUP are ignored (also kept
    by ``execv``).  The places still get every signal sent to them (a batch system signals
    every process of the job) and their anchor ends when they end; SIGKILL of the anchor ends
    the job, as it always did.  Elsewhere this script, run again by an interpreter started
    with ``-I -S`` (:func:`_wait_for`, 11.5 MB RSS), waits and forwards SIGINT, SIGTERM and
    SIGHUP, then exits 0.  ``apgaspy-anchor`` is in the argv of both (``argv[0]`` for
    ``tail``).

    Args:
        children: the pids of this anchor's places.
        alive: the read end of the pipe whose write end each place holds.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    tail = _gnu_tail()
    # Ignored from here: through execv, until the Python waiter installs its handlers; for
    # good with tail (an exit on a signal would end the job, see the docstring).
    for sig in _FORWARDED:
        signal.signal(sig, signal.SIG_IGN)
    try:
        if tail is not None:
            signal.signal(signal.SIGCHLD, signal.SIG_IGN)
            # A place that ended before that is a zombie, which SIG_IGN does not reap and
            # tail would take for alive: reap it here.
            left = []
            for child in children:
                try:
                    if os.waitpid(child, os.WNOHANG)[0] == 0:
                        left.append(child)
                except ChildProcessError:  # reaped by the kernel already
                    pass
            if not left:
                os._exit(0)
            if len(children) == 1:
                os.execv(tail, [ANCHOR_MARK, f"--pid={left[0]}", "-s", "0.1", "-f",
                                os.devnull])
            os.dup2(alive, 0)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.execv(tail, [ANCHOR_MARK, "-c", "1"])
        os.execv(sys.executable, [sys.executable, "-I", "-S", os.path.abspath(__file__),
                                  ANCHOR_MARK, *map(str, children)])
    except OSError:  # nothing to exec: wait here, with everything loaded
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _wait_for(children)


def _fork_places(ends: list[tuple[int, int]], others: list[int]) -> list[int]:
    """Fork one place per ``(down_r, up_w)`` pair of ``ends``; return their pids.

    Each place closes ``others`` (descriptors it must not hold) and the other places' ends,
    and runs :func:`_place` with its pipes and this process's pid."""
    parent = os.getpid()
    children = []
    for i, (down_r, up_w) in enumerate(ends):
        child = os.fork()
        if child == 0:
            for fd in (*others, *(f for j, pair in enumerate(ends) if j != i for f in pair)):
                os.close(fd)
            _place_function()(os.fdopen(down_r, "rb"), os.fdopen(up_w, "wb"), parent)
        children.append(child)
    return children


def main() -> None:
    """Fork into an anchor and its places (``_child.py [N]``: N places, default 1); never
    returns.  Run as ``_child.py apgaspy-anchor <pid> [<pid> ...]``: the anchor's waiter where
    there is no GNU ``tail`` (:func:`_wait_for`).

    One place is forked at once and imports apgaspy while the anchor starts MPI.  Several
    places come from a *forker*, forked first (a zygote, as Android starts its apps): it
    imports apgaspy (not MPI) while the anchor starts MPI, then forks the places, which skip
    the imports (a third to a half of a place's start) and share those pages; then it waits
    for them as the anchor does (it dies with the anchor, the places die with it)::

        anchor ──fork──► forker: import apgaspy ──fork──► place, place, ...
          │ MPI_Init, handshake (relayed to the places through their pipes)
    """
    # Place 0 spawns with SIGINT and SIGTERM blocked, so that MPICH's process manager never
    # gets them (apgaspy._interrupt); the launcher and its places take them again.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
    if sys.argv[1:2] == [ANCHOR_MARK]:
        _wait_for([int(a) for a in sys.argv[2:]])
    if "mpi4py.MPI" in sys.modules:
        sys.exit("apgaspy._child must fork before MPI starts")
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    global _CREATED_WALL
    _CREATED_WALL = _process_created()
    if __name__ == "__main__":  # run as a script with -P: the working directory first, as -m
        sys.path.insert(0, os.getcwd())
    alive_r, alive_w = os.pipe()  # the places hold the write end: see _become_waiter
    downs = [os.pipe() for _ in range(count)]
    ups = [os.pipe() for _ in range(count)]
    ends = [(down[0], up[1]) for down, up in zip(downs, ups, strict=True)]  # the places'
    mine = [(down[1], up[0]) for down, up in zip(downs, ups, strict=True)]  # the anchor's
    anchor_fds = [fd for pair in mine for fd in pair]
    anchor = os.getpid()
    if count == 1:
        children = _fork_places(ends, [alive_r, *anchor_fds])
    else:
        forker = os.fork()
        if forker == 0:
            for fd in anchor_fds:
                os.close(fd)
            _die_with_parent()
            if os.getppid() != anchor:  # the anchor died before prctl took effect
                os._exit(1)
            _place_function()  # warm: the places forked next skip the imports
            if len(sys.argv) > 2:
                _import_main_function()(sys.argv[2])
            places = _fork_places(ends, [alive_r])
            for fd in (alive_w, *(fd for pair in ends for fd in pair)):
                os.close(fd)
            _become_waiter(places, alive_r)
        children = [forker]
    for fd in (alive_w, *(fd for pair in ends for fd in pair)):
        os.close(fd)
    _anchor(children, [os.fdopen(w, "wb") for w, _ in mine],
            [os.fdopen(r, "rb") for _, r in mine], alive_r)


def _import_main_function() -> Any:
    """:func:`import_main` of the package's module (whose ``importing_main`` the runtime
    reads), or this one's when the package's module is this one."""
    if __name__ != "__main__":
        return import_main
    from apgaspy import _child as package

    return package.import_main


def _place_function() -> Any:
    """The place's entry point: :func:`_place` of the package's module (run as a script,
    this imports the package, all of apgaspy)."""
    if __name__ != "__main__":
        return _place
    # Importing the package's module and loading all of apgaspy (its __init__ loads its
    # names lazily): in the forker, before it forks, so the places skip the imports.  By
    # importlib: this runs as the launcher's script, outside the package's import graph.
    import importlib

    from apgaspy import _child as package

    importlib.import_module("apgaspy")._load_all()

    # The package's module has its own clock readings, taken at its import: give it the
    # script's, so the places' start stamps count from the launcher's start.
    package._STARTED, package._STARTED_WALL = _STARTED, _STARTED_WALL
    package._CREATED_WALL = _CREATED_WALL
    return package._place


if __name__ == "__main__":
    main()
