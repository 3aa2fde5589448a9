"""Configuration: keyword argument, then ``APGAS_*`` environment variable, then default.

Every setting of the runtime is read through :func:`setting`, which rejects bad values with a
:class:`ConfigurationError` naming the variable, the value and what is expected.  The table
:data:`SETTINGS` documents every variable (README.md lists the same).  ``APGAS_TEST_DELAY``
is a test hook, off by default: it delays messages between chosen places (see
:mod:`apgaspy._test_delay`; :func:`parse_delays` reads its value).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._exceptions import ConfigurationError

__all__ = ["Setting", "SETTINGS", "setting", "parse_delays"]


@dataclass(frozen=True)
class Setting:
    """One documented configuration variable.

    Attributes:
        name: the variable name without the ``APGAS_`` prefix.
        default: the value used when neither argument nor variable is given.
        parse: converts the raw string (or argument) into the value; raises ValueError.
        check: validates the parsed value; returns an error text or ``None``.
        doc: one line for the README table (with the unit).
    """

    name: str
    default: Any
    parse: Callable[[Any], Any]
    check: Callable[[Any], str | None]
    doc: str


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be positive"


def _non_negative(v: Any) -> str | None:
    return None if v >= 0 else "must not be negative"


def _any(v: Any) -> str | None:
    return None


def _port(v: Any) -> str | None:
    return None if 0 <= v < 65536 else "must be a TCP port, 0-65535 (0: an ephemeral one)"


def parse_bool(raw: Any) -> bool:
    """A yes/no setting: a bool, or ``1/true/yes/on`` and ``0/false/no/off`` (any case).

    Raises:
        ValueError: any other value.
    """
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError("expected 0/1, true/false, yes/no or on/off")


def _log_level(raw: Any) -> str:
    text = str(raw).strip().upper()
    if text not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError("expected DEBUG, INFO, WARNING, ERROR or CRITICAL")
    return text


def parse_delays(text: str | None) -> dict[tuple[int, int], float]:
    """Parse an ``APGAS_TEST_DELAY`` value.

    Args:
        text: ``"<src>><dst>:<seconds>[,...]"``, e.g. ``"2>1:0.3,3>1:0.3"``; ``None`` or blank
            means no delay.

    Returns:
        ``{(src, dst): seconds}`` (place ids, seconds as a float ≥ 0); a pair given twice
        keeps its last delay.

    Raises:
        ValueError: an entry does not parse, names a negative place or a negative delay,
            or names the same place as source and destination.
    """
    out: dict[tuple[int, int], float] = {}
    if text is None:
        return out
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        try:
            pair, seconds_text = item.split(":")
            src_text, dst_text = pair.split(">")
            src, dst = int(src_text), int(dst_text)
            seconds = float(seconds_text)
        except ValueError:
            raise ValueError(
                f"entry {item!r}: expected '<src>><dst>:<seconds>', e.g. '2>1:0.3'") from None
        if src < 0 or dst < 0:
            raise ValueError(f"entry {item!r}: place ids must not be negative")
        if src == dst:
            raise ValueError(f"entry {item!r}: a place's messages to itself are not sent")
        if not seconds >= 0 or seconds == float("inf"):
            raise ValueError(f"entry {item!r}: the delay must be a finite number ≥ 0")
        out[(src, dst)] = seconds
    return out


def _test_delay(v: Any) -> str | None:
    try:
        parse_delays(v)
    except ValueError as exc:
        return str(exc)
    return None


def _elastic(raw: Any) -> str:
    value = str(raw).strip().lower()
    if value not in ("rigid", "malleable", "evolving"):
        raise ValueError("expected rigid, malleable or evolving")
    return value


def _evolving_mode(raw: Any) -> str:
    value = str(raw).strip().lower()
    if value not in ("cpu", "task"):
        raise ValueError("expected cpu or task")
    return value


def _cores_env(v: Any) -> str | None:
    from .wire.cores import parse_cores_env

    try:
        parse_cores_env(v)
    except ValueError as exc:
        return str(exc)
    return None


def _percent(v: Any) -> str | None:
    return None if 0 <= v <= 100 else "must be a percentage in [0, 100]"


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("PLACES", None, int, _positive,
                "places to start without mpiexec (default: the number of cores)"),
        Setting("THREADS", 1, int, _positive,
                "worker threads that run tasks at each place (more are added while workers block)"),
        Setting("IMMEDIATE_THREADS", 1, int, _positive,
                "threads of the small pool for immediate_async_at tasks at each place"),
        Setting("MAX_THREADS", 512, int, _positive,
                "upper bound on worker threads of one place, blocked ones included"),
        Setting("HOST", None, str, _any,
                "address this process binds and advertises, where it is an address of this "
                "machine (default: chosen per host, see INTERFACE)"),
        Setting("INTERFACE", None, str, _any,
                "network interface whose address each place binds and advertises (default: "
                "its host's resolved address, or the route towards remote peers)"),
        Setting("START_TIMEOUT", 60.0, float, _positive,
                "seconds start-up and a grow wait for new places to start and report ready"),
        Setting("SPAWN_CONCURRENCY", None, int, _positive,
                "MPI_Comm_spawn calls place 0 has in flight at once (default: twice its cores, "
                "at least 4); a new place's MPI start-up spins while it waits for place 0"),
        Setting("LAUNCH_GROUP", 1024, int, _positive,
                "places one launcher process starts on a host (one MPI_Comm_spawn each: it "
                "forks them from an interpreter that has apgaspy imported); 1: a launch per "
                "place"),
        Setting("LAUNCH_IMPORTS_MAIN", False, parse_bool, _any,
                "1: a launcher of several places imports the program's main module once, "
                "before it forks them, so they share it and its loaded kernels (experimental; "
                "default: each place imports it)"),
        Setting("CORES", None, str, _cores_env,
                "the cores the job holds on each host, 'host=cpulist;host=cpulist' (e.g. "
                "'node1=0-3;node2=0-1,4'); each place binds to its share of its host's cores "
                "(default: no pinning; docs/guides/pinning.md)"),
        Setting("CORES_FILE", None, str, _any,
                "a file in APGAS_CORES's format, read again at every grow (its hosts win over "
                "APGAS_CORES's): where a scheduler writes a grown job's new cores"),
        Setting("SLURM", True, parse_bool, _any,
                "inside a Slurm allocation, start places on its nodes (0: ignore Slurm)"),
        Setting("DEAD_PLACE_TIMEOUT", 1.0, float, _positive,
                "seconds a broken connection may stay down before its place is declared dead"),
        Setting("HEARTBEAT", 1.0, float, _positive,
                "seconds between transport heartbeats (a silent peer is dropped after 3 of them)"),
        Setting("MAX_MESSAGE_BYTES", 256 << 20, int, _positive,
                "bytes of the largest batch a place accepts (default 256 MiB); a connection "
                "that announces a larger one is closed before it is read, and sending a "
                "larger message raises ValueError"),
        Setting("SHUTDOWN_TIMEOUT", 10.0, float, _positive,
                "seconds place 0 waits for the other places to say goodbye at shutdown"),
        Setting("INTERRUPT_TIMEOUT", 3.0, float, _positive,
                "seconds place 0 waits for the other places to say goodbye after an interrupt "
                "(SIGINT, SIGTERM) before it ends the ones on its machine by force"),
        Setting("FORWARD_OUTPUT", True, parse_bool, _any,
                "forward print output of places other than 0 to place 0's stdout/stderr, in order"),
        Setting("LOG_LEVEL", "WARNING", _log_level, _any,
                "level of the 'apgaspy' logger (DEBUG, INFO, WARNING, ERROR)"),
        Setting("DEBUG", False, parse_bool, _any,
                "1: a failure that ends run() or session() prints every traceback, remote "
                "ones included (default: its first failure in a few lines), and an "
                "interrupted run prints where place 0's main thread was, not only one line"),
        Setting("PLACES_PER_HOST", 1, int, _positive,
                "places started on each host of a grow order (a scheduler counts hosts)"),
        Setting("COMMUNICATOR", None, str, _any,
                "malleable communicator as module:Class or entry point name (default: socket "
                "when SCHEDULER_PORT is set)"),
        Setting("ORDERS_FROM", None, str, _any,
                "addresses allowed to send orders, comma-separated, or 'any' (default: "
                "SCHEDULER_IP)"),
        Setting("ORDER_PORT", None, int, _port,
                "the port the socket communicator takes orders on, announced as "
                "APGAS-Ready;<port>; 0: an ephemeral one (apgaspy's scheduler sets it where "
                "jobs may share a first node; default: SCHEDULER_PORT)"),
        Setting("ORDER_TIMEOUT", 5.0, float, _positive,
                "seconds the socket communicator waits for an order line on a new connection"),
        Setting("SHRINK_REPLY_TIMEOUT", 18.0, float, _positive,
                "seconds a shrink may take before the scheduler is answered ERROR (the Java "
                "scheduler waits 20 s per reply line)"),
        Setting("SCHEDULE", None, str, _any,
                "orders for the schedule communicator, e.g. 'after 5 s grow 2 on localhost "
                "localhost; after 12 s shrink 1'"),
        Setting("ELASTIC", None, _elastic, _any,
                "rigid, malleable or evolving; evolving starts the evolving monitor when the "
                "handler is defined (default: the scheduler's ELASTIC variable, else malleable)"),
        Setting("MAX_HOSTS", None, int, _positive,
                "hosts an evolving job never asks to exceed (default: no limit)"),
        Setting("EVOLVING_MODE", "cpu", _evolving_mode, _any,
                "what the evolving monitor measures: cpu (each place's process CPU use) or task "
                "(a load source a library registers, GLB's busy workers)"),
        Setting("EVOLVING_INTERVAL", 1.0, float, _positive,
                "seconds between two load samples and two decisions of the evolving monitor"),
        Setting("EVOLVING_STANDBY", 3.0, float, _non_negative,
                "seconds the evolving monitor waits after it starts before its first decision"),
        Setting("EVOLVING_HIGH", 90.0, float, _percent,
                "average load in % above which the evolving monitor requests one host"),
        Setting("EVOLVING_LOW", 10.0, float, _percent,
                "average load in % below which the evolving monitor releases the least loaded "
                "place (also when some place's load is 0)"),
        Setting("EVOLVING_IDLE_GRACE", 10.0, float, _non_negative,
                "seconds a place's load must stay below 1 % before it reads 0 (idle: the "
                "evolving monitor releases it)"),
        Setting("EVOLVING_REQUEST_TIMEOUT", 60.0, float, _positive,
                "seconds an unanswered request for a host stays open before it is given up"),
        Setting("EVOLVING_RELEASE_BLOCK", 10.0, float, _positive,
                "seconds a release under way blocks the evolving monitor's decisions at most"),
        Setting("LOAD_INTERVAL", 5.0, float, _non_negative,
                "seconds between two load reports of a job to the scheduler (APGAS-Load: duty "
                "cycle, bytes/s, GIL share, memory; socket communicator); 0: none"),
        Setting("RELEASE_TIMEOUT", 600.0, float, _positive,
                "seconds a shrink waits for a released place to finish its last tasks"),
        Setting("ACK_TIMEOUT", 60.0, float, _positive,
                "seconds an order waits for every live place to acknowledge a table change "
                "(a place that dies is not waited for)"),
        Setting("CONNECT_GRACE", 5.0, float, _positive,
                "seconds a new place's connection may take before the place counts as dead"),
        Setting("CHECK_TIMEOUT", 15.0, float, _positive,
                "seconds one launcher round trip of the pre-spawn host check may take"),
        Setting("CHECK_TTL", 60.0, float, _non_negative,
                "seconds a host that ran this job's places, or passed the pre-spawn check, "
                "is not checked again before a grow (0: check every time)"),
        Setting("NOTIFY_TIMEOUT", 5.0, float, _positive,
                "seconds the socket communicator tries to deliver one notification"),
        Setting("CLOSE_LINGER", 2.0, float, _non_negative,
                "seconds a place's queued messages may still take to leave when it closes"),
        Setting("RELEASE_LINGER", 10.0, float, _non_negative,
                "seconds a place's last messages to a released place may take to leave"),
        Setting("TEST_DELAY", None, str, _test_delay,
                "test hook, off by default: delay every message from one place to another, "
                "'<src>><dst>:<seconds>[,...]', e.g. '2>1:0.3,3>1:0.3' (see apgaspy._test_delay)"),
    ]
}


def setting(name: str, value: Any = None, *, table: dict[str, Setting] | None = None,
            prefix: str = "APGAS_") -> Any:
    """Return the value of setting ``name``.

    Order: ``value`` if not ``None``, else the environment variable ``<prefix><name>`` if set
    and non-empty, else the documented default.

    Args:
        name: a key of ``table`` (without the prefix).
        value: an explicit value (a keyword argument of the caller), or ``None``.
        table: the settings table (default :data:`SETTINGS`; GLB has its own).
        prefix: the environment variables' prefix (default ``APGAS_``).

    Raises:
        ConfigurationError: the value does not parse or is out of range.
        KeyError: ``name`` is not a documented setting (a programming error).
    """
    spec = (SETTINGS if table is None else table)[name]
    source = "argument"
    raw = value
    if raw is None:
        env = os.environ.get(prefix + name, "")
        if env.strip() == "":
            return spec.default
        raw, source = env, prefix + name
    try:
        parsed = spec.parse(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(
            f"{source}={raw!r} is not valid for setting {name}: {exc} ({spec.doc})"
        ) from None
    problem = spec.check(parsed)
    if problem:
        raise ConfigurationError(f"{source}={raw!r} for setting {name} {problem} ({spec.doc})")
    return parsed
