"""The GLB worker of a place: process, answer thieves, steal, wait on lifelines.

Algorithm: Saraswat, Kambadur, Kodali, Grove, Krishnamoorthy, "Lifeline-based global load
balancing", PPoPP 2011, as in X10's GLB and Posner's LifelineGLB for APGAS.

One worker per place (the GIL makes more pointless).  Its loop::

    while work or loot:
        bag.process(n, result)            # n units, then...
        answer random thieves             # loot (or "none") back over the immediate pool
        feed lifeline thieves             # loot as a counted async_at: it restarts them
    steal: w random victims, one at a time, waiting for each answer
    wait for the answers still due, register on the lifeline buddies, go idle (the task ends)

Termination: the worker runs as a task counted by one ``finish`` at place 0.  Steal requests
and random-steal answers are uncounted (immediate pool): a random answer may carry loot, which
is safe because the thief's worker task stays alive until the answer arrives.  Lifeline loot
goes to an idle place, so it is a counted task, which becomes that place's worker.  When every
worker is idle and no loot is in flight, the finish ends.

Steal attempts: each random steal request carries an attempt id (a counter of the thief), which
the victim sends back with its answer.  The thief waits for the current attempt's answer while
the victim lives.  When the victim dies, the attempt is dropped (a dead place never answers);
when it is released by a shrink, the thief moves on, but the attempt stays *pending*: a
released place answers every request that reached it before it leaves, so the answer still
comes, possibly late and possibly with loot.  Loot never goes anywhere but the mailbox,
whichever attempt it answers, and the worker merges its mailbox before it processes, steals
again, goes idle or hands its bag over.  A worker never goes idle, nor finishes leaving, while
an attempt of its is pending: so no random loot can reach a place whose worker task has ended
(which the finish would not wait for).  While it waits for answers, a worker refuses thieves
at once (it is stealing or leaving), so waits never form a cycle.

Malleability: a place about to be released gets ``leaving``; its worker hands its whole bag
to a continuing place (counted), answers its thieves, reports its partial result to place 0
and stops.  Membership changes rewire the lifeline graph everywhere.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apgaspy import (
    BadPlaceError,
    DeadPlaceError,
    GlobalRef,
    async_at,
    here,
    immediate_async_at,
    place,
    places,
)

from ._bag import Bag
from ._config import glb_setting
from ._fold import Fold
from ._lifeline import heir, lifeline_graph, steal_victim
from ._resilience import HaltReport, _on_backup, _on_pass, _on_split, _retire, store

__all__ = ["PlaceStats", "Worker", "Params"]

log = logging.getLogger("glb")

_POLL_S = 0.05  # seconds between checks that the victims of pending steal attempts live


@dataclass
class Params:
    """GLB parameters of one computation (see ``glb._config``)."""

    n: int
    w: int
    l: int  # noqa: E741 - the paper's name
    z: int | None
    resilient: bool = False
    backup_interval: float = 1.0


@dataclass
class PlaceStats:
    """What one place did during a computation.

    Attributes:
        place: the place id.
        processed: units of work processed (``n`` per ``process`` call, at most).
        process_calls: calls of ``Bag.process``.
        steals_tried, steals_won: random steal attempts made, and those that brought loot.
        steals_late: loot that answered an attempt the thief had given up on (its victim was
            released meanwhile); it was merged like any other loot.
        lifeline_steals: lifeline registrations sent to buddies.
        lifeline_loot: loot received from lifeline buddies.
        lifeline_answers: loot sent to lifeline thieves.
        random_answers: loot sent to random thieves.
        busy_s: seconds spent in ``process``; idle_s: the rest of the computation's time.
        released: true for a place released by a shrink during the computation.
        died: true for a place that died during a resilient computation (its work and
            partial result were recovered; its other figures are lost with it).
    """

    place: int
    processed: int = 0
    process_calls: int = 0
    steals_tried: int = 0
    steals_won: int = 0
    steals_late: int = 0
    lifeline_steals: int = 0
    lifeline_loot: int = 0
    lifeline_answers: int = 0
    random_answers: int = 0
    busy_s: float = 0.0
    idle_s: float = 0.0
    released: bool = False
    died: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict (for JSON)."""
        return dict(self.__dict__)


