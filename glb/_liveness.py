"""Which places are live, dead or released, as GLB needs to know it (apgaspy's public API)."""

from __future__ import annotations

from apgaspy import BadPlaceError, DeadPlaceError, place, places

__all__ = ["live_places", "is_dead", "only_dead"]


def live_places() -> set[int]:
    """The ids of the places now in the computation."""
    return {p.id for p in places()}


def is_dead(p: int) -> bool:
    """True when place ``p`` died (as opposed to: live, or released by a shrink)."""
    try:
        place(p)
    except DeadPlaceError:
        return True
    except BadPlaceError:
        return False
    return False


def only_dead(exc: BaseException) -> bool:
    """True when ``exc`` says only that places died (a finish's ``MultipleException`` whose
    members are all :class:`apgaspy.DeadPlaceError`, or one such error)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(only_dead(e) for e in exc.exceptions)
    return isinstance(exc, DeadPlaceError)
