"""GLB parameters: keyword argument, then ``GLB_*`` environment variable, then default.

=============  =======  ===================================================================
name           default  meaning
=============  =======  ===================================================================
N              (bag)    work units per ``process`` call (default: the bag class's
                        ``DEFAULT_WORK_UNITS``, else 511 as in X10 GLB)
W              1        random steal attempts before turning to lifelines
L              2        base of the lifeline hypercube
Z              (auto)   dimensions of the hypercube (default: the fewest that reach every
                        place, ceil(log_L(places)))
REPLY_TIMEOUT  600.0    seconds GLB waits for a broadcast's answers (its messages to every
                        place during a shrink or a grow) and, at most, for the answers to a
                        worker's own steal requests before it goes idle or leaves; a place
                        that dies is not waited for (``DeadPlaceError`` at once)
RESILIENT      0        1: computations survive the death of places other than 0 with the
                        exact result (``glb._store``); 0: a death fails the computation
BACKUP_INTERVAL 1.0     seconds between two backups of a place's bag and partial result to
                        place 0 in a resilient computation (less: less work redone after a
                        death, more messages)
WORKERS        1        worker threads per place, each with its own bag (``glb._worker``);
                        more than 1 pays off with compiled kernels that release the GIL;
                        0: the cores of place 0's host divided by ``APGAS_PLACES_PER_HOST``
                        (a host as one place: ``APGAS_PLACES_PER_HOST=1``, ``GLB_WORKERS=0``);
                        in a pinned job (``APGAS_CORES``), 0: the cores of place 0's share
PIN_WORKERS    1        in a pinned job, worker i's thread runs on core i mod len(share) of
                        its place's cores (docs/guides/pinning.md); 0: the workers run on
                        the whole share, as the place does
=============  =======  ===================================================================
"""

from __future__ import annotations

from typing import Any

from apgaspy.config import Setting, parse_bool, setting

__all__ = ["GLB_SETTINGS", "glb_setting", "workers_per_place"]


def _positive(v: int) -> str | None:
    return None if v > 0 else "must be positive"


def _base(v: int) -> str | None:
    return None if v >= 2 else "must be at least 2"


def _positive_seconds(v: float) -> str | None:
    return None if v > 0 else "must be positive"


def _non_negative(v: int) -> str | None:
    return None if v >= 0 else "must be 0 (the host's cores) or positive"


def _any(v: Any) -> str | None:
    return None


GLB_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("N", None, int, _positive, "work units per process() call"),
        Setting("W", 1, int, _positive, "random steal attempts before lifelines"),
        Setting("L", 2, int, _base, "base of the lifeline hypercube"),
        Setting("Z", None, int, _positive, "dimensions of the lifeline hypercube"),
        Setting("REPLY_TIMEOUT", 600.0, float, _positive_seconds,
                "seconds GLB waits for a broadcast's answers"),
        Setting("RESILIENT", False, parse_bool, _any,
                "1: survive the death of places other than 0 with the exact result"),
        Setting("BACKUP_INTERVAL", 1.0, float, _positive_seconds,
                "seconds between backups of a place's work in a resilient computation"),
        Setting("WORKERS", 1, int, _non_negative,
                "worker threads per place, each with its own bag (0: cores per place)"),
        Setting("PIN_WORKERS", True, parse_bool, _any,
                "in a pinned job (APGAS_CORES), each worker thread on one core of its "
                "place's share (0: on the whole share)"),
    ]
}


def glb_setting(name: str, value: Any = None) -> Any:
    """The GLB setting ``name``; see the module docstring.

    Args:
        name: ``"N"``, ``"W"``, ``"L"``, ``"Z"``, ``"WORKERS"`` (ints or ``None``),
            ``"REPLY_TIMEOUT"`` or ``"BACKUP_INTERVAL"`` (floats, seconds), ``"RESILIENT"``
            or ``"PIN_WORKERS"`` (bools).
        value: an explicit value (a keyword argument of the caller), or ``None`` for the
            ``GLB_<name>`` environment variable, else the default.

    Returns:
        The value, parsed (an ``int``, a ``float``) or ``None`` where that is the default.

    Raises:
        ConfigurationError: a malformed value.
        KeyError: ``name`` is not a GLB setting.
    """
    return setting(name, value, table=GLB_SETTINGS, prefix="GLB_")


def workers_per_place(value: int | None = None) -> int:
    """The workers of each place, W: ``value``, else ``GLB_WORKERS``, else 1; 0 means this
    host's cores (those the process may run on) divided by ``APGAS_PLACES_PER_HOST``, at
    least 1, so that a host's places and their workers use its cores once; in a pinned job
    (``APGAS_CORES``), 0 means the cores of this place's share.

    Raises:
        ConfigurationError: a malformed or negative value.
    """
    import os

    from apgaspy.config import setting as runtime_setting
    from apgaspy.pinning import place_cores

    w = int(glb_setting("WORKERS", value))
    if w > 0:
        return w
    share = place_cores()
    if share:
        return len(share)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, cores // int(runtime_setting("PLACES_PER_HOST")))
