"""Carrying out shrink and grow orders at place 0 (the mechanism; communicators bring orders).

One :class:`Malleability` per computation owns place 0's malleability state (the handler, the
communicator, the order lock, the reports).  :func:`apgaspy._launch.start` creates it with
place 0's runtime and the launcher that starts places for a grow, and hands it to the runtime
(``Runtime.malleability``); the public functions of :mod:`apgaspy.elastic` and the
communicator it starts reach it there.  Nothing here imports the launcher or the runtime
module: both are handed in.

Grow(n hosts)::

    pre_grow(n·k) ─► spawn n·k places at once (fresh ids, ids never reused; each new place
    receives the whole table) ─► every existing place adds them (acknowledged) ─► post_grow

Shrink(n hosts)::

    pre_shrink(n·k) ─► check the answer (exactly n·k distinct live places, not place 0,
    whole hosts) ─► release them (``Membership.release``: every place drops them from its
    table and sends each of them a 'fin' marker; a released place waits for all markers and
    for its last task, says 'released' and ends; place 0 sees its connection close; the
    shrink protocol is drawn in :mod:`apgaspy._membership`) ─► the released hosts go back
    ─► post_shrink

A refused order (malformed, no handler, a wrong handler answer, an unreachable host) raises
:class:`MalleabilityError` and leaves the program as it was.

A place that dies during an order (its death is detected within ``APGAS_DEAD_PLACE_TIMEOUT``
seconds) is never waited for: the acknowledgements still pending from it are dropped at once
(``Membership.place_died``), so no order waits ``APGAS_ACK_TIMEOUT`` for a dead place.  What the
order then does:

* **shrink, a released place dies** (before it finished leaving): the order completes; the
  place counts as released (in ``post_shrink``'s ``removed``, its host in the reply) and as
  dead (its unfinished tasks are lost: finishes waiting on them raise ``DeadPlaceError``).
* **shrink, another place dies**: the order completes; that place is dead, as anywhere else.
* **shrink, a chosen place is already known dead** when ``pre_shrink`` answers: refused
  (``MalleabilityError`` naming it), like any place that is not part of the computation.
* **grow, a new place dies** before it is ready, or before every place has added it: it is
  given up, like a place that fails to start; ``post_grow`` gets the others and the order
  then raises ``MalleabilityError`` naming it (the scheduler is told ``ERROR ...``).
* **grow, an existing place dies**: the order completes; every place, the new ones included,
  learns that it is dead.

Either way ``post_*`` runs exactly once and :attr:`OrderReport.died` lists the places that
died during the order.  Known limit: a place that sent its last message ('fin') to a released
place that then died keeps that message for ``APGAS_RELEASE_LINGER`` seconds when it closes
(ZeroMQ linger); so when a shrink releases several places and one dies, the others end, and
the order completes, up to that long later (still bounded, never ``APGAS_RELEASE_TIMEOUT``).
A handler method that raises (a ``DeadPlaceError`` from its own ``at``, say) makes the order
fail with that exception.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .._config import setting
from .._exceptions import MalleabilityError, OrdersEndedError
from .._membership import PlaceInfo
from .._messages import AddPlaces
from .._place import Place
from ..wire.protocol import SHRINK_TIME, timing_message
from ._handler import MalleableHandler
from ._interfaces import OrderReport
from ._shrink_answer import check_shrink_answer
from ._registry import make_communicator, make_load_notifier

if TYPE_CHECKING:
    from ._interfaces import MalleabilityHost

__all__ = ["HandlerState", "OrderListener", "OrderReport", "Malleability", "PlaceLauncher",
           "evolving_mode"]

log = logging.getLogger("apgaspy")

OrderListener = Callable[[OrderReport, MalleabilityError | None], None]
"""An order's observer: ``listener(report, error)``, ``error`` ``None`` for an order carried
out, else the :class:`MalleabilityError` that refused it (``report`` then has the order's kind
and host count, and for a grow its hosts and the places that did start)."""


def evolving_mode() -> bool:
    """Whether this job is evolving: ``APGAS_ELASTIC`` (default: the scheduler's ``ELASTIC``
    variable) is ``evolving``.

    Raises:
        ConfigurationError: ``APGAS_ELASTIC`` is not ``rigid``, ``malleable`` or ``evolving``.
    """
    value = setting("ELASTIC")
    if value is None:
        scheduler_value = os.environ.get("ELASTIC", "").strip()
        value = setting("ELASTIC", scheduler_value) if scheduler_value else "malleable"
    return value == "evolving"


def _stop_logged(part: Any, what: str) -> None:
    """At the end of the program: ``part.stop()`` (``None``: nothing to stop); an error is
    logged as ``what``'s (the program must end anyway)."""
    if part is None:
        return
    try:
        part.stop()
    except Exception:  # noqa: BLE001 - the program must end anyway
        log.exception("error while stopping %s", what)