class Worker:
    """The GLB state of one place (one per place, found by messages through ``_worker()``)."""

    def __init__(self, params: Params, result: Fold, bag: Bag | None, members: list[int],
                 epoch: int = 0) -> None:
        self.params = params
        self.result = result
        self.bag = bag
        self.lock = threading.Lock()
        self.active = False
        self.stealing = False  # out of work, asking others: thieves get "no" at once
        self.leaving = False
        self.leave_reply: GlobalRef[Any] | None = None
        self.mailbox: list[Bag] = []  # loot that arrived while the worker runs
        self.thieves: deque[tuple[int, int]] = deque()  # (thief, attempt) waiting for answers
        self.lifeline_thieves: list[int] = []  # idle places registered on this one
        self.activated: set[int] = set()  # buddies this place is registered on
        self.members: list[int] = []
        self.buddies: list[int] = []
        self.rng = random.Random(here().id * 7919 + 17)
        self.answered = threading.Condition(self.lock)  # answers, loot, an order to leave
        self.attempt = 0  # id of this place's latest random steal attempt
        self.current: int | None = None  # the attempt the worker is waiting for
        self.pending: dict[int, int] = {}  # unanswered attempts: id -> victim
        self.reply_timeout = float(glb_setting("REPLY_TIMEOUT"))
        self.me = here().id
        self.stats = PlaceStats(self.me)
        self.started = time.perf_counter()
        self.joined = False  # has taken part (run, or joined by a grow): may register lifelines
        # resilience (glb._resilience): the round, a halt, and what the store must know
        self.resilient = params.resilient
        self.epoch = epoch
        self.halted = False
        self.seq = 0  # number of this place's latest state sent to the store
        self.consumed: set[Any] = set()  # records taken into this place's state
        self.transfers = 0  # counter of this place's record ids
        self.confirmed: dict[Any, bool] = {}  # the store's answers to this place's transfers
        self.unconfirmed: list[tuple[Any, Bag]] = []  # transfers a halt cut short
        self.backup_due = time.monotonic() + params.backup_interval
        self.set_members(members)

    # ------------------------------------------------------------------ membership
    def set_members(self, members: list[int]) -> None:
        """Adopt a new list of places: recompute the lifelines, forget departed places."""
        with self.lock:
            self.members = sorted(members)
            graph = lifeline_graph(self.members, self.params.l, self.params.z) \
                if self.me in self.members else {}
            self.buddies = graph.get(self.me, [])
            self.lifeline_thieves = [t for t in self.lifeline_thieves if t in self.members]
            self.activated &= set(self.buddies)
            idle = self.joined and not self.active and not self.leaving and not self.halted
        if idle:
            self.register_lifelines()

    # ------------------------------------------------------------------ the loop
    def start(self) -> None:
        """Run as the worker (a counted task), unless a worker already runs here."""
        with self.lock:
            self.joined = True
            if self.active or self.leaving:
                return
            self.active = True
        self.run()

    def run(self) -> None:
        """The worker loop; returns when this place is out of work (or leaves)."""
        params = self.params
        stats = self.stats
        while True:
            self._merge_mailbox()
            bag = self.bag
            while bag is not None and not bag.is_empty() and not self.leaving \
                    and not self.halted:
                t = time.perf_counter()
                bag.process(params.n, self.result)
                stats.busy_s += time.perf_counter() - t
                stats.process_calls += 1
                stats.processed += params.n
                self._distribute()
                if self.resilient and time.monotonic() >= self.backup_due:
                    self._backup()
                self._merge_mailbox()
                bag = self.bag
            if self.halted:
                self._stop()
                return
            if self.leaving:
                self._leave()
                return
            if self._steal():
                continue
            with self.lock:
                if self.mailbox:
                    continue  # lifeline loot arrived while we were stealing
                if self.leaving or self.halted:
                    continue  # the loop's head hands everything over, or stops
                self.active = False
                waiting = list(self.thieves)
                self.thieves.clear()
            _answer_all(waiting)
            self.register_lifelines()
            return

    def _merge_mailbox(self) -> None:
        if not self.mailbox:
            return
        with self.lock:
            loot, self.mailbox = self.mailbox, []
        for bag in loot:
            self._absorb(bag)

    def _absorb(self, loot: Bag) -> None:
        loot.submit(self.result)  # a bag's inner partial result stays where it was made
        if self.bag is None:
            self.bag = loot
        else:
            self.bag.merge(loot)

    def _distribute(self) -> None:
        """Answer random thieves, then feed lifeline thieves, while the bag can be split."""
        if not self.thieves and not self.lifeline_thieves:
            return
        with self.lock:
            waiting = list(self.thieves)
            self.thieves.clear()
        bag = self.bag
        for thief, attempt in waiting:
            loot = bag.split(False) if bag is not None and bag.is_splittable() else None
            if loot is not None and loot.is_empty():
                loot = None
            if loot is not None and self.resilient:
                self._give(thief, loot, "answer", attempt)
                self.stats.random_answers += 1
            elif _answer(thief, attempt, loot):
                if loot is not None:
                    self.stats.random_answers += 1
            elif loot is not None and bag is not None:
                bag.merge(loot)  # the thief is gone: keep the work
        while bag is not None and self.lifeline_thieves and bag.is_splittable():
            with self.lock:
                if not self.lifeline_thieves:
                    break
                thief = self.lifeline_thieves.pop(0)
            loot = bag.split(False)
            if loot is None or loot.is_empty():
                with self.lock:
                    self.lifeline_thieves.insert(0, thief)
                break
            if self.resilient:
                self._give(thief, loot, "deal", None)
                self.stats.lifeline_answers += 1
                continue
            try:
                async_at(thief, _deal, loot, self.me)  # counted: it restarts the thief
                self.stats.lifeline_answers += 1
            except (BadPlaceError, DeadPlaceError):
                bag.merge(loot)  # the thief left meanwhile: keep the work

    # ------------------------------------------------------------------ stealing
    def _steal(self) -> bool:
        """Up to w random steals, one at a time; True when loot was obtained.

        While stealing, this place has nothing to give: thieves are refused at once (two
        places stealing from each other would otherwise wait for each other forever).
        """
        with self.lock:
            self.stealing = True
            waiting = list(self.thieves)
            self.thieves.clear()
        _answer_all(waiting)
        try:
            return self._steal_attempts()
        finally:
            with self.lock:
                self.stealing = False

    def _steal_attempts(self) -> bool:
        """The random steals; True when there is loot in the mailbox or an order to leave.

        Returns False (the worker may go idle) only once no attempt is pending any more.
        """
        for _ in range(self.params.w):
            with self.lock:
                if self.mailbox or self.leaving or self.halted:
                    return True
            victim = _pick_victim(self)
            if victim is None:
                break
            with self.lock:
                self.attempt += 1
                attempt = self.current = self.attempt
                self.pending[attempt] = victim
            try:
                immediate_async_at(victim, _on_steal_request, self.me, attempt)
            except (BadPlaceError, DeadPlaceError):
                with self.lock:
                    self.pending.pop(attempt, None)
                    self.current = None
                continue
            self.stats.steals_tried += 1
            self.await_answers(attempt)
            with self.lock:
                self.current = None
        self.await_answers(None)
        with self.lock:
            return bool(self.mailbox) or self.leaving or self.halted

    def await_answers(self, attempt: int | None) -> None:
        """Wait for the answer to steal attempt ``attempt``, or (``None``) to every pending one.

        Checks every ``_POLL_S`` (0.05) seconds that the victims still live: the attempts of a
        dead victim are dropped (no answer will come).  Waiting for one attempt also ends
        when loot reached the mailbox another way, when this place is to leave, or when the
        victim was released by a shrink (its answer is still to come; the attempt stays
        pending).  Waiting for every attempt ends at the latest after ``GLB_REPLY_TIMEOUT``
        seconds: the attempts still pending are then dropped with an error in the log (their
        loot, if any ever comes, would be late for this computation).

        Args:
            attempt: an attempt id of this place, or ``None`` for all pending attempts.
        """
        deadline = time.monotonic() + self.reply_timeout

        def done() -> bool:  # with the lock held
            if self.halted:
                return True  # the store takes over whatever answers are still due
            if attempt is None:
                return not self.pending
            return attempt not in self.pending or bool(self.mailbox) or self.leaving

        while True:
            with self.lock:
                if done():
                    return
                self.answered.wait(_POLL_S)
                if done():
                    return
                victims = dict(self.pending)
            gone = {a for a, v in victims.items() if _is_dead(v)}
            if gone:
                with self.lock:
                    for a in gone:
                        self.pending.pop(a, None)
                log.info("GLB place(%d): victims %s died; their answers will not come",
                         self.me, sorted({victims[a] for a in gone}))
            if attempt is not None and victims.get(attempt) not in _live_places():
                return  # released (or dead): move on; a late answer goes to the mailbox
            if time.monotonic() > deadline:
                if attempt is None:
                    with self.lock:
                        lost, self.pending = self.pending, {}
                    log.error("GLB place(%d): no answer to steal attempts %s within %s s",
                              self.me, lost, self.reply_timeout)
                return

    def register_lifelines(self) -> None:
        """Register on every lifeline buddy not registered on yet (uncounted requests)."""
        with self.lock:
            todo = [b for b in self.buddies if b not in self.activated]
            self.activated.update(todo)
        for buddy in todo:
            try:
                immediate_async_at(buddy, _on_lifeline_request, self.me)
                self.stats.lifeline_steals += 1
            except (BadPlaceError, DeadPlaceError):
                with self.lock:
                    self.activated.discard(buddy)

    # ------------------------------------------------------------------ leaving
    def _leave(self) -> None:
        """Answer thieves, wait for the answers to this place's own pending steal attempts,
        then hand all work (the bag and the mailbox) to a continuing place and report to
        place 0."""
        with self.lock:
            waiting = list(self.thieves)
            self.thieves.clear()
            self.lifeline_thieves.clear()
        _answer_all(waiting)  # first: a thief must not wait for our own waits
        self.await_answers(None)  # late loot lands in the mailbox: it goes with the rest
        with self.lock:
            self.active = False
            loot, self.mailbox = self.mailbox, []
        for bag in loot:
            self._absorb(bag)
        if self.bag is not None:
            self.bag.submit(self.result)
            bag, self.bag = self.bag, None
            if not bag.is_empty():
                dest = _heir(self)
                if self.resilient:
                    self._give(dest, bag, "deal", None)
                else:
                    async_at(dest, _deal, bag, self.me)  # counted: the work stays tracked
        self._report_left()

    def _report_left(self) -> None:
        reply = self.leave_reply
        if reply is not None:
            self.stats.released = True
            self.stats.idle_s = time.perf_counter() - self.started - self.stats.busy_s
            if self.resilient:
                with self.lock:
                    consumed = frozenset(self.consumed)
                left, self.bag = self.bag, None  # work of a halted place (see _on_leave)
                if left is not None and left.is_empty():
                    left = None
                immediate_async_at(reply.home, _retire, self.me, self.result, self.stats,
                                   consumed, left, reply)
            else:
                immediate_async_at(reply.home, _deliver, reply, (self.result, self.stats),
                                   self.me)
            self.leave_reply = None

    # ------------------------------------------------------------------ resilience
    def _snapshot(self) -> tuple[int, frozenset]:
        """Merge the mailbox and number this state: ``(seq, consumed)``.  Worker thread
        only (or a halted worker); the bag and result are then this state."""
        with self.lock:
            loot, self.mailbox = self.mailbox, []
            consumed = frozenset(self.consumed)
            self.seq += 1
            seq = self.seq
        for bag in loot:
            self._absorb(bag)
        return seq, consumed

    def _backup(self) -> None:
        """Send this place's state to the store (an immediate message; not at place 0)."""
        self.backup_due = time.monotonic() + self.params.backup_interval
        if self.me == 0:
            return
        seq, consumed = self._snapshot()
        immediate_async_at(0, _on_backup, self.me, seq, self.bag, self.result, consumed)

    def new_record(self) -> tuple[int, int]:
        """A new record id of this place: ``(place, counter)``."""
        with self.lock:
            self.transfers += 1
            return (self.me, self.transfers)

    def confirm(self, x: Any, send: Callable[[], Any]) -> bool | None:
        """Send a transfer's record to the store with ``send`` and wait for its answer.

        Returns:
            The store's answer (False: this place was taken for dead, its backup with the
            loot in it was taken over), or ``None`` when a recovery halted this place before
            the answer came (the halt report hands the loot to the store).  Either way the
            caller does not send the loot.

        Raises:
            TimeoutError: no answer within ``GLB_REPLY_TIMEOUT`` seconds.
        """
        send()
        deadline = time.monotonic() + self.reply_timeout
        with self.lock:
            while x not in self.confirmed:
                if self.halted:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"GLB place({self.me}): place 0 did not record "
                                       f"transfer {x} within {self.reply_timeout} s")
                self.answered.wait(min(left, _POLL_S))
            return self.confirmed.pop(x)

    def _give(self, dest: int, loot: Bag, kind: str, attempt: int | None) -> None:
        """Send ``loot``, just split off this place's bag, to ``dest``: first its record
        (with this place's state after the split) to the store, then the loot itself
        (worker thread; a deal inside a counted task).  A destination that is gone leaves the
        record open: a recovery deals it again."""
        x = self.new_record()
        if self.me == 0:
            store().record(x, loot, dest)
        else:
            seq, consumed = self._snapshot()
            self.backup_due = time.monotonic() + self.params.backup_interval
            bag, result = self.bag, self.result
            answer = self.confirm(x, lambda: immediate_async_at(
                0, _on_split, self.me, seq, bag, result, consumed, x, loot, dest))
            if answer is None:
                with self.lock:
                    self.unconfirmed.append((x, loot))  # goes with the halt report
                return
            if not answer:
                return  # taken for dead: the loot is in the backup a recovery took over
        try:
            if kind == "answer":
                immediate_async_at(dest, _on_steal_answer, loot, attempt, self.me, x,
                                   self.epoch)
            else:
                async_at(dest, _deal, loot, self.me, x, self.epoch)
        except (BadPlaceError, DeadPlaceError):
            log.info("GLB place(%d): loot %s for place(%d) stays with the store (the place is "
                     "gone)", self.me, x, dest)

    def _stop(self) -> None:
        """The worker loop ends for a halt (the halting thread waits for this)."""
        with self.lock:
            self.active = False
            waiting = list(self.thieves)
            self.thieves.clear()
            self.answered.notify_all()
        _answer_all(waiting)

    def _takes(self, x: Any, epoch: int) -> bool:
        """Whether loot of record ``x`` from round ``epoch`` may enter this place's state
        (lock held): not after this place was halted in that round, nor from an older round;
        loot of a newer round waits in the mailbox for the resume.  Counts it as consumed."""
        if x is None or not self.resilient:
            return True
        if epoch < self.epoch or (epoch == self.epoch and self.halted):
            return False
        self.consumed.add(x)
        return True

    def finish_stats(self) -> PlaceStats:
        """Close this place's statistics at the end of the computation."""
        self.stats.idle_s = max(0.0, time.perf_counter() - self.started - self.stats.busy_s)
        return self.stats


