"""The workers 1..W-1 of a place and its two queues (W > 1): the multi-worker GLB.

Yamashita and Kamada, "Introducing a multithread and multistage mechanism for the global
load balancing library of X10", IPSJ Journal of Information Processing 24(2), 2016, as
Posner's LifelineGLB runs it; the whole scheme is told in :mod:`glb._worker`.  This is the
part of the place's :class:`~glb._worker.Worker` that deals with its own threads::

    any worker, between two process calls     _share: start idle workers (intra queue's
                                              work, else half the bag); fill the intra
                                              queue; fill the inter queue when asked
    worker i = 1..W-1 (a thread)              _work: its bag, then the queues', until dry
    worker 0, its bag dry                     _idle_multi: the queues' work, serve thieves,
                                              wait for the others
    a release, a halt, a backup               recall: stop 1..W-1, gather bags, queues and
                                              results into worker 0's

:class:`IntraPlace` is a mixin: :class:`~glb._worker.Worker` holds the state it reads (the
lock, the queues, the bag) and the two methods it calls (``_distribute``, ``_absorb``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from apgaspy.pinning import pin_thread

from ._accounting import account_thread, process_accounted
from ._bag import Bag
from ._fold import Fold
from ._gil import adapt_work_units
from ._params import Params
from ._stats import WorkerStats, thread_run_delay_s

__all__ = ["IntraPlace"]

_WAIT_S = 0.05  # seconds between checks while worker 0 waits for the other workers


class IntraPlace:
    """Workers 1..W-1 of a place and its intra- and inter-place queues (module docstring);
    the state is the :class:`~glb._worker.Worker`'s."""

    # the Worker's state that this part reads and writes
    params: Params
    workers: int
    me: int
    lock: threading.Lock
    answered: threading.Condition
    bag: Bag | None
    result: Fold
    result_factory: Callable[[], Fold]
    intra: list[Bag]
    inter: list[Bag]
    feed: bool
    recalling: bool
    running: dict[int, threading.Thread]
    done_results: list[Fold]
    failure: BaseException | None
    worker_stats: list[WorkerStats]
    mailbox: list[Bag]
    leaving: bool
    halted: bool
    thieves: deque[tuple[int, int]]
    lifeline_thieves: list[int]

    def _distribute(self) -> None:  # the Worker's: answer thieves, feed lifelines
        raise NotImplementedError

    def _absorb(self, loot: Bag) -> None:  # the Worker's: loot into worker 0's bag
        raise NotImplementedError

    def _share(self, bag: Bag) -> None:
        """Between two ``process`` calls of any worker holding ``bag`` (W > 1): start idle
        workers with the intra-place queue's work or half of ``bag``, fill the intra-place
        queue when it is empty, and the inter-place queue when a thief asked (Yamashita and
        Kamada 2016)."""
        while len(self.running) < self.workers - 1 and not self.recalling:
            with self.lock:
                loot = self.intra.pop() if self.intra else None
            if loot is None:
                loot = bag.split(False) if bag.is_splittable() else None
                if loot is None or loot.is_empty():
                    break
            if not self._start_worker(loot):
                with self.lock:
                    self.intra.append(loot)
                break
        if not self.intra and bag.is_splittable():
            loot = bag.split(False)
            if loot is not None and not loot.is_empty():
                with self.lock:
                    self.intra.append(loot)
                    self.answered.notify_all()
        if self.feed and bag.is_splittable():
            loot = bag.split(False)
            if loot is not None and not loot.is_empty():
                with self.lock:
                    self.inter.append(loot)
                    self.feed = False
                    self.answered.notify_all()

    def _start_worker(self, bag: Bag) -> bool:
        """Start an idle worker (1..W-1) on ``bag``; False when none is idle or a recall is
        under way (the caller keeps ``bag``)."""
        with self.lock:
            if self.recalling or self.failure is not None:
                return False
            idle = [i for i in range(1, self.workers) if i not in self.running]
            if not idle:
                return False
            index = idle[0]
            t = threading.Thread(target=self._work, args=(index, bag), daemon=True,
                                 name=f"glb-worker-{self.me}-{index}")
            self.running[index] = t
            self.worker_stats[index].starts += 1
        t.start()
        return True

    def _work(self, index: int, bag: Bag) -> None:
        """Worker ``index`` (1..W-1): process ``bag``, then the queues' work, until both are
        dry or a recall; leave what is left in the intra-place queue and the result for
        worker 0 (a thread of its own, not a task: worker 0's task outlives it)."""
        ws = self.worker_stats[index]
        result = self.result_factory()
        params = self.params
        n = ws.work_units or params.n
        cpu, delay = time.thread_time(), thread_run_delay_s()
        error: BaseException | None = None
        if params.pin_workers:  # a pinned job: on core index mod len(share) of the place's
            pin_thread(index)   # cores (a thread of its own, which ends with the work)
        try:
            while True:
                last = None
                while not bag.is_empty() and not self.recalling and self.failure is None:
                    self._share(bag)
                    if ws.first_work_at is None:
                        ws.first_work_at = time.time()
                    _, took, held_c, span_c, last = process_accounted(bag, n, result, ws, last)
                    if not bag.is_empty():
                        n = adapt_work_units(n, params.n, took, held_c, span_c, self.workers)
                    ws.work_units = n
                if self.recalling or self.failure is not None:
                    break
                with self.lock:
                    queue = self.intra or self.inter
                    loot = queue.pop() if queue else None
                if loot is None:
                    break
                bag.submit(result)
                loot.submit(result)
                bag = loot
        except BaseException as exc:  # noqa: BLE001 - given to worker 0, which raises it
            error = exc
        finally:
            try:
                bag.submit(result)
            except BaseException as exc:  # noqa: BLE001
                error = error or exc
            account_thread(ws, cpu, delay)
            with self.lock:
                if not bag.is_empty():
                    self.intra.append(bag)
                self.done_results.append(result)
                if error is not None and self.failure is None:
                    self.failure = error
                self.running.pop(index, None)
                self.answered.notify_all()

    def _idle_multi(self) -> bool:
        """Worker 0's bag ran dry (W > 1): take the queues' work, serve thieves from the
        inter-place queue, wait for the other workers.  True when worker 0 has work again or
        the loop's head has something to do (loot, an order, a halt, a failure); False when
        every worker is dry and the queues are empty."""
        while True:
            serve = False
            bag = self.bag
            if bag is not None and not bag.is_empty():
                return True  # work a thief could not take came back
            with self.lock:
                if self.failure is not None or self.mailbox or self.leaving or self.halted:
                    return True
                if self.thieves or self.lifeline_thieves:
                    if self.inter:
                        serve = True
                    elif self.running:
                        self.feed = True
                if not serve:
                    queue = self.intra or self.inter
                    if not queue:
                        if not self.running:
                            return False
                        self.answered.wait(_WAIT_S)
                        continue
                    loot = queue.pop()
            if serve:
                self._distribute()
                continue
            self._absorb(loot)
            return True

    def recall(self) -> None:
        """Stop workers 1..W-1 after their current ``process`` call and gather their bags,
        both queues and their results into worker 0's (worker 0's thread, or a halted place);
        no-op for W = 1."""
        if self.workers == 1:
            return
        with self.lock:
            self.recalling = True
            self.answered.notify_all()
        try:
            while True:
                with self.lock:
                    threads = list(self.running.values())
                if not threads:
                    break
                for t in threads:
                    t.join()
        finally:
            with self.lock:
                self.recalling = False
                loot, self.intra, self.inter = self.intra + self.inter, [], []
                results, self.done_results = self.done_results, []
        for r in results:
            self.result.fold(r)
        for bag in loot:
            self._absorb(bag)
