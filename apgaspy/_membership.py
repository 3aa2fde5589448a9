"""Which places make up the computation, and how places join, die, leave and stop.

The room (:class:`Membership`, one per place, ``runtime().membership``) holds the place table
(id → :class:`PlaceInfo`), the places known dead and those released by a shrink, the places
that reported ready, and the state of this place's end (``stopping``, ``exit_code``,
``stopped``, ``retired``).  It runs these protocols:

**Start-up and grow: readiness.**  A new place says ``ready`` to place 0 once it serves tasks
(:meth:`Membership.report_ready`); place 0 waits for it (:meth:`Membership.wait_ready`) and
gives up a place that never becomes ready (:meth:`Membership.abandon_place`: it counts as
dead).  Every place enters the new places in its table (:meth:`Membership.add_places`; the
others on place 0's ``add_places`` request, acknowledged through the requests room).

**Deaths.**  Place 0 watches every place and the others watch place 0 (see :mod:`._transport`);
the transport's verdict arrives in :meth:`Membership.on_peer_lost`.  Place 0 tells every place
(:meth:`Membership.announce_dead`, control message ``dead``), and each one takes the place out
of its table and fails, at once, everything that waits on it (:meth:`Membership.place_died`):
the finishes whose home is here (finish room), the control requests waiting for its
acknowledgement (requests room), readiness waits and the shutdown.  A place that loses place 0
ends at once (exit code 1).

**Shrink** (place 0's :meth:`Membership.release`, for a shrink order of ``elastic._malleability``)::

    place 0                           each other place o (r too)      each released place r
    ───────                           ──────────────────────────      ─────────────────────
    leaving[r], released_here[r]
    remove_places: drop r from the
      table, 'fin' ══════════════════════════════════════════════►  ctrl_fin: fins += {0}
    request_all('remove_places') ═►  ctrl_remove_places:
                                       drop r from the table,
                                       'fin' (after whatever it
                                       sent before) ══════════════►  ctrl_fin: fins += {o}
    ctrl_ack ◄══════════════════════  ack
                                                                     (at r itself,
                                                                     remove_places starts
                                                                     _drain_and_leave:)
                                                                     every 'fin' arrived, no
                                                                     task and no remote finish
    ctrl_released: released_here[r] ◄════════════════════════════   left ─► 'released'; ends
    on_peer_down: leaving[r] ◄╌╌╌╌╌ its connection closes ╌╌╌╌╌╌╌╌   (a spawned process exits,
    forget r; a spawned process on                                   an mpiexec rank retires:
      this machine: wait until it is                                 it waits in MPI_Finalize
      gone ─► its host can go back                                   without using the CPU)

A released place that dies on its way out counts as released and as dead
(:meth:`Membership._leaving_place_died`): the finishes waiting on it fail everywhere, and place 0
sends the 'fin' markers the other released places still wait for in its name.

**Shutdown** (:meth:`Membership.shutdown`, at place 0): ``shutdown`` to every other place, which
says ``bye`` and stops; place 0 waits (bounded) for the goodbyes, and a place that dies meanwhile
counts as gone at once.  A goodbye must not be taken for a death: the place's transport sends
it even when it is still queued for another sending thread at close (``Transport.close``), and
place 0, which often sees the place's connection close before the goodbye (another
connection), declares it lost only after handling the messages already received (see
:mod:`._transport`, failure detection).

Control messages handled here (typed records of :mod:`._messages`; the pictures above write them in
snake case): ``Ready``, ``AddPlaces``, ``RemovePlaces`` (the two answered with an ``Ack``),
``Dead``, ``ReleasedDied``, ``Fin``, ``Released``, ``Shutdown`` and ``Bye``.  Who calls it: the
runtime's receiver thread (those messages) and its transport (``on_peer_lost``,
``on_peer_down``); ``_launch`` (start-up, ``shutdown``, the end state); the constructs
(``place_ids``, ``check_place``); the finish room (``table``, ``bad_place``, ``dead``); place
0's malleability orders (grow: ``add_places``, ``wait_ready``, ``abandon_place``,
``announce_dead``; shrink: ``release``).

Locking: ``table``, ``dead`` and ``released`` change only under the runtime's lock ``state_lock``
(but for ``Runtime.start``, before anything is received), shared with the finish and control
rooms, so that a death takes the place out of the table and
fails what waits on it (finishes, acknowledgements) in one step.  Readers on the hot path
(``spawn``'s ``dest in table``) read without it, as before the rooms were split.  Readiness
has its own condition variable (``_ready_cv``); the shrink and shutdown events are
:class:`threading.Event` objects.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._config import setting
from ._exceptions import ApgasError, BadPlaceError, DeadPlaceError, MalleabilityError
from ._messages import (
    AddPlaces,
    Bye,
    Ctrl,
    Dead,
    Fin,
    Ready,
    Released,
    ReleasedDied,
    RemovePlaces,
    Shutdown,
)

if TYPE_CHECKING:
    from ._runtime_needs import MembershipHost

__all__ = ["PlaceInfo", "Membership"]

log = logging.getLogger("apgaspy")


@dataclass
class PlaceInfo:
    """What every place knows about a place.

    Attributes:
        id: the place id.
        endpoint: its ZeroMQ address, ``tcp://ip:port``.
        host: the host name it was started for, in the spelling it was given.
        pid: its process id on that host.
        origin: ``"world"`` (an mpiexec rank), ``"embedded"`` (place 0 without mpiexec) or
            ``"spawned"`` (started by MPI_Comm_spawn).
        slot: the host allotment it belongs to: the places started for one host of the
            scheduler's allotment share a slot, and a shrink releases whole slots.
    """

    id: int
    endpoint: str
    host: str
    pid: int
    origin: str
    slot: int = 0


class Membership:
    """The membership room of one place: the place table and the places' comings and goings.

    Created by the :class:`~apgaspy._runtime.Runtime` first among its rooms.

    Args:
        rt: the runtime of this place (its transport, pools and sends, the other rooms).

    Attributes:
        table: id → :class:`PlaceInfo` of every live place of the computation.
        dead: the ids of the places known dead.
        released: the ids of the places released by a shrink.
        stopping: this place is ending (shutdown, place 0 gone, or released).
        exit_code: the exit code this place ends with.
        stopped: set when this place should end (``_launch`` waits for it).
        retired: this place was released by a shrink.
        leaving: at place 0, during a shrink: released place → set when its connection closed.
        released_here: at place 0, during a shrink: released place → set when it said
            'released'.
        state_lock: the runtime's lock (shared with the finish and requests rooms); it guards
            ``table``, ``dead`` and ``released``.
    """

    def __init__(self, rt: MembershipHost) -> None:
        self.rt = rt
        self.here = here = rt.here
        self.state_lock = rt.state_lock  # shared: guards the place table, finish records and acks
        self.table: dict[int, PlaceInfo] = {}
        self.dead: set[int] = set()
        self.released: set[int] = set()
        self.stopping = False
        self.exit_code = 0
        self.stopped = threading.Event()
        self._byes: set[int] = set()
        self._byes_expected: set[int] = set()
        self._byes_done = threading.Event()
        self._ready: set[int] = {here}
        self._ready_cv = threading.Condition()
        self.leaving: dict[int, threading.Event] = {}  # place 0: places being released
        self.released_here: dict[int, threading.Event] = {}  # place 0: 'released' received
        self._fins_expected: set[int] | None = None  # at a place being released
        self._fins: set[int] = set()
        self.retired = False  # this place was released by a shrink

    # ================================================================== places
    def place_ids(self) -> list[int]:
        """Ids of the places of the computation, ascending."""
        return sorted(self.table)

    def check_place(self, dest: int) -> None:
        """Raise the right error if ``dest`` is not a live place."""
        if dest not in self.table:
            raise self.bad_place(dest)

    def bad_place(self, dest: int) -> ApgasError:
        """The error for naming place ``dest``, which is not live."""
        if dest in self.dead:
            return DeadPlaceError(dest)
        if dest in self.released:
            return BadPlaceError(f"place({dest}) was released by a shrink", dest)
        return BadPlaceError(
            f"there is no place({dest}); the places are {self.place_ids()}", dest
        )

    # ================================================================== readiness
    def ctrl_ready(self, src: int, message: Ready) -> None:
        """Control message :class:`~apgaspy._messages.Ready`: place ``src`` serves tasks
        (start-up, grow)."""
        with self._ready_cv:
            self._ready.add(src)
            self._ready_cv.notify_all()

    def report_ready(self) -> None:
        """Tell place 0 that this place serves tasks (its main module is imported)."""
        if self.here != 0:
            self.rt.send_ctrl(0, Ready())

    def wait_ready(self, places: Iterable[int], timeout: float) -> list[int]:
        """Wait (at most ``timeout`` seconds) until ``places`` reported ready or died; return
        the ones that did not."""
        deadline = time.monotonic() + timeout
        wanted = set(places)
        with self._ready_cv:
            while True:
                missing = wanted - self._ready - self.dead
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    return sorted(missing)
                self._ready_cv.wait(min(left, 0.5))

    # ================================================================== adding places
    def add_places(self, infos: Iterable[PlaceInfo]) -> None:
        """Make ``infos`` part of this place's table (place 0 also watches them)."""
        with self.state_lock:
            for info in infos:
                self.table[info.id] = info
        if self.here == 0:
            for info in infos:
                self.rt.transport.add_peer(info.id, info.endpoint, watch=True)

    def ctrl_add_places(self, src: int, message: AddPlaces) -> None:
        """Control message :class:`~apgaspy._messages.AddPlaces` from place 0 (a grow): add
        its ``infos``, acknowledge its request ``op``."""
        self.add_places(message.infos)
        self.rt.requests.ack(src, message.op)

    def abandon_place(self, place: int) -> None:
        """At place 0: give up a new place that never became ready (a failed grow): tell it
        to stop, and count it as dead, so that naming it raises :class:`DeadPlaceError`."""
        try:
            self.rt.send_ctrl(place, Shutdown(code=1))
        except ApgasError:
            pass
        with self.state_lock:
            self.table.pop(place, None)
            self.dead.add(place)
        self.rt.transport.remove_peer(place, linger_s=setting("CLOSE_LINGER"))

    # ================================================================== deaths
    def on_peer_lost(self, place: int) -> None:
        """The transport's verdict: the connection to ``place`` broke for good (receiver
        thread).  Place 0 watches every place; the others watch only place 0."""
        if place == 0:
            if not self.stopping:
                log.error("place(0) is gone: place(%d) exits", self.here)
                self.exit_code = 1
                self.stopping = True
                self.stopped.set()
            return
        if self.stopping:
            # During shutdown: a place that died before saying goodbye counts as gone now.
            if place in self._byes_expected and place not in self._byes:
                log.warning("place(%d) died during shutdown", place)
                self.place_died(place)
            return
        if place in self.leaving:
            said_released = self.released_here.get(place)
            if said_released is None or not said_released.is_set():
                self._leaving_place_died(place)
            return  # else it left as it should; its connection closed when it exited
        if place in self.released or place not in self.table:
            return
        log.error("place(%d) died", place)
        self.place_died(place)
        self.announce_dead(place)

    def announce_dead(self, place: int, targets: Iterable[int] | None = None) -> None:
        """Tell ``targets`` (default: every place of the table and every place being
        released, but not ``place`` nor this one) that ``place`` died.

        Idempotent at the receiver (a place it no longer knows is ignored), so it may be sent
        again, e.g. to places that joined during a grow after the first announcement.
        """
        if targets is None:
            targets = set(self.table) | set(self.leaving)
        for p in sorted(set(targets) - {self.here, place}):
            try:
                self.rt.send_ctrl(p, Dead(place=place))
            except ApgasError:
                pass

    def _leaving_place_died(self, place: int) -> None:
        """At place 0: a place being released by a shrink died before it finished leaving.

        It counts as released (the shrink completes; its host goes back), and as dead: its
        unfinished tasks are lost, so every finish still waiting on it, here or at any other
        place, fails with :class:`DeadPlaceError`, and naming it raises
        :class:`DeadPlaceError`.  The other places have already dropped it from their tables
        (they ignore a plain 'dead' notice for it), so place 0 sends each of them a
        'released_died' control message that records the death there.  The other places
        being released (no longer in place 0's table, so no message reaches them) were
        waiting for its 'fin' marker: place 0 sends it in its name (nothing more can come
        from a dead process).
        """
        log.warning("place(%d) died while it was being released; it counts as released, "
                    "its unfinished tasks are lost", place)
        self.place_died(place)
        for p in sorted(set(self.table) - {self.here, place}):
            try:
                self.rt.send_ctrl(p, ReleasedDied(place=place))
            except ApgasError:
                pass
        fin = Ctrl.encode(place, Fin())
        for other in list(self.leaving):
            if other != place:
                try:
                    self.rt.transport.send(other, fin)
                except KeyError:
                    pass
        event = self.released_here.get(place)
        if event is not None:
            event.set()
        event = self.leaving.get(place)
        if event is not None:
            event.set()

    def ctrl_released_died(self, src: int, message: ReleasedDied) -> None:
        """Control message :class:`~apgaspy._messages.ReleasedDied` (from place 0): its
        ``place``, which a shrink was releasing, died before it left; fail what still waits
        on it here."""
        place = message.place
        if place not in self.dead:
            self.place_died(place)

    def ctrl_dead(self, src: int, message: Dead) -> None:
        """Control message :class:`~apgaspy._messages.Dead`: its ``place`` died (ignored once
        it left this table)."""
        place = message.place
        if place in self.table:
            self.place_died(place)

    def place_died(self, place: int) -> None:
        """Take ``place`` out of the computation and fail, at once, everything here that
        waits on it.

        What waits on a place and how it ends: a finish (or an ``at``) whose home is here and
        that expects something from ``place`` raises :class:`DeadPlaceError`
        (``Finishes.fail_waiting_on``); a control request (``Requests.request_all``) stops
        waiting for its acknowledgement (``Requests.stop_waiting_on``); start-up and grow
        (:meth:`wait_ready`) stop waiting for it to report ready; shutdown counts it as gone.
        Idempotent.

        Args:
            place: the id of the dead place.
        """
        with self.state_lock:
            info = self.table.pop(place, None)
            self.dead.add(place)
            self.rt.finishes.fail_waiting_on(place)
            self.rt.requests.stop_waiting_on(place)
        with self._ready_cv:
            self._ready_cv.notify_all()
        self.rt.transport.remove_peer(place, linger_s=0)
        if info is not None:  # a grow onto its host is checked again
            from ._hosts import forget_reachable

            forget_reachable(info.host)
        if self.stopping and self._byes_expected:
            self._said_bye(place)

    # ================================================================== shrink
    def release(self, removed: list[int], ack_timeout: float) -> None:
        """At place 0: release the places ``removed`` (a checked shrink answer) and return
        once they are gone (see the module docstring for the protocol).

        A place that dies meanwhile is not waited for (:meth:`place_died`; a released one
        counts as released: :meth:`_leaving_place_died`).

        Args:
            removed: the places to release (live, not place 0).
            ack_timeout: seconds to wait for the other places to confirm (then a warning).

        Raises:
            MalleabilityError: a released place did not end within ``APGAS_RELEASE_TIMEOUT``
                seconds.
        """
        infos = {r: self.table[r] for r in removed}
        for r in removed:
            self.leaving[r] = threading.Event()
            self.released_here[r] = threading.Event()
        others = [p for p in self.place_ids() if p != 0]
        self.remove_places(removed)  # place 0's own table, and its fins
        # A place that dies now is not waited for (place_died; a released one counts as
        # released: _leaving_place_died).
        late = self.rt.requests.request_all(others, RemovePlaces(removed=removed),
                                           timeout=ack_timeout)
        if late:
            log.warning("places %s did not confirm the shrink in time", late)
        deadline = time.monotonic() + setting("RELEASE_TIMEOUT")
        try:
            for r in removed:
                while not (self.released_here[r].is_set() and self.leaving[r].is_set()):
                    if r in self.dead:
                        break
                    if time.monotonic() > deadline:
                        raise MalleabilityError(
                            f"place({r}) did not end within APGAS_RELEASE_TIMEOUT seconds")
                    self.leaving[r].wait(0.05)
        finally:
            for r in removed:
                self.leaving.pop(r, None)
                self.released_here.pop(r, None)
                self.rt.transport.remove_peer(r, linger_s=0)
        from ._hosts import note_reachable

        for r, info in infos.items():  # its launcher reached it: a grow there is not checked
            if r not in self.dead:
                note_reachable(info.host)
        # A spawned place on this machine: its host goes back only once its process is gone
        # (its connection closes a moment before it exits).
        for info in infos.values():
            if info.origin == "spawned" and _is_here(info.host):
                _wait_process_gone(info.pid, deadline)

    def remove_places(self, removed: list[int]) -> None:
        """Take ``removed`` out of the table and tell each of them that nothing more will come
        from here (a 'fin' marker, after anything already sent on the same connection)."""
        with self.state_lock:
            before = set(self.table)
            infos = {r: self.table.pop(r) for r in removed if r in self.table}
            self.released.update(removed)
            self.rt.finishes.places_gone(removed)
        if self.here in removed:
            self._fins_expected = before - {self.here} - self.dead
            threading.Thread(target=self._drain_and_leave, name="apgaspy-release",
                             daemon=True).start()
        fin = Ctrl.encode(self.here, Fin())
        for r, info in infos.items():
            if r == self.here:
                continue
            if not self.rt.transport.has_peer(r):
                self.rt.transport.add_peer(r, info.endpoint)
            try:
                self.rt.transport.send(r, fin)
            except KeyError:
                pass
            if self.here != 0:
                self.rt.transport.remove_peer(r, linger_s=setting("RELEASE_LINGER"))

    def ctrl_remove_places(self, src: int, message: RemovePlaces) -> None:
        """Control message :class:`~apgaspy._messages.RemovePlaces` from place 0 (a shrink):
        drop its ``removed`` places, acknowledge its request ``op``."""
        self.remove_places(message.removed)
        self.rt.requests.ack(src, message.op)

    def ctrl_fin(self, src: int, message: Fin) -> None:
        """Control message :class:`~apgaspy._messages.Fin`: place ``src`` sends this released
        place nothing more."""
        self._fins.add(src)

    def _drain_and_leave(self) -> None:
        """At a released place: wait until every place's last message arrived and no task is
        left, then tell place 0 and stop (the process exits, or an mpiexec rank retires)."""
        expected = self._fins_expected or set()
        next_warning = time.monotonic() + 10.0
        delay = 0.0005
        while True:
            expected -= self.dead
            idle = self.rt.pool.pending == 0 and self.rt.immediate.pending == 0
            if idle and self._fins >= expected and not self.rt.finishes.remotes \
                    and not self.rt.finishes.holding():
                break
            if time.monotonic() > next_warning:
                log.warning("released place(%d) still has work: %d task(s), waiting for %s",
                            self.here, self.rt.pool.pending, sorted(expected - self._fins))
                next_warning += 10.0
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        self.rt.flush_output()
        try:
            self.rt.send_ctrl(0, Released())
        except ApgasError:
            pass
        self.retired = True
        self.stopping = True
        self.exit_code = 0
        self.stopped.set()

    def ctrl_released(self, src: int, message: Released) -> None:
        """Control message :class:`~apgaspy._messages.Released`: place ``src`` finished
        leaving (at place 0)."""
        event = self.released_here.get(src)
        if event is not None:
            event.set()

    def on_peer_down(self, place: int) -> None:
        """The transport saw the connection to ``place`` close (a released place ends)."""
        event = self.leaving.get(place)
        if event is not None:
            event.set()

    # ================================================================== shutdown
    def shutdown(self, code: int = 0, timeout: float | None = None) -> list[int]:
        """On place 0: stop every other place and wait (bounded) for their goodbyes.

        Waits at most ``timeout`` seconds (default ``APGAS_SHUTDOWN_TIMEOUT``; then logs the
        places that did not answer).  A place that dies meanwhile (or was already dying)
        counts as gone as soon as its death is detected (``APGAS_DEAD_PLACE_TIMEOUT``):
        shutdown never waits the full timeout for a dead place, and the exit code stays
        ``code``.

        Args:
            code: the exit code the other places end with (0, 1 after a failure, 128 + the
                signal after an interrupt).
            timeout: seconds to wait for the goodbyes (default ``APGAS_SHUTDOWN_TIMEOUT``).

        Returns:
            The places that did not say goodbye in time, ascending.
        """
        self.stopping = True
        self.exit_code = code
        others = [p for p in self.table if p != self.here]
        self._byes_expected = set(others)
        if not others:
            self._byes_done.set()
        for p in others:
            try:
                self.rt.send_ctrl(p, Shutdown(code=code))
            except ApgasError:
                self._said_bye(p)
        with self.state_lock:  # died between the table snapshot and now: no goodbye will come
            gone = [p for p in others if p in self.dead]
        for p in gone:
            self._said_bye(p)
        missing: list[int] = []
        if not self._byes_done.wait(setting("SHUTDOWN_TIMEOUT") if timeout is None
                                    else timeout):
            missing = sorted(self._byes_expected - self._byes)
            log.warning("places %s did not confirm shutdown in time", missing)
        self.stopped.set()
        return missing

    def ctrl_shutdown(self, src: int, message: Shutdown) -> None:
        """Control message :class:`~apgaspy._messages.Shutdown` from place 0: end this place
        with its exit ``code``."""
        self.stopping = True
        self.exit_code = message.code
        self.rt.flush_output()
        try:
            self.rt.send_ctrl(0, Bye())
        except ApgasError:
            pass
        self.stopped.set()

    def ctrl_bye(self, src: int, message: Bye) -> None:
        """Control message :class:`~apgaspy._messages.Bye`: place ``src`` ended (at place 0,
        during shutdown)."""
        self._said_bye(src)

    def _said_bye(self, place: int) -> None:
        """Count ``place`` as gone for the shutdown (a goodbye, or a death)."""
        self._byes.add(place)
        if self._byes >= self._byes_expected:
            self._byes_done.set()


def _is_here(host: str) -> bool:
    from ._hosts import is_local_host

    try:
        return is_local_host(host)
    except OSError:
        return False


def _wait_process_gone(pid: int, deadline: float) -> None:
    """Wait until process ``pid`` of this machine has ended (or ``deadline`` passed)."""
    import psutil  # here: a place that never shrinks does not load it

    delay = 0.0005
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return
        except psutil.Error:
            return  # no such process (or it cannot be read: nothing more we can check)
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    log.warning("released place process %d has not ended yet", pid)
