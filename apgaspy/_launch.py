"""Starting and stopping places: MPI for process management, nothing else.

Two ways to start:

* **mpiexec** (``mpiexec -n 4 python prog.py``): every rank runs the program; rank r is place
  r.  Rank 0 draws the job secret and hands it to each rank sealed to that rank's one-time
  public key (:mod:`apgaspy._keys`); the ranks allgather their ZeroMQ endpoints.
* **embedded** (``python prog.py``): the process is an MPI singleton and becomes place 0; it
  starts the other places with ``MPI_Comm_spawn``: one launcher process per host (and per
  ``APGAS_LAUNCH_GROUP`` places), all launches at once from as many threads.  The launcher
  forks the host's places, which are not MPI processes.  (A single spawn of n MPI processes
  would give them one shared ``MPI_COMM_WORLD``; ``MPI_Finalize`` is collective over it, so
  none of them could leave before the others, and MPICH's Hydra kills the whole group when one
  exits without finalizing.  Places forked by a launcher let a shrink end any one of them.)

A launcher runs :mod:`apgaspy._child` (as a script): it receives its places' ids, host and
the parent's ``multiprocessing`` preparation data over the intercommunicator, hands each
place its part, answers with their endpoints and one-time public keys, receives the table of
places once for all of them with the job secret sealed to each place's key
(:mod:`apgaspy._keys`), and each place imports the user's main module the way ``multiprocessing``'s
spawn start method does (as ``__mp_main__``, same working directory and ``sys.path``), so
functions and classes of the program resolve at every place.  The launcher's MPI process
disconnects and finalizes after the handshake.  So a grow by a host costs one launch however
many places it brings, place 0 keeps one thread per launch, not per place, and the table goes
once to each launcher, not to each place.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing.spawn
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from . import _child, _interrupt
from ._child import TAG as _TAG
from ._child import LaunchOrder, PlaceAnswer
from ._child import sleepy_recv as _sleepy_recv
from ._config import setting
from ._env_check import check_environment
from ._exceptions import ApgasError, ConfigurationError, MalleabilityError, StartupError
from ._hosts import (
    check_host,
    choose_address,
    is_local_host,
    is_loopback,
    my_host,
    node_file_hosts,
    note_reachable,
    resolve_host,
    slurm_allocation,
)
from ._keys import KeyPair, new_secret, seal
from ._logging import configure_logging
from ._membership import PlaceInfo
from ._runtime import Runtime, current_runtime, set_runtime
from .elastic._malleability import Malleability

__all__ = ["start", "stop", "serve", "spawn_places"]

log = logging.getLogger("apgaspy")

_CHILD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
_FORWARDED_ENV_PREFIXES = ("APGAS_", "SCHEDULER_")
_FORWARDED_ENV = ("NODE_FILE", "NODES", "JOBNAME", "PYTHONPATH")
# APGAS_HOST: an address of place 0's machine, meaningless elsewhere; SCHEDULER_KEY: the
# scheduler's line key, which only place 0 uses and which must not cross MPI in the clear.
_NOT_FORWARDED = ("APGAS_HOST", "SCHEDULER_KEY")
_SPAWN_ENV = {"UCX_TLS": "tcp,self", "UCX_LOG_LEVEL": "error"}


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
    # The process manager and the places it starts inherit this environment.  MPI carries
    # only the start-up handshake: TCP suffices, and UCX's shared-memory transports take
    # hosts that are network namespaces or containers of one machine for one node and kill
    # the job when a place starts on another.  UCX then warns of requests left
    # in its pools at MPI_Finalize, on the places' stdout: only errors are shown.
    for key, value in _SPAWN_ENV.items():
        os.environ.setdefault(key, value)
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
def _address_of(endpoint: str) -> str:
    """The IP address of a ZeroMQ endpoint ``tcp://ip:port``."""
    return endpoint.rsplit("//", 1)[-1].rsplit(":", 1)[0]


