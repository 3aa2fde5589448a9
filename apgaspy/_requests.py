"""Requests that wait for acknowledgements: the requests room of a place.

The room (:class:`Requests`, one per place, ``runtime().requests``) lets a place send a control
request to several places and wait until each one has carried it out::

    requesting place                                      target place t
    ────────────────                                      ──────────────
    request_all(targets, request):
      op = next number; pending[op] = (waiting, event)
      request._replace(op=op) ════════════════════════►  receiver: ctrl_handlers[type](src,
                                                            request) does its work, then
    receiver: ctrl_ack ◄════════════════════ Ack(op)  ◄── Requests.ack(src, request.op)
      waiting.discard(t); empty ─► event.set()
      ─► request_all returns the late ones (timeout)

A target that is or becomes dead stops being waited for at once: ``Membership.place_died``
calls :meth:`Requests.stop_waiting_on` under the shared lock, and :meth:`Requests.request_all`
drops the places already dead after entering its request; a target that cannot be sent to
(unknown, released) counts as acknowledged.

Control messages handled here: ``Ack`` (:meth:`Requests.ctrl_ack`).  The requests themselves
(``AddPlaces``, ``RemovePlaces``, typed records of :mod:`._messages`) are handled by the
membership room, which answers them with :meth:`Requests.ack`.  Who calls it: place 0's
malleability orders (``elastic._malleability``: grow) and the membership room (shrink).

Locking: the pending-ack table changes only under the runtime's lock ``state_lock``, shared with the
finish and membership rooms, so that a death (which takes the place out of the table and
resolves the acknowledgements waiting on it in one step) and a new request (which drops the
places already dead after entering its entry) cannot miss each other.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ._exceptions import ApgasError
from ._messages import Ack, Request

if TYPE_CHECKING:
    from ._runtime_needs import DeadPlaces, RequestsHost

__all__ = ["Requests"]


class Requests:
    """The requests room of one place: requests waiting for acknowledgements.

    Created by the :class:`~apgaspy._runtime.Runtime` after its membership room.

    Args:
        rt: the runtime of this place (its sends).

    Attributes:
        state_lock: the runtime's lock (shared with the finish and membership rooms); it guards
            the pending-ack table.
    """

    def __init__(self, rt: RequestsHost) -> None:
        self.rt = rt
        self.here = rt.here
        self.state_lock = rt.state_lock  # shared: guards the acks, finish records and places
        self.membership: DeadPlaces = rt.membership
        self._ops = itertools.count(1)
        self._pending_acks: dict[int, tuple[set[int], threading.Event]] = {}

    def request_all(self, targets: Iterable[int], request: Request,
                    timeout: float | None = None) -> list[int]:
        """Send control request ``request`` to ``targets`` and wait until each one
        acknowledged it or died.

        A target that is or becomes dead (or cannot be sent to: unknown or released) stops
        being waited for at once (see ``Membership.place_died``); it is not in the returned
        list, and the caller finds it in ``membership.dead``.  The handler of the request's
        type at the target receives ``(src, request)``, its ``op`` field set to this request's
        number, and must answer with :meth:`ack`.

        Args:
            targets: place ids (this place is skipped).
            request: an :class:`~apgaspy._messages.AddPlaces` or
                :class:`~apgaspy._messages.RemovePlaces` (its ``op`` is replaced).
            timeout: seconds to wait for the acknowledgements; ``None``: no limit.

        Returns:
            The live targets that did not acknowledge within ``timeout`` seconds, ascending.
        """
        targets = [t for t in targets if t != self.here]
        op = next(self._ops)
        request = request._replace(op=op)
        waiting = set(targets)
        event = threading.Event()
        with self.state_lock:
            self._pending_acks[op] = (waiting, event)
        try:
            for t in targets:
                try:
                    self.rt.send_ctrl(t, request)
                except ApgasError:
                    self.ctrl_ack(t, Ack(op))
            with self.state_lock:  # died before the entry existed: place_died could not see it
                waiting.difference_update(self.membership.dead)
                if not waiting:
                    event.set()
            event.wait(timeout)
        finally:
            with self.state_lock:
                self._pending_acks.pop(op, None)
                late = sorted(waiting - self.membership.dead)
        return late

    def ctrl_ack(self, src: int, message: Ack) -> None:
        """Control message :class:`~apgaspy._messages.Ack`: place ``src`` acknowledged
        request ``message.op``."""
        op = message.op
        with self.state_lock:
            entry = self._pending_acks.get(op)
            if entry is not None:
                waiting, event = entry
                waiting.discard(src)
                if not waiting:
                    event.set()

    def ack(self, src: int, op: int) -> None:
        """Acknowledge request ``op`` of place ``src`` (the end of a request's handler)."""
        try:
            self.rt.send_ctrl(src, Ack(op))
        except ApgasError:
            pass

    def stop_waiting_on(self, place: int) -> None:
        """Stop waiting for acknowledgements from ``place``, which died (state_lock held; called by
        ``Membership.place_died``): a request left waiting for nobody else returns."""
        for waiting, event in list(self._pending_acks.values()):
            waiting.discard(place)
            if not waiting:
                event.set()
