"""Starting and stopping places: MPI for process management, nothing else.

Two ways to start:

* **mpiexec** (``mpiexec -n 4 python prog.py``): every rank runs the program; rank r is place
  r.  Rank 0 draws the job secret and broadcasts it; the ranks allgather their ZeroMQ
  endpoints.
* **embedded** (``python prog.py``): the process is an MPI singleton and becomes place 0; it
  starts the other places with ``MPI_Comm_spawn``, one process per call, all calls at once
  from as many threads.  (A single spawn of n processes would give them one shared
  ``MPI_COMM_WORLD``; ``MPI_Finalize`` is collective over it, so none of them could leave
  before the others, and MPICH's Hydra kills the whole group when one exits without
  finalizing.  Separate spawns let a shrink end any one of them.)

A spawned place runs :mod:`apgaspy._child`: it receives its id, host, the secret and the
parent's ``multiprocessing`` preparation data over the intercommunicator, binds its socket,
answers with its endpoint, receives the table of places, disconnects from its parent (so that
it can later finalize and exit alone) and imports the user's main module the way
``multiprocessing``'s spawn start method does (as ``__mp_main__``, same working directory and
``sys.path``), so functions and classes of the program resolve at every place.
"""

from __future__ import annotations

import ipaddress
import logging
import multiprocessing.spawn
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ._config import setting
from ._exceptions import ApgasError, MalleabilityError
from ._runtime import PlaceInfo, Runtime, set_runtime

__all__ = [
    "start",
    "stop",
    "serve",
    "spawn_places",
    "is_local_host",
    "resolve_host",
    "node_file_hosts",
]

log = logging.getLogger("apgaspy")

_TAG = 4711
_READY_TIMEOUT_S = 120.0
_FORWARDED_ENV_PREFIXES = ("APGAS_", "SCHEDULER_")
_FORWARDED_ENV = ("NODE_FILE", "NODES", "JOBNAME", "PYTHONPATH")


def _mpi() -> Any:
    from mpi4py import MPI

    return MPI


_PM_STARTED = False


def _ensure_process_manager() -> None:
    """Make sure an MPI singleton can start its process manager, ``mpiexec``, from PATH.

    MPICH looks for ``mpiexec`` on PATH at the first spawn and aborts the whole process if it
    is missing.  The ``mpich`` wheel installs it next to the Python interpreter, which is not
    on PATH when a virtual environment's python runs without being activated: then that
    directory is added to PATH.

    Raises:
        ApgasError: no ``mpiexec`` anywhere (spawning would abort the program).
    """
    if shutil.which("mpiexec"):
        return
    here = os.path.dirname(os.path.abspath(sys.executable))
    if os.access(os.path.join(here, "mpiexec"), os.X_OK):
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")
        return
    raise ApgasError(
        "starting places without mpiexec needs MPICH's process manager: 'mpiexec' is neither "
        "on PATH nor next to this Python. Install the mpich wheel (pip install mpich), or "
        "launch the program with your MPI's mpiexec")


@contextmanager
def _own_stdio_for_process_manager() -> Iterator[None]:
    """Let the process manager that an MPI singleton forks have its own stdout and stderr.

    MPICH starts its process manager (``mpiexec``) at the first ``MPI_Comm_spawn`` of a
    singleton, as a child that inherits file descriptors 1 and 2.  It makes them non-blocking,
    and since the flag belongs to the open file description, place 0's own writes would then
    fail with EAGAIN when a pipe fills, and output is lost.  So, for the fork, fds 1 and 2
    point to fresh open file descriptions of the same files (reopened through /proc, in
    append mode); then place 0 gets its originals back.  Best effort: where a stream cannot
    be reopened (a socket, say), it is left alone.
    """
    global _PM_STARTED
    if _PM_STARTED:
        yield
        return
    _PM_STARTED = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    saved: list[tuple[int, int]] = []
    for fd in (1, 2):
        try:
            fresh = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_APPEND)
        except OSError:
            continue
        saved.append((fd, os.dup(fd)))  # os.dup: not inherited by the process manager
        os.dup2(fresh, fd)
        os.close(fresh)
    try:
        yield
    finally:
        for fd, original in saved:
            os.dup2(original, fd)
            os.close(original)


# ---------------------------------------------------------------------- hosts
def resolve_host(host: str) -> str:
    """The IPv4 address of ``host`` (a name or an address).

    Raises:
        OSError: the name does not resolve.
    """
    return socket.gethostbyname(host)