def _remote_address(hosts: Sequence[str]) -> str | None:
    """The resolved address of the first of ``hosts`` that is another machine, or ``None``."""
    for host in hosts:
        try:
            if not is_local_host(host):
                return resolve_host(host)
        except OSError:
            continue
    return None


def _sleepy_barrier(comm: Any) -> None:
    """A barrier that waits without spinning (MPICH's progress engine busy-polls)."""
    req = comm.Ibarrier()
    delay = 0.001
    while not req.Test():
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


FDS_PER_PLACE = 6
"""Open files place 0 holds per place: two TCP connections (its own to the place, the
place's to it), the ZeroMQ socket to the place with its mailbox, and the socket monitor
that watches it (5.1 per place measured at 512 places), rounded up."""
_FDS_BASE = 256  # what place 0 holds besides: the interpreter, MPI, pools, the program


def ensure_fd_limit(places: int) -> None:
    """Make sure this process (place 0) may open the files ``places`` places need.

    Raises the soft limit on open files (``RLIMIT_NOFILE``) to what ``places`` need, never
    above the hard limit (as a server that expects many connections does).

    Args:
        places: the number of places the computation will have, place 0 included.

    Raises:
        StartupError: the hard limit is too low (one line: how many are needed, and the fix).
    """
    try:
        import resource
    except ImportError:  # not POSIX: nothing to check
        return
    need = _FDS_BASE + FDS_PER_PLACE * places
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        raise StartupError(
            f"{places} places need about {need} open files at place 0, but the hard limit is "
            f"{hard}: raise it (ulimit -Hn {need}, or nofile in /etc/security/limits.conf) "
            f"or start fewer places")
    if soft != resource.RLIM_INFINITY and soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


@contextmanager
def _announced(count: int, hosts: int, after_s: float = 2.0) -> Iterator[None]:
    """Log at INFO (``APGAS_LOG_LEVEL=INFO``) that ``count`` places are starting on ``hosts``
    hosts if that takes more than ``after_s`` seconds, and then when they have started."""
    began = time.monotonic()
    timer = threading.Timer(after_s, log.info, ("starting %d place(s) on %d host(s)",
                                                count, hosts))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        took = time.monotonic() - began
        if took > after_s:
            log.info("%d place(s) on %d host(s) started in %.1f s", count, hosts, took)


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
    if current_runtime() is not None:
        raise ApgasError("the apgaspy runtime is already running in this process")
    if _child.importing_main is not None:
        raise ApgasError(
            f"place({_child.importing_main}) imports the program's main module, and the module "
            f"starts a computation at import: put the apgaspy.run() (or session()) call under "
            f"'if __name__ == \"__main__\":', as multiprocessing requires")
    MPI = _mpi()  # noqa: N806 - the mpi4py convention
    if MPI.Comm.Get_parent() != MPI.COMM_NULL:
        raise ApgasError("a spawned place cannot start a runtime of its own")
    world = MPI.COMM_WORLD
    if world.Get_rank() == 0:
        _check_settings(places, world.Get_size())
    if world.Get_size() > 1:
        return _start_world(world), world.Get_rank() == 0
    return _start_embedded(places), True


def _check_settings(places: int | None, ranks: int) -> None:
    """At place 0, before the start: warn about misspelt variables
    (:mod:`apgaspy._env_check`) and, under mpiexec, where the ranks are the places, about
    ``places``/``APGAS_PLACES`` asking for another count (a bad value is left alone there,
    as the setting is unused)."""
    try:
        configure_logging(0)
    except ConfigurationError:
        pass  # a bad APGAS_LOG_LEVEL: raised at every rank alike, after the start
    check_environment()
    if ranks == 1:
        return
    try:
        asked = setting("PLACES", places)
    except ConfigurationError:
        return
    if asked is not None and asked != ranks:
        source = "places=" if places is not None else "APGAS_PLACES="
        log.warning("%s%d is ignored under mpiexec: its %d ranks are the places, so %d places "
                    "run (mpiexec -n %d gives %d)", source, asked, ranks, ranks, asked, asked)


