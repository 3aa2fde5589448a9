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
from ._worker import (
    Params,
    PlaceStats,
    Replies,
    _on_leave,
    _on_members,
    _worker,
    make_worker,
)

__all__ = ["GLBHandler"]

_SLICE_S = 0.1  # seconds between checks that the places yet to answer still live


def _broadcast(targets: list[int], fn: Callable[..., None], *args: Any) -> list[Any]:
    """Run ``fn(*args, reply)`` at each target on its immediate pool; wait for all answers.

    ``fn`` must answer through ``reply`` (a ``GlobalRef`` to a :class:`Replies`) exactly once,
    naming its place.  The wait goes in slices of 0.1 s; after each, a target that has not
    answered and is no longer a live place ends it.

    Args:
        targets: place ids (not this place).
        fn: a module-level function, run as ``fn(*args, reply)``.

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
            _check_targets(targets, box)
            if time.monotonic() >= deadline:
                with box.lock:
                    missing = sorted(set(targets) - box.senders)
                raise TimeoutError(f"GLB: no answer from places {missing} within {timeout} s "
                                   "(GLB_REPLY_TIMEOUT)")
        return list(box.values)
    finally:
        ref.free()


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

    def __init__(self, params: Params, result_factory: Callable[[], Fold]) -> None:
        self.params = params
        self.result_factory = result_factory
        self.released: list[tuple[Fold, PlaceStats]] = []
        self.orders: list[tuple[str, list[int]]] = []

    def _notify(self, phase: str, n: int, t0: int) -> None:
        notify_scheduler(f"{phase}TimeGLB;{n};{time.perf_counter_ns() - t0}")

    def pre_shrink(self, n: int) -> list[Place]:
        t0 = time.perf_counter_ns()
        current = places()
        leaving = current[-n:]  # the runtime never asks for place 0
        continuing = [p.id for p in current if p not in leaving]
        # continuing places stop choosing the leaving ones as victims or lifelines
        _broadcast([p for p in continuing if p != 0], _on_members, continuing, False)
        _worker().set_members(continuing)
        # the leaving ones hand over their work and report their partial results
        for res, stats in _broadcast([p.id for p in leaving], _on_leave, continuing):
            self.released.append((res, stats))
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
        members = [p.id for p in places()]
        with finish():
            for p in added:
                async_at(p, make_worker, self.params, self.result_factory, None, members)
        new = {p.id for p in added}
        _broadcast([p for p in members if p != 0 and p not in new], _on_members, members, False)
        _broadcast(sorted(new), _on_members, members, True)
        _worker().set_members(members)
        self.orders.append(("grow", [p.id for p in added]))
        self._notify("postGrow", len(added), t0)
