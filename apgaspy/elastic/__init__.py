"""Malleability: shrinking and growing a running program on a scheduler's order.

Public names (re-exported by :mod:`apgaspy`): :class:`MalleableHandler`,
:func:`define_malleable_handler`, :func:`disable_malleable_handler`,
:func:`notify_scheduler`, and for evolving jobs :func:`request_places` and
:func:`release_places` (docs/guides/evolving.md); for extensions,
:class:`MalleableCommunicator` (the abstract link to a scheduler), :func:`malleable_state`
with :class:`HandlerState`, :func:`order_reports` with :class:`OrderReport`, :func:`watch_orders` (an order's
observer, told as each order is carried out or refused), :func:`orders_held` (no order
while a block runs), and
:func:`set_load_source` (a place's load for the evolving monitor's ``task`` mode) with
:func:`evolving_mode`, and :class:`LoadReporter` with :func:`set_gil_source` (the job's duty
cycle, traffic, GIL share and memory, reported to the scheduler by a communicator).  The
mechanism is in ``_malleability``: place 0's runtime owns its
:class:`~apgaspy.elastic._malleability.Malleability` (``Runtime.malleability``, ``None`` at
the other places), which these functions reach through the running runtime; the links to
particular schedulers are in the top-level ``communicators`` package, which implements
:class:`MalleableCommunicator` and registers them as entry points.
"""

from __future__ import annotations

import logging

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .._exceptions import ApgasError, MalleabilityError
from .._place import Place
from .._runtime import current_runtime, runtime
from ._communicator import MalleableCommunicator
from ._evolving_monitor import EvolvingMonitor, set_load_source
from ._handler import MalleableHandler
from ._load_report import LoadReporter, set_gil_source
from ._malleability import (
    HandlerState,
    Malleability,
    OrderListener,
    OrderReport,
    evolving_mode,
)

__all__ = [
    "MalleableHandler",
    "define_malleable_handler",
    "disable_malleable_handler",
    "notify_scheduler",
    "request_places",
    "release_places",
    "set_load_source",
    "set_gil_source",
    "LoadReporter",
    "evolving_mode",
    "OrderReport",
    "HandlerState",
    "MalleableCommunicator",
    "malleable_state",
    "order_reports",
    "watch_orders",
    "orders_held",
    "OrderListener",
]

log = logging.getLogger("apgaspy")


def _malleability() -> Malleability | None:
    """Place 0's malleability state, or ``None`` (another place, or no runtime running)."""
    rt = current_runtime()
    return rt.malleability if rt is not None else None


def define_malleable_handler(handler: MalleableHandler) -> None:
    """Make the program malleable: from now on, scheduler orders are carried out by ``handler``.

    Starts the configured communicator (``APGAS_COMMUNICATOR``; the socket communicator when
    ``SCHEDULER_PORT`` is set), which tells the scheduler that orders are accepted, and, in
    evolving mode (``APGAS_ELASTIC=evolving``, or ``ELASTIC=evolving`` from the scheduler),
    the evolving monitor (docs/guides/evolving.md).

    Raises:
        MalleabilityError: called away from place 0, a handler is already defined, or the
            handler was disabled before (a program is malleable once).
        TypeError: ``handler`` is not a :class:`MalleableHandler`.
        ConfigurationError: the communicator is misconfigured.
        ApgasError: the runtime is not running.
    """
    rt = runtime()
    if rt.malleability is None:
        raise MalleabilityError(
            f"define_malleable_handler() is for place 0 (the program's main), "
            f"called at place({rt.here})")
    from .. import _api  # the monitor samples loads with at(); imported when the runtime runs

    rt.malleability.define(handler,
                           monitor=lambda m: EvolvingMonitor(m, _api.at, _api.places))


def disable_malleable_handler() -> None:
    """End the malleable phase: no more orders (an order under way finishes first).

    The communicator stops and tells the scheduler (``APGAS-Disabled``).

    Raises:
        MalleabilityError: no handler is defined.
    """
    m = _malleability()
    if m is None:
        raise MalleabilityError("no malleable handler is defined")
    m.disable()


def notify_scheduler(message: str) -> None:
    """Send ``message`` (e.g. ``"preShrinkTimeGLB;2;1234"``) to the scheduler, if one listens.

    Does nothing when no communicator runs.  Never raises: a message the communicator cannot
    send is logged (a warning on the ``apgaspy`` logger) and dropped, whether the scheduler
    cannot be reached or the message does not fit the protocol (with the socket communicator:
    a ``:`` or a line break, on which the scheduler splits, or text that is not ASCII), or
    the communicator itself fails.

    Args:
        message: one line of printable ASCII text without ``:``, by the scheduler protocol
            (anything else is dropped as said).
    """
    m = _malleability()
    comm = m.communicator if m is not None else None
    if comm is None:
        return
    try:
        comm.notify(message)
    except Exception as exc:  # noqa: BLE001 - a notification must never break the program
        log.warning("notification %r to the scheduler dropped: %s: %s", message,
                    type(exc).__name__, exc)