def is_local_host(host: str) -> bool:
    """True when ``host`` is this machine: a loopback address or one of its own addresses.

    Places for a local host start on this machine with ``MPI_Comm_spawn`` host ``localhost``
    (MPICH would try ssh for a name such as 127.0.1.2).

    Raises:
        OSError: the name does not resolve.
    """
    ip = resolve_host(host)
    if ipaddress.ip_address(ip).is_loopback:
        return True
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind((ip, 0))  # only an address of this machine can be bound
        return True
    except OSError:
        return False
    finally:
        probe.close()


def node_file_hosts() -> list[str]:
    """The hosts listed in ``$NODE_FILE`` (one a line, blanks skipped), or ``[]``."""
    path = os.environ.get("NODE_FILE")
    if not path:
        return []
    with open(path, encoding="ascii") as fh:
        return [line.strip() for line in fh if line.strip()]


def _my_host() -> str:
    hosts = node_file_hosts()
    return hosts[0] if hosts else socket.gethostname()


def _bind_address(host: str) -> str:
    explicit = setting("HOST")
    if explicit:
        return resolve_host(explicit)
    try:
        return resolve_host(host)
    except OSError:
        return "127.0.0.1"


def _sleepy_barrier(comm: Any) -> None:
    """A barrier that waits without spinning (MPICH's progress engine busy-polls)."""
    req = comm.Ibarrier()
    delay = 0.001
    while not req.Test():
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


# ---------------------------------------------------------------------- start
class Session:
    """How this process takes part in the computation (set by :func:`start`)."""

    world: Any = None  # MPI.COMM_WORLD when started under mpiexec with several ranks


SESSION = Session()


def start(places: int | None = None) -> tuple[Runtime, bool]:
    """Start the runtime of this process and return it with ``True`` on place 0.

    Args:
        places: places to start in embedded mode (default ``APGAS_PLACES``, else the number of
            cores, else with ``NODE_FILE`` its hosts × ``APGAS_PLACES_PER_HOST``); ignored
            under mpiexec, where the number of ranks decides.

    Raises:
        ApgasError: the runtime is already running in this process.
        ConfigurationError: a setting is invalid.
    """
    from ._runtime import _RUNTIME
    from .elastic._orders import reset

    reset()
    if _RUNTIME is not None:
        raise ApgasError("the apgaspy runtime is already running in this process")
    MPI = _mpi()  # noqa: N806 - the mpi4py convention
    if MPI.Comm.Get_parent() != MPI.COMM_NULL:
        raise ApgasError("a spawned place cannot start a runtime of its own")
    world = MPI.COMM_WORLD
    if world.Get_size() > 1:
        return _start_world(world), world.Get_rank() == 0
    return _start_embedded(places), True


