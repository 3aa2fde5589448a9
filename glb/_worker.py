"""The GLB worker of a place: process, answer thieves, steal, wait on lifelines.

Algorithm: Saraswat, Kambadur, Kodali, Grove, Krishnamoorthy, "Lifeline-based global load
balancing", PPoPP 2011, as in X10's GLB and Posner's LifelineGLB for APGAS.

One worker per place (the GIL makes more pointless).  Its loop::

    while work or loot:
        bag.process(n, result)            # n units, then...
        answer random thieves             # loot (or "none") back over the immediate pool
        feed lifeline thieves             # loot as a counted async_at: it restarts them
    steal: w random victims, one at a time, waiting for each answer
    register on the lifeline buddies, go idle (the worker task ends)

Termination: the worker runs as a task counted by one ``finish`` at place 0.  Steal requests
and random-steal answers are uncounted (immediate pool): a random answer may carry loot, which
is safe because the thief's worker task stays alive until the answer arrives.  Lifeline loot
goes to an idle place, so it is a counted task, which becomes that place's worker.  When every
worker is idle and no loot is in flight, the finish ends.

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
    places,
)

from ._bag import Bag
from ._fold import Fold
from ._lifeline import lifeline_graph, steal_victim

__all__ = ["PlaceStats", "Worker", "Params"]

log = logging.getLogger("glb")


@dataclass
class Params:
    """GLB parameters of one computation (see ``glb._config``)."""

    n: int
    w: int
    l: int  # noqa: E741 - the paper's name
    z: int | None


@dataclass
class PlaceStats:
    """What one place did during a computation.

    Attributes:
        place: the place id.
        processed: units of work processed (``n`` per ``process`` call, at most).
        process_calls: calls of ``Bag.process``.
        steals_tried, steals_won: random steal attempts made, and those that brought loot.
        lifeline_steals: lifeline registrations sent to buddies.
        lifeline_loot: loot received from lifeline buddies.
        lifeline_answers: loot sent to lifeline thieves.
        random_answers: loot sent to random thieves.
        busy_s: seconds spent in ``process``; idle_s: the rest of the computation's time.
        released: true for a place released by a shrink during the computation.
    """

    place: int
    processed: int = 0
    process_calls: int = 0
    steals_tried: int = 0
    steals_won: int = 0
    lifeline_steals: int = 0
    lifeline_loot: int = 0
    lifeline_answers: int = 0
    random_answers: int = 0
    busy_s: float = 0.0
    idle_s: float = 0.0
    released: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict (for JSON)."""
        return dict(self.__dict__)


class Worker:
    """The GLB state of one place (one per place, found by messages through ``_worker()``)."""

    def __init__(self, params: Params, result: Fold, bag: Bag | None, members: list[int]) -> None:
        self.params = params
        self.result = result
        self.bag = bag
        self.lock = threading.Lock()
        self.active = False
        self.stealing = False  # out of work, asking others: thieves get "no" at once
        self.leaving = False
        self.leave_reply: GlobalRef[Any] | None = None
        self.mailbox: list[Bag] = []  # loot that arrived while the worker runs
        self.thieves: deque[int] = deque()  # random thieves waiting for an answer
        self.lifeline_thieves: list[int] = []  # idle places registered on this one
        self.activated: set[int] = set()  # buddies this place is registered on
        self.members: list[int] = []
        self.buddies: list[int] = []
        self.rng = random.Random(here().id * 7919 + 17)
        self.steal_answer = threading.Event()
        self.steal_loot: Bag | None = None
        self.me = here().id
        self.stats = PlaceStats(self.me)
        self.started = time.perf_counter()
        self.joined = False  # has taken part (run, or joined by a grow): may register lifelines
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
            idle = self.joined and not self.active and not self.leaving
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
            while bag is not None and not bag.is_empty() and not self.leaving:
                t = time.perf_counter()
                bag.process(params.n, self.result)
                stats.busy_s += time.perf_counter() - t
                stats.process_calls += 1
                stats.processed += params.n
                self._distribute()
                self._merge_mailbox()
                bag = self.bag
            if self.leaving:
                self._leave()
                return
            if self._steal():
                continue
            with self.lock:
                if self.mailbox:
                    continue  # lifeline loot arrived while we were stealing
                if self.leaving:
                    continue  # the loop's head hands everything over
                self.active = False
                waiting = list(self.thieves)
                self.thieves.clear()
            for thief in waiting:
                _answer(thief, None)
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
        for thief in waiting:
            loot = bag.split(False) if bag is not None and bag.is_splittable() else None
            if loot is not None and loot.is_empty():
                loot = None
            if loot is not None:
                self.stats.random_answers += 1
            _answer(thief, loot)
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
        for thief in waiting:
            _answer(thief, None)
        try:
            return self._steal_attempts()
        finally:
            with self.lock:
                self.stealing = False

    def _steal_attempts(self) -> bool:
        for _ in range(self.params.w):
            victim = _pick_victim(self)
            if victim is None:
                return False
            self.steal_answer.clear()
            self.steal_loot = None
            try:
                immediate_async_at(victim, _on_steal_request, self.me)
            except (BadPlaceError, DeadPlaceError):
                continue
            self.stats.steals_tried += 1
            while not self.steal_answer.wait(0.5):
                if victim not in _live_places():
                    break  # it died; its answer will never come
            loot = self.steal_loot
            self.steal_loot = None
            if loot is not None:
                self.stats.steals_won += 1
                self._absorb(loot)
                return True
            if self.mailbox or self.leaving:
                return True
        return False

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
        """Hand all work to a continuing place, answer thieves, report to place 0."""
        with self.lock:
            self.active = False
            waiting = list(self.thieves)
            self.thieves.clear()
            self.lifeline_thieves.clear()
            loot, self.mailbox = self.mailbox, []
        for thief in waiting:
            _answer(thief, None)
        for bag in loot:
            self._absorb(bag)
        if self.bag is not None:
            self.bag.submit(self.result)
            if not self.bag.is_empty():
                dest = _heir(self)
                async_at(dest, _deal, self.bag, self.me)  # counted: the work stays tracked
            self.bag = None
        self._report_left()

    def _report_left(self) -> None:
        reply = self.leave_reply
        if reply is not None:
            self.stats.released = True
            self.stats.idle_s = time.perf_counter() - self.started - self.stats.busy_s
            immediate_async_at(reply.home, _deliver, reply, (self.result, self.stats))
            self.leave_reply = None

    def finish_stats(self) -> PlaceStats:
        """Close this place's statistics at the end of the computation."""
        self.stats.idle_s = max(0.0, time.perf_counter() - self.started - self.stats.busy_s)
        return self.stats


