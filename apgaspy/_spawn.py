"""Spawning places: one ``MPI_Comm_spawn`` of a launcher per host and launch group.

The embedded start (:mod:`apgaspy._launch`) and every grow (place 0's
:class:`~apgaspy.elastic._malleability.Malleability`, through the launcher ``_launch`` hands
it) start places here::

    spawn_places(rt, specs, known)
      ├─ check_grow_hosts        each host once, in parallel (apgaspy._hosts.check_host)
      ├─ grow_cores              a pinned job: each new place's cores (apgaspy._pinning)
      ├─ _Spawning.launch_all    one thread per launch group (launch_groups), at most
      │    └─ launch_group       APGAS_SPAWN_CONCURRENCY spawns in flight:
      │                          MPI_Comm_spawn(_child.py) → LaunchOrder → PlaceAnswer each
      ├─ _Spawning.new_places    the PlaceInfo of every place that answered
      └─ _Spawning.send_tables   the table + the job secret sealed to each place's key
                                 (apgaspy._keys), then the launcher disconnects

A launcher (:mod:`apgaspy._child`, run as a script) forks its group's places, which are not
MPI processes, so a shrink can end any one of them; why one spawn per group and not one
spawn of all places is told in :mod:`apgaspy._launch`.  The MPI calls are those of MPI-4.0,
chapter 11 (Process Creation and Management), through mpi4py.
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
from ._exceptions import ApgasError, ConfigurationError, MalleabilityError
from ._hosts import (
    check_host,
    is_local_host,
    is_loopback,
    note_reachable,
    resolve_host,
    slurm_allocation,
)
from ._keys import seal
from ._membership import PlaceInfo
from ._pinning import cores_map, grow_cores, host_key
from ._runtime import Runtime

__all__ = ["LaunchTraffic", "check_grow_hosts", "launch_groups", "spawn_places"]

log = logging.getLogger("apgaspy")

_CHILD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
_FORWARDED_ENV_PREFIXES = ("APGAS_", "SCHEDULER_")
_FORWARDED_ENV = ("NODE_FILE", "NODES", "JOBNAME", "PYTHONPATH")
# APGAS_HOST: an address of place 0's machine, meaningless elsewhere; SCHEDULER_KEY: the
# scheduler's line key, which only place 0 uses and which must not cross MPI in the clear.
_NOT_FORWARDED = ("APGAS_HOST", "SCHEDULER_KEY")
_SPAWN_ENV = {"UCX_TLS": "tcp,self", "UCX_LOG_LEVEL": "error"}


def mpi() -> Any:
    from mpi4py import MPI

    return MPI


_PM_STARTED = False


def ensure_process_manager() -> None:
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
def own_stdio_for_process_manager() -> Iterator[None]:
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
def address_of(endpoint: str) -> str:
    """The IP address of a ZeroMQ endpoint ``tcp://ip:port``."""
    return endpoint.rsplit("//", 1)[-1].rsplit(":", 1)[0]


def remote_address(hosts: Sequence[str]) -> str | None:
    """The resolved address of the first of ``hosts`` that is another machine, or ``None``."""
    for host in hosts:
        try:
            if not is_local_host(host):
                return resolve_host(host)
        except OSError:
            continue
    return None


@contextmanager
def announced(count: int, hosts: int, after_s: float = 2.0) -> Iterator[None]:
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


def _child_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if (k.startswith(_FORWARDED_ENV_PREFIXES) or k in _FORWARDED_ENV)
        and k not in _NOT_FORWARDED
    }


def check_grow_hosts(rt: Runtime, hosts: Sequence[str], *, embedded: bool) -> dict[str, str]:
    """Check that places can start on ``hosts`` and reach the running ones; return each
    host's MPI ``host`` info value.

    Args:
        rt: place 0's runtime (its table: the running places).
        hosts: host names, as a node file or an order names them.
        embedded: the session was started without mpiexec (this process is an MPI
            singleton, whose process manager runs on this machine).

    Raises:
        MalleabilityError: a host cannot run a place (see :func:`apgaspy._hosts.check_host`),
            or it is another machine while running places listen on loopback addresses, or
            the job is pinned and ``APGAS_CORES`` (and ``APGAS_CORES_FILE``) has no cores for
            it; the first such host's error.
    """
    try:
        cores = cores_map()
    except ConfigurationError as exc:
        raise MalleabilityError(f"cannot grow: {exc}") from None
    if cores is not None:
        for host in dict.fromkeys(hosts):
            if host_key(host, cores) is None:
                raise MalleabilityError(
                    f"cannot start a place on host {host!r}: the job is pinned and "
                    f"APGAS_CORES{' and APGAS_CORES_FILE' if setting('CORES_FILE') else ''} "
                    f"give it no cores (hosts named: {', '.join(cores) or 'none'})")
    values, refused = _check_hosts(rt, hosts, embedded)
    if refused:
        raise MalleabilityError(next(iter(refused.values())))
    return values


