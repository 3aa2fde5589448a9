"""GLB's malleable handler: keeps a running computation exact through shrinks and grows.

* ``pre_shrink(n)``: the last n places leave.  Each gets ``leaving`` (immediate pool): its
  worker hands its whole bag to a continuing place as a counted task, answers its thieves and
  reports its partial result and statistics to place 0, which keeps them for the final
  reduction.  The continuing places adopt the new membership (lifelines recomputed).
* ``post_grow``: each new place gets an empty worker, every place adopts the new membership,
  and idle places (the new ones among them) register on their lifeline buddies, so work flows
  to them through the lifeline graph.
Each phase's time is sent to the scheduler as ``preShrinkTimeGLB;<n>;<ns>`` and the like.

A phase's messages to the places wait for every answer, but never for a place that is gone
(:func:`glb._broadcast.broadcast`): the wait fails with :class:`apgaspy.DeadPlaceError` as soon
as one died (``GLB_REPLY_TIMEOUT`` bounds it all).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from apgaspy import MalleableHandler, Place, async_at, finish, notify_scheduler, places
from apgaspy.wire.protocol import glb_phase_time, timing_message

from ._broadcast import broadcast
from ._fold import Fold
from ._liveness import only_dead
from ._params import Params
from ._stats import PlaceStats
from ._store import Store
from ._worker import current_worker, make_worker
from ._worker_orders import on_leave, on_members

__all__ = ["GLBHandler"]


class GLBHandler(MalleableHandler):
    """The handler a GLB computation defines while it runs.

    Args:
        params: the computation's parameters (for the workers of new places).
        result_factory: makes an empty result (for the workers of new places).
        store: a resilient computation's store (orders then wait while it recovers, and a
            place that dies during an order is left to the recovery), or ``None``.

    Attributes:
        released: ``(result, stats)`` of every place a shrink released.
        orders: the orders carried out, ``(kind, places)``.
        order_times: when each of ``orders`` began (its ``pre_shrink`` or ``pre_grow``;
            ``time.time()``, seconds since the epoch).
    """

    def __init__(self, params: Params, result_factory: Callable[[], Fold],
                 store: Store | None = None) -> None:
        self.params = params
        self.result_factory = result_factory
        self.released: list[tuple[Fold, PlaceStats]] = []
        self.orders: list[tuple[str, list[int]]] = []
        self.order_times: list[float] = []
        self._order_began = 0.0
        self.store = store  # a resilient computation's: orders wait while it recovers
        self.phase: AbstractContextManager[Any] = \
            store.phase if store is not None else nullcontext()
        self.skip_dead = store is not None

    def _notify(self, phase: str, n: int, t0: int) -> None:
        notify_scheduler(timing_message(glb_phase_time(phase), n, time.perf_counter_ns() - t0))

    def pre_shrink(self, n: int) -> list[Place]:
        return self._leave(lambda current: current[-n:], n)  # never place 0 (the runtime's)

    def pre_release(self, chosen: list[Place]) -> list[Place]:
        """Release exactly ``chosen`` (an evolving job's own release, or a named shrink when
        the scheduler drains their nodes), their work handed over as in a shrink."""
        ids = {p.id for p in chosen}
        return self._leave(lambda current: [p for p in current if p.id in ids], len(chosen))

    def _leave(self, choose: Callable[[list[Place]], list[Place]], n: int) -> list[Place]:
        """The shrink side of an order of ``n`` places: ``choose`` picks the leaving ones
        from the current places (inside the phase a resilient store guards)."""
        t0 = time.perf_counter_ns()
        self._order_began = time.time()
        with self.phase:
            current = places()
            leaving = choose(current)
            continuing = [p.id for p in current if p not in leaving]
            # continuing places stop choosing the leaving ones as victims or lifelines
            broadcast([p for p in continuing if p != 0], on_members, continuing, False,
                       skip_dead=self.skip_dead)
            current_worker().set_members(continuing)
            # the leaving ones hand over their work and report their partial results (None:
            # a place that a recovery took over meanwhile)
            for answer in broadcast([p.id for p in leaving], on_leave, continuing,
                                     skip_dead=self.skip_dead):
                if answer is not None:
                    self.released.append(answer)
        self._notify("preShrink", n, t0)
        return leaving

    def post_shrink(self, n: int, removed: list[Place]) -> None:
        t0 = time.perf_counter_ns()
        self.orders.append(("shrink", [p.id for p in removed]))
        self.order_times.append(self._order_began)
        self._notify("postShrink", len(removed), t0)

    def pre_grow(self, n: int) -> None:
        t0 = time.perf_counter_ns()
        self._order_began = time.time()
        self._notify("preGrow", n, t0)

    def post_grow(self, n: int, continued: list[Place], added: list[Place]) -> None:
        t0 = time.perf_counter_ns()
        with self.phase:
            members = [p.id for p in places()]
            epoch = self.store.epoch if self.store is not None else 0
            try:
                with finish():
                    for p in added:
                        async_at(p, make_worker, self.params, self.result_factory, None,
                                 members, epoch)
            except Exception as exc:  # noqa: BLE001 - a new place died: go on without it
                if not (self.skip_dead and only_dead(exc)):
                    raise
                members = [p.id for p in places()]
            new = {p.id for p in added} & set(members)
            if self.store is not None:
                with self.store.lock:
                    self.store.known.update(new)
            broadcast([p for p in members if p != 0 and p not in new], on_members, members,
                       False, skip_dead=self.skip_dead)
            # place 0 too, before the new places register their lifelines: a request from a
            # place not yet among place 0's members is dropped, and the new place then waits
            # for work that never comes
            current_worker().set_members(members)
            broadcast(sorted(new), on_members, members, True, skip_dead=self.skip_dead)
        self.orders.append(("grow", [p.id for p in added]))
        self.order_times.append(self._order_began)
        self._notify("postGrow", len(added), t0)
