"""The GLB worker of a place: process, answer thieves, steal, wait on lifelines.

Algorithm: Saraswat, Kambadur, Kodali, Grove, Krishnamoorthy, "Lifeline-based global load
balancing", PPoPP 2011, as in X10's GLB and Posner's LifelineGLB for APGAS.

A place runs ``workers`` (W) worker threads, 1 by default.  Worker 0 is the place's task and
the only one that talks to other places; its loop::

    while work or loot:
        bag.process(n, result)            # n units, then...
        answer random thieves             # loot (or "none") back over the immediate pool
        feed lifeline thieves             # loot as a counted async_at: it restarts them
    steal: w random victims, one at a time, waiting for each answer
    wait for the answers still due, register on the lifeline buddies, go idle (the task ends)

W > 1 follows the multi-worker GLB of Yamashita and Kamada ("Introducing a multithread and
multistage mechanism for the global load balancing library of X10", IPSJ Journal of
Information Processing 24(2), 2016), as Posner's LifelineGLB runs it: every worker owns a
bag, and the place keeps an *intra-place queue* (work for its own idle workers) and an
*inter-place queue* (work for remote thieves and lifeline answers).  Between two ``process``
calls a worker (1) starts an idle worker with half of its bag (or with the intra-place
queue's work), (2) puts half of its bag into the intra-place queue when that is empty, and
(3) puts half into the inter-place queue when a thief found it empty.  A worker whose bag
runs dry takes from the intra-place queue, then the inter-place queue, and otherwise stops
(no message).  Thieves and lifeline answers take work from the inter-place queue (else from
worker 0's bag), so they never interrupt workers 1..W-1; loot goes to the intra-place queue.
The place steals, and goes idle, only when all its workers are dry.  A release, a halt and a
backup first *recall* workers 1..W-1 (each stops after its current ``process`` call) and
gather their bags, both queues and their partial results into worker 0's bag and result, so
that the rest of this module deals with one bag a place, whatever W.  A bag that raises in any
worker stops them all and fails the place's task once, with that exception.

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

Resilience: in a resilient computation the worker's :class:`glb._store_client.StoreClient`
backs its state up at place 0 and records every transfer of loot there before the loot
leaves; a recovery halts the worker (:func:`glb._worker_orders.halt`) and starts it again
(:func:`glb._worker_orders.resume`).

This module holds the worker and the messages of the steal protocol (module-level functions,
which travel by name and find the place's worker through :func:`current_worker`); the
orders place 0 gives a worker (leave, members, halt, resume) are :mod:`glb._worker_orders`,
its statistics :mod:`glb._accounting`.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from apgaspy import (
    BadPlaceError,
    DeadPlaceError,
    GlobalRef,
    async_at,
    here,
    immediate_async_at,
)
from apgaspy.elastic import set_gil_source, set_load_source
from apgaspy.pinning import pinned_worker

from ._accounting import Accounting, account_thread, process_accounted
from ._bag import Bag
from ._config import glb_setting
from ._fold import Fold
from ._gil import adapt_work_units
from ._intra_place import IntraPlace
from ._lifeline import heir, lifeline_graph, steal_victim
from ._liveness import is_dead, live_places
from ._params import Params
from ._replies import deliver
from ._stats import PlaceStats, thread_run_delay_s
from ._store_client import State, StoreClient, install_client

__all__ = ["POLL_S", "Worker", "current_worker", "make_worker", "refuse_thieves", "start"]

log = logging.getLogger("glb")

POLL_S = 0.05  # seconds between checks that the victims of pending steal attempts live


class Worker(IntraPlace):
    """The GLB state of one place (one per place, found by messages through
    :func:`current_worker`): worker 0's bag and result, and (W > 1) the other workers and
    the place's two queues.

    Args:
        params: the computation's parameters (``params.workers`` is W).
        result: worker 0's result (the place's, once the others' are folded in).
        bag: worker 0's initial bag, or ``None``.
        members: the places of the computation.
        epoch: the round of a resilient computation.
        result_factory: makes an empty result, for workers 1..W-1 (default: ``type(result)``
            called without arguments).
    """

    def __init__(self, params: Params, result: Fold, bag: Bag | None, members: list[int],
                 epoch: int = 0, result_factory: Callable[[], Fold] | None = None) -> None:
        self.params = params
        self.result = result
        self.result_factory = result_factory or type(result)
        self.bag = bag
        # W > 1 (module docstring): the other workers, the place's queues, their results
        self.workers = max(1, params.workers)
        self.intra: list[Bag] = []  # work for this place's idle workers
        self.inter: list[Bag] = []  # work for remote thieves and lifeline answers
        self.feed = False  # a thief found the inter-place queue empty: workers, fill it
        self.recalling = False  # workers 1..W-1 stop after their current process() call
        self.running: dict[int, threading.Thread] = {}  # worker index -> its thread
        self.done_results: list[Fold] = []  # results of workers that stopped, for worker 0
        self.failure: BaseException | None = None  # what a bag raised in some worker
        self.failed = False  # the failure was raised: this place takes no more work
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
        self.accounting = Accounting(self.me, self.workers)  # glb._accounting
        self.stats = self.accounting.stats  # the place's figures (worker 0's until the end)
        self.worker_stats = self.accounting.worker_stats  # workers 1..W-1's
        self.joined = False  # has taken part (run, or joined by a grow): may register lifelines
        # resilience (glb._store): the round, a halt, and this place's side of the store
        self.resilient = params.resilient
        self.epoch = epoch
        self.halted = False
        self.client = StoreClient(self.me, self.answered, lambda: self.halted,
                                  params.backup_interval, self.reply_timeout)
        self.set_members(members)
        # the evolving monitor's task mode reads this place's load (docs/guides/evolving.md)
        self._load_mark = (time.perf_counter(), 0.0)
        set_load_source(self.load_percent)
        # and the job's load reports to the scheduler its GIL share (apgaspy.elastic)
        set_gil_source(self.accounting.gil_counters)

    def load_percent(self) -> float:
        """The evolving monitor's ``task`` load of this place, in % (0-100): the share of
        time since the previous call (the first: since the worker was made) that its worker
        spent in ``Bag.process`` while its bag held work another place could take
        (``Bag.is_splittable()`` true before the call; ``stats.splittable_busy_s``).

        A worker busy on work nobody else can take (a sequential chain of tasks, the last
        task of a tree) reads low: one more place would only sit idle.  APGAS for Java's
        task mode, min(100, 100 × queued tasks ÷ workers of the place), reads such a single
        task low as well, with its many workers a place (about 8 % with 12); the plain busy
        share of our one worker would read it 100 %.  With W workers a place, the share is
        that of the W workers together (their splittable busy time over W times the span).
        See docs/guides/evolving.md."""
        now, busy = time.perf_counter(), self.stats.splittable_busy_s
        if self.workers > 1:  # the busy share of the W workers, as min(100, 100 × queued ÷ W)
            busy += sum(ws.splittable_busy_s for ws in self.worker_stats[1:])
        then, busy_then = self._load_mark
        self._load_mark = (now, busy)
        span = (now - then) * self.workers
        return 0.0 if now <= then else min(100.0, 100.0 * (busy - busy_then) / span)

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
        """The worker loop; returns when this place is out of work (or leaves).

        Accounts the CPU time of the calling thread and its wait for a CPU
        (``stats.worker_cpu_s``, ``stats.run_delay_s``) over the loop."""
        cpu, delay = time.thread_time(), thread_run_delay_s()
        # A pinned job: worker 0 (a thread of the place's pool) on the share's first core
        # while it works, on the whole share again afterwards.
        pinned = pinned_worker(0) if self.params.pin_workers else contextlib.nullcontext()
        try:
            with pinned:
                self._loop()
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            account_thread(self.stats, cpu, delay)

    def _loop(self) -> None:
        params = self.params
        stats = self.stats
        multi = self.workers > 1
        n = params.n
        while True:
            self._merge_mailbox()
            bag = self.bag
            last = None  # end of the previous process() call (the GIL share)
            while bag is not None and not bag.is_empty() and not self.leaving \
                    and not self.halted:
                if multi:
                    if self.failure is not None:
                        break
                    self._share(bag)
                t, took, held_c, span_c, last = process_accounted(bag, n, self.result, stats,
                                                                   last)
                if stats.first_work_s is None:
                    stats.first_work_s = t - self.accounting.started
                stats.last_work_s = last[0] - self.accounting.started
                if multi and not bag.is_empty():  # a call cut short by a dry bag says nothing
                    n = adapt_work_units(n, params.n, took, held_c, span_c, self.workers)
                    self.worker_stats[0].work_units = n
                self._distribute()
                if self.resilient and self.client.backup_is_due():
                    self._backup()
                self._merge_mailbox()
                bag = self.bag
            if self.failure is not None:
                raise self.failure
            if multi and not (self.leaving or self.halted) and self._idle_multi():
                continue  # work again, or something for the loop's head
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
            refuse_thieves(waiting)
            self.register_lifelines()
            return

    def _fail(self, exc: BaseException) -> None:
        """Worker 0's task ends with ``exc`` (a bag raised): stop the other workers, refuse
        thieves, take no more work, so that the computation fails once and nothing waits."""
        with self.lock:
            self.failure = self.failure or exc
            self.failed = True
        try:
            self.recall()
        except BaseException:  # noqa: BLE001 - the first failure is the one to report
            log.exception("GLB place(%d): stopping the workers after a failure", self.me)
        with self.lock:
            self.active = False
            waiting = list(self.thieves)
            self.thieves.clear()
            self.lifeline_thieves.clear()
            self.answered.notify_all()
        refuse_thieves(waiting)
        log.error("GLB place(%d): a bag raised %r; this place stops", self.me, exc)

    def _loot(self) -> Bag | None:
        """Work for a thief: the inter-place queue's, else half of worker 0's bag, else
        ``None`` (a thief that finds none asks the workers to fill the queue)."""
        with self.lock:
            if self.inter:
                return self.inter.pop()
        bag = self.bag
        loot = bag.split(False) if bag is not None and bag.is_splittable() else None
        if loot is not None and loot.is_empty():
            loot = None
        if loot is None and self.workers > 1:
            self.feed = True
        return loot

    def _keep(self, loot: Bag) -> None:
        """Take back loot a thief could not receive."""
        if self.bag is not None:
            self.bag.merge(loot)
        else:
            with self.lock:
                self.intra.append(loot)

    def _merge_mailbox(self) -> None:
        if not self.mailbox:
            return
        with self.lock:
            loot, self.mailbox = self.mailbox, []
        for bag in loot:
            if self.workers > 1 and self.bag is not None and not self.bag.is_empty():
                bag.submit(self.result)  # loot goes to the intra-place queue
                with self.lock:
                    self.intra.append(bag)
            else:
                self._absorb(bag)

    def _absorb(self, loot: Bag) -> None:
        loot.submit(self.result)  # a bag's inner partial result stays where it was made
        if self.bag is None:
            self.bag = loot
        else:
            self.bag.merge(loot)

    def _distribute(self) -> None:
        """Answer random thieves, then feed lifeline thieves, while there is work to give
        (:meth:`_loot`)."""
        if not self.thieves and not self.lifeline_thieves:
            return
        with self.lock:
            waiting = list(self.thieves)
            self.thieves.clear()
        for thief, attempt in waiting:
            loot = self._loot()
            if loot is not None and self.resilient:
                self._give(thief, loot, "answer", attempt)
                self.stats.random_answers += 1
            elif answer_thief(thief, attempt, loot):
                if loot is not None:
                    self.stats.random_answers += 1
            elif loot is not None:
                self._keep(loot)  # the thief is gone: keep the work
        while self.lifeline_thieves:
            with self.lock:
                if not self.lifeline_thieves:
                    break
                thief = self.lifeline_thieves.pop(0)
            loot = self._loot()
            if loot is None:
                with self.lock:
                    self.lifeline_thieves.insert(0, thief)
                break
            if self.resilient:
                self._give(thief, loot, "deal", None)
                self.stats.lifeline_answers += 1
                continue
            try:
                async_at(thief, deal, loot, self.me)  # counted: it restarts the thief
                self.stats.lifeline_answers += 1
            except (BadPlaceError, DeadPlaceError):
                self._keep(loot)  # the thief left meanwhile: keep the work

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
        refuse_thieves(waiting)
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
            with self.lock:
                members = list(self.members)
            victim = steal_victim(self.me, members, self.rng)
            if victim is None:
                break
            with self.lock:
                self.attempt += 1
                attempt = self.current = self.attempt
                self.pending[attempt] = victim
            try:
                immediate_async_at(victim, on_steal_request, self.me, attempt)
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

        Checks every ``POLL_S`` (0.05) seconds that the victims still live: the attempts of a
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
                self.answered.wait(POLL_S)
                if done():
                    return
                victims = dict(self.pending)
            gone = {a for a, v in victims.items() if is_dead(v)}
            if gone:
                with self.lock:
                    for a in gone:
                        self.pending.pop(a, None)
                log.info("GLB place(%d): victims %s died; their answers will not come",
                         self.me, sorted({victims[a] for a in gone}))
            if attempt is not None and victims.get(attempt) not in live_places():
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
                immediate_async_at(buddy, on_lifeline_request, self.me)
                self.stats.lifeline_steals += 1
            except (BadPlaceError, DeadPlaceError):
                with self.lock:
                    self.activated.discard(buddy)

    # ------------------------------------------------------------------ leaving
    def _leave(self) -> None:
        """Answer thieves, wait for the answers to this place's own pending steal attempts,
        then hand all work (the bag and the mailbox) to a continuing place and report to
        place 0.  With W > 1 the other workers stop first and their work goes along."""
        self.recall()
        with self.lock:
            waiting = list(self.thieves)
            self.thieves.clear()
            self.lifeline_thieves.clear()
        refuse_thieves(waiting)  # first: a thief must not wait for our own waits
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
                dest = self.heir()
                if self.resilient:
                    self._give(dest, bag, "deal", None)
                else:
                    async_at(dest, deal, bag, self.me)  # counted: the work stays tracked
        self.report_left()

    def report_left(self) -> None:
        """Report this released place's final result and statistics to place 0."""
        reply = self.leave_reply
        if reply is not None:
            self.recall()  # W > 1: the results of the workers that stopped
            self.stats.released = True
            self.finish_stats()
            if self.resilient:
                left, self.bag = self.bag, None  # work of a halted place (see on_leave)
                if left is not None and left.is_empty():
                    left = None
                self.client.retire(reply, self.result, self.stats, left)
            else:
                immediate_async_at(reply.home, deliver, reply, (self.result, self.stats),
                                   self.me)
            self.leave_reply = None

    def heir(self) -> int:
        """The continuing place that inherits this leaving place's work."""
        with self.lock:
            members = list(self.members)
        return heir(self.me, members)

    # ------------------------------------------------------------------ resilience
    def snapshot(self) -> tuple[int, frozenset]:
        """Merge the mailbox and number this state: ``(seq, consumed)``.  Worker thread
        only (or a halted worker); the bag and result are then this state (W > 1: the other
        workers are recalled first, and their bags and results gathered into it)."""
        self.recall()
        with self.lock:
            loot, self.mailbox = self.mailbox, []
            seq, consumed = self.client.next_state()
        for bag in loot:
            self._absorb(bag)
        return seq, consumed

    def _state(self) -> State:
        seq, consumed = self.snapshot()
        return seq, consumed, self.bag, self.result

    def _backup(self) -> None:
        """Send this place's state to the store (an immediate message; not at place 0)."""
        self.client.schedule_backup()
        if self.me == 0:
            return
        seq, consumed = self.snapshot()
        self.client.send_backup(seq, consumed, self.bag, self.result)

    def _give(self, dest: int, loot: Bag, kind: str, attempt: int | None) -> None:
        """Send ``loot``, just split off this place's bag, to ``dest``: first its record
        (with this place's state after the split) to the store, then the loot itself
        (worker thread; a deal inside a counted task).  A destination that is gone leaves the
        record open: a recovery deals it again."""
        x = self.client.record_transfer(loot, dest, self._state)
        if x is None:
            return  # a halt came, or this place was taken for dead: the store has the loot
        try:
            if kind == "answer":
                immediate_async_at(dest, on_steal_answer, loot, attempt, self.me, x,
                                   self.epoch)
            else:
                async_at(dest, deal, loot, self.me, x, self.epoch)
        except (BadPlaceError, DeadPlaceError):
            log.info("GLB place(%d): loot %s for place(%d) stays with the store (the place is "
                     "gone)", self.me, x, dest)

    def _stop(self) -> None:
        """The worker loop ends for a halt (the halting thread waits for this)."""
        self.recall()
        with self.lock:
            self.active = False
            waiting = list(self.thieves)
            self.thieves.clear()
            self.answered.notify_all()
        refuse_thieves(waiting)

    def takes(self, x: Any, epoch: int) -> bool:
        """Whether loot of record ``x`` from round ``epoch`` may enter this place's state
        (lock held): not after this place was halted in that round, nor from an older round;
        loot of a newer round waits in the mailbox for the resume.  Counts it as consumed."""
        if x is None or not self.resilient:
            return True
        if epoch < self.epoch or (epoch == self.epoch and self.halted):
            return False
        self.client.consume(x)
        return True

    def finish_stats(self) -> PlaceStats:
        """Close this place's statistics (:meth:`glb._accounting.Accounting.close`): at the
        end of the computation, or when the place is released."""
        return self.accounting.close(self.params.n)