def _check_hosts(rt: Runtime, hosts: Sequence[str],
                 embedded: bool) -> tuple[dict[str, str], dict[str, str]]:
    """Check every host at once (each remote one costs a launcher round trip); return the MPI
    ``host`` info value of each good host and the reason of each refused one."""
    control = socket.gethostname() if embedded else None
    looped = [i for i in rt.membership.table.values() if is_loopback(address_of(i.endpoint))]
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
                 announce: bool = True, *, embedded: bool,
                 cores: dict[int, list[int]] | None = None) -> list[PlaceInfo]:
    """Start one place per ``(id, host)`` of ``specs``, all at once; return their infos.

    Every new place learns the table ``known`` + the new places.  The places are not added to
    ``rt``'s table: the caller does that.  A place that has not answered within
    ``APGAS_START_TIMEOUT`` seconds counts as failed.

    Args:
        slots: the host slot of each new place (default: its id).
        mpi_hosts: each host's MPI ``host`` info value, already checked
            (default: :func:`check_grow_hosts` now).
        announce: log at INFO what is starting when it takes more than 2 s.
        embedded: as for :func:`check_grow_hosts`.
        cores: place id → the cores it binds to (the start's assignment,
            :func:`apgaspy._pinning.start_pinning`); default: a pinned job's cores for a grow
            (:func:`apgaspy._pinning.grow_cores`: the hosts' cores the places ``known`` do
            not hold), none when the job is not pinned.

    Raises:
        MalleabilityError: a host cannot run a place, a pinned job has no cores for a place
            (before anything starts), or a spawn failed or timed out, a place's cores could
            not be bound included (nothing is left running in that case: the places that
            did start are told to exit); its ``places`` attribute maps each failed place to
            ``(host, cause)``.
    """
    if not specs:
        return []
    ensure_process_manager()
    if mpi_hosts is None:
        mpi_hosts, refused = _check_hosts(rt, [h for _, h in specs], embedded)
        if refused:
            _raise_failed(len(specs), {pid: (host, refused[host]) for pid, host in specs
                                       if host in refused})
    if cores is None:
        try:
            cores = grow_cores(specs, [info.id for info in known])
        except ConfigurationError as exc:
            raise MalleabilityError(f"could not start {len(specs)} place(s): {exc}") from None
    spawning = _Spawning(rt, specs, mpi_hosts, cores or {})
    spawning.launch_all(announce)
    new = spawning.new_places(slots)
    spawning.send_tables(known, new)
    if spawning.failed:
        _raise_failed(len(specs), spawning.failed)
    return new


