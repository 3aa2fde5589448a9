"""The broadcast: run a function at several places on their immediate pools and wait for every
answer (through a :class:`glb._replies.Replies` box), never for a place that is gone.

GLB's malleable handler uses it to tell places of a new membership and to release places; a
resilient computation's recovery uses it to halt the places.  The wait goes in slices of 0.1 s;
after each, the targets that have not answered are checked: a target that died ends the wait
with :class:`apgaspy.DeadPlaceError` (or, for a resilient computation, is no longer waited
for), a released one with :class:`apgaspy.BadPlaceError`; ``GLB_REPLY_TIMEOUT`` bounds it all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from apgaspy import BadPlaceError, DeadPlaceError, GlobalRef, immediate_async_at, place

from ._config import glb_setting
from ._liveness import is_dead, live_places
from ._replies import Replies

__all__ = ["broadcast"]

_SLICE_S = 0.1  # seconds between checks that the places yet to answer still live


def broadcast(targets: list[int], fn: Callable[..., None], *args: Any,
              skip_dead: bool = False) -> list[Any]:
    """Run ``fn(*args, reply)`` at each target on its immediate pool; wait for all answers.

    ``fn`` must answer through ``reply`` (a ``GlobalRef`` to a :class:`Replies`) exactly once,
    naming its place (:func:`glb._replies.deliver`).

    Args:
        targets: place ids (not this place).
        fn: a module-level function, run as ``fn(*args, reply)``.
        skip_dead: a resilient computation's wait: a target that dies is not waited for
            (its state is recovered from place 0's store) instead of raising.

    Returns:
        The answers, in arrival order.

    Raises:
        DeadPlaceError: a target died before answering (at once when it was already known to
            be dead, else within 0.1 s of the runtime declaring it dead); not with
            ``skip_dead``.
        BadPlaceError: a target was released (or is unknown) before answering; not with
            ``skip_dead``.
        TimeoutError: not every answer came within ``GLB_REPLY_TIMEOUT`` seconds (with
            ``skip_dead`` too: a target that neither answers nor dies is not waited for
            forever).
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
                    box.forget(dead)
                    if box.event.is_set():
                        break
            else:
                _check_targets(targets, box)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"GLB: no answer from places {box.missing(targets)} within "
                                   f"{timeout} s (GLB_REPLY_TIMEOUT)")
        return list(box.values)
    finally:
        ref.free()


def _dead_targets(targets: list[int], box: Replies) -> set[int]:
    """The targets that have not answered and died."""
    with box.lock:
        answered = set(box.senders)
    return {t for t in targets if t not in answered and is_dead(t)}


def _check_targets(targets: list[int], box: Replies) -> None:
    """Raise for the first target that has not answered and is gone (dead or released)."""
    live = live_places()
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
