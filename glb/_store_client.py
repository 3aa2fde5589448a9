"""Resilient GLB, a place's side: its backups and the records of the work it gives away.

A place's :class:`StoreClient` numbers the states of the place that it sends to place 0's
store (:mod:`glb._store`, which describes the scheme), gives each transfer of loot a record
id, and waits for the store's answer before the loot leaves (:meth:`StoreClient.confirm`).
The worker (:mod:`glb._worker`) owns one and calls it; the client knows nothing of the
worker's loop, only the worker's lock and whether a recovery halted it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from apgaspy import GlobalRef, immediate_async_at

from ._bag import Bag
from ._fold import Fold
from ._store import RecordId, on_backup, on_pass, on_retire, on_split, store

__all__ = ["StoreClient", "install_client", "on_confirmed"]

_POLL_S = 0.05  # seconds between checks that a halt ended a wait for the store

State = tuple[int, frozenset, Bag | None, Fold]  # seq, consumed, bag, result


class StoreClient:
    """What place ``me`` tells place 0's store, and the store's answers.

    Args:
        me: this place's id.
        answered: the worker's condition (its lock guards the fields below too); notified
            when the store answers.
        halted: true once a recovery halted this place's worker (ends every wait here).
        backup_interval: seconds between two backups.
        reply_timeout: seconds to wait for the store's answer (``GLB_REPLY_TIMEOUT``).

    Attributes:
        seq: the number of this place's latest state sent to the store.
        consumed: the records this place took into its state.
        confirmed: the store's answers to this place's transfers, by record id.
        unconfirmed: transfers ``(id, loot)`` a halt cut short (they go with the halt report).
    """

    def __init__(self, me: int, answered: threading.Condition, halted: Callable[[], bool],
                 backup_interval: float, reply_timeout: float) -> None:
        self.me = me
        self.answered = answered
        self.halted = halted
        self.backup_interval = backup_interval
        self.reply_timeout = reply_timeout
        self.seq = 0
        self.consumed: set[Any] = set()
        self.transfers = 0  # counter of this place's record ids
        self.confirmed: dict[Any, bool] = {}
        self.unconfirmed: list[tuple[Any, Bag]] = []
        self.backup_due = time.monotonic() + backup_interval

    # ------------------------------------------------------------------ states
    def next_state(self) -> tuple[int, frozenset]:
        """Number a new state of this place: ``(seq, consumed)`` (worker's lock held)."""
        self.seq += 1
        return self.seq, frozenset(self.consumed)

    def consume(self, x: RecordId) -> None:
        """This place took the loot of record ``x`` into its state (worker's lock held)."""
        self.consumed.add(x)

    def backup_is_due(self) -> bool:
        """True when the next periodic backup is due."""
        return time.monotonic() >= self.backup_due

    def schedule_backup(self) -> None:
        """The next periodic backup is due in ``backup_interval`` seconds."""
        self.backup_due = time.monotonic() + self.backup_interval

    def send_backup(self, seq: int, consumed: frozenset, bag: Bag | None, result: Fold) -> None:
        """Send state ``seq`` to the store (an immediate message; not at place 0)."""
        immediate_async_at(0, on_backup, self.me, seq, bag, result, consumed)

    # ------------------------------------------------------------------ transfers
    def new_record(self) -> tuple[int, int]:
        """A new record id of this place: ``(place, counter)``."""
        with self.answered:
            self.transfers += 1
            return (self.me, self.transfers)

    def record_transfer(self, loot: Bag, dest: int,
                        snapshot: Callable[[], State]) -> RecordId | None:
        """Give the store the record of ``loot``, just split off for place ``dest``.

        Place 0 enters its record directly; another place sends the store its state after
        the split (``snapshot()``) with the record and waits for the answer.

        Returns:
            The record id to send the loot with, or ``None`` when the loot must not be sent:
            this place was taken for dead (the loot is in the backup a recovery took over),
            or a halt cut the wait short (the loot then goes with the halt report).

        Raises:
            TimeoutError: no answer within ``GLB_REPLY_TIMEOUT`` seconds.
        """
        x = self.new_record()
        if self.me == 0:
            store().record(x, loot, dest)
            return x
        seq, consumed, bag, result = snapshot()
        self.schedule_backup()
        answer = self.confirm(x, lambda: immediate_async_at(
            0, on_split, self.me, seq, bag, result, consumed, x, loot, dest, on_confirmed))
        if answer is None:
            with self.answered:
                self.unconfirmed.append((x, loot))  # goes with the halt report
            return None
        return x if answer else None

    def record_pass(self, x: RecordId, loot: Bag, dest: int) -> RecordId | None:
        """A leaving place passes loot of record ``x`` on to ``dest``: the new record's id,
        or ``None`` when the store no longer has ``x`` (a recovery deals it) or a halt came."""
        y = self.new_record()
        ok = self.confirm(y, lambda: immediate_async_at(0, on_pass, self.me, x, y, loot, dest,
                                                        on_confirmed))
        return y if ok else None

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
        with self.answered:
            while x not in self.confirmed:
                if self.halted():
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"GLB place({self.me}): place 0 did not record "
                                       f"transfer {x} within {self.reply_timeout} s")
                self.answered.wait(min(left, _POLL_S))
            return self.confirmed.pop(x)

    def took(self, x: RecordId | None) -> None:
        """Place 0 took the loot of record ``x`` into its own state (elsewhere: nothing; the
        next backup carries ``x``)."""
        if x is not None and self.me == 0:
            store().close(x)

    def take_unconfirmed(self) -> list[tuple[Any, Bag]]:
        """The transfers a halt cut short, forgotten here (they go with the halt report)."""
        with self.answered:
            unconfirmed, self.unconfirmed = self.unconfirmed, []
        return unconfirmed

    def retire(self, reply: GlobalRef[Any], result: Fold, stats: Any,
               left: Bag | None) -> None:
        """This place, released by a shrink, reports its final result to the store (which
        answers ``reply``); ``left``: work it could not hand over."""
        with self.answered:
            consumed = frozenset(self.consumed)
        immediate_async_at(reply.home, on_retire, self.me, result, stats, consumed, left, reply)


_CURRENT: dict[str, StoreClient] = {}


def install_client(client: StoreClient) -> StoreClient:
    """Make ``client`` this place's store client (the one the store's answers reach)."""
    _CURRENT["client"] = client
    return client


def on_confirmed(x: RecordId, ok: bool) -> None:
    """The store's answer to this place's transfer ``x`` (immediate pool)."""
    client = _CURRENT["client"]
    with client.answered:
        client.confirmed[x] = ok
        client.answered.notify_all()
