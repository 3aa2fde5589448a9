"""Distributed termination detection for ``finish``.

Algorithm (the counting protocol of X10's default finish, as implemented by APGAS for Java's
``DefaultFinish``; Tardieu et al., "X10 and APGAS at Petascale", PPoPP 2014, §3.1):

* The place where a finish starts is its *home*.  The home keeps ``counts[p]`` = tasks spawned
  to place p minus tasks completed at place p, as far as it knows, and the number of non-zero
  entries.  The finish body counts as one task at home.  The finish is done when every entry
  is zero.
* Every other place p that runs tasks of the finish keeps a :class:`RemoteFinish` record:
  ``live`` (tasks of the finish that arrived at p and have not completed) and ``deltas``
  (+1 for each task p spawned to q, -1 for each task completed at p).  When ``live`` drops to
  zero, p sends its deltas (with the exceptions and any ``at`` result) to the home in one
  UPDATE message and forgets the record.
* Events at the home itself are applied at once.

Why it is correct: a task's +1 travels in the same UPDATE as its spawner's -1 (the spawner is
live at p until it completes, so p cannot flush in between), and a place reports a -1 only when
it has nothing live, so a task in flight towards a place cannot be hidden by that place's
earlier report; an all-zero vector therefore means no task is live or in flight.

Cost: no message per spawn; one UPDATE per place each time it becomes quiescent for the finish.
Local-only finishes send nothing.  UPDATEs from one place to one home are sent in the order of
the snapshots they carry.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._serialization import PackedException

__all__ = ["RootFinish", "RemoteFinish", "FID"]

FID = tuple  # (home place id, sequence number at home)


class RootFinish:
    """The home-side state of one finish.

    All methods that change counts are called with the runtime's finish lock held.

    Attributes:
        fid: (home, seq) once the finish has spawned a remote task, else ``None``.
        exceptions: exceptions collected so far (``Exception`` objects).
        result: for ``at``: the pickled return value of the called function, or ``None``.
        at_error: for ``at``: the called function's own exception, or ``None``.
    """

    __slots__ = ("fid", "counts", "nonzero", "exceptions", "event", "result", "at_error",
                 "here", "failed")

    def __init__(self, here: int) -> None:
        self.here = here
        self.fid: Any = None
        self.counts: dict[int, int] = {here: 1}  # the body is a task at home
        self.nonzero = 1
        self.exceptions: list[Exception] = []
        self.event: threading.Event | None = None
        self.result: bytes | None = None
        self.at_error: Exception | None = None
        self.failed = False

    def add(self, place: int, delta: int) -> bool:
        """Apply ``delta`` to ``counts[place]``; return True when the finish became done."""
        counts = self.counts
        old = counts.get(place, 0)
        new = old + delta
        if new:
            counts[place] = new
            if not old:
                self.nonzero += 1
        else:
            del counts[place]
            if old:
                self.nonzero -= 1
        return self.nonzero == 0

    def apply(self, deltas: dict[int, int]) -> bool:
        """Apply an UPDATE's deltas; return True when the finish became done."""
        for place, delta in deltas.items():
            if delta:
                self.add(place, delta)
        return self.nonzero == 0

    @property
    def done(self) -> bool:
        """True when no task of the finish is live or in flight."""
        return self.nonzero == 0

    def waits_on(self, place: int) -> bool:
        """True when the finish still expects something from ``place``."""
        return self.counts.get(place, 0) != 0

    def release(self) -> None:
        """Wake the thread waiting for this finish (lock held)."""
        if self.event is not None:
            self.event.set()


class RemoteFinish:
    """A non-home place's record of one finish: live tasks here and unreported deltas.

    Attributes:
        fid: (home, seq) of the finish.
        live: tasks of the finish that arrived here and have not completed.
        deltas: place id → spawned minus completed, not yet reported to the home.
        exceptions: packed exceptions not yet reported.
        result, at_error: for the task of an ``at``: its packed result or exception.
    """

    __slots__ = ("fid", "live", "deltas", "exceptions", "result", "at_error")

    def __init__(self, fid: Any) -> None:
        self.fid = fid
        self.live = 0
        self.deltas: dict[int, int] = {}
        self.exceptions: list[PackedException] = []
        self.result: bytes | None = None
        self.at_error: PackedException | None = None
