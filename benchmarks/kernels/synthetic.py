"""LifelineGLB's synthetic benchmark with load phases (``evotree``) as a GLB bag.

Source: the synthetic benchmark of LifelineGLB (Posner et al., the Java library's
``StartSynthetic`` with ``-Dglb.synth=evotree``), written for evolving APGAS programs, whose
parallelism changes while they run.  The work has three phases:

1. **tree 1**: ``tasks_per_worker × workers`` tasks whose CPU time adds up to
   ``workers × g`` ms (one worker per place here, so ``workers`` is the ``-s`` place count the
   work is sized for); each task lasts ``g / tasks_per_worker`` ms on average, spread
   uniformly by ``±variance`` %.
2. **the branch**: once the last task of tree 1 is done, a strictly sequential chain of
   ``branch`` tasks of ``2g / branch`` ms each (each task creates the next: nothing to steal,
   so one place is busy for about ``2g`` ms).
3. **tree 2**: the last task of the branch creates a tree identical to tree 1.

The answer is the number of tasks, ``2 × tasks_per_worker × workers + branch``, whatever the
places, the steals, the shrinks and the grows.

The tree.  A pending part of a tree is a range ``[lo, hi)`` of task indices; splitting a range
halves it, so the ranges form a binary tree whose leaves are the tasks, and a range stands for
a subtree not expanded yet.  (The Java tree grows its children at random; the index ranges
give the same task count and CPU time with a shape that no place count can change.)  A task's
duration comes from a hash of ``(seed, phase, index)``, so it is the same wherever it runs.
Tasks burn wall-clock time in a busy loop on :func:`time.perf_counter` (the whole chunk of one
``process`` call in one loop), so the phases keep their lengths on a loaded machine.  With
``sleep`` (``--sleep``) a ``process`` call waits its tasks' time out in :func:`time.sleep`
instead: this emulates the compute time of many nodes on one machine with few cores (ten
logical nodes on two cores), where busy loops would share the cores and stretch every phase.
GLB still counts the call's time as busy (its load source for the evolving monitor's
``task`` mode), so the monitor sees the same load either way.

One phase change, exactly once.  GLB has no barrier inside a computation, and a program is
malleable only once (one computation), so the three phases run inside **one** computation.
Every place reports the tree-1 tasks it finished to place 0 and waits for the answer
(every ~0.1 s of work, and whenever its tree-1 work runs out; the count not yet reported
travels with the work when it is stolen or moved off a released place).  Place 0 adds them up
and answers whether this report completed tree 1: only one report can, and the place that
sent it starts the branch in its own bag.  Report and answer go over the places' immediate
pools (:func:`apgaspy.immediate_async_at`, as GLB's steal requests do): a counted task or an
``at`` would queue at place 0 behind its GLB worker, which does not return while it has work,
and the two workers would wait for each other.  The branch cannot be split, so no thief
takes it; a shrink that releases its place hands it, whole, to a continuing place (GLB's
``split(True)``).  Its last task turns into tree 2, which spreads by stealing.

Busy trace.  The result (:class:`SynthResult`) carries, besides the count, the seconds each
place spent in tasks during each second since the start, so the load phases can be seen:
every place busy, then one, then every place again.  Seconds are wall-clock (:func:`time.time`),
so places on several hosts need synchronised clocks for the trace (not for the count).

Ballast.  ``ballast`` bytes per pending range (a range is a subtree not expanded yet, the
frontier task of the Java tree) travel with a bag whenever it is pickled, as the Java tasks'
byte arrays do.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from apgaspy import async_at, here, immediate_async_at
from glb import Bag, Fold

__all__ = ["SynthParams", "SynthResult", "SynthBag", "PhaseClock", "expected_tasks",
           "begin_run", "end_run", "report_to_place_0", "DEFAULT_WORK_UNITS"]

DEFAULT_WORK_UNITS = 1 << 20
"""Tasks per ``process`` call at most; in practice a call stops after :data:`CALL_BUDGET_S`
(with the default tasks of 50 µs, 511 tasks would make calls of 25 ms, and with tasks of
a few µs calls of 1-2 ms, where GLB's per-call work weighs more)."""

CALL_BUDGET_S = 0.01
"""Seconds of tasks one ``process`` call burns at most (at least one task)."""

REPORT_EVERY_S = 0.1
"""Seconds between a place's reports of finished tree-1 tasks (while it has tree-1 work)."""

REPORT_TIMEOUT_S = 60.0
"""Seconds a place waits for place 0's answer to a report before it gives up (raises)."""

TREE1, BRANCH, TREE2 = 1, 2, 3
_MASK = (1 << 64) - 1


@dataclass(frozen=True)
class SynthParams:
    """The synthetic workload.

    Attributes:
        g_ms: ``-g``: ms of CPU time per worker in one tree (the tree's length on ``workers``
            places); the branch lasts about ``2 × g_ms``.
        tasks_per_worker: ``-t``: tasks per worker in one tree (≥ 1).
        variance_pct: ``-u``: task durations spread uniformly over ``mean × (1 ± u/100)``,
            0 ≤ u ≤ 100.
        workers: ``-s``: the places (one worker each) the trees are sized for (≥ 1).
        branch: tasks of the sequential chain between the trees (≥ 1).
        mode: ``"evotree"`` (tree, branch, tree) or ``"tree"`` (tree 1 only).
        ballast: ``-b``: bytes per pending range carried when a bag travels (≥ 0).
        seed: seeds the task durations (never the counts).
        sleep: wait the tasks' time out in :func:`time.sleep` instead of a busy loop (the
            emulation of many nodes on few cores, module docstring).
    """

    g_ms: float
    tasks_per_worker: int
    variance_pct: float
    workers: int
    branch: int = 5000
    mode: str = "evotree"
    ballast: int = 0
    seed: int = 0
    sleep: bool = False

    def check(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if not self.g_ms > 0:
            raise ValueError(f"g must be a positive number of ms, got {self.g_ms}")
        if self.tasks_per_worker < 1:
            raise ValueError(f"tasks per worker must be ≥ 1, got {self.tasks_per_worker}")
        if not 0 <= self.variance_pct <= 100:
            raise ValueError(f"variance must be 0..100 %, got {self.variance_pct}")
        if self.workers < 1:
            raise ValueError(f"workers (-s) must be ≥ 1, got {self.workers}")
        if self.branch < 1:
            raise ValueError(f"branch must be ≥ 1 task, got {self.branch}")
        if self.mode not in ("evotree", "tree"):
            raise ValueError(f"mode must be evotree or tree, got {self.mode!r}")
        if self.ballast < 0:
            raise ValueError(f"ballast must be ≥ 0 bytes, got {self.ballast}")

    @property
    def tree_tasks(self) -> int:
        """Tasks of one tree: ``tasks_per_worker × workers``."""
        return self.tasks_per_worker * self.workers

    @property
    def tree_task_s(self) -> float:
        """Mean duration of a tree task in seconds: ``g / tasks_per_worker``."""
        return self.g_ms / 1000.0 / self.tasks_per_worker

    @property
    def branch_task_s(self) -> float:
        """Mean duration of a branch task in seconds: ``2g / branch``."""
        return 2 * self.g_ms / 1000.0 / self.branch


def expected_tasks(p: SynthParams) -> int:
    """The exact answer: ``2 × tree + branch`` for evotree, ``tree`` for the plain tree."""
    return 2 * p.tree_tasks + p.branch if p.mode == "evotree" else p.tree_tasks


def _durations(p: SynthParams, phase: int, lo: int, hi: int, mean_s: float) -> np.ndarray:
    """Durations (s) of tasks ``lo..hi-1`` of ``phase``: splitmix64 of (seed, phase, index)."""
    with np.errstate(over="ignore"):
        z = np.arange(lo, hi, dtype=np.uint64)
        z = z + np.uint64(((p.seed * 4 + phase) * 0x9E3779B97F4A7C15) & _MASK)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    r = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)  # uniform in [0, 1)
    return mean_s * (1.0 + p.variance_pct / 100.0 * (2.0 * r - 1.0))


class SynthResult(Fold):
    """Tasks done, and the seconds each place spent in tasks during each second.

    Attributes:
        tasks: tasks done (an ``int``).
        busy: ``{(place id, second since the start): busy seconds}``.
    """

    __slots__ = ("tasks", "busy")

    def __init__(self) -> None:
        self.tasks = 0
        self.busy: dict[tuple[int, int], float] = {}

    def record(self, place: int, t0: float, start: float, end: float) -> None:
        """Add the busy interval ``[start, end)`` (``time.time()`` seconds) of ``place``,
        cut at the whole seconds since ``t0``."""
        while start < end:
            sec = int((start - t0) // 1)
            cut = min(end, t0 + sec + 1)
            key = (place, sec)
            self.busy[key] = self.busy.get(key, 0.0) + (cut - start)
            start = cut

    def fold(self, other: Fold) -> None:
        if not isinstance(other, SynthResult):
            raise TypeError(f"cannot fold {type(other).__name__} into SynthResult")
        self.tasks += other.tasks
        for k, v in other.busy.items():
            self.busy[k] = self.busy.get(k, 0.0) + v

    def value(self) -> int:
        return self.tasks

    def busy_places(self, threshold: float = 0.5) -> list[int]:
        """For each second since the start, the places busy at least ``threshold`` of it."""
        if not self.busy:
            return []
        last = max(sec for _, sec in self.busy)
        counts = [0] * (last + 1)
        for (_, sec), s in self.busy.items():
            if sec >= 0 and s >= threshold:
                counts[sec] += 1
        return counts

    def busy_seconds(self) -> list[float]:
        """For each second since the start, the place-seconds spent in tasks (≈ busy places)."""
        if not self.busy:
            return []
        last = max(sec for _, sec in self.busy)
        sums = [0.0] * (last + 1)
        for (_, sec), s in self.busy.items():
            if sec >= 0:
                sums[sec] += s
        return sums

    def __getstate__(self) -> tuple[int, dict[tuple[int, int], float]]:
        return self.tasks, self.busy

    def __setstate__(self, state: tuple[int, dict[tuple[int, int], float]]) -> None:
        self.tasks, self.busy = state


# ---------------------------------------------------------------- place 0's phase clock
@dataclass
class PhaseClock:
    """Place 0's record of one run: tree-1 tasks reported, and when each phase ended.

    Attributes:
        target: tree-1 tasks to wait for; reported: those reported so far.
        t0: the run's start (``time.time()``).
        tree1_end, branch_end: ``time.time()`` when tree 1's last task and the branch's last
            task were done (``None`` before).
    """

    target: int
    t0: float
    reported: int = 0
    tree1_end: float | None = None
    branch_end: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


_RUNS: dict[str, PhaseClock] = {}


def begin_run(p: SynthParams) -> tuple[str, float]:
    """At place 0, before the computation: register a run; returns ``(run id, t0)``."""
    run_id = uuid.uuid4().hex
    t0 = time.time()
    _RUNS[run_id] = PhaseClock(p.tree_tasks, t0)
    return run_id, t0


def end_run(run_id: str) -> PhaseClock:
    """At place 0, after the computation: forget the run and return its clock."""
    return _RUNS.pop(run_id)


def _report(run_id: str, done: int) -> bool:
    """At place 0: ``done`` more tree-1 tasks are finished.  True for the one report that
    completes tree 1 (its sender starts the branch); ``None`` if too many were reported (a bag
    bug: the sender raises)."""
    clock = _RUNS[run_id]
    with clock.lock:
        clock.reported += done
        if clock.reported > clock.target:
            return None
        if clock.reported < clock.target:
            return False
        clock.tree1_end = time.time()
        return True


# answers awaited at this place: token -> [event, answer]
_WAITING: dict[int, list[Any]] = {}
_TOKENS = itertools.count()


def _on_report(run_id: str, done: int, sender: int, token: int) -> None:
    """At place 0, on its immediate pool: count the report and answer its sender."""
    answer = _report(run_id, done)
    if sender == 0:
        _on_answer(token, answer)
    else:
        immediate_async_at(sender, _on_answer, token, answer)


def _on_answer(token: int, answer: bool | None) -> None:
    slot = _WAITING[token]
    slot[1] = answer
    slot[0].set()


def report_to_place_0(run_id: str, done: int) -> bool:
    """Report ``done`` finished tree-1 tasks of run ``run_id`` to place 0 and wait for the
    answer: True if this report completed tree 1.

    Raises:
        RuntimeError: place 0 counted more tree-1 tasks than the tree has, or did not answer
            within :data:`REPORT_TIMEOUT_S`.
    """
    token = next(_TOKENS)
    slot: list[Any] = [threading.Event(), None]
    _WAITING[token] = slot
    try:
        immediate_async_at(0, _on_report, run_id, done, here().id, token)
        if not slot[0].wait(REPORT_TIMEOUT_S):
            raise RuntimeError(f"place 0 did not answer a tree-1 report in {REPORT_TIMEOUT_S} s")
    finally:
        del _WAITING[token]
    if slot[1] is None:
        raise RuntimeError(f"more tree-1 tasks reported than tree 1 has (run {run_id})")
    return bool(slot[1])


def _branch_done(run_id: str, when: float) -> None:
    """At place 0: the branch's last task was done at ``when`` (``time.time()``)."""
    clock = _RUNS.get(run_id)
    if clock is not None:
        clock.branch_end = when


# ---------------------------------------------------------------- the bag
class SynthBag(Bag[SynthResult]):
    """Pending synthetic tasks: ranges of tree tasks and, during the branch, the chain.

    Args:
        params: the workload (:class:`SynthParams`).
        run_id: the run's id at place 0 (:func:`begin_run`), for the tree-1 reports.
        t0: the run's start, ``time.time()`` at place 0 (for the busy trace).
        ranges: ``[(phase, lo, hi), ...]``, phase :data:`TREE1` or :data:`TREE2`.
        chain: the next branch task's index, or ``None`` outside the branch.
    """

    DEFAULT_WORK_UNITS = DEFAULT_WORK_UNITS

    def __init__(self, params: SynthParams, run_id: str, t0: float,
                 ranges: list[tuple[int, int, int]], chain: int | None = None) -> None:
        self.p = params
        self.run_id = run_id
        self.t0 = t0
        self.ranges = [r for r in ranges if r[2] > r[1]]
        self.chain = chain
        self.unreported = 0  # tree-1 tasks done here and not yet reported to place 0
        self.last_report = time.perf_counter()

    @classmethod
    def tree1(cls, params: SynthParams, run_id: str, t0: float, index: int = 0,
              count: int = 1) -> SynthBag:
        """Share ``index`` of ``count`` of tree 1 (the whole tree for ``count`` 1)."""
        n = params.tree_tasks
        return cls(params, run_id, t0, [(TREE1, n * index // count, n * (index + 1) // count)])

    # -- GLB protocol
    def process(self, n: int, result: SynthResult) -> None:
        start_wall = time.time()
        start = time.perf_counter()
        deadline = start + CALL_BUDGET_S
        burn = 0.0
        done = 0
        branch_over = False
        while done < n and (done == 0 or start + burn < deadline):
            if self.chain is not None:
                burn += float(_durations(self.p, BRANCH, self.chain, self.chain + 1,
                                         self.p.branch_task_s)[0])
                self.chain += 1
                done += 1
                if self.chain >= self.p.branch:  # the last branch task creates tree 2
                    self.chain = None
                    self.ranges.append((TREE2, 0, self.p.tree_tasks))
                    branch_over = True
                    break
                continue
            if not self.ranges:
                break
            phase, lo, hi = self.ranges[-1]
            budget = deadline - start - burn
            k = max(1, min(hi - lo, n - done, int(budget / self.p.tree_task_s) + 1))
            burn += float(_durations(self.p, phase, lo, lo + k, self.p.tree_task_s).sum())
            if lo + k < hi:
                self.ranges[-1] = (phase, lo + k, hi)
            else:
                self.ranges.pop()
            done += k
            if phase == TREE1 and self.p.mode == "evotree":
                self.unreported += k
        end = start + burn
        if self.p.sleep:
            while (left := end - time.perf_counter()) > 0:
                time.sleep(left)
        else:
            while time.perf_counter() < end:
                pass
        result.tasks += done
        result.record(here().id, self.t0, start_wall, start_wall + burn)
        if branch_over:
            async_at(0, _branch_done, self.run_id, start_wall + burn)
        if self.unreported and (not any(r[0] == TREE1 for r in self.ranges)
                                or time.perf_counter() - self.last_report >= REPORT_EVERY_S):
            self._flush()

    def _flush(self) -> None:
        done, self.unreported = self.unreported, 0
        self.last_report = time.perf_counter()
        if report_to_place_0(self.run_id, done):  # this report completed tree 1
            if self.chain is not None or any(r[0] == TREE1 for r in self.ranges):
                raise RuntimeError("tree 1 completed while this bag still holds some of it")
            self.chain = 0

    def split(self, take_all: bool) -> SynthBag | None:
        if self.is_splittable():
            # the largest range gives its upper half (a subtree)
            i = max(range(len(self.ranges)), key=lambda j: self.ranges[j][2] - self.ranges[j][1])
            phase, lo, hi = self.ranges[i]
            if len(self.ranges) > 1 and hi - lo < 2:
                give = self.ranges.pop(i)
                return SynthBag(self.p, self.run_id, self.t0, [give])
            mid = (lo + hi) // 2
            self.ranges[i] = (phase, lo, mid)
            return SynthBag(self.p, self.run_id, self.t0, [(phase, mid, hi)])
        if not take_all or self.is_empty() and not self.unreported:
            return None
        loot = SynthBag(self.p, self.run_id, self.t0, self.ranges, self.chain)
        loot.unreported = self.unreported
        self.ranges, self.chain, self.unreported = [], None, 0
        return loot

    def merge(self, other: Bag[SynthResult]) -> None:
        if not isinstance(other, SynthBag):
            raise TypeError(f"cannot merge {type(other).__name__} into SynthBag")
        if other.chain is not None:
            if self.chain is not None:
                raise RuntimeError("two branches met: the branch must exist once")
            self.chain = other.chain
        # a count not yet reported comes with tree-1 ranges (process reports it when they
        # run out), so this bag reports it in time
        self.ranges.extend(other.ranges)
        self.unreported += other.unreported
        other.ranges, other.chain, other.unreported = [], None, 0

    def is_empty(self) -> bool:
        return not self.ranges and self.chain is None

    def is_splittable(self) -> bool:
        return sum(hi - lo for _, lo, hi in self.ranges) >= 2

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["ballast"] = bytes(self.p.ballast * len(self.ranges))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.pop("ballast", None)
        self.__dict__.update(state)