def _evolving_malleability(what: str) -> Malleability:
    rt = runtime()
    if rt.malleability is None:
        raise MalleabilityError(f"{what}() is for place 0 (the program's main), called at "
                                f"place({rt.here})")
    return rt.malleability


def request_places(n: int = 1) -> None:
    """Ask the scheduler for ``n`` more hosts (an evolving job; APGAS_PLACES_PER_HOST places
    each).  Returns at once: what the scheduler grants arrives later as an ordinary grow,
    through the handler's ``pre_grow`` and ``post_grow``.

    One request is open at a time: it closes when a grow arrives, when the program releases
    places, or after ``APGAS_EVOLVING_REQUEST_TIMEOUT`` seconds without an answer (the
    program runs on either way).  With the socket communicator the line is
    ``Evolving;Request;1`` (the Java ElasticJobScheduler's; docs/guides/evolving.md), so ``n``
    must be 1 there.

    Args:
        n: hosts asked for (≥ 1).

    Raises:
        MalleabilityError: away from place 0; ``n`` < 1; no handler defined; no
            communicator runs, or it does not support evolving requests ("this communicator
            does not support evolving requests"); a shrink or release is under way; the job
            would exceed ``APGAS_MAX_HOSTS``; a request is still open; or the scheduler
            cannot be reached.
        ApgasError: the runtime is not running.
    """
    _evolving_malleability("request_places").request(n)


def release_places(places: list[Place] | list[int]) -> OrderReport:
    """Give ``places`` back to the scheduler (an evolving job), and wait until they are gone.

    Runs the shrink side of the handler: ``pre_release(places)`` (by default
    ``pre_shrink(len(places))``) answers the places that leave, they end as in a shrink
    order, the communicator tells the scheduler each freed host (the socket communicator:
    ``Evolving;Release;<host>``, after the place's process has ended), then ``post_shrink``
    runs and ``shrinkTimeAPGAS;<hosts>;<ns>`` is sent.  An open request is dropped (as the
    Java scheduler does on a release).

    Args:
        places: the places to release, whole hosts, never place 0.

    Returns:
        The :class:`OrderReport` (kind ``"release"``).

    Raises:
        MalleabilityError: away from place 0; an empty list; place 0, a place that is not
            part of the computation or already leaving, or places that split a host; no
            handler; no communicator, or one without evolving support; or a wrong answer of
            ``pre_release`` (nothing is released then).
        ApgasError: the runtime is not running.
    """
    return _evolving_malleability("release_places").release(places)


def malleable_state() -> HandlerState:
    """Where this program stands with malleability (at place 0): ``HandlerState.UNDEFINED``
    before a handler is defined, ``DEFINED`` while orders are accepted, ``DISABLED`` after.

    A library that would define a handler of its own (GLB does) checks this first: a
    program is malleable once.
    """
    m = _malleability()
    return m.state if m is not None else HandlerState.UNDEFINED


def order_reports() -> list[OrderReport]:
    """The orders carried out so far in this run (at place 0), oldest first: kind, hosts,
    places, and their total and handler times in nanoseconds."""
    m = _malleability()
    return list(m.reports) if m is not None else []


@contextmanager
def orders_held(timeout_s: float = 0.0) -> Iterator[bool]:
    """Hold shrink and grow orders off while the block runs (at place 0): no order starts,
    and no place leaves, until it ends.  Yields whether the hold was taken: ``False`` when an
    order under way did not end within ``timeout_s`` seconds (the block should then skip
    what needed the hold).  Keep the block short: an order waits for it.

    Used to ask every place something without racing a shrink (the benchmarks' progress,
    :func:`glb.work_done`; the evolving monitor holds the same lock for its load samples).
    Away from place 0, or without a runtime, nothing is held and it yields ``True``.
    """
    m = _malleability()
    if m is None:
        yield True
        return
    held = m.order_lock.acquire(timeout=timeout_s) if timeout_s > 0 else \
        m.order_lock.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            m.order_lock.release()


def watch_orders(listener: OrderListener) -> Callable[[], None]:
    """Call ``listener(report, error)`` after every shrink and grow order from now on, as it
    happens: ``error`` is ``None`` for an order carried out (``report`` as in
    :func:`order_reports`), else the :class:`MalleabilityError` that refused it (a host that
    cannot run a place, no handler defined yet or any more; ``report`` then has the order's
    kind and host count, and for a grow its hosts).  The benchmarks' command lines print
    their order lines this way (docs/reference/cli.md).

    The listener runs at place 0, on the thread that carried the order out (the
    communicator's), after the handler's ``post_*`` method; it should return quickly, and an
    exception it raises is logged, never passed on to the order.

    Returns:
        A function that stops the calls (calling it twice is harmless).

    Raises:
        ApgasError: the runtime is not running, or this is not place 0.
    """
    m = _malleability()
    if m is None:
        if current_runtime() is None:
            runtime()  # raises ApgasError: not running
        raise ApgasError("watch_orders() is for place 0 (the program's main)")
    m.listeners.append(listener)

    def stop() -> None:
        if listener in m.listeners:
            m.listeners.remove(listener)

    return stop