# ---------------------------------------------------------------------- messages
# Module-level functions: they travel by name.  ``_worker()`` resolves the place's instance.

_CURRENT: dict[str, Worker] = {}


def _live_places() -> set[int]:
    return {p.id for p in places()}


def _pick_victim(worker: Worker) -> int | None:
    with worker.lock:
        members = list(worker.members)
    return steal_victim(worker.me, members, worker.rng)


def _heir(worker: Worker) -> int:
    with worker.lock:
        members = [m for m in worker.members if m != worker.me]
    return members[worker.me % len(members)] if members else 0


def _answer(thief: int, loot: Bag | None) -> None:
    try:
        immediate_async_at(thief, _on_steal_answer, loot)
    except (BadPlaceError, DeadPlaceError):
        pass  # the thief left; with loot, this can only happen to a thief that died


def _on_steal_request(thief: int) -> None:
    w = _worker()
    with w.lock:
        if w.active and not w.stealing and not w.leaving:
            w.thieves.append(thief)  # the worker answers after its current process() call
            return
    _answer(thief, None)


def _on_steal_answer(loot: Bag | None) -> None:
    w = _worker()
    w.steal_loot = loot
    w.steal_answer.set()


def _on_lifeline_request(thief: int) -> None:
    w = _worker()
    with w.lock:
        if not w.leaving and thief in w.members and thief not in w.lifeline_thieves:
            w.lifeline_thieves.append(thief)


def _deal(loot: Bag, giver: int) -> None:
    """Lifeline loot (a counted task): becomes the worker if this place is idle."""
    w = _worker()
    with w.lock:
        w.activated.discard(giver)
        w.stats.lifeline_loot += 1
        if w.leaving:
            forward = True
        elif w.active:
            w.mailbox.append(loot)
            return
        else:
            forward = False
            w.active = w.joined = True
            w.mailbox.append(loot)
    if forward:
        async_at(_heir(w), _deal, loot, w.me)
        return
    w.run()


def _on_leave(continuing: list[int], reply: GlobalRef[Any]) -> None:
    """At a place to be released (immediate pool): stop, hand over, report."""
    w = _worker()
    with w.lock:
        w.leaving = True
        w.leave_reply = reply
        w.members = sorted(continuing)
        running = w.active
    if not running:  # idle: nothing to hand over (loot arriving later is forwarded)
        w._report_left()


def _on_members(members: list[int], join: bool, reply: GlobalRef[Any] | None) -> None:
    w = _worker()
    if join:
        w.joined = True  # a place added by a grow: idle, it registers on its lifelines
    w.set_members(members)
    if reply is not None:
        immediate_async_at(reply.home, _deliver, reply, None)


def _deliver(reply: GlobalRef[Any], value: Any) -> None:
    reply.get()(value)


def _worker() -> Worker:
    return _CURRENT["worker"]


def install(worker: Worker) -> Worker:
    """Make ``worker`` this place's worker (the one messages reach)."""
    _CURRENT["worker"] = worker
    return worker


def make_worker(params: Params, result_factory: Callable[[], Fold], bag: Bag | None,
                members: list[int]) -> Worker:
    """Create and install this place's worker."""
    return install(Worker(params, result_factory(), bag, members))


@dataclass
class Replies:
    """Place 0's collector of immediate answers (a GlobalRef points here)."""

    expected: int
    values: list[Any] = field(default_factory=list)
    event: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, value: Any) -> None:
        with self.lock:
            self.values.append(value)
            if len(self.values) >= self.expected:
                self.event.set()