# ---------------------------------------------------------------------- messages
# Module-level functions: they travel by name.  ``current_worker()`` finds the place's worker.

_CURRENT: dict[str, Worker] = {}


def current_worker() -> Worker:
    """This place's worker (the one messages reach).

    Raises:
        KeyError: no GLB computation has created a worker at this place.
    """
    return _CURRENT["worker"]


def install(worker: Worker) -> Worker:
    """Make ``worker`` this place's worker (the one messages reach), its store client too."""
    install_client(worker.client)
    _CURRENT["worker"] = worker
    return worker


def make_worker(params: Params, result_factory: Callable[[], Fold], bag: Bag | None,
                members: list[int], epoch: int = 0) -> Worker:
    """Create and install this place's worker (in round ``epoch`` of a resilient run)."""
    return install(Worker(params, result_factory(), bag, members, epoch, result_factory))


def answer_thief(thief: int, attempt: int, loot: Bag | None) -> bool:
    """Answer ``thief``'s steal ``attempt`` with ``loot`` (or ``None``); False when the thief
    is gone (the caller keeps the loot)."""
    try:
        immediate_async_at(thief, on_steal_answer, loot, attempt, here().id)
    except (BadPlaceError, DeadPlaceError):
        return False
    return True


def refuse_thieves(waiting: list[tuple[int, int]]) -> None:
    """Refuse every (thief, attempt) of ``waiting``."""
    for thief, attempt in waiting:
        answer_thief(thief, attempt, None)


