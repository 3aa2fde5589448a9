"""The check of a handler's answer to a shrink, as pure code: plain data in, a verdict out.

The mechanism in ``_malleability`` calls these with what it knows; the tests call them with tables
made by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any

from .._exceptions import MalleabilityError
from .._place import Place

__all__ = ["check_shrink_answer"]


def check_shrink_answer(answer: Any, n: int, n_hosts: int, slot_of: Mapping[int, int],
                        dead: Set[int] = frozenset()) -> list[int]:
    """Check a handler's ``pre_shrink`` answer; return the released place ids, ascending.

    The answer must name exactly ``n`` distinct live places, never place 0, that make up
    ``n_hosts`` whole host slots (a scheduler releases hosts, and every place started for a
    host goes with it).

    Args:
        answer: what ``pre_shrink(n)`` returned (a list of :class:`Place` or ints).
        n: places asked for (``n_hosts`` × places per host).
        n_hosts: hosts the order releases.
        slot_of: the live places: place id → the host slot it belongs to.
        dead: ids of places known to have died.

    Raises:
        MalleabilityError: the answer is not a list of places, has the wrong length, names a
            place twice, names place 0, a dead or unknown place, or splits a host.
    """
    try:
        ids = [p.id if isinstance(p, Place) else p for p in answer]
    except TypeError:
        raise MalleabilityError(
            f"pre_shrink must return a list of places, returned {answer!r}") from None
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise MalleabilityError(f"pre_shrink must return places, returned {answer!r}")
    if len(ids) != n:
        raise MalleabilityError(f"pre_shrink was asked for {n} places and returned "
                                f"{len(ids)}: {sorted(ids)}")
    if len(set(ids)) != len(ids):
        raise MalleabilityError(f"pre_shrink returned a place twice: {ids}")
    if 0 in ids:
        raise MalleabilityError("pre_shrink returned place(0), which is never released")
    died = [i for i in ids if i in dead]
    if died:
        raise MalleabilityError(f"pre_shrink returned places that died: {died}")
    unknown = [i for i in ids if i not in slot_of]
    if unknown:
        raise MalleabilityError(f"pre_shrink returned places that do not exist: {unknown}")
    chosen = {slot_of[i] for i in ids}
    members = {s: {p for p, ps in slot_of.items() if ps == s} for s in chosen}
    partial = [s for s in chosen if members[s] - set(ids)]
    if partial or len(chosen) != n_hosts:
        raise MalleabilityError(
            f"pre_shrink must release whole hosts ({n_hosts} host(s) of "
            f"{n // n_hosts} place(s)); places {sorted(ids)} do not make up whole hosts")
    return sorted(ids)
