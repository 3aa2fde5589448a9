"""The lifeline graph: a cyclic hypercube over the places (pure policy, plain data).

Saraswat et al., "Lifeline-based global load balancing", PPoPP 2011, §3: the P places, in
order, are numbered 0..P-1 and written in base ``l`` with ``z`` digits; the lifeline of index
i along dimension j is the index obtained by decrementing i's j-th digit cyclically, skipping
indices ≥ P (the X10 GLB formula).  With z = ceil(log_l P) the graph is connected and has
diameter at most z·(l-1); each place has at most z outgoing lifelines.

The graph is recomputed from the list of places whenever a shrink or grow changes it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

__all__ = ["dimensions", "lifelines", "lifeline_graph", "steal_victim", "heir", "diameter"]


def dimensions(nplaces: int, base: int) -> int:
    """The number of hypercube dimensions that reach ``nplaces`` places (at least 1).

    Raises:
        ValueError: ``nplaces`` < 1 or ``base`` < 2.
    """
    if nplaces < 1 or base < 2:
        raise ValueError(f"need nplaces >= 1 and base >= 2, got {nplaces}, {base}")
    z, reach = 1, base
    while reach < nplaces:
        z += 1
        reach *= base
    return z


def lifelines(index: int, nplaces: int, base: int, dims: int) -> list[int]:
    """The lifeline buddies (indices) of ``index`` among ``nplaces`` places, in order.

    Raises:
        ValueError: ``index`` is not in ``range(nplaces)``.
    """
    if not 0 <= index < nplaces:
        raise ValueError(f"index {index} outside 0..{nplaces - 1}")
    out: list[int] = []
    x = 1
    for _ in range(dims):
        v = index
        for _ in range(1, base):
            v = v - v % (x * base) + (v + x * base - x) % (x * base)
            if v < nplaces:
                if v != index and v not in out:
                    out.append(v)
                break
        x *= base
    return out


def lifeline_graph(members: Sequence[int], base: int,
                   dims: int | None = None) -> dict[int, list[int]]:
    """Place id → its lifeline buddies (place ids) for the places ``members`` (ascending ids).

    Args:
        members: the place ids in the computation.
        base: the hypercube base ``l`` (≥ 2).
        dims: the dimensions ``z`` (default :func:`dimensions`).
    """
    ids = sorted(members)
    z = dims if dims is not None else dimensions(len(ids), base)
    return {pid: [ids[j] for j in lifelines(i, len(ids), base, z)] for i, pid in enumerate(ids)}


def steal_victim(me: int, members: Sequence[int], rng: random.Random) -> int | None:
    """A random place other than ``me`` among ``members``, or ``None`` if there is none."""
    others = [m for m in members if m != me]
    return rng.choice(others) if others else None


def heir(me: int, members: Sequence[int]) -> int:
    """The continuing place that inherits the bag of a place ``me`` leaving in a shrink.

    Leaving places spread over the continuing ones (``members``, the places that stay:
    ``me`` itself is skipped) by their id, so several places leaving at once do not all
    burden one heir; place 0 when no other place stays.
    """
    others = [m for m in members if m != me]
    return others[me % len(others)] if others else 0


def diameter(graph: dict[int, list[int]]) -> float:
    """The largest number of lifeline hops between two places (``math.inf`` if disconnected)."""
    worst = 0
    for src in graph:
        seen = {src: 0}
        frontier = [src]
        while frontier:
            nxt = []
            for u in frontier:
                for v in graph[u]:
                    if v not in seen:
                        seen[v] = seen[u] + 1
                        nxt.append(v)
            frontier = nxt
        if len(seen) < len(graph):
            return math.inf
        worst = max(worst, max(seen.values()))
    return worst