class _Spawning:
    """One :func:`spawn_places` call: its launch groups, the launchers' answers and the
    places that failed (``failed``: place id → ``(host, cause)``)."""

    def __init__(self, rt: Runtime, specs: Sequence[tuple[int, str]],
                 mpi_hosts: dict[str, str], cores: dict[int, list[int]]) -> None:
        self.rt = rt
        self.specs = specs
        self.mpi_hosts = mpi_hosts
        self.cores = cores  # place id → its cores (empty: not pinned)
        self.prep = multiprocessing.spawn.get_preparation_data("apgaspy-place")
        self.prep.pop("authkey", None)
        self.env = _child_env()
        self.toward = address_of(rt.transport.endpoint)
        self.groups = launch_groups(specs, setting("LAUNCH_GROUP"))
        #: place id → (its launcher's intercommunicator, its answer or None: it died)
        self.results: dict[int, tuple[Any, PlaceAnswer | None]] = {}
        self.failed: dict[int, tuple[str, str]] = {}
        # Spawns in flight are bounded: a new launcher's MPI_Init busy-polls until place 0,
        # which serves one spawn at a time, gets to it; 32 places at once on 2 cores took
        # 15-19 s to be ready and 0.9-1.1 s of CPU per place, 4 at a time 9-10 s and 0.5-0.6 s.
        self.gate = threading.BoundedSemaphore(setting("SPAWN_CONCURRENCY")
                                               or max(4, 2 * (os.cpu_count() or 1)))
        self.began = time.monotonic()
        self.deadline = self.began + setting("START_TIMEOUT")
        # A launcher of several places imports the main module before it forks them: it gets
        # what it needs for that (multiprocessing's preparation data) on its command line.
        self.main_arg = [_child.encode_main(self.prep)] if setting("LAUNCH_IMPORTS_MAIN") else []

    def launch_all(self, announce: bool) -> None:
        """Launch every group from a thread of its own and wait for them until the deadline
        (``APGAS_START_TIMEOUT``); a group still launching then has failed."""
        threads = [threading.Thread(target=self.launch_group, args=(group,), daemon=True)
                   for group in self.groups]
        hosts = len({host for _, host in self.specs})
        with own_stdio_for_process_manager(), (announced(len(self.specs), hosts) if announce
                                               else contextlib.nullcontext()):
            with _interrupt.shielded():  # the launch threads, so MPICH's process manager,
                for t in threads:       # inherit SIGINT and SIGTERM blocked (apgaspy._interrupt)
                    t.start()
            for t in threads:
                t.join(max(0.0, self.deadline - time.monotonic()))
        for group, t in zip(self.groups, threads, strict=True):
            if t.is_alive():
                for pid, host in group:
                    self.failed[pid] = (host, f"MPI_Comm_spawn did not return within "
                                              f"{setting('START_TIMEOUT'):g} s "
                                              "(APGAS_START_TIMEOUT)")

    def launch_group(self, group: list[tuple[int, str]]) -> None:
        """Spawn the launcher of ``group`` (places of one host), send it its order and take
        its places' answers; any failure is noted for each place of the group."""
        MPI = mpi()  # noqa: N806 - the mpi4py convention
        host = group[0][1]
        try:
            info = MPI.Info.Create()
            info.Set("host", self.mpi_hosts[host])
            info.Set("wdir", os.getcwd())
            argv = ["-P", _CHILD_SCRIPT, str(len(group)),
                    *(self.main_arg if len(group) > 1 else [])]
            with self.gate:
                called = time.time()
                inter = MPI.COMM_SELF.Spawn(sys.executable, argv, 1, info)
            info.Free()
            spawned = time.monotonic() - self.began
            returned = time.time()
            far = None if self.mpi_hosts[host] == "localhost" else self.toward
            cores = tuple(self.cores[pid] for pid, _ in group) if self.cores else ()
            inter.send(tuple(LaunchOrder(specs=group, prep=self.prep, env=self.env, toward=far,
                                         cores=cores)), dest=0, tag=_TAG)
            answers = _sleepy_recv(inter, 0, _TAG)
            log.debug("launcher of %d place(s) on %s: MPI_Comm_spawn returned after %.3f s, "
                      "its places answered after %.3f s (wall clock: spawn=%.6f "
                      "spawned=%.6f answered=%.6f)", len(group), host, spawned,
                      time.monotonic() - self.began, called, returned, time.time())
            for (pid, _), answer in zip(group, answers, strict=True):
                told = None if answer is None else PlaceAnswer(*answer)
                self.results[pid] = (inter, told)
                if told is None:
                    self.failed[pid] = (host, "its process died while starting (see its stderr)")
                elif told.error:  # it could not start (its cores) and has exited
                    self.failed[pid] = (host, told.error)
        except BaseException as exc:  # noqa: BLE001 - reported by spawn_places
            for pid, _ in group:
                self.failed[pid] = (host, f"{type(exc).__name__}: {exc}")

    def new_places(self, slots: Sequence[int] | None) -> list[PlaceInfo]:
        """The infos of the places that answered and did not fail, in ``specs``' order."""
        slot_of = dict(zip((pid for pid, _ in self.specs),
                           slots or [pid for pid, _ in self.specs], strict=True))
        done = dict(self.results)
        return [
            PlaceInfo(pid, answer.endpoint, host, answer.pid, "spawned", slot_of[pid])
            for pid, host in self.specs
            if pid in done and (answer := done[pid][1]) is not None and pid not in self.failed
        ]

    def send_tables(self, known: Sequence[PlaceInfo], new: Sequence[PlaceInfo]) -> None:
        """End each launcher's handshake: send it the table ``known`` + ``new`` (``None`` when
        a place failed: its places then exit) with the job secret sealed to each of its
        places' keys, and disconnect; counts what went over MPI (:class:`LaunchTraffic`)."""
        done = dict(self.results)
        table = [*known, *new] if not self.failed else None
        table_bytes = _pickled_size(table)  # the same table goes to every launcher
        for group in self.groups:
            LaunchTraffic.add(len(group), _pickled_size(
                tuple(LaunchOrder(group, self.prep, self.env, self.toward))) + table_bytes)
        # Each launcher's places get the job secret sealed to their own public keys, beside
        # the table (apgaspy._keys): it never crosses MPI in the clear.
        boxes: dict[int, dict[int, bytes]] = {}
        for pid, (inter, answer) in done.items():
            if table is not None and answer is not None:
                boxes.setdefault(id(inter), {})[pid] = seal(self.rt.secret, answer.public_key)
        finals = []
        for inter in {id(inter): inter for inter, _ in done.values()}.values():

            def finish_handshake(inter: Any = inter) -> None:
                inter.send((table, boxes.get(id(inter), {})), dest=0, tag=_TAG)
                inter.Disconnect()

            t = threading.Thread(target=finish_handshake, daemon=True)
            t.start()
            finals.append(t)
        for t in finals:
            t.join(max(1.0, self.deadline - time.monotonic()))
        log.debug("%d place(s) in %d launch(es): tables sent after %.3f s", len(self.specs),
                  len(self.groups), time.monotonic() - self.began)


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
