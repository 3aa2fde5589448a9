"""Resilient GLB, place 0's side: the store of backups and records, and the messages it handles.

The work and partial result of a place that dies are recovered, exactly.  This module holds
the scheme (below), the :class:`Store` at place 0 and the messages places send it; a place's
side (its backups, its transfers' records) is :mod:`glb._store_client`, and the recovery that
place 0 runs after a death is :mod:`glb._recovery`.

On by ``resilient=True`` (or ``GLB_RESILIENT=1``, or a benchmark's ``--resilient``).  The
scheme follows the fault-tolerant lifeline GLB of Posner and Fohry (J. Posner, C. Fohry,
"Fault Tolerance for Lifeline-Based Global Load Balancing", Journal of Software Engineering
and Applications 10(13), 2017; and "A Comparison of Application-Level Fault Tolerance Schemes
for Task Pools", FGCS 2019): each worker's bag and partial result are backed up at another
place, every work transfer updates the backups of both sides, and after a failure the
backup of the dead place is taken over by a survivor.  Where they keep backups at a buddy
place in a resilient store, we keep them at place 0, which a GLB computation cannot lose
anyway (its ``main`` runs there): the "place-zero" resilient mode of Resilient X10
(Cunningham et al., "Resilient X10", PPoPP 2014).  One place holds every copy, so nothing is
lost when several places die at once, and no copy needs moving when a buddy dies; the price is
that every transfer of work between two other places passes through place 0 (see "Cost").

The store (a :class:`Store`, at place 0) holds:

* for each place p other than 0, a *backup* ``(seq, bag, result)``: a state of p's worker,
  the bag with its mailbox merged and the partial result, numbered by p's counter ``seq``;
* *records* ``x -> (loot, dest)``: loot split off a bag on its way to place ``dest``, not yet
  known to be part of ``dest``'s backup.

Transfers.  Loot leaves a place only once the store has its record.  A worker p ≠ 0 that
splits loot L off its bag for place t (a random steal answer, a lifeline deal, the hand-over
of a leaving place) sends place 0 (immediate pool) L, t and p's state right after the split;
place 0 installs that state as p's backup, creates the record x = L and answers; only then
does p send L to t, tagged with x.  Place 0's own loot gets a record before it leaves.  A
place t that takes L into its state (bag or mailbox) adds x to its set ``consumed``; its next
backup carries that set, and the store deletes the records it names when it installs the
backup.  A place that does not take L (it went idle, it is halted, the round is over) drops
it: the record keeps it.  A leaving place passes on loot that reaches it after it handed its bag
over: place 0 swaps record x for a new record y to the heir, or drops the pass if x is gone.

Invariant (under the store's lock): for every place p, p's backup plus the records p consumed
since it is the same work and result as p's live state plus what p processed since (the
result of that processing is not in the backup, its work still is); every piece of work
is in exactly one of: a live place's state not yet in its backup, a backup, a record.  Each
step keeps it: a split installs the state without L in the same step that creates L's record;
a consumption deletes a record only in the step that installs a backup containing it; the
first message from a dead place that place 0 handles after it took the dead place's backup
over is discarded (the backup it took predates whatever that message would change).

Recovery.  Termination is one ``finish`` at place 0 per *round* (an epoch).  When a place
dies the finish fails at once with ``DeadPlaceError`` (the runtime's semantics); the other
workers still run.  Place 0 then, holding the lock that malleability orders also take:

1. halts every live place (on its immediate pool: the worker pool's one thread may be the
   worker): its worker stops between two ``process`` calls (a steal or a transfer waiting
   for its record ends too; the loot of a transfer cut short goes with the report), merges
   its mailbox, and from then on drops loot of the ending round; the answer is p's exact
   state, installed as its backup;
2. deals the loot of the transfers cut short whose record has not come (and marks them, so
   that a record coming later is not created);
3. takes over every place that is neither live nor released and has a backup: its result is
   folded into the recovered result, its bag becomes an orphan, and every later message from
   it is discarded; every record still open becomes an orphan too (nobody holds that loot);
4. gives the orphans to place 0's worker and starts the next round (``resume`` at each live
   place: the workers go on with their own bags, stealing spreads the recovered work).

A round that ends without a failure goes through the same steps (a place may have died idle,
or loot may have reached a place after it went idle); the computation ends when a round ends
with no orphan and no work left anywhere.  The final result folds the live places' results,
the results of the places released by shrinks, and the recovered results.

Malleability: shrinks and grows work as without resilience, and an order waits while place
0 recovers (the lock).  A place released by a shrink reports its final result to the store
(it *retires*); a place that dies while it leaves is recovered like any other.

What is not recovered: place 0 (the program's ``main`` and the store live there); work of a
place that dies before the computation created its worker at place 0's request.  Places
started by ``mpiexec`` cannot die alone (Hydra ends the job), so resilience helps places that
apgaspy spawned (the embedded default, grows).

Cost with no failure: one backup message per place every ``GLB_BACKUP_INTERVAL`` seconds
(the bag and result, pickled), the split-time state with each transfer, and a second hop
through place 0 for loot between two places other than 0.  ``benchmarks/scaling.py
--resilient`` measures it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apgaspy import GlobalRef, immediate_async_at

from ._bag import Bag
from ._fold import Fold

__all__ = ["Store", "Backup", "HaltReport", "RecordId", "install_store", "store", "on_backup",
           "on_split", "on_pass", "on_retire"]

log = logging.getLogger("glb")

RecordId = tuple  # (giver place, giver's counter)


@dataclass
class Backup:
    """A place's state as the store knows it: ``seq`` numbers it, newer replaces older."""

    seq: int
    bag: Bag | None
    result: Fold | None