class _Launcher:
    """Starts the places of a grow for place 0's :class:`Malleability` (a ``PlaceLauncher``)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    def check_hosts(self, hosts: Sequence[str]) -> dict[str, str]:
        """See :func:`check_grow_hosts`."""
        return check_grow_hosts(self.rt, hosts)

    def spawn(self, specs: Sequence[tuple[int, str]], known: Sequence[PlaceInfo],
              slots: Sequence[int], mpi_hosts: dict[str, str]) -> list[PlaceInfo]:
        """See :func:`spawn_places`."""
        return spawn_places(self.rt, specs, known, slots=slots, mpi_hosts=mpi_hosts)


def _install(rt: Runtime) -> None:
    """Make ``rt`` this process's runtime; at place 0 hand it its malleability state."""
    if rt.here == 0:
        rt.malleability = Malleability(rt, _Launcher(rt))
    set_runtime(rt)


def _start_world(world: Any) -> Runtime:
    """Start under mpiexec.  Every failure is collective: all ranks learn it and raise the
    same :class:`StartupError` (a rank that raised alone would leave the others waiting in a
    collective call, and mpiexec would hang)."""
    rank = world.Get_rank()
    limit = None
    if rank == 0:
        try:
            ensure_fd_limit(world.Get_size())
        except StartupError as exc:
            limit = str(exc)
    # The job secret never crosses MPI in the clear (apgaspy._keys): every other rank sends a
    # one-time public key, rank 0 answers each with the secret sealed to it.
    pair = None if rank == 0 else KeyPair()
    publics = world.gather(None if pair is None else pair.public, root=0)
    if rank == 0:
        secret = new_secret()
        boxes = [None, *(seal(secret, public) for public in publics[1:])]
        box, limit = world.scatter([(b, limit) for b in boxes], root=0)
    else:
        box, limit = world.scatter(None, root=0)
        secret = pair.open(box)
    if limit:
        raise StartupError(limit if rank == 0 else f"start-up failed: {limit}")
    host = _mpi().Get_processor_name()
    names = world.allgather(host)
    toward = _remote_address([names[0], *names]) if len(set(names)) > 1 else None
    rt: Runtime | None = None
    error = None
    try:
        rt = Runtime(rank, secret, choose_address(host, toward))
    except Exception as exc:  # noqa: BLE001 - reported collectively below
        error = f"{type(exc).__name__}: {exc}"
    infos = world.allgather((rt.transport.endpoint if rt else None, host, os.getpid(), error))
    failed = {i: (h, err) for i, (_, h, _, err) in enumerate(infos) if err}
    if len(set(names)) > 1:
        for i, (ep, h, _, _err) in enumerate(infos):
            if ep and is_loopback(_address_of(ep)):
                failed[i] = (h, _loopback_cause(ep, h))
    if failed:
        if rt is not None:
            rt.close()
        raise _startup_error(failed)
    assert rt is not None
    per_host = setting("PLACES_PER_HOST")
    table = [PlaceInfo(i, ep, h, pid, "world", i // per_host)
             for i, (ep, h, pid, _) in enumerate(infos)]
    SESSION.world = world
    _install(rt)
    rt.start(table)
    rt.membership.report_ready()
    verdict = ""
    if rank == 0:
        failed = _not_ready(rt, rt.membership.place_ids())
        verdict = str(_startup_error(failed)) if failed else ""
    verdict = _bcast_text(world, verdict)
    if verdict:
        set_runtime(None)
        rt.close()
        SESSION.world = None
        raise StartupError(verdict if rank == 0 else f"start-up failed: {verdict}")
    return rt


def _loopback_cause(endpoint: str, host: str) -> str:
    return (f"it advertises {endpoint}, a loopback address that places on other hosts cannot "
            f"reach ({host} resolves to a loopback address there, as with Debian's "
            f"'127.0.1.1 {host}' line in /etc/hosts): fix /etc/hosts or set APGAS_INTERFACE")


def _startup_error(failed: dict[int, tuple[str, str]]) -> StartupError:
    lines = "; ".join(f"place({i}) on host {h}: {why}" for i, (h, why) in sorted(failed.items()))
    return StartupError(f"{len(failed)} place(s) did not start: {lines}", failed)


def _bcast_text(world: Any, text: str) -> str:
    """Broadcast ``text`` (at most 4 KiB) from rank 0 without spinning while waiting."""
    buf = bytearray(4096)
    data = text.encode()[:4096]
    buf[:len(data)] = data
    req = world.Ibcast(buf, root=0)
    delay = 0.001
    while not req.Test():
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


def _not_ready(rt: Runtime, ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """At place 0: wait until the places ``ids`` serve tasks; return the ones that died or
    did not report ready within ``APGAS_START_TIMEOUT`` seconds, with their host and why."""
    timeout = setting("START_TIMEOUT")
    late = set(rt.membership.wait_ready(ids, timeout))
    failed: dict[int, tuple[str, str]] = {}
    for i in ids:
        info = rt.membership.table.get(i)
        host = info.host if info else "?"
        if i in rt.membership.dead:
            failed[i] = (host, "its connection broke or could not be made (to "
                               f"{info.endpoint if info else '?'}); the process died or is "
                               "unreachable from place 0")
        elif i in late:
            failed[i] = (host, f"it did not report ready within {timeout:g} s "
                               "(APGAS_START_TIMEOUT)")
    return failed


def _start_embedded(places: int | None) -> Runtime:
    per_host = setting("PLACES_PER_HOST")
    alloc = slurm_allocation()
    hosts = node_file_hosts() or (list(alloc.nodes) if alloc else [])
    count = setting("PLACES", places)
    if count is None:
        count = len(hosts) * per_host if hosts else (os.cpu_count() or 1)
    here = my_host()
    if hosts and count == len(hosts) * per_host:
        layout = [hosts[i // per_host] for i in range(count)]
    else:
        layout = [here] * count
    if alloc is not None:
        os.environ.setdefault("SLURM_OVERLAP", "1")  # spawned steps share the job's CPUs
    ensure_fd_limit(count)
    configure_logging(0)  # start-up's progress lines (INFO)
    rt = Runtime(0, new_secret(), choose_address(here, _remote_address(layout)))
    me = PlaceInfo(0, rt.transport.endpoint, here, os.getpid(), "embedded", 0)
    announce = _announced(count - 1, len(set(layout[1:])), after_s=0.0 if count > 64 else 2.0)
    with announce:
        try:
            others = spawn_places(rt, list(enumerate(layout))[1:], [me],
                                  slots=[i // per_host for i in range(1, count)],
                                  announce=False)
        except MalleabilityError as exc:
            rt.close()
            raise StartupError(str(exc), getattr(exc, "places", None)) from exc.__cause__
        except BaseException:
            rt.close()
            raise
        SESSION.world = None
        _install(rt)
        rt.start([me, *others])
        failed = _not_ready(rt, rt.membership.place_ids())
    if failed:
        rt.membership.shutdown(1)
        rt.close()
        set_runtime(None)
        raise _startup_error(failed)
    return rt


def _child_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if (k.startswith(_FORWARDED_ENV_PREFIXES) or k in _FORWARDED_ENV)
        and k not in _NOT_FORWARDED
    }


def check_grow_hosts(rt: Runtime, hosts: Sequence[str]) -> dict[str, str]:
    """Check that places can start on ``hosts`` and reach the running ones; return each
    host's MPI ``host`` info value.

    Raises:
        MalleabilityError: a host cannot run a place (see :func:`apgaspy._hosts.check_host`),
            or it is another machine while running places listen on loopback addresses; the
            first such host's error.
    """
    values, refused = _check_hosts(rt, hosts)
    if refused:
        raise MalleabilityError(next(iter(refused.values())))
    return values


def _check_hosts(rt: Runtime, hosts: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Check every host at once (each remote one costs a launcher round trip); return the MPI
    ``host`` info value of each good host and the reason of each refused one."""
    control = socket.gethostname() if SESSION.world is None else None
    looped = [i for i in rt.membership.table.values() if is_loopback(_address_of(i.endpoint))]
    for info in rt.membership.table.values():  # running places there now: reachable
        note_reachable(info.host)

    def check(host: str) -> str:
        began = time.time()
        value = check_host(host, control_host=control)
        log.debug("host %s checked in %.3f s (wall clock: check=%.6f checked=%.6f)", host,
                  time.time() - began, began, time.time())
        if looped and value != "localhost" and slurm_allocation() is None:
            first = looped[0]
            raise MalleabilityError(
                f"cannot start a place on host {host!r}: place({first.id}) listens on "
                f"{first.endpoint}, a loopback address a place on another machine cannot "
                f"reach ({first.host} resolves to a loopback address); start the job with "
                f"APGAS_INTERFACE set, or with a first host that resolves to a real address")
        return value

    unique = list(dict.fromkeys(hosts))
    values: dict[str, str] = {}
    refused: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=min(16, len(unique)) or 1) as pool:
        futures = {host: pool.submit(check, host) for host in unique}
        for host, future in futures.items():
            try:
                values[host] = future.result()
            except MalleabilityError as exc:
                refused[host] = str(exc)
    return values, refused


def spawn_places(rt: Runtime, specs: Sequence[tuple[int, str]],
                 known: Sequence[PlaceInfo],
                 slots: Sequence[int] | None = None,
                 mpi_hosts: dict[str, str] | None = None,
                 announce: bool = True) -> list[PlaceInfo]:
    """Start one place per ``(id, host)`` of ``specs``, all at once; return their infos.

    Every new place learns the table ``known`` + the new places.  The places are not added to
    ``rt``'s table: the caller does that.  A place that has not answered within
    ``APGAS_START_TIMEOUT`` seconds counts as failed.

    Args:
        slots: the host slot of each new place (default: its id).
        mpi_hosts: each host's MPI ``host`` info value, already checked
            (default: :func:`check_grow_hosts` now).
        announce: log at INFO what is starting when it takes more than 2 s.

    Raises:
        MalleabilityError: a host cannot run a place, or a spawn failed or timed out (nothing
            is left running in that case: the places that did start are told to exit); its
            ``places`` attribute maps each failed place to ``(host, cause)``.
    """
    if not specs:
        return []
    _ensure_process_manager()
    MPI = _mpi()  # noqa: N806 - the mpi4py convention
    if mpi_hosts is None:
        mpi_hosts, refused = _check_hosts(rt, [h for _, h in specs])
        if refused:
            _raise_failed(len(specs), {pid: (host, refused[host]) for pid, host in specs
                                       if host in refused})
    prep = multiprocessing.spawn.get_preparation_data("apgaspy-place")
    prep.pop("authkey", None)
    env = _child_env()
    toward = _address_of(rt.transport.endpoint)
    results: dict[int, tuple[Any, Any]] = {}
    failed: dict[int, tuple[str, str]] = {}
    groups = launch_groups(specs, setting("LAUNCH_GROUP"))

    # Spawns in flight are bounded: a new launcher's MPI_Init busy-polls until place 0, which
    # serves one spawn at a time, gets to it; 32 places at once on 2 cores took 15-19 s to be
    # ready and 0.9-1.1 s of CPU per place, 4 at a time 9-10 s and 0.5-0.6 s.
    gate = threading.BoundedSemaphore(setting("SPAWN_CONCURRENCY")
                                      or max(4, 2 * (os.cpu_count() or 1)))

    began = time.monotonic()

    # A launcher of several places imports the main module before it forks them: it gets what
    # it needs for that (multiprocessing's preparation data) on its command line.
    main_arg = [_child.encode_main(prep)] if setting("LAUNCH_IMPORTS_MAIN") else []

    def launch(group: list[tuple[int, str]]) -> None:
        host = group[0][1]
        try:
            info = MPI.Info.Create()
            info.Set("host", mpi_hosts[host])
            info.Set("wdir", os.getcwd())
            argv = ["-P", _CHILD_SCRIPT, str(len(group)), *(main_arg if len(group) > 1 else [])]
            with gate:
                called = time.time()
                inter = MPI.COMM_SELF.Spawn(sys.executable, argv, 1, info)
            info.Free()
            spawned = time.monotonic() - began
            returned = time.time()
            far = None if mpi_hosts[host] == "localhost" else toward
            inter.send(tuple(LaunchOrder(specs=group, prep=prep, env=env, toward=far)),
                       dest=0, tag=_TAG)
            answers = _sleepy_recv(inter, 0, _TAG)
            log.debug("launcher of %d place(s) on %s: MPI_Comm_spawn returned after %.3f s, "
                      "its places answered after %.3f s (wall clock: spawn=%.6f "
                      "spawned=%.6f answered=%.6f)", len(group), host, spawned,
                      time.monotonic() - began, called, returned, time.time())
            for (pid, _), answer in zip(group, answers, strict=True):
                results[pid] = (inter, None if answer is None else PlaceAnswer(*answer))
                if answer is None:
                    failed[pid] = (host, "its process died while starting (see its stderr)")
        except BaseException as exc:  # noqa: BLE001 - reported below
            for pid, _ in group:
                failed[pid] = (host, f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=launch, args=(group,), daemon=True) for group in groups]
    deadline = time.monotonic() + setting("START_TIMEOUT")
    hosts = len({host for _, host in specs})
    with _own_stdio_for_process_manager(), (_announced(len(specs), hosts) if announce
                                            else contextlib.nullcontext()):
        with _interrupt.shielded():  # the launch threads, so MPICH's process manager, inherit
            for t in threads:       # SIGINT and SIGTERM blocked (see apgaspy._interrupt)
                t.start()
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    for group, t in zip(groups, threads, strict=True):
        if t.is_alive():
            for pid, host in group:
                failed[pid] = (host, f"MPI_Comm_spawn did not return within "
                                     f"{setting('START_TIMEOUT'):g} s (APGAS_START_TIMEOUT)")
    slot_of = dict(zip((pid for pid, _ in specs), slots or [pid for pid, _ in specs],
                       strict=True))
    done = dict(results)
    new = [
        PlaceInfo(pid, done[pid][1].endpoint, host, done[pid][1].pid, "spawned", slot_of[pid])
        for pid, host in specs
        if pid in done and done[pid][1] is not None and pid not in failed
    ]
    table = [*known, *new] if not failed else None
    table_bytes = _pickled_size(table)  # the same table goes to every launcher
    for group in groups:
        LaunchTraffic.add(len(group), _pickled_size(
            tuple(LaunchOrder(group, prep, env, toward))) + table_bytes)
    # Each launcher's places get the job secret sealed to their own public keys, beside the
    # table (apgaspy._keys): it never crosses MPI in the clear.
    boxes: dict[int, dict[int, bytes]] = {}
    for pid, (inter, answer) in done.items():
        if table is not None and answer is not None:
            boxes.setdefault(id(inter), {})[pid] = seal(rt.secret, answer.public_key)
    finals = []
    for inter in {id(inter): inter for inter, _ in done.values()}.values():

        def finish_handshake(inter: Any = inter) -> None:
            inter.send((table, boxes.get(id(inter), {})), dest=0, tag=_TAG)
            inter.Disconnect()

        t = threading.Thread(target=finish_handshake, daemon=True)
        t.start()
        finals.append(t)
    for t in finals:
        t.join(max(1.0, deadline - time.monotonic()))
    log.debug("%d place(s) in %d launch(es): tables sent after %.3f s", len(specs),
              len(groups), time.monotonic() - began)
    if failed:
        _raise_failed(len(specs), failed)
    return new


class LaunchTraffic:
    """What place 0 sent its launchers over MPI so far (for measurements): ``launches``
    (``MPI_Comm_spawn`` calls), ``places`` and ``bytes`` (pickled start data and tables)."""

    launches = 0
    places = 0
    bytes = 0

    @classmethod
    def add(cls, places: int, nbytes: int) -> None:
        """Count one launch of ``places`` places and the ``nbytes`` pickled bytes sent to it."""
        cls.launches += 1
        cls.places += places
        cls.bytes += nbytes


def _pickled_size(message: Any) -> int:
    """Bytes of ``message`` pickled as mpi4py sends it (the highest protocol)."""
    import pickle

    return len(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def launch_groups(specs: Sequence[tuple[int, str]],
                  size: int) -> list[list[tuple[int, str]]]:
    """Split ``specs`` (``(place id, host)`` pairs) into launch groups: the places of one host,
    in order, at most ``size`` to a group; each group is one ``MPI_Comm_spawn`` of one
    launcher process, which forks the group's places.

    Args:
        specs: the places to start, each ``(id, host)``.
        size: the most places of one group (``APGAS_LAUNCH_GROUP``; 1: a launch per place).

    Raises:
        ValueError: ``size`` < 1.
    """
    if size < 1:
        raise ValueError(f"a launch group holds at least one place, not {size}")
    by_host: dict[str, list[tuple[int, str]]] = {}
    for pid, host in specs:
        by_host.setdefault(host, []).append((pid, host))
    return [places[i:i + size] for places in by_host.values()
            for i in range(0, len(places), size)]


def _raise_failed(total: int, failed: dict[int, tuple[str, str]]) -> None:
    lines = "; ".join(f"place({i}) on host {h}: {why}" for i, (h, why) in sorted(failed.items()))
    error = MalleabilityError(f"could not start {len(failed)} of {total} places: {lines}")
    error.places = failed  # type: ignore[attr-defined]
    raise error


# ---------------------------------------------------------------------- stop
def stop(rt: Runtime, code: int = 0, interrupted: bool = False) -> None:
    """On place 0: end every place and release this one.

    Args:
        rt: place 0's runtime.
        code: the exit code the other places end with.
        interrupted: the run was interrupted (SIGINT, SIGTERM: ``apgaspy._interrupt``): wait
            only ``APGAS_INTERRUPT_TIMEOUT`` seconds for the places' goodbyes, then SIGKILL
            the spawned places of this machine that did not answer.
    """
    try:
        if rt.malleability is not None:
            rt.malleability.close()  # stops a communicator still running (APGAS-Disabled)
        if not interrupted:
            rt.membership.shutdown(code)
        else:
            infos = dict(rt.membership.table)
            late = rt.membership.shutdown(code, timeout=setting("INTERRUPT_TIMEOUT"))
            _kill_local_places([infos[p] for p in late if p in infos])
    finally:
        rt.close()
        set_runtime(None)
        if SESSION.world is not None:
            _sleepy_barrier(SESSION.world)
            SESSION.world = None


def _kill_local_places(infos: Sequence[PlaceInfo]) -> None:
    """SIGKILL the processes of the spawned places ``infos`` that run on this machine (an
    interrupted run's places that did not end when told)."""
    import signal

    for info in infos:
        if info.origin != "spawned" or not _is_this_machine(info.host):
            continue
        log.warning("place(%d) did not end when told: killing its process %d", info.id,
                    info.pid)
        with contextlib.suppress(OSError):
            os.kill(info.pid, signal.SIGKILL)


def _is_this_machine(host: str) -> bool:
    try:
        return is_local_host(host)
    except OSError:
        return False


def serve(rt: Runtime) -> int:
    """On an mpiexec rank other than 0: serve tasks until place 0 shuts down; return the code."""
    rt.membership.stopped.wait()
    rt.close()
    set_runtime(None)
    code = rt.membership.exit_code
    if rt.membership.retired:  # released by a shrink: keep nothing while waiting for the end
        import gc

        rt.objects.clear()
        rt.plos.clear()
        gc.collect()
    if SESSION.world is not None:
        _sleepy_barrier(SESSION.world)
        SESSION.world = None
    return code