def on_steal_request(thief: int, attempt: int) -> None:
    """Place ``thief`` asks for work (immediate pool): answered after the current
    ``process`` call, or refused at once when this place is idle, stealing or leaving.  With
    W > 1 (not resilient) work in the inter-place queue answers it at once, from this
    thread; when that is empty the workers are asked to fill it."""
    w = current_worker()
    loot = None
    if w.workers > 1 and not w.resilient:
        with w.lock:
            if w.inter and not w.leaving and not w.halted:
                loot = w.inter.pop()
                w.stats.random_answers += 1
    if loot is not None:
        if not answer_thief(thief, attempt, loot):
            with w.lock:
                w.inter.append(loot)
                w.stats.random_answers -= 1
        return
    with w.lock:
        if w.active and not w.stealing and not w.leaving:
            if w.workers > 1:
                w.feed = True
            w.thieves.append((thief, attempt))  # answered after the current process() call
            return
    answer_thief(thief, attempt, None)


def on_steal_answer(loot: Bag | None, attempt: int, victim: int, x: Any = None,
                    epoch: int = 0) -> None:
    """A victim's answer to steal ``attempt`` (immediate pool): ``loot`` or ``None``.

    Loot is never dropped: whether it answers the attempt the worker waits for or an older
    one, it goes to the mailbox, which the worker merges before anything else.  In a resilient
    computation the loot is record ``x`` of round ``epoch`` in the store; a place that went
    idle, or was halted, leaves it to the store (which deals it again).
    """
    w = current_worker()
    with w.lock:
        w.pending.pop(attempt, None)
        if loot is not None and x is not None and (
                (not w.active and epoch == w.epoch) or not w.takes(x, epoch)):
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
    if loot is not None:
        w.client.took(x)