def _start_world(world: Any) -> Runtime:
    rank = world.Get_rank()
    secret = world.bcast(os.urandom(32) if rank == 0 else None, root=0)
    host = _mpi().Get_processor_name()
    rt = Runtime(rank, secret, _bind_address(host))
    infos = world.allgather((rt.transport.endpoint, host, os.getpid()))
    per_host = setting("PLACES_PER_HOST")
    table = [PlaceInfo(i, ep, h, pid, "world", i // per_host)
             for i, (ep, h, pid) in enumerate(infos)]
    SESSION.world = world
    set_runtime(rt)
    rt.start(table)
    rt.report_ready()
    _wait_ready(rt, rt.place_ids())
    return rt


def _wait_ready(rt: Runtime, ids: Sequence[int]) -> None:
    """At place 0: wait until the places ``ids`` serve tasks (they import the program first)."""
    if rt.here != 0:
        return
    late = rt.wait_ready(ids, _READY_TIMEOUT_S)
    if late:
        log.warning("places %s did not report ready within %g s", late, _READY_TIMEOUT_S)


def _start_embedded(places: int | None) -> Runtime:
    per_host = setting("PLACES_PER_HOST")
    hosts = node_file_hosts()
    count = setting("PLACES", places)
    if count is None:
        count = len(hosts) * per_host if hosts else (os.cpu_count() or 1)
    my_host = _my_host()
    if hosts and count == len(hosts) * per_host:
        layout = [hosts[i // per_host] for i in range(count)]
    else:
        layout = [my_host] * count
    rt = Runtime(0, os.urandom(32), _bind_address(my_host))
    me = PlaceInfo(0, rt.transport.endpoint, my_host, os.getpid(), "embedded", 0)
    try:
        others = spawn_places(rt, list(enumerate(layout))[1:], [me],
                              slots=[i // per_host for i in range(1, count)])
    except BaseException:
        rt.close()
        raise
    SESSION.world = None
    set_runtime(rt)
    rt.start([me, *others])
    _wait_ready(rt, rt.place_ids())
    return rt


def _child_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k.startswith(_FORWARDED_ENV_PREFIXES) or k in _FORWARDED_ENV
    }


def check_spawnable(host: str) -> str:
    """The MPI ``host`` info value for starting a place for ``host``.

    Raises:
        MalleabilityError: ``host`` does not resolve, or is remote and cannot be reached
            with the launcher's ssh (MPICH aborts the caller on a failed remote spawn, so we
            check first).
    """
    try:
        if is_local_host(host):
            return "localhost"
    except OSError as exc:
        raise MalleabilityError(f"cannot start a place on host {host!r}: {exc}") from None
    import subprocess

    try:
        probe = subprocess.run(
            ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", host, "true"],
            capture_output=True,
            timeout=15,
        )
        ok = probe.returncode == 0
        why = probe.stderr.decode(errors="replace").strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, why = False, str(exc)
    if not ok:
        raise MalleabilityError(
            f"cannot start a place on host {host!r}: it is not this machine and ssh to it "
            f"failed ({why or 'no answer'})"
        )
    return host


def spawn_places(rt: Runtime, specs: Sequence[tuple[int, str]],
                 known: Sequence[PlaceInfo],
                 slots: Sequence[int] | None = None) -> list[PlaceInfo]:
    """Start one place per ``(id, host)`` of ``specs``, all at once; return their infos.

    Every new place learns the table ``known`` + the new places.  The places are not added to
    ``rt``'s table: the caller does that.

    Args:
        slots: the host slot of each new place (default: its id).

    Raises:
        MalleabilityError: a host cannot run a place, or a spawn failed (nothing is left
            running in that case: the places that did start are told to exit).
    """
    if not specs:
        return []
    _ensure_process_manager()
    MPI = _mpi()  # noqa: N806 - the mpi4py convention
    mpi_hosts = {host: check_spawnable(host) for _, host in specs}
    prep = multiprocessing.spawn.get_preparation_data("apgaspy-place")
    prep.pop("authkey", None)
    env = _child_env()
    results: dict[int, tuple[Any, Any]] = {}
    errors: list[BaseException] = []

    def launch(pid: int, host: str) -> None:
        try:
            info = MPI.Info.Create()
            info.Set("host", mpi_hosts[host])
            info.Set("wdir", os.getcwd())
            inter = MPI.COMM_SELF.Spawn(sys.executable, ["-m", "apgaspy._child"], 1, info)
            info.Free()
            inter.send((pid, host, rt.secret, prep, env), dest=0, tag=_TAG)
            answer = inter.recv(source=0, tag=_TAG)
            results[pid] = (inter, answer)
            if answer is None:
                errors.append(MalleabilityError(f"place({pid}) died while starting on {host}"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=launch, args=spec, daemon=True) for spec in specs]
    with _own_stdio_for_process_manager():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    slot_of = dict(zip((pid for pid, _ in specs), slots or [pid for pid, _ in specs],
                       strict=True))
    new = [
        PlaceInfo(pid, results[pid][1][0], host, results[pid][1][1], "spawned", slot_of[pid])
        for pid, host in specs
        if pid in results and results[pid][1] is not None
    ]
    table = [*known, *new] if not errors else None
    finals = []
    for inter, _ in results.values():

        def finish_handshake(inter: Any = inter) -> None:
            inter.send(table, dest=0, tag=_TAG)
            inter.Disconnect()

        t = threading.Thread(target=finish_handshake, daemon=True)
        t.start()
        finals.append(t)
    for t in finals:
        t.join()
    if errors:
        raise MalleabilityError(f"could not start {len(errors)} of {len(specs)} places: "
                                f"{errors[0]}") from errors[0]
    return new


# ---------------------------------------------------------------------- stop
def stop(rt: Runtime, code: int = 0) -> None:
    """On place 0: end every place and release this one."""
    from .elastic._orders import reset

    try:
        reset()  # stops a communicator still running (APGAS-Disabled)
        rt.shutdown(code)
    finally:
        rt.close()
        set_runtime(None)
        if SESSION.world is not None:
            _sleepy_barrier(SESSION.world)
            SESSION.world = None


def serve(rt: Runtime) -> int:
    """On an mpiexec rank other than 0: serve tasks until place 0 shuts down; return the code."""
    rt.stopped.wait()
    rt.close()
    set_runtime(None)
    code = rt.exit_code
    if rt.retired:  # released by a shrink: keep nothing while waiting for the end
        import gc

        rt.objects.clear()
        rt.plos.clear()
        gc.collect()
    if SESSION.world is not None:
        _sleepy_barrier(SESSION.world)
        SESSION.world = None
    return code
