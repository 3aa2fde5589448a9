"""GLB parameters: keyword argument, then ``GLB_*`` environment variable, then default.

======  =======  ==========================================================================
name    default  meaning
======  =======  ==========================================================================
N       (bag)    work units per ``process`` call (default: the bag class's
                 ``DEFAULT_WORK_UNITS``, else 511 as in X10 GLB)
W       1        random steal attempts before turning to lifelines
L       2        base of the lifeline hypercube
Z       (auto)   dimensions of the hypercube (default: the fewest that reach every place,
                 ceil(log_L(places)))
======  =======  ==========================================================================
"""

from __future__ import annotations

from apgaspy._config import Setting, setting

__all__ = ["GLB_SETTINGS", "glb_setting"]


def _positive(v: int) -> str | None:
    return None if v > 0 else "must be positive"


def _base(v: int) -> str | None:
    return None if v >= 2 else "must be at least 2"


GLB_SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting("N", None, int, _positive, "work units per process() call"),
        Setting("W", 1, int, _positive, "random steal attempts before lifelines"),
        Setting("L", 2, int, _base, "base of the lifeline hypercube"),
        Setting("Z", None, int, _positive, "dimensions of the lifeline hypercube"),
    ]
}


def glb_setting(name: str, value: int | None = None) -> int | None:
    """The GLB parameter ``name`` (N, W, L or Z); see the module docstring.

    Raises:
        ConfigurationError: a malformed value.
    """
    return setting(name, value, table=GLB_SETTINGS, prefix="GLB_")  # type: ignore[no-any-return]
