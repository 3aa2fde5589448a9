"""Resilient GLB, place 0's recovery: the rounds of a resilient computation, the halts after a
death, and the result of a place that died after the last round.

The scheme (backups, records, the invariant, the four steps of a recovery) is described in
:mod:`glb._store`; this module carries the steps out with the store, the broadcast and the
workers' ``halt`` and ``resume`` messages.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from apgaspy import async_at, finish, places

from ._broadcast import broadcast
from ._fold import Fold
from ._liveness import only_dead
from ._stats import PlaceStats
from ._store import HaltReport, Store
from ._worker import current_worker, start
from ._worker_orders import halt, halt_request, resume

__all__ = ["resilient_rounds", "halt_all", "live_members", "collect_dead"]

log = logging.getLogger("glb")


def live_members(s: Store) -> list[int]:
    """The live places of the computation (released places that retired excluded)."""
    with s.lock:
        retired = set(s.retired)
    return [p.id for p in places() if p.id not in retired]


def halt_all(members: list[int]) -> tuple[list[HaltReport], set[int]]:
    """Step 1 of a recovery: halt every place of ``members`` (place 0 included).

    Returns:
        The reports of the places that answered, and the places found dead meanwhile.

    Raises:
        TimeoutError: a place neither answered nor died within ``GLB_REPLY_TIMEOUT`` s.
    """
    others = [p for p in members if p != 0]
    reports: list[HaltReport] = list(broadcast(others, halt_request, skip_dead=True))
    if 0 in members:
        reports.append(halt())
    dead = set(others) - {r.place for r in reports}
    return reports, dead


def resilient_rounds(s: Store) -> int:
    """Run rounds until one ends with no work anywhere (steps in ``glb._store``); return how
    many.  At place 0, with the workers created.

    Raises:
        Exception: what a round's finish raised other than the deaths of places.
    """
    rounds = 0
    begin: tuple[Callable[..., None], tuple[Any, ...]] = (start, ())
    while True:
        rounds += 1
        try:
            with finish():
                with s.phase:  # no order between the halt of a round and the next one's start
                    members = live_members(s)
                    with s.lock:
                        s.known.update(members)
                    for p in members:
                        async_at(p, begin[0], *begin[1])
        except Exception as exc:  # noqa: BLE001 - a finish fails with a MultipleException
            if not only_dead(exc):
                raise
            log.warning("GLB: a place died (%s); recovering", exc)
        with s.phase:
            members = live_members(s)
            reports, dead = halt_all(members)
            live = set(members) - dead
            orphans, work_left = s.reconcile(reports, live)
            if not orphans and not work_left:
                return rounds
            w = current_worker()
            with w.lock:
                w.mailbox.extend(orphans)
            begin = (resume, (s.epoch, sorted(live)))


def collect_dead(s: Store, p: int) -> tuple[Fold, PlaceStats]:
    """The final result of place ``p``, which died after the last round: its state in the
    store (exact: the last halt installed it)."""
    with s.lock:
        b = s.backups.pop(p, None)
        s.recovered.append(p)
    res = s.result_factory()
    if b is not None:
        if b.result is not None:
            res.fold(b.result)
        if b.bag is not None:
            b.bag.submit(res)
    return res, PlaceStats(p, died=True)
