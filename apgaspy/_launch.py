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

This module holds the session's life; the spawning itself, at the start and at every grow,
is :mod:`apgaspy._spawn`::

    start(places)
      ├─ under mpiexec: _start_world   secret sealed to each rank, each rank bound to its
      │                                cores (a pinned job), endpoints allgathered
      └─ embedded:      _start_embedded place 0 bound to its cores (a pinned job, every
                                       place's assigned at once: apgaspy._pinning),
                                       → _spawn.spawn_places(every place but 0)
    _install(rt)        place 0: Malleability(rt, _Launcher) (a grow spawns through it);
                        once the places run, a rigid job's load reports (start_notifier)
    serve(rt)           an mpiexec rank other than 0: wait for place 0's shutdown
    stop(rt)            place 0: end every place (SIGKILL the local ones left when interrupted)
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from . import _child
from ._config import setting
from ._env_check import check_environment
from ._exceptions import ApgasError, ConfigurationError, MalleabilityError, StartupError
from ._hosts import (
    choose_address,
    is_local_host,
    is_loopback,
    my_host,
    node_file_hosts,
    slurm_allocation,
)
from ._keys import KeyPair, new_secret, seal
from ._logging import configure_logging
from ._membership import PlaceInfo
from ._pinning import start_pinning
from ._runtime import Runtime, current_runtime, set_runtime
from ._spawn import address_of, announced, check_grow_hosts, mpi, remote_address, spawn_places
from .elastic._malleability import Malleability

__all__ = ["start", "stop", "serve"]

log = logging.getLogger("apgaspy")


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
    MPI = mpi()  # noqa: N806 - the mpi4py convention
    if MPI.Comm.Get_parent() != MPI.COMM_NULL:
        raise ApgasError("a spawned place cannot start a runtime of its own")
    world = MPI.COMM_WORLD
    if world.Get_rank() == 0:
        _check_settings(places, world.Get_size())
    if world.Get_size() > 1:
        rt, is_main = _start_world(world), world.Get_rank() == 0
    else:
        rt, is_main = _start_embedded(places), True
    if is_main and rt.malleability is not None:
        rt.malleability.start_notifier()  # a rigid job's load reports (ELASTIC=rigid)
    return rt, is_main


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
        """See :func:`apgaspy._spawn.check_grow_hosts`."""
        return check_grow_hosts(self.rt, hosts, embedded=SESSION.world is None)

    def spawn(self, specs: Sequence[tuple[int, str]], known: Sequence[PlaceInfo],
              slots: Sequence[int], mpi_hosts: dict[str, str]) -> list[PlaceInfo]:
        """See :func:`apgaspy._spawn.spawn_places`."""
        return spawn_places(self.rt, specs, known, slots=slots, mpi_hosts=mpi_hosts,
                            embedded=SESSION.world is None)


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
    host = mpi().Get_processor_name()
    names = world.allgather(host)
    # A pinned job: every rank assigns every rank's cores alike and binds its own, before its
    # runtime's threads start; a failure anywhere fails every rank (collective).
    try:
        start_pinning(list(enumerate(names)), rank)
        pinned = ""
    except (ConfigurationError, StartupError) as exc:
        pinned = str(exc)
    pin_errors = [e for e in world.allgather(pinned) if e]
    if pin_errors:
        raise StartupError(pin_errors[0] if rank == 0 else f"start-up failed: {pin_errors[0]}")
    toward = remote_address([names[0], *names]) if len(set(names)) > 1 else None
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
            if ep and is_loopback(address_of(ep)):
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
    # A pinned job: every place's cores at once, place 0 bound before its threads start.
    cores = start_pinning(list(enumerate(layout)), 0)
    rt = Runtime(0, new_secret(), choose_address(here, remote_address(layout)))
    me = PlaceInfo(0, rt.transport.endpoint, here, os.getpid(), "embedded", 0)
    announce = announced(count - 1, len(set(layout[1:])), after_s=0.0 if count > 64 else 2.0)
    with announce:
        try:
            others = spawn_places(rt, list(enumerate(layout))[1:], [me],
                                  slots=[i // per_host for i in range(1, count)],
                                  announce=False, embedded=True, cores=cores or {})
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