class PlaceLauncher(Protocol):
    """What a grow needs from the launcher (:mod:`apgaspy._launch` implements it)."""

    def check_hosts(self, hosts: Sequence[str]) -> dict[str, str]:
        """Check that places can start on ``hosts``; return each host's MPI ``host`` value.

        Raises:
            MalleabilityError: a host cannot run a place.
        """

    def spawn(self, specs: Sequence[tuple[int, str]], known: Sequence[PlaceInfo],
              slots: Sequence[int], mpi_hosts: dict[str, str]) -> list[PlaceInfo]:
        """Start one place per ``(id, host)`` of ``specs``; return their infos.

        Raises:
            MalleabilityError: a spawn failed or timed out (nothing is left running).
        """


class HandlerState(enum.Enum):
    """Where the program stands with malleability (:func:`apgaspy.elastic.malleable_state`).

    ``UNDEFINED`` until ``define_malleable_handler``, ``DEFINED`` while orders are accepted,
    ``DISABLED`` after ``disable_malleable_handler`` (final: a program is malleable once).
    """

    UNDEFINED = "undefined"
    DEFINED = "defined"
    DISABLED = "disabled"

    def __str__(self) -> str:
        return self.value


class Malleability:
    """Place 0's malleability state: the handler, the communicator, the order lock.

    Args:
        rt: place 0's runtime (its membership and requests rooms carry the orders out).
        launcher: starts the places of a grow (``None``: grows are refused).

    Attributes:
        state: an :class:`HandlerState`.
        handler: the program's :class:`MalleableHandler` while ``DEFINED``.
        communicator: the running communicator (it is given this object as its
            ``malleability``), or ``None``.
        reports: the :class:`OrderReport` of every order carried out, oldest first.
        listeners: called as ``listener(report, error)`` after every shrink and grow order,
            from the thread that carried it out (:func:`apgaspy.elastic.watch_orders`).
    """

    def __init__(self, rt: MalleabilityHost, launcher: PlaceLauncher | None = None) -> None:
        self.rt = rt
        self.launcher = launcher
        self.state = HandlerState.UNDEFINED  # then DEFINED, then DISABLED
        self.handler: MalleableHandler | None = None
        self.communicator: Any = None
        self.notifier: Any = None  # a rigid job's load reports (start_notifier)
        self.order_lock = threading.RLock()  # a handler may disable from inside an order
        self.next_place: int | None = None
        self.next_slot: int | None = None
        self.reports: list[OrderReport] = []
        # evolving: the open request (time.monotonic() when sent), the places leaving now
        self.request_since: float | None = None
        self.shrinking = False
        self.leaving: set[int] = set()
        self.monitor: Any = None
        self.listeners: list[OrderListener] = []  # told of every order, carried out or refused

    def _tell(self, report: OrderReport, error: MalleabilityError | None) -> None:
        """Tell every listener (:func:`apgaspy.elastic.watch_orders`) of an order that was
        carried out (``error`` ``None``) or refused; a listener that raises is logged."""
        for listener in list(self.listeners):
            try:
                listener(report, error)
            except Exception:  # noqa: BLE001 - an observer must not fail an order
                log.exception("an order listener failed")

    # ------------------------------------------------------------------ handler
    def define(self, handler: MalleableHandler,
               monitor: Callable[[Malleability], Any] | None = None) -> None:
        """Accept orders from now on, carried out by ``handler``; start the communicator.

        ``monitor`` makes the evolving monitor (:class:`~apgaspy.elastic._evolving_monitor.
        EvolvingMonitor`, handed in by :func:`apgaspy.define_malleable_handler`: it uses the
        public API, which this module does not import); it is started in evolving mode
        (:func:`evolving_mode`) and stopped with the handler.

        Raises:
            MalleabilityError: away from place 0, a handler is defined, or it was disabled.
            TypeError: ``handler`` is not a :class:`MalleableHandler`.
            ConfigurationError: the communicator is misconfigured.
        """
        rt = self.rt
        if rt.here != 0:
            raise MalleabilityError(
                f"define_malleable_handler() is for place 0 (the program's main), "
                f"called at place({rt.here})")
        if not isinstance(handler, MalleableHandler):
            raise TypeError(f"expected a MalleableHandler, got {type(handler).__name__}")
        if self.state is HandlerState.DEFINED:
            raise MalleabilityError("a malleable handler is already defined")
        if self.state is HandlerState.DISABLED:
            raise MalleabilityError(
                "the malleable handler was disabled: a program is malleable once, "
                "define_malleable_handler() cannot be called again")
        self.handler = handler
        members = rt.membership
        self.next_place = max([*members.table, *members.released, *members.dead]) + 1
        self.next_slot = max(info.slot for info in members.table.values()) + 1
        self.state = HandlerState.DEFINED
        self.communicator = make_communicator()
        if self.communicator is not None:
            self.communicator.malleability = self
            self.communicator.start()
        if monitor is not None and evolving_mode():
            self.monitor = monitor(self)
            self.monitor.start()

    def disable(self) -> None:
        """No more orders (an order under way ends first); stop the communicator.

        Raises:
            MalleabilityError: no handler is defined.
        """
        if self.state is not HandlerState.DEFINED:
            raise MalleabilityError("no malleable handler is defined")
        self._stop_monitor()
        with self.order_lock:  # let a running order end first
            self.state = HandlerState.DISABLED
            self.handler = None
        self._stop_communicator()

    def _stop_monitor(self) -> None:
        monitor, self.monitor = self.monitor, None
        if monitor is not None:
            monitor.stop()

    def _stop_communicator(self) -> None:
        comm, self.communicator = self.communicator, None
        _stop_logged(comm, "the malleable communicator")

    def start_notifier(self) -> None:
        """Start a rigid job's load reports (:func:`~apgaspy.elastic._registry.
        make_load_notifier`), once the places run; nothing for a job that is not rigid or
        has no scheduler.  Never raises: a notifier that fails to start is logged."""
        notifier = make_load_notifier()
        if notifier is None:
            return
        try:
            notifier.start()
        except Exception:  # noqa: BLE001 - a rigid job computes on without reports
            log.exception("a rigid job's load reports could not start")
            return
        self.notifier = notifier

    def close(self) -> None:
        """At the end of the program: stop the communicator if still running, and a rigid
        job's load reports."""
        notifier, self.notifier = self.notifier, None
        _stop_logged(notifier, "the load reports")
        self._stop_monitor()
        if self.state is HandlerState.DEFINED:
            self.state = HandlerState.DISABLED
            self.handler = None
        self._stop_communicator()

    def _handler(self, order: bool = True) -> MalleableHandler:
        """The handler; for an ``order`` (shrink, grow) that arrives after the program
        disabled it, :class:`OrdersEndedError` (the computation had ended)."""
        if order and self.state is HandlerState.DISABLED:
            raise OrdersEndedError("not carried out (the computation had ended: the program "
                                   "disabled its malleable handler)")
        if self.state is not HandlerState.DEFINED or self.handler is None:
            raise MalleabilityError(
                "orders are refused: the program has no malleable handler defined "
                f"({'not yet' if self.state is HandlerState.UNDEFINED else 'disabled'})")
        return self.handler

    # ------------------------------------------------------------------ grow
    def grow(self, hosts: Sequence[str]) -> OrderReport:
        """Add ``APGAS_PLACES_PER_HOST`` places on each of ``hosts`` (one slot per entry).

        Args:
            hosts: host names, one entry per host (repeat a name for several slots there).

        Returns:
            The :class:`OrderReport` (``places``: the added places).

        Raises:
            MalleabilityError: no handler, no hosts, or a host cannot run a place; or a new
                place died or did not report ready within ``APGAS_START_TIMEOUT`` seconds
                (raised after ``post_grow``, which gets the places that did start).
        """
        hosts = [str(h) for h in hosts]
        before = len(self.reports)
        try:
            report = self._grow(hosts)
        except MalleabilityError as exc:
            self._tell(self.reports[-1] if len(self.reports) > before else
                       OrderReport("grow", len(hosts), host_names=hosts), exc)
            raise
        self._tell(report, None)
        return report

    def _grow(self, hosts: list[str]) -> OrderReport:
        """:meth:`grow`'s work (its listeners are told by :meth:`grow`)."""
        if not hosts:
            raise MalleabilityError("a grow order needs at least one host")
        with self.order_lock:
            handler = self._handler()
            if self.launcher is None:
                raise MalleabilityError("this runtime cannot start places (no launcher)")
            rt = self.rt
            members = rt.membership
            c0 = time.monotonic()
            mpi_hosts = self.launcher.check_hosts(hosts)  # before the handler hears of it
            log.debug("grow: %d host(s) checked in %.3f s", len(hosts), time.monotonic() - c0)
            per_host = setting("PLACES_PER_HOST")
            report = OrderReport("grow", len(hosts), host_names=list(hosts))
            t0 = time.perf_counter_ns()
            n = len(hosts) * per_host
            h0 = time.perf_counter_ns()
            handler.pre_grow(n)
            report.handler_ns += time.perf_counter_ns() - h0
            continued = [Place(i) for i in members.place_ids()]
            dead_before = set(members.dead)
            assert self.next_place is not None and self.next_slot is not None
            specs: list[tuple[int, str]] = []
            slots: list[int] = []
            for i, host in enumerate(hosts):
                for _ in range(per_host):
                    specs.append((self.next_place, host))
                    slots.append(self.next_slot + i)
                    self.next_place += 1
            self.next_slot += len(hosts)
            added: list[Place] = []
            error: MalleabilityError | None = None
            never_ready: set[int] = set()  # given up alive: not 'died'
            try:
                infos = self.launcher.spawn(specs, list(members.table.values()), slots,
                                            mpi_hosts)
            except MalleabilityError as exc:
                error, infos = exc, []
            log.debug("grow: places launched %.3f s after the check",
                      time.monotonic() - c0)
            if infos:
                members.add_places(infos)
                timeout = setting("START_TIMEOUT")
                late = set(members.wait_ready([i.id for i in infos], timeout))
                log.debug("grow: places ready %.3f s after the check", time.monotonic() - c0)
                lost = [i for i in infos if i.id in late or i.id in members.dead]
                never_ready |= late
                if lost:
                    for info in lost:
                        members.abandon_place(info.id)
                    error = MalleabilityError(
                        "could not start " + "; ".join(
                            f"place({i.id}) on host {i.host}: "
                            + ("its connection from place 0 broke or could not be made"
                               if i.id in members.dead and i.id not in late else
                               f"it did not report ready within {timeout:g} s")
                            for i in lost))
                    infos = [i for i in infos if i not in lost]
            if infos:
                silent = rt.requests.request_all([p for p in members.place_ids() if p not in
                                                 {i.id for i in infos}], AddPlaces(infos),
                                                timeout=setting("ACK_TIMEOUT"))
                if silent:
                    log.warning("places %s did not confirm the grow in time", silent)
                log.debug("grow: the other places acknowledged %.3f s after the check",
                          time.monotonic() - c0)
                gone = [i for i in infos if i.id not in members.table]  # died after 'ready'
                if gone:
                    for info in gone:
                        members.abandon_place(info.id)
                    more = "; ".join(f"place({i.id}) on host {i.host}: it died while the "
                                     f"grow was under way" for i in gone)
                    error = MalleabilityError(
                        f"{error}; {more}" if error is not None else f"could not start {more}")
                    infos = [i for i in infos if i not in gone]
                added = [Place(i.id) for i in infos]
            # Every place learns of the places that died during the order: those that joined
            # now may have been given them in their table, and an existing place may have
            # heard of a new place's death before it was told to add it.
            died = sorted(members.dead - dead_before)
            for d in died:
                members.announce_dead(d)
            report.died = [Place(d) for d in died if d not in never_ready]
            report.places = added
            h0 = time.perf_counter_ns()
            handler.post_grow(len(members.table), continued, added)
            report.handler_ns += time.perf_counter_ns() - h0
            report.total_ns = time.perf_counter_ns() - t0
            self.reports.append(report)
            self.request_since = None  # a grow answers an open evolving request
            if error is not None:
                raise error
            return report

    # ------------------------------------------------------------------ shrink
    def shrink(self, n_hosts: int,
               on_released: Callable[[list[str]], None] | None = None,
               hosts: Sequence[str] = ()) -> OrderReport:
        """Release ``n_hosts`` hosts: ask the handler for their places and let them go.

        Args:
            n_hosts: hosts to release (≥ 1).
            on_released: called with the released host names once their places are gone,
                before ``post_shrink`` (the communicator replies to the scheduler there).
            hosts: empty: the handler chooses (``pre_shrink(n)``); else the ``n_hosts``
                hosts the scheduler names (it drains those nodes): their places are offered
                to the handler's ``pre_release`` (GLB's releases exactly them; the default
                answers ``pre_shrink``'s own choice, which the scheduler then orders again).

        Returns:
            The :class:`OrderReport` (``places``: the released places, a released place
            that died on its way out included; ``died``: places that died meanwhile).

        Raises:
            MalleabilityError: no handler, too many hosts, a named host the job does not
                hold or place 0's, or a wrong handler answer (a place that is not part of
                the computation, a dead one included); or a released place still had work
                after ``APGAS_RELEASE_TIMEOUT`` seconds.
        """
        try:
            report = self._shrink(n_hosts, on_released, tuple(hosts))
        except MalleabilityError as exc:
            self._tell(OrderReport("shrink", n_hosts if isinstance(n_hosts, int) else 0), exc)
            raise
        self._tell(report, None)
        return report

    def _shrink(self, n_hosts: int, on_released: Callable[[list[str]], None] | None,
                hosts: tuple[str, ...] = ()) -> OrderReport:
        """:meth:`shrink`'s work (its listeners are told by :meth:`shrink`)."""
        if isinstance(n_hosts, bool) or not isinstance(n_hosts, int) or n_hosts < 1:
            raise MalleabilityError(f"a shrink order releases at least 1 host, got {n_hosts!r}")
        with self.order_lock:
            handler = self._handler()
            members = self.rt.membership
            per_host = setting("PLACES_PER_HOST")
            slots = self._slots(members.table)
            releasable = [s for s in slots if s != members.table[0].slot]
            if n_hosts > len(releasable):
                raise MalleabilityError(
                    f"cannot release {n_hosts} host{'s' if n_hosts > 1 else ''}: the job has "
                    f"{len(releasable)} host{'s' if len(releasable) != 1 else ''} besides the "
                    f"one of place 0")
            chosen = self._named(hosts, n_hosts, slots, members.table[0].slot)
            report = OrderReport("shrink", n_hosts)
            dead_before = set(members.dead)
            t0 = time.perf_counter_ns()
            n = n_hosts * per_host
            self.shrinking = True
            try:
                h0 = time.perf_counter_ns()
                answer = (handler.pre_release(chosen) if chosen is not None
                          else handler.pre_shrink(n))
                report.handler_ns += time.perf_counter_ns() - h0
                try:
                    removed = check_shrink_answer(
                        answer, n, n_hosts, {p: info.slot for p, info in members.table.items()},
                        members.dead)
                except MalleabilityError:
                    h0 = time.perf_counter_ns()
                    handler.post_shrink(len(members.table), [])
                    report.handler_ns += time.perf_counter_ns() - h0
                    raise
                return self._let_go(handler, report, removed, slots, dead_before, t0,
                                    on_released)
            finally:
                self.shrinking = False

    @staticmethod
    def _named(hosts: tuple[str, ...], n_hosts: int, slots: dict[int, list[PlaceInfo]],
               first: int) -> list[Place] | None:
        """The places of the hosts a named shrink names (every place of each), or None for
        a plain shrink.

        Raises:
            MalleabilityError: not ``n_hosts`` names, a host the job holds no place on, or
                place 0's host.
        """
        if not hosts:
            return None
        if len(hosts) != n_hosts:
            raise MalleabilityError(f"a shrink of {n_hosts} hosts names {len(hosts)}")
        by_host = {infos[0].host: s for s, infos in slots.items()}
        chosen: list[Place] = []
        for host in hosts:
            slot = by_host.get(host)
            if slot is None:
                raise MalleabilityError(f"the job holds no place on {host!r}")
            if slot == first:
                raise MalleabilityError(f"{host!r} is place 0's host")
            chosen.extend(Place(info.id) for info in slots[slot])
        return chosen

    def _let_go(self, handler: MalleableHandler, report: OrderReport, removed: list[int],
                slots: dict[int, list[PlaceInfo]], dead_before: set[int], t0: int,
                on_released: Callable[[list[str]], None] | None) -> OrderReport:
        """The common end of a shrink and a release: the checked places leave, their hosts
        go back, ``post_shrink`` runs (with the order lock held)."""
        members = self.rt.membership
        released_slots = []
        for pid in removed:
            slot = members.table[pid].slot
            if slot not in released_slots:
                released_slots.append(slot)
        host_names = [slots[s][0].host for s in released_slots]
        self.leaving.update(removed)
        try:
            members.release(removed, ack_timeout=setting("ACK_TIMEOUT"))
        finally:
            self.leaving.difference_update(removed)
        report.places = [Place(p) for p in removed]
        report.host_names = host_names
        report.died = [Place(p) for p in sorted(members.dead - dead_before)]
        if on_released is not None:
            on_released(host_names)
        h0 = time.perf_counter_ns()
        handler.post_shrink(len(members.table), report.places)
        report.handler_ns += time.perf_counter_ns() - h0
        report.total_ns = time.perf_counter_ns() - t0
        self.reports.append(report)
        return report

    # ------------------------------------------------------------------ evolving
    def _evolving_communicator(self) -> Any:
        comm = self.communicator
        if comm is None:
            raise MalleabilityError(
                "no communicator runs, so there is no scheduler to ask for places or to give "
                "them back to (set SCHEDULER_PORT, or APGAS_COMMUNICATOR)")
        if not getattr(comm, "EVOLVING", False):
            raise MalleabilityError(
                f"this communicator does not support evolving requests "
                f"({type(comm).__module__}.{type(comm).__qualname__})")
        return comm

    def request(self, n: int = 1) -> None:
        """Ask the scheduler for ``n`` more hosts; what it grants comes later as a grow order.

        Raises:
            MalleabilityError: ``n`` < 1, no handler, no communicator or one without evolving
                support, a shrink or release under way, the job would exceed
                ``APGAS_MAX_HOSTS``, a request is still open (one at a time, for at most
                ``APGAS_EVOLVING_REQUEST_TIMEOUT`` seconds), or the scheduler cannot be
                reached.  The program runs on unchanged.
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise MalleabilityError(f"request_places() asks for at least 1 host, got {n!r}")
        self._handler(order=False)
        comm = self._evolving_communicator()
        if self.shrinking:
            raise MalleabilityError("a shrink is under way: request places after it has ended")
        max_hosts = setting("MAX_HOSTS")
        hosts = len(self._slots(self.rt.membership.table))
        if max_hosts is not None and hosts + n > max_hosts:
            raise MalleabilityError(
                f"cannot request {n} more host(s): the job has {hosts} and at most "
                f"{max_hosts} (APGAS_MAX_HOSTS)")
        now = time.monotonic()
        if self.request_since is not None:
            waited = now - self.request_since
            if waited < setting("EVOLVING_REQUEST_TIMEOUT"):
                raise MalleabilityError(
                    f"a request for places is already open (sent {waited:.1f} s ago); the "
                    f"scheduler serves one at a time")
            log.warning("the scheduler did not answer the request for places sent %.1f s ago; "
                        "it is given up", waited)
        comm.request(n)
        self.request_since = now

    def release(self, chosen: Sequence[Place | int]) -> OrderReport:
        """Give ``chosen`` places back to the scheduler (whole hosts, never place 0).

        Runs the shrink side: the handler's ``pre_release(chosen)`` (by default
        ``pre_shrink(len(chosen))``) answers the places that leave, they are released as in a
        shrink order, the communicator tells the scheduler each freed host (after the places
        have ended), then ``post_shrink`` runs and the whole time is notified
        (``shrinkTimeAPGAS;<hosts>;<ns>``).

        Returns:
            The :class:`OrderReport` (kind ``"release"``).

        Raises:
            MalleabilityError: nothing chosen, place 0, a place that is not part of the
                computation (released, dead or unknown) or already leaving, places that split
                a host, no handler, no communicator or one without evolving support, or a
                wrong handler answer.  The program runs on unchanged.
        """
        try:
            ids = [p.id if isinstance(p, Place) else p for p in chosen]
        except TypeError:
            raise MalleabilityError(
                f"release_places() takes a list of places, got {chosen!r}") from None
        if not ids:
            raise MalleabilityError("release_places() needs at least one place")
        if any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
            raise MalleabilityError(f"release_places() takes places, got {chosen!r}")
        if 0 in ids:
            raise MalleabilityError("place(0) is never released")
        leaving = sorted(set(ids) & self.leaving)
        if leaving:
            raise MalleabilityError(f"places {leaving} are already leaving")
        members = self.rt.membership
        gone = sorted(i for i in ids if i in members.released)
        if gone:
            raise MalleabilityError(f"places {gone} were already released")
        self._handler(order=False)
        comm = self._evolving_communicator()
        with self.order_lock:
            leaving = sorted(set(ids) & self.leaving)  # again: a release may just have ended
            if leaving:
                raise MalleabilityError(f"places {leaving} are already leaving")
            self.leaving.update(ids)
            self.shrinking = True
            try:
                report = self._release(ids, comm)
            finally:
                self.shrinking = False
                self.leaving.difference_update(ids)
        comm.notify(timing_message(SHRINK_TIME, report.hosts, report.total_ns))
        return report

    def _release(self, ids: list[int], comm: Any) -> OrderReport:
        """The body of :meth:`release`, with the order lock held."""
        members = self.rt.membership
        handler = self._handler(order=False)
        table = {p: info.slot for p, info in members.table.items()}
        died = sorted(i for i in ids if i in members.dead)
        if died:
            raise MalleabilityError(f"cannot release places {died}: they died")
        unknown = sorted(i for i in ids if i not in table)
        if unknown:
            raise MalleabilityError(
                f"cannot release places {unknown}: they are not part of the computation")
        if len(set(ids)) != len(ids):
            raise MalleabilityError(f"release_places() was given a place twice: {ids}")
        chosen_slots = {table[i] for i in ids}
        split = sorted(p for p, s in table.items() if s in chosen_slots and p not in ids)
        if split:
            raise MalleabilityError(
                f"release_places() releases whole hosts: places {split} share a host with "
                f"places {sorted(ids)} and would have to leave too")
        n_hosts = len(chosen_slots)
        slots = self._slots(members.table)
        report = OrderReport("release", n_hosts)
        dead_before = set(members.dead)
        t0 = time.perf_counter_ns()
        h0 = time.perf_counter_ns()
        answer = handler.pre_release([Place(i) for i in sorted(ids)])
        report.handler_ns += time.perf_counter_ns() - h0
        try:
            removed = check_shrink_answer(answer, len(ids), n_hosts, table, members.dead)
        except MalleabilityError:
            h0 = time.perf_counter_ns()
            handler.post_shrink(len(members.table), [])
            report.handler_ns += time.perf_counter_ns() - h0
            raise
        report = self._let_go(handler, report, removed, slots, dead_before, t0, comm.release)
        self.request_since = None  # the Java scheduler drops a pending request on release
        return report

    @staticmethod
    def _slots(table: dict[int, PlaceInfo]) -> dict[int, list[PlaceInfo]]:
        slots: dict[int, list[PlaceInfo]] = {}
        for info in sorted(table.values(), key=lambda i: i.id):
            slots.setdefault(info.slot, []).append(info)
        return slots

