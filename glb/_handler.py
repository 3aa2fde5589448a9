"""GLB's malleable handler: keeps a running computation exact through shrinks and grows.

* ``pre_shrink(n)``: the last n places leave.  Each gets ``leaving`` (immediate pool): its
  worker hands its whole bag to a continuing place as a counted task, answers its thieves and
  reports its partial result and statistics to place 0, which keeps them for the final
  reduction.  The continuing places adopt the new membership (lifelines recomputed).
* ``post_grow``: each new place gets an empty worker, every place adopts the new membership,
  and idle places (the new ones among them) register on their lifeline buddies, so work flows
  to them through the lifeline graph.
Each phase's time is sent to the scheduler as ``preShrinkTimeGLB;<n>;<ns>`` and the like.

A phase's messages to the places wait for every answer, but never for a place that is gone:
the wait checks every 0.1 s that the places that have not answered are still live, and fails
with :class:`apgaspy.DeadPlaceError` as soon as one died (``GLB_REPLY_TIMEOUT`` bounds it all).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from apgaspy import (
    BadPlaceError,
    DeadPlaceError,
    GlobalRef,
    MalleableHandler,
    Place,
    async_at,
    finish,
    immediate_async_at,
    notify_scheduler,
    place,
    places,
)

from ._config import glb_setting
from ._fold import Fold
from ._resilience import Store, only_dead
from ._worker import (
    Params,
    PlaceStats,
    Replies,
    _is_dead,
    _on_leave,
    _on_members,
    _worker,
    make_worker,
)

__all__ = ["GLBHandler"]

_SLICE_S = 0.1  # seconds between checks that the places yet to answer still live


def _broadcast(targets: list[int], fn: Callable[..., None], *args: Any,
               skip_dead: bool = False) -> list[Any]:
    """Run ``fn(*args, reply)`` at each target on its immediate pool; wait for all answers.

    ``fn`` must answer through ``reply`` (a ``GlobalRef`` to a :class:`Replies`) exactly once,
    naming its place.  The wait goes in slices of 0.1 s; after each, a target that has not
    answered and is no longer a live place ends it.

    Args:
        targets: place ids (not this place).
        fn: a module-level function, run as ``fn(*args, reply)``.
        skip_dead: a resilient computation's wait: a target that dies is not waited for
            (its state is recovered from place 0's store) instead of raising.

    Returns:
        The answers, in arrival order.

    Raises:
        DeadPlaceError: a target died before answering (at once when it was already known to
            be dead, else within 0.1 s of the runtime declaring it dead).
        BadPlaceError: a target was released (or is unknown) before answering.
        TimeoutError: not every answer came within ``GLB_REPLY_TIMEOUT`` seconds.
    """
    box = Replies(len(targets))
    ref = GlobalRef(box)
    try:
        for t in targets:
            immediate_async_at(t, fn, *args, ref)
        if not targets:
            return []
        timeout = glb_setting("REPLY_TIMEOUT")
        deadline = time.monotonic() + timeout
        while not box.event.wait(_SLICE_S):
            if skip_dead:
                dead = _dead_targets(targets, box)
                if dead:
                    targets = [t for t in targets if t not in dead]
                    with box.lock:
                        box.expected -= len(dead)
                        if len(box.values) >= box.expected:
                            break
                continue
            _check_targets(targets, box)
            if time.monotonic() >= deadline:
                with box.lock:
                    missing = sorted(set(targets) - box.senders)
                raise TimeoutError(f"GLB: no answer from places {missing} within {timeout} s "
                                   "(GLB_REPLY_TIMEOUT)")
        return list(box.values)
    finally:
        ref.free()


def _dead_targets(targets: list[int], box: Replies) -> set[int]:
    """The targets that have not answered and died."""
    with box.lock:
        answered = set(box.senders)
    return {t for t in targets if t not in answered and _is_dead(t)}


def _check_targets(targets: list[int], box: Replies) -> None:
    """Raise for the first target that has not answered and is gone (dead or released)."""
    live = {p.id for p in places()}
    with box.lock:
        answered = set(box.senders)
    for t in targets:
        if t in live or t in answered:
            continue
        try:
            place(t)  # raises DeadPlaceError for a dead place, BadPlaceError for a released one
        except DeadPlaceError:
            raise
        except BadPlaceError:
            raise BadPlaceError(f"place({t}) left the computation before answering GLB",
                                t) from None


class GLBHandler(MalleableHandler):
    """The handler a GLB computation defines while it runs."""

    def __init__(self, params: Params, result_factory: Callable[[], Fold],
                 store: Store | None = None) -> None:
        self.params = params
        self.result_factory = result_factory
        self.released: list[tuple[Fold, PlaceStats]] = []
        self.orders: list[tuple[str, list[int]]] = []
        self.store = store  # a resilient computation's: orders wait while it recovers
        self.phase: AbstractContextManager[Any] = \
            store.phase if store is not None else nullcontext()
        self.skip_dead = store is not None

    def _notify(self, phase: str, n: int, t0: int) -> None:
        notify_scheduler(f"{phase}TimeGLB;{n};{time.perf_counter_ns() - t0}")

    def pre_shrink(self, n: int) -> list[Place]:
        t0 = time.perf_counter_ns()
        with self.phase:
            current = places()
            leaving = current[-n:]  # the runtime never asks for place 0
            continuing = [p.id for p in current if p not in leaving]
            # continuing places stop choosing the leaving ones as victims or lifelines
            _broadcast([p for p in continuing if p != 0], _on_members, continuing, False,
                       skip_dead=self.skip_dead)
            _worker().set_members(continuing)
            # the leaving ones hand over their work and report their partial results (None:
            # a place that a recovery took over meanwhile)
            for answer in _broadcast([p.id for p in leaving], _on_leave, continuing,
                                     skip_dead=self.skip_dead):
                if answer is not None:
                    self.released.append(answer)
        self._notify("preShrink", n, t0)
        return leaving

    def post_shrink(self, n: int, removed: list[Place]) -> None:
        t0 = time.perf_counter_ns()
        self.orders.append(("shrink", [p.id for p in removed]))
        self._notify("postShrink", len(removed), t0)

    def pre_grow(self, n: int) -> None:
        t0 = time.perf_counter_ns()
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
            _broadcast([p for p in members if p != 0 and p not in new], _on_members, members,
                       False, skip_dead=self.skip_dead)
            # place 0 too, before the new places register their lifelines: a request from a
            # place not yet among place 0's members is dropped, and the new place then waits
            # for work that never comes
            _worker().set_members(members)
            _broadcast(sorted(new), _on_members, members, True, skip_dead=self.skip_dead)
        self.orders.append(("grow", [p.id for p in added]))
        self._notify("postGrow", len(added), t0)
