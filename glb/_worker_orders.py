"""The orders place 0 gives a place's GLB worker (:mod:`glb._worker`), as messages.

Each is a module-level function (it travels by name) that finds the place's worker through
:func:`glb._worker.current_worker`::

    shrink      on_leave(continuing, reply)    stop, hand the work to an heir, report
    grow/shrink on_members(members, join, …)   adopt the new places (rewire the lifelines)
    recovery    halt_request(reply) → halt()   stop between two process calls, report the
                                               exact state (glb._store.HaltReport)
                resume(epoch, members)         start round ``epoch`` again (a counted task)

The shrink follows the worker's leaving protocol (:mod:`glb._worker`, "Malleability"); the
halt and resume are the recovery of :mod:`glb._recovery`.
"""

from __future__ import annotations

from typing import Any

from apgaspy import GlobalRef, immediate_async_at

from ._replies import deliver
from ._store import HaltReport
from ._worker import POLL_S, current_worker, refuse_thieves

__all__ = ["halt", "halt_request", "on_leave", "on_members", "resume"]


def on_leave(continuing: list[int], reply: GlobalRef[Any]) -> None:
    """At a place to be released (immediate pool): stop, hand over, report."""
    w = current_worker()
    with w.lock:
        w.leaving = True
        w.leave_reply = reply
        w.members = sorted(continuing)
        running = w.active
        w.answered.notify_all()
    if not running:  # idle: nothing to hand over (loot arriving later is forwarded) ...
        if w.resilient:  # ... unless a recovery halted it and it was not resumed yet
            w._merge_mailbox()
            if w.bag is not None:
                w.bag.submit(w.result)
        w.report_left()


def on_members(members: list[int], join: bool, reply: GlobalRef[Any] | None) -> None:
    """Adopt the places ``members`` (immediate pool); ``join``: this place was just added by
    a grow.  Answers ``reply`` (a broadcast's box), if any."""
    w = current_worker()
    if join:
        w.joined = True  # a place added by a grow: idle, it registers on its lifelines
    w.set_members(members)
    if reply is not None:
        immediate_async_at(reply.home, deliver, reply, None, w.me)


def halt_request(reply: GlobalRef[Any]) -> None:
    """Place 0 halts this place for a recovery (immediate pool): answer with the report."""
    report = halt()
    immediate_async_at(reply.home, deliver, reply, report, report.place)


def halt() -> HaltReport:
    """Halt this place's worker for a recovery and report its exact state.

    Runs on the immediate pool (the worker pool's thread may be the worker itself), so every
    wait of the worker ends on ``halted``: a ``process`` call, a steal, a transfer's record.

    The worker stops between two ``process`` calls; thieves are refused; answers still due
    and loot of this round that arrives later are left to the store.
    """
    w = current_worker()
    with w.lock:
        w.halted = True
        w.answered.notify_all()
        while w.active:
            w.answered.wait(POLL_S)
        waiting = list(w.thieves)
        w.thieves.clear()
        w.lifeline_thieves.clear()
        w.activated.clear()
        w.pending.clear()
        w.current = None
    refuse_thieves(waiting)
    seq, consumed = w.snapshot()
    unconfirmed = w.client.take_unconfirmed()
    bag = w.bag
    return HaltReport(w.me, seq, bag, w.result, consumed,
                      bag is not None and not bag.is_empty(), unconfirmed)


def resume(epoch: int, members: list[int]) -> None:
    """Start round ``epoch`` after a recovery (a counted task): the worker goes on."""
    w = current_worker()
    with w.lock:
        if w.leaving:
            return  # a shrink released this place meanwhile; it handed everything over
        w.epoch = epoch
        w.halted = False
        w.active = w.joined = True
    w.set_members(members)
    w.run()
