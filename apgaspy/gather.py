"""One figure from every place, over the immediate pools (public): for monitors and tools.

    from apgaspy.gather import gather

    loads = gather(my_module.cpu_share, timeout_s=1.0)   # {place id: figure}

Place 0 (or any place: the caller) sends each other place a question, and the place answers
with the figure its ``probe`` returns; question and answer both run on the immediate pools
(:func:`apgaspy.immediate_async_at`, as GLB's steal requests do)::

    caller ── immediate_async_at(p, _ask, token, probe, args) ──► place p: probe(*args)
           ◄── immediate_async_at(caller, _take, token, p, figure) ──┘

An ``at`` would queue behind the place's worker, and a GLB worker does not return while it
has work, so a busy place would never answer; over the immediate pools it answers at once.
Each call has its own token and event: the caller waits on the event until every place has
answered or ``timeout_s`` has passed, and an answer that comes later is dropped.  A place that
has not answered in time (busy joining, leaving, or gone) is left out.

Three users: the evolving monitor's load samples (:mod:`apgaspy.elastic`), GLB's progress
polls (:func:`glb.work_done`) and the job's load reports to the scheduler
(:mod:`apgaspy._duty`).  None of them lets a place leave while it is asked: each holds
orders off around its call (:func:`apgaspy.elastic.orders_held`, or the order lock).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Collection
from typing import Any, TypeVar

__all__ = ["gather"]

log = logging.getLogger("apgaspy")

T = TypeVar("T")

# calls awaiting answers: token -> (event, {place id: figure}, answers expected)
_CALLS: dict[int, tuple[threading.Event, dict[int, Any], int]] = {}
_TOKENS = itertools.count()
_lock = threading.Lock()


def _ask(token: int, origin: int, probe: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """At an asked place, on its immediate pool: send ``probe(*args)`` to ``origin``."""
    from ._api import here, immediate_async_at

    immediate_async_at(origin, _take, token, here().id, probe(*args))


def _take(token: int, place: int, figure: Any) -> None:
    """At the caller's place, on its immediate pool: one place's answer to call ``token``."""
    with _lock:
        slot = _CALLS.get(token)
        if slot is None:  # the call is over: a late answer is dropped
            return
        slot[1][place] = figure
        if len(slot[1]) >= slot[2]:
            slot[0].set()


def gather(probe: Callable[..., T], *args: Any, timeout_s: float,
           leave_out: Collection[int] = ()) -> dict[int, T]:
    """``probe(*args)`` at every place, the caller's own place included (run on the calling
    thread), each other place's on its immediate pool (module docstring).

    Args:
        probe: a module-level function (it travels by name), fast and non-blocking: it runs
            on the place's immediate pool, which also carries the runtime's own messages.
        args: its arguments (picklable).
        timeout_s: seconds to wait for the other places' answers (> 0).
        leave_out: place ids not to ask (places leaving now, say).

    Returns:
        Place id → figure, for the caller's place and every place that answered within
        ``timeout_s`` (a figure may be ``None`` if ``probe`` returns it).

    Raises:
        ApgasError: the runtime is not running.
        Exception: whatever ``probe`` raises at the caller's own place (a remote probe that
            raises is logged there and its place left out).
    """
    from ._api import here, immediate_async_at, places

    me = here().id
    out: dict[int, T] = {me: probe(*args)}
    others = [p.id for p in places() if p.id != me and p.id not in leave_out]
    if not others:
        return out
    token = next(_TOKENS)
    done = threading.Event()
    answers: dict[int, T] = {}
    with _lock:
        _CALLS[token] = (done, answers, len(others))
    try:
        for pid in others:
            try:
                immediate_async_at(pid, _ask, token, me, probe, args)
            except Exception as exc:  # noqa: BLE001 - a place may leave or die meanwhile
                log.debug("gather: no answer from place(%d): %s", pid, exc)
        done.wait(timeout_s)
    finally:
        with _lock:
            del _CALLS[token]
    missing = sorted(set(others) - set(answers))
    if missing:
        log.debug("gather: no answer from places %s within %g s", missing, timeout_s)
    out.update(answers)
    return out