# ---------------------------------------------------------------------- messages
# Module-level functions: they travel by name.  ``_worker()`` resolves the place's instance.

_CURRENT: dict[str, Worker] = {}


def _live_places() -> set[int]:
    return {p.id for p in places()}


def _is_dead(p: int) -> bool:
    """True when place ``p`` died (as opposed to: live, or released by a shrink)."""
    try:
        place(p)
    except DeadPlaceError:
        return True
    except BadPlaceError:
        return False
    return False


def _pick_victim(worker: Worker) -> int | None:
    with worker.lock:
        members = list(worker.members)
    return steal_victim(worker.me, members, worker.rng)


def _heir(worker: Worker) -> int:
    with worker.lock:
        members = list(worker.members)
    return heir(worker.me, members)


def _answer(thief: int, attempt: int, loot: Bag | None) -> bool:
    """Answer ``thief``'s steal ``attempt`` with ``loot`` (or ``None``); False when the thief
    is gone (the caller keeps the loot)."""
    try:
        immediate_async_at(thief, _on_steal_answer, loot, attempt, here().id)
    except (BadPlaceError, DeadPlaceError):
        return False
    return True


def _answer_all(waiting: list[tuple[int, int]]) -> None:
    """Refuse every (thief, attempt) of ``waiting``."""
    for thief, attempt in waiting:
        _answer(thief, attempt, None)