@dataclass
class HaltReport:
    """A halted place's exact state (the answer of ``glb._worker_orders.halt``).

    Attributes:
        place: the place.
        seq: its state's number.
        bag: its bag (mailbox merged) or ``None``.
        result: its partial result.
        consumed: the records it took into its state.
        work_left: true when its bag still holds work.
        unconfirmed: transfers ``(id, loot)`` whose record the halt cut short: the place
            did not send the loot (the store may not have the record yet).
    """

    place: int
    seq: int
    bag: Bag | None
    result: Fold
    consumed: frozenset
    work_left: bool
    unconfirmed: list = field(default_factory=list)


@dataclass
class Store:
    """Place 0's copies of the other places' states and of the loot in flight.

    All methods take ``lock``; ``phase`` (reentrant) is held by a recovery and by every
    malleability order, so the two never interleave.

    Attributes:
        result_factory: makes an empty result.
        backups: place → its latest :class:`Backup`.
        records: record id → (loot, destination place).
        retired: places released by a shrink that reported their final result.
        recovered: places whose backup was taken over after they died.
        recovered_result: the results of the recovered places, folded.
        epoch: the current round.
        known: every place that took part (a place that is not live any more and did not
            retire died: a recovery takes it over).
        settled: transfers a recovery dealt from a halt report before their record came (a
            record that comes later is not created).
    """

    result_factory: Callable[[], Fold]
    backups: dict[int, Backup] = field(default_factory=dict)
    records: dict[RecordId, tuple[Bag, int]] = field(default_factory=dict)
    retired: set = field(default_factory=set)
    recovered: list = field(default_factory=list)
    recovered_result: Fold = field(init=False)
    epoch: int = 0
    known: set = field(default_factory=set)
    settled: set = field(default_factory=set)
    lock: threading.Condition = field(default_factory=threading.Condition)
    phase: threading.RLock = field(default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.recovered_result = self.result_factory()

    # ------------------------------------------------------------------ updates
    def _install(self, p: int, seq: int, bag: Bag | None, result: Fold | None,
                 consumed: frozenset) -> None:
        # lock held; p is neither recovered nor retired
        old = self.backups.get(p)
        if old is not None and old.seq >= seq:
            return  # an older state that arrived late: the newer one contains it
        self.backups[p] = Backup(seq, bag, result)
        for x in consumed:
            self.records.pop(x, None)

    def backup(self, p: int, seq: int, bag: Bag | None, result: Fold | None,
               consumed: frozenset) -> None:
        """Install ``p``'s state number ``seq`` (unless a newer one is in, or p is gone)."""
        with self.lock:
            if p in self.recovered or p in self.retired:
                return
            self._install(p, seq, bag, result, consumed)

    def record(self, x: RecordId, loot: Bag, dest: int) -> None:
        """Enter place 0's own transfer ``x`` of ``loot`` to ``dest``."""
        with self.lock:
            self.records[x] = (loot, dest)

    def split(self, giver: int, seq: int, bag: Bag | None, result: Fold | None,
              consumed: frozenset, x: RecordId, loot: Bag, dest: int) -> bool:
        """``giver`` split ``loot`` off for ``dest``; its state after the split is ``seq``.

        Returns:
            False when ``giver`` was recovered meanwhile (the loot is in the backup that was
            taken over: the transfer is discarded), else True (record ``x`` is open).
        """
        with self.lock:
            if giver in self.recovered:
                return False
            if x in self.settled:
                return False  # the giver's halt report handed this loot over already
            if giver not in self.retired:
                self._install(giver, seq, bag, result, consumed)
            self.records[x] = (loot, dest)
            return True

    def pass_on(self, x: RecordId, y: RecordId, loot: Bag, dest: int) -> bool:
        """A leaving place passes loot of record ``x`` on to ``dest`` as record ``y``.

        Returns:
            False when ``x`` is no longer open (a recovery made it an orphan): the pass is
            discarded.
        """
        with self.lock:
            if self.records.pop(x, None) is None:
                return False
            self.records[y] = (loot, dest)
            return True

    def close(self, x: RecordId) -> None:
        """Place 0 took the loot of record ``x`` into its own state."""
        with self.lock:
            self.records.pop(x, None)

    def retire(self, p: int, consumed: frozenset, left: Bag | None = None) -> bool:
        """``p`` leaves (a shrink) and reports its final result; returns False when ``p``
        was recovered meanwhile (its result is in the recovered result already).

        Args:
            p: the place.
            consumed: the records it took into its state.
            left: work it could not hand over (it was halted by a recovery and not yet
                resumed when the shrink came): an open record, dealt by the next recovery.
        """
        with self.lock:
            if p in self.recovered:
                return False
            self.retired.add(p)
            self.backups.pop(p, None)
            for x in consumed:
                self.records.pop(x, None)
            if left is not None:
                self.records[(p, "left")] = (left, 0)
            return True

    # ------------------------------------------------------------------ recovery
    def reconcile(self, reports: list[HaltReport], live: set[int]) -> tuple[list[Bag], bool]:
        """Steps 2-3 of a recovery (see the module docstring), after the halts.

        Args:
            reports: the halted places' reports (place 0's included).
            live: the live places.

        Returns:
            The orphan bags, and whether any live place still holds work.
        """
        with self.lock:
            for r in reports:
                if r.place == 0:
                    for x in r.consumed:
                        self.records.pop(x, None)
                else:
                    self._install(r.place, r.seq, r.bag, r.result, r.consumed)
            orphans: list[Bag] = []
            for r in reports:
                for x, loot in r.unconfirmed:
                    if x not in self.records:  # else the record is an orphan below
                        self.settled.add(x)
                        orphans.append(loot)
            gone = (set(self.backups) | self.known) - live - self.retired - set(self.recovered)
            for p in sorted(gone):
                b = self.backups.pop(p, None)
                self.recovered.append(p)
                if b is not None and b.result is not None:
                    self.recovered_result.fold(b.result)
                if b is not None and b.bag is not None:
                    orphans.append(b.bag)
                log.warning("GLB: place(%d) died; its work and partial result (state %d) are "
                            "recovered at place 0", p, b.seq if b is not None else 0)
            for loot, _ in self.records.values():
                orphans.append(loot)
            self.records.clear()
            self.epoch += 1
        return orphans, any(r.work_left for r in reports)


_STORE: dict[str, Store] = {}


def install_store(s: Store) -> Store:
    """Make ``s`` the store of this (place 0's) computation."""
    _STORE["store"] = s
    return s


def store() -> Store:
    """The store of the running resilient computation (place 0 only).

    Raises:
        KeyError: no resilient computation runs at this place.
    """
    return _STORE["store"]


# ---------------------------------------------------------------------- messages to place 0
# Module-level functions: they travel by name.

def on_backup(p: int, seq: int, bag: Bag | None, result: Fold, consumed: frozenset) -> None:
    """A periodic backup of place ``p`` (immediate pool at place 0)."""
    store().backup(p, seq, bag, result, consumed)


def on_split(giver: int, seq: int, bag: Bag | None, result: Fold, consumed: frozenset,
             x: RecordId, loot: Bag, dest: int, answer: Callable[[RecordId, bool], None]
             ) -> None:
    """``giver`` is about to send ``loot`` to ``dest`` (immediate pool at place 0): record
    it with the giver's state, and answer with ``answer(x, ok)`` at the giver (see
    :meth:`Store.split`); the giver sends the loot once it has the answer."""
    ok = store().split(giver, seq, bag, result, consumed, x, loot, dest)
    immediate_async_at(giver, answer, x, ok)


def on_pass(giver: int, x: RecordId, y: RecordId, loot: Bag, dest: int,
            answer: Callable[[RecordId, bool], None]) -> None:
    """A leaving place is about to pass loot of record ``x`` on as ``y`` (immediate pool):
    answer with ``answer(y, ok)`` at the giver (see :meth:`Store.pass_on`)."""
    ok = store().pass_on(x, y, loot, dest)
    immediate_async_at(giver, answer, y, ok)


def on_retire(p: int, result: Fold, stats: Any, consumed: frozenset, left: Bag | None,
              reply: GlobalRef[Any]) -> None:
    """A place released by a shrink reports its final result (immediate pool at place 0):
    the reply box gets ``(result, stats)``, or ``None`` when ``p`` was recovered meanwhile."""
    ok = store().retire(p, consumed, left)
    reply.get()((result, stats) if ok else None, p)