def on_lifeline_request(thief: int) -> None:
    """Idle place ``thief`` registers on this place's lifeline (immediate pool)."""
    w = current_worker()
    with w.lock:
        if not w.leaving and thief in w.members and thief not in w.lifeline_thieves:
            w.lifeline_thieves.append(thief)


def deal(loot: Bag, giver: int, x: Any = None, epoch: int = 0) -> None:
    """Lifeline loot (a counted task): becomes the worker if this place is idle.

    In a resilient computation the loot is record ``x`` of round ``epoch`` in the store: loot
    this place may not take (see ``Worker.takes``) is left to the store; loot of a newer round
    than this halted place's waits in the mailbox for the resume; a leaving place passes it
    on to its heir as a new record.
    """
    w = current_worker()
    with w.lock:
        w.activated.discard(giver)
        leaving = w.leaving
        if not leaving:
            if not w.takes(x, epoch):
                return
            w.stats.lifeline_loot += 1
            w.mailbox.append(loot)
            start = not w.active and not w.halted and not w.failed
            if start:
                w.active = w.joined = True
            else:
                w.answered.notify_all()
    if leaving:
        _pass_on(w, loot, x, epoch)
        return
    w.client.took(x)
    if start:
        w.run()


def _pass_on(w: Worker, loot: Bag, x: Any, epoch: int) -> None:
    """A leaving place forwards lifeline loot to its heir (counted), resilient or not."""
    dest = w.heir()
    if x is None:
        async_at(dest, deal, loot, w.me)
        return
    y = w.client.record_pass(x, loot, dest)
    if y is None:
        return  # x (or y, if the pass came first) is open in the store, which deals it
    try:
        async_at(dest, deal, loot, w.me, y, epoch)
    except (BadPlaceError, DeadPlaceError):
        pass  # record y stays open: a recovery deals it again


def start() -> None:
    """Run this place's worker (a counted task of a round's finish)."""
    current_worker().start()