def _on_steal_request(thief: int, attempt: int) -> None:
    w = _worker()
    with w.lock:
        if w.active and not w.stealing and not w.leaving:
            w.thieves.append((thief, attempt))  # answered after the current process() call
            return
    _answer(thief, attempt, None)


def _on_steal_answer(loot: Bag | None, attempt: int, victim: int, x: Any = None,
                     epoch: int = 0) -> None:
    """A victim's answer to steal ``attempt`` (immediate pool): ``loot`` or ``None``.

    Loot is never dropped: whether it answers the attempt the worker waits for or an older
    one, it goes to the mailbox, which the worker merges before anything else.  In a resilient
    computation the loot is record ``x`` of round ``epoch`` in the store; a place that went
    idle, or was halted, leaves it to the store (which deals it again).
    """
    w = _worker()
    with w.lock:
        w.pending.pop(attempt, None)
        if loot is not None and x is not None and (
                (not w.active and epoch == w.epoch) or not w._takes(x, epoch)):
            w.answered.notify_all()
            return
        if loot is not None:
            w.mailbox.append(loot)
            w.stats.steals_won += 1
            if attempt != w.current:
                w.stats.steals_late += 1
            if not w.active:  # only after a victim was given up for dead, or a timeout
                log.error("GLB place(%d): loot from place(%d) arrived after this place went "
                          "idle (steal attempt %d)", w.me, victim, attempt)
        w.answered.notify_all()
    if x is not None and loot is not None and w.me == 0:
        store().close(x)


