"""Pinning: each place bound to its share of the cores its job holds on its host.

``APGAS_CORES`` (``host=cpulist;...``, :mod:`apgaspy.wire.cores`; a scheduler sets it for each
job, or a user by hand) names the cores of each host; ``APGAS_CORES_FILE`` names a file of
the same format, read again at every grow (a scheduler that gives a growing job a new host
writes its cores there; its entries win over the variable's).  Neither set: no pinning.

Which cores a place gets (:func:`assign`): the places started together on one host (its
``APGAS_PLACES_PER_HOST`` places, or every place of the host at the start) split the host's
free cores into as many contiguous chunks, in order, the first ones one core larger when
they do not divide evenly (as ``numpy.array_split``); *free*: not held by a live place of the
job on that host (:class:`CoreBook`, place 0's record), so a grow onto a host the job already
runs on takes the cores it was newly given, and a shrink frees its places' cores::

    start / grow at place 0          assign(places, cores_map(), held)  → place: its cores
      │                                 ConfigurationError: host not in APGAS_CORES, or
      │                                 fewer free cores than places (one line)
      ├─ place 0, an mpiexec rank      bind_place: sched_setaffinity of every thread
      └─ a spawned place               gets its cores in its start data, binds them before
                                       its runtime's threads start (they inherit them)
    GLB worker i of a place           pinned_worker(i): the calling thread on core
                                       i mod len(share) (GLB_PIN_WORKERS)

A host of the job is matched to the keys of ``APGAS_CORES`` as the node file names it: the
same name, else the same resolved address (:func:`apgaspy._hosts.resolve_host`).  Only CPU
affinity is set (``os.sched_setaffinity``, Linux's ``sched_setaffinity(2)``): memory is not
bound, and Linux's default first-touch policy places a thread's pages on the NUMA node of
the core it runs on.  A refused binding (a core that does not exist, or that the process's
cpuset or cgroup does not allow: ``EINVAL``) is a :class:`StartupError` naming the place,
its host and the cores; the job never runs unpinned in silence.  See docs/guides/pinning.md.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ._config import setting
from .wire.cores import format_cpulist, parse_cores_env
from ._exceptions import ConfigurationError, StartupError
from ._hosts import resolve_host

__all__ = ["BOOK", "CoreBook", "assign", "bind_place", "cores_map", "grow_cores", "host_key",
           "pin_thread", "place_cores", "pinned_worker", "split", "start_pinning", "unbind",
           "usable_cpus"]

_SHARE: tuple[int, ...] | None = None  # this place's cores once bound (bind_place)
_BOOK_LOCK = threading.Lock()


def cores_map() -> dict[str, list[int]] | None:
    """The cores of each host: ``APGAS_CORES`` updated with ``APGAS_CORES_FILE``'s content
    (read now: a grow calls this again; entries one a line or separated by ``;``); ``None``
    when neither is set (no pinning).  A file that does not exist (yet) adds nothing.

    Raises:
        ConfigurationError: a value or the file's content does not parse, or the file cannot
            be read.
    """
    env = setting("CORES")
    path = setting("CORES_FILE")
    if env is None and path is None:
        return None
    out = parse_cores_env(env) if env is not None else {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except FileNotFoundError:
            return out
        except OSError as exc:
            raise ConfigurationError(f"APGAS_CORES_FILE={path!r} cannot be read: "
                                     f"{exc.strerror or exc}") from None
        try:
            out.update(parse_cores_env(text.replace("\n", ";")))
        except ValueError as exc:
            raise ConfigurationError(f"APGAS_CORES_FILE={path!r}: {exc}") from None
    return out


def host_key(host: str, cores: Mapping[str, Sequence[int]]) -> str | None:
    """The key of ``cores`` that names ``host``: the same text, else the first key that
    resolves to the same address; ``None`` when none does (or ``host`` does not resolve)."""
    if host in cores:
        return host
    try:
        address = resolve_host(host)
    except OSError:
        return None
    for key in cores:
        try:
            if resolve_host(key) == address:
                return key
        except OSError:
            continue
    return None


def split(cores: Sequence[int], parts: int) -> list[list[int]]:
    """``cores`` cut into ``parts`` contiguous chunks in order, the first ``len % parts`` one
    core larger (``numpy.array_split``'s rule); a chunk is empty when ``parts`` > ``len``.

    Raises:
        ValueError: ``parts`` < 1.
    """
    if parts < 1:
        raise ValueError(f"cannot split cores into {parts} parts")
    size, extra = divmod(len(cores), parts)
    out, at = [], 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        out.append(list(cores[at:at + n]))
        at += n
    return out


def assign(places: Sequence[tuple[int, str]], cores: Mapping[str, Sequence[int]],
           held: Mapping[str, Iterable[int]] | None = None) -> dict[int, tuple[str, list[int]]]:
    """The cores of each of ``places`` started together (module docstring).

    Args:
        places: ``(place id, host)`` of each place, in start order (a host's chunks go to its
            places in this order).
        cores: host key → cores (:func:`cores_map`).
        held: host key → cores live places of the job hold there already (not given again).

    Returns:
        place id → ``(host key, its cores)``.

    Raises:
        ConfigurationError: a host matches no key of ``cores``, or it has fewer free cores
            than places (one line naming the place, the host and the cores).
    """
    held = held or {}
    by_key: dict[str, list[tuple[int, str]]] = {}
    keys: dict[str, str | None] = {}
    for pid, host in places:
        if host not in keys:
            keys[host] = host_key(host, cores)
        key = keys[host]
        if key is None:
            named = ", ".join(cores) or "none"
            raise ConfigurationError(
                f"place({pid}) on host {host}: the host has no cores in APGAS_CORES "
                f"(hosts named: {named}); the job does not run unpinned")
        by_key.setdefault(key, []).append((pid, host))
    out: dict[int, tuple[str, list[int]]] = {}
    for key, members in by_key.items():
        taken = set(held.get(key, ()))
        free = [c for c in cores[key] if c not in taken]
        if len(free) < len(members):
            pid, host = members[len(free)]
            raise ConfigurationError(
                f"place({pid}) on host {host}: no core left for it: {len(members)} place(s) "
                f"start there and APGAS_CORES gives {key} the cores "
                f"{format_cpulist(cores[key])}"
                + (f", of which {format_cpulist(taken)} are held by running places"
                   if taken & set(cores[key]) else "")
                + "; give more cores or start fewer places per host")
        for (pid, _), chunk in zip(members, split(free, len(members)), strict=True):
            out[pid] = (key, chunk)
    return out


class CoreBook:
    """Place 0's record of the cores each place of the job holds (:func:`assign`'s ``held``);
    one per process, :data:`BOOK`.  Entries of places no longer in the table (released,
    dead) are ignored, so a shrink frees their cores."""

    def __init__(self) -> None:
        self.cores: dict[int, tuple[str, tuple[int, ...]]] = {}

    def clear(self) -> None:
        """Forget every place (a new computation starts)."""
        with _BOOK_LOCK:
            self.cores.clear()

    def note(self, assigned: Mapping[int, tuple[str, Sequence[int]]]) -> None:
        """Record ``assigned`` (place id → ``(host key, cores)``)."""
        with _BOOK_LOCK:
            for pid, (key, cpus) in assigned.items():
                self.cores[pid] = (key, tuple(cpus))

    def held(self, live: Iterable[int]) -> dict[str, set[int]]:
        """Host key → the cores the places ``live`` (the table's ids) hold."""
        out: dict[str, set[int]] = {}
        with _BOOK_LOCK:
            for pid in live:
                if pid in self.cores:
                    key, cpus = self.cores[pid]
                    out.setdefault(key, set()).update(cpus)
        return out


BOOK = CoreBook()


def _threads() -> list[int]:
    """The thread ids of this process (``/proc/self/task``), or ``[0]`` (the caller)."""
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def usable_cpus() -> str:
    """The cpulist of the CPUs this process's cpuset allows (cgroup v2's
    ``cpuset.cpus.effective``, else v1's ``cpuset.effective_cpus``), else the online CPUs;
    ``"?"`` where none can be read.  Not the affinity: a launcher's places inherit place 0's
    share, and may still bind to any CPU of the cpuset."""
    try:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        lines = []
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidates.append(f"/sys/fs/cgroup{path}/cpuset.cpus.effective")
        elif "cpuset" in controllers.split(","):
            candidates.append(f"/sys/fs/cgroup/cpuset{path}/cpuset.effective_cpus")
    candidates.append("/sys/devices/system/cpu/online")
    for candidate in candidates:
        try:
            with open(os.path.normpath(candidate), encoding="ascii") as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text:
            return text
    return "?"


def bind_place(place_id: int, host: str, cores: Sequence[int]) -> None:
    """Bind this process, every thread it has and every thread it starts later, to ``cores``.

    Args:
        place_id: this place's id; host: its host (both for the error message).
        cores: CPU numbers (its share, :func:`assign`).

    Raises:
        StartupError: the kernel refused (a core that does not exist or that this process's
            cpuset or cgroup does not allow); one line naming the place, host and cores.
    """
    global _SHARE
    wanted = set(cores)
    try:
        allowed = os.sched_getaffinity(0)
    except OSError:
        allowed = set()
    why = None
    try:
        for tid in _threads():
            try:
                os.sched_setaffinity(tid, wanted)
            except ProcessLookupError:  # a thread that ended meanwhile
                continue
        # The kernel takes a mask if some of its cores are usable, and drops the others.
        got = os.sched_getaffinity(0)
        if got != wanted:
            why = f"the kernel gave {format_cpulist(got)}"
    except (OSError, ValueError, OverflowError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if why is not None:
        if allowed:  # back as it was: the place does not start
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, allowed)
        cause = (f"cannot bind to cores {format_cpulist(cores)} (APGAS_CORES): {why}; the "
                 f"cores must exist and be in this process's cpuset (here: {usable_cpus()})")
        raise StartupError(f"place({place_id}) on host {host}: {cause}",
                           {place_id: (host, cause)}) from None
    _SHARE = tuple(cores)


def start_pinning(places: Sequence[tuple[int, str]], me: int) -> dict[int, list[int]] | None:
    """At the start of a computation: assign the cores of ``places`` (every place, in id
    order) and bind this process, place ``me``, to its share; at place 0, record them
    (:data:`BOOK`).  Every place of a start computes the same assignment.

    Returns:
        place id → its cores, or ``None`` when the job is not pinned (neither
        ``APGAS_CORES`` nor ``APGAS_CORES_FILE`` set).

    Raises:
        ConfigurationError: as :func:`assign`.
        StartupError: as :func:`bind_place`.
    """
    unbind()
    if me == 0:
        BOOK.clear()
    cores = cores_map()
    if cores is None:
        return None
    assigned = assign(places, cores)
    if me == 0:
        BOOK.note(assigned)
    host = dict(places)[me]
    bind_place(me, host, assigned[me][1])
    return {pid: cpus for pid, (_, cpus) in assigned.items()}


def grow_cores(places: Sequence[tuple[int, str]],
               live: Iterable[int]) -> dict[int, list[int]] | None:
    """At place 0, before a grow starts ``places``: their cores, from the cores of their hosts
    (:func:`cores_map`, ``APGAS_CORES_FILE`` read again) not held by the places ``live``;
    recorded in :data:`BOOK`.  ``None`` when the job is not pinned.

    Raises:
        ConfigurationError: as :func:`assign`.
    """
    cores = cores_map()
    if cores is None:
        return None
    assigned = assign(places, cores, BOOK.held(live))
    BOOK.note(assigned)
    return {pid: cpus for pid, (_, cpus) in assigned.items()}


def place_cores() -> tuple[int, ...] | None:
    """The cores this place is bound to (its share), or ``None`` when it is not pinned."""
    return _SHARE


def unbind() -> None:
    """Forget this place's share (its runtime stopped); the affinity stays as it is."""
    global _SHARE
    _SHARE = None


def pin_thread(index: int) -> int | None:
    """Bind the calling thread to core ``index`` mod len(share) of this place's share, for
    good; return the core, or ``None`` when the place is not pinned or the kernel refused
    (the core left the process's cpuset meanwhile: the thread stays as it was).

    Linux applies ``sched_setaffinity(0, ...)`` to the calling thread alone
    (``sched_setaffinity(2)``: a thread id of 0 is the caller).
    """
    share = _SHARE
    if not share:
        return None
    core = share[index % len(share)]
    try:
        os.sched_setaffinity(0, {core})
    except OSError:
        return None
    return core


@contextlib.contextmanager
def pinned_worker(index: int) -> Iterator[int | None]:
    """Run the enclosed block with the calling thread on core ``index`` mod len(share) of
    this place's share (:func:`pin_thread`), and give the thread the whole share back
    afterwards (a pool thread that runs other tasks next); yields the core, or ``None`` (not
    pinned: a no-op)."""
    core = pin_thread(index)
    try:
        yield core
    finally:
        share = _SHARE
        if core is not None and share:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, set(share))
