"""The reply box: place 0 collects the answers of immediate messages it sent to places.

A :class:`Replies` lives at place 0 behind a :class:`apgaspy.GlobalRef`; a place answers with
``immediate_async_at(ref.home, deliver, ref, value, sender)``.  :func:`glb._broadcast.broadcast`
waits on one; a released place's final report and a halted place's report arrive in one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from apgaspy import GlobalRef

__all__ = ["Replies", "deliver"]


@dataclass
class Replies:
    """Place 0's collector of immediate answers (a GlobalRef points here).

    Attributes:
        expected: how many answers complete the collection.
        values: the answers, in arrival order.
        senders: the places that answered (those that said who they are).
        event: set once ``expected`` answers arrived.
        lock: guards the fields above.
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

    def forget(self, places: set[int]) -> None:
        """Stop expecting answers from ``places`` (they died without answering)."""
        with self.lock:
            self.expected -= len(places)
            if len(self.values) >= self.expected:
                self.event.set()

    def missing(self, targets: list[int]) -> list[int]:
        """The places of ``targets`` that have not answered, ascending."""
        with self.lock:
            return sorted(set(targets) - self.senders)


def deliver(reply: GlobalRef[Any], value: Any, sender: int | None = None) -> None:
    """At the reply box's home (immediate pool): record ``value`` from place ``sender``."""
    reply.get()(value, sender)