def _on_lifeline_request(thief: int) -> None:
    w = _worker()
    with w.lock:
        if not w.leaving and thief in w.members and thief not in w.lifeline_thieves:
            w.lifeline_thieves.append(thief)


def _deal(loot: Bag, giver: int, x: Any = None, epoch: int = 0) -> None:
    """Lifeline loot (a counted task): becomes the worker if this place is idle.

    In a resilient computation the loot is record ``x`` of round ``epoch`` in the store: loot
    this place may not take (see ``Worker._takes``) is left to the store; loot of a newer round
    than this halted place's waits in the mailbox for the resume; a leaving place passes it
    on to its heir as a new record.
    """
    w = _worker()
    with w.lock:
        w.activated.discard(giver)
        leaving = w.leaving
        if not leaving:
            if not w._takes(x, epoch):
                return
            w.stats.lifeline_loot += 1
            w.mailbox.append(loot)
            start = not w.active and not w.halted
            if start:
                w.active = w.joined = True
            else:
                w.answered.notify_all()
    if leaving:
        _pass_on(w, loot, x, epoch)
        return
    if x is not None and w.me == 0:
        store().close(x)
    if start:
        w.run()


def _pass_on(w: Worker, loot: Bag, x: Any, epoch: int) -> None:
    """A leaving place forwards lifeline loot to its heir (counted), resilient or not."""
    dest = _heir(w)
    if x is None:
        async_at(dest, _deal, loot, w.me)
        return
    y = w.new_record()
    if not w.confirm(y, lambda: immediate_async_at(0, _on_pass, w.me, x, y, loot, dest)):
        return  # x (or y, if the pass came first) is open in the store, which deals it
    try:
        async_at(dest, _deal, loot, w.me, y, epoch)
    except (BadPlaceError, DeadPlaceError):
        pass  # record y stays open: a recovery deals it again


def _on_leave(continuing: list[int], reply: GlobalRef[Any]) -> None:
    """At a place to be released (immediate pool): stop, hand over, report."""
    w = _worker()
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
        w._report_left()


def _on_members(members: list[int], join: bool, reply: GlobalRef[Any] | None) -> None:
    w = _worker()
    if join:
        w.joined = True  # a place added by a grow: idle, it registers on its lifelines
    w.set_members(members)
    if reply is not None:
        immediate_async_at(reply.home, _deliver, reply, None, w.me)


def _deliver(reply: GlobalRef[Any], value: Any, sender: int | None = None) -> None:
    reply.get()(value, sender)


def _worker() -> Worker:
    return _CURRENT["worker"]


def _confirmed(x: Any, ok: bool) -> None:
    """The store's answer to this place's transfer ``x`` (immediate pool)."""
    w = _worker()
    with w.lock:
        w.confirmed[x] = ok
        w.answered.notify_all()


def _halt_request(reply: GlobalRef[Any]) -> None:
    """Place 0 halts this place for a recovery (immediate pool): answer with the report."""
    report = _halt()
    immediate_async_at(reply.home, _deliver, reply, report, report.place)


def _halt() -> HaltReport:
    """Halt this place's worker for a recovery and report its exact state.

    Runs on the immediate pool (the worker pool's thread may be the worker itself), so every
    wait of the worker ends on ``halted``: a ``process`` call, a steal, a transfer's record.

    The worker stops between two ``process`` calls; thieves are refused; answers still due
    and loot of this round that arrives later are left to the store.
    """
    w = _worker()
    with w.lock:
        w.halted = True
        w.answered.notify_all()
        while w.active:
            w.answered.wait(_POLL_S)
        waiting = list(w.thieves)
        w.thieves.clear()
        w.lifeline_thieves.clear()
        w.activated.clear()
        w.pending.clear()
        w.current = None
    _answer_all(waiting)
    seq, consumed = w._snapshot()
    with w.lock:
        unconfirmed, w.unconfirmed = w.unconfirmed, []
    bag = w.bag
    return HaltReport(w.me, seq, bag, w.result, consumed,
                      bag is not None and not bag.is_empty(), unconfirmed)


def _resume(epoch: int, members: list[int]) -> None:
    """Start round ``epoch`` after a recovery (a counted task): the worker goes on."""
    w = _worker()
    with w.lock:
        if w.leaving:
            return  # a shrink released this place meanwhile; it handed everything over
        w.epoch = epoch
        w.halted = False
        w.active = w.joined = True
    w.set_members(members)
    w.run()


def install(worker: Worker) -> Worker:
    """Make ``worker`` this place's worker (the one messages reach)."""
    _CURRENT["worker"] = worker
    return worker


def make_worker(params: Params, result_factory: Callable[[], Fold], bag: Bag | None,
                members: list[int], epoch: int = 0) -> Worker:
    """Create and install this place's worker (in round ``epoch`` of a resilient run)."""
    return install(Worker(params, result_factory(), bag, members, epoch))


@dataclass
class Replies:
    """Place 0's collector of immediate answers (a GlobalRef points here).

    Attributes:
        expected: how many answers complete the collection.
        values: the answers, in arrival order.
        senders: the places that answered (those that said who they are).
        event: set once ``expected`` answers arrived.
    """

    expected: int
    values: list[Any] = field(default_factory=list)
    senders: set[int] = field(default_factory=set)
    event: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, value: Any, sender: int | None = None) -> None:
        """Record ``value``, the answer of place ``sender`` (an id, or ``None``)."""
        with self.lock:
            self.values.append(value)
            if sender is not None:
                self.senders.add(sender)
            if len(self.values) >= self.expected:
                self.event.set()
