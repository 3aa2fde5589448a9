"""The evolving monitor: place 0 samples every place's load and asks for, or gives back, hosts.

Like APGAS for Java's ``EvolvingMonitor`` (v0.0.4): switched on by configuration
(``APGAS_ELASTIC=evolving``, or ``ELASTIC=evolving`` in the environment as the Java
ElasticJobScheduler sets it), it starts when the program defines its malleable handler and
stops when the handler is disabled.  Every ``APGAS_EVOLVING_INTERVAL`` seconds place 0 asks
each place for its load and lets the pure
:func:`~apgaspy.elastic._evolving_decision.decide` choose: request one host
(:meth:`Malleability.request`) or release the least loaded place
(:meth:`Malleability.release`, on a thread of its own so that a slow release blocks new
decisions for ``APGAS_EVOLVING_RELEASE_BLOCK`` seconds at most).  Errors are logged; the
program runs on.

Loads, in % (0-100), by ``APGAS_EVOLVING_MODE``:

* ``cpu``: the place's process CPU use since the previous sample (``psutil``), divided by
  its worker threads (``APGAS_THREADS``), at most 100.  Java measures the host's CPU
  instead; a place is one process here, and several places may share a host.
* ``task``: the value of the load source registered at the place
  (:func:`set_load_source`; GLB registers the share of time its worker was busy on work
  another place could take, a splittable bag); 0 where none is registered.

Either way a place reads 0 only after ``APGAS_EVOLVING_IDLE_GRACE`` seconds below 1 %
(:func:`place_load`).

Sampling goes over the places' immediate pools (:func:`apgaspy.gather.gather`, over
:func:`apgaspy.immediate_async_at` as GLB's steal requests do), question and answer: an
``at`` would queue behind the place's worker, and a GLB worker does not return while it has
work, so a busy place would never answer.  A place that has not answered within one
interval is left out of that sample.

The guide is docs/guides/evolving.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._config import setting
from .._exceptions import MalleabilityError
from .._place import Place
from ..gather import gather
from ._evolving_decision import EvolvingParams, EvolvingState, decide
from ._source import Source

if TYPE_CHECKING:
    from ._malleability import Malleability

__all__ = ["EvolvingMonitor", "set_load_source", "place_load"]

log = logging.getLogger("apgaspy")

_load = Source[float]("load source")
_process = None  # this place's psutil.Process, primed at the first cpu sample
_idle_since: float | None = None  # since when this place's load is below 1 %


def set_load_source(source: Callable[[], float] | None) -> Callable[[], float] | None:
    """Register this place's load for the evolving monitor's ``task`` mode.

    Call it at each place whose load a library knows (GLB registers, as it makes a place's
    worker, the share of time that worker is busy on a splittable bag: work another place
    could take).

    Args:
        source: a callable without arguments that returns the place's load in % (0-100),
            called once a sample (every ``APGAS_EVOLVING_INTERVAL`` s) on a runtime thread;
            ``None`` removes the source.

    Returns:
        The source registered before (``None`` if none), so a caller can put it back.

    Raises:
        TypeError: ``source`` is neither callable nor ``None``.
    """
    return _load.set(source)


def place_load(mode: str | None = None) -> float | None:
    """This place's load in % (0-100) for the evolving monitor, by ``mode`` (default
    ``APGAS_EVOLVING_MODE``); ``None`` at the very first ``cpu`` sample of a process (no
    interval measured yet).

    As in APGAS for Java, a place reads 0 (idle, to be released) only after
    ``APGAS_EVOLVING_IDLE_GRACE`` seconds (10) below 1 %; before that a load below 1 % reads
    0.01, so a place that just started, or waits a moment for work, is not released at once.
    A load source that fails is logged and read as 0 %, one out of range is clamped."""
    load = _raw_load(mode or setting("EVOLVING_MODE"))
    if load is None:
        return None
    global _idle_since
    now = time.monotonic()
    if load >= 1.0:
        _idle_since = None
        return load
    if _idle_since is None:
        _idle_since = now
    return 0.0 if now - _idle_since >= setting("EVOLVING_IDLE_GRACE") else 0.01


def _raw_load(mode: str) -> float | None:
    global _process
    if mode == "task":
        value = _load.read(float)  # None: none registered, or it failed (logged)
        if value is None or value != value:
            return 0.0
        return min(100.0, max(0.0, value))
    import psutil

    if _process is None:
        _process = psutil.Process()
        _process.cpu_percent(None)
        return None
    return min(100.0, _process.cpu_percent(None) / setting("THREADS"))


def params_from_settings() -> EvolvingParams:
    """The monitor's :class:`EvolvingParams` from the ``APGAS_EVOLVING_*`` settings.

    Raises:
        ConfigurationError: a setting is invalid, or ``APGAS_EVOLVING_LOW`` exceeds
            ``APGAS_EVOLVING_HIGH``.
    """
    from .._exceptions import ConfigurationError

    try:
        return EvolvingParams(
            interval=setting("EVOLVING_INTERVAL"), standby=setting("EVOLVING_STANDBY"),
            high=setting("EVOLVING_HIGH"), low=setting("EVOLVING_LOW"),
            request_timeout=setting("EVOLVING_REQUEST_TIMEOUT"),
            release_block=setting("EVOLVING_RELEASE_BLOCK"))
    except ValueError as exc:
        raise ConfigurationError(f"evolving monitor settings: {exc}") from None


class EvolvingMonitor:
    """Place 0's evolving monitor (see the module docstring).

    Args:
        malleability: place 0's malleability state, which carries requests and releases out.
        at: :func:`apgaspy.at` (handed in by the caller; unused since the loads travel over
            the immediate pools, kept so that the constructor's signature stays).
        places: :func:`apgaspy.places`.

    Attributes:
        decisions: every non-``wait`` decision taken, oldest first, as
            ``(action, place or None, reason)`` (for logs and tests).

    Raises:
        ConfigurationError: the settings are invalid.
    """

    def __init__(self, malleability: Malleability, at: Callable[..., Any],
                 places: Callable[[], list[Place]]) -> None:
        self.m = malleability
        self._at = at
        self._places = places
        self.params = params_from_settings()
        self.mode = setting("EVOLVING_MODE")
        self.decisions: list[tuple[str, int | None, str]] = []
        self._stop = threading.Event()
        self._releasing: threading.Thread | None = None
        self._release_since: float | None = None
        self._last_refusal = ""
        self._thread = threading.Thread(target=self._run, name="apgaspy-evolving", daemon=True)

    def start(self) -> None:
        """Start sampling and deciding (a daemon thread)."""
        log.info("evolving monitor: mode %s, %s", self.mode, self.params)
        self._thread.start()

    def stop(self) -> None:
        """Stop; waits up to one interval for the loop (a release under way goes on)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.params.interval + 5)

    def samples(self) -> dict[int, float] | None:
        """Every place's load now (place id → %); places that do not answer within one
        interval are left out.  ``None`` while an order or a release is under way: sampling
        holds the order lock, so that no place leaves while it is asked for its load.

        The question and the answer travel over the immediate pools (module docstring), so
        a place whose worker is busy answers at once."""
        if not self.m.order_lock.acquire(timeout=self.params.interval):
            return None
        try:
            loads = gather(place_load, self.mode, timeout_s=self.params.interval,
                           leave_out=self.m.leaving)
        finally:
            self.m.order_lock.release()
        return {p: v for p, v in loads.items() if v is not None}

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.wait(self.params.interval):
            try:
                self._step(started)
            except Exception:  # noqa: BLE001 - the monitor must not end the program
                log.exception("evolving monitor step failed")

    def _step(self, started: float) -> None:
        # the first sample primes the cpu measurement one interval before the standby ends
        if time.monotonic() - started < self.params.standby - self.params.interval:
            return
        samples = self.samples()
        if samples is None or self._stop.is_set():
            return
        if self._releasing is not None and not self._releasing.is_alive():
            self._releasing, self._release_since = None, None
        now = time.monotonic()
        state = EvolvingState(started, self.m.request_since, self._release_since)
        d = decide(samples, state, now, self.params)
        if d.expired:
            log.warning("evolving monitor: the request for a host got no answer within %g s; "
                        "given up", self.params.request_timeout)
            self.m.request_since = None
        if d.action == "wait":
            return
        log.info("evolving monitor: %s %s (%s; loads %s)", d.action,
                 "" if d.place is None else f"place({d.place})", d.reason,
                 {p: round(v, 1) for p, v in sorted(samples.items())})
        self.decisions.append((d.action, d.place, d.reason))
        if d.action == "request":
            try:
                self.m.request(1)
            except MalleabilityError as exc:
                # the same refusal each interval (a job at APGAS_MAX_HOSTS, say) is logged once
                level = logging.DEBUG if str(exc) == self._last_refusal else logging.WARNING
                self._last_refusal = str(exc)
                log.log(level, "evolving monitor: no request sent: %s", exc)
        elif d.action == "release" and d.place is not None:
            self._release_since = now
            self._releasing = threading.Thread(target=self._release, args=(d.place,),
                                               name="apgaspy-evolving-release", daemon=True)
            self._releasing.start()

    def _release(self, place: int) -> None:
        try:
            self.m.release([Place(place)])
        except MalleabilityError as exc:
            log.warning("evolving monitor: place(%d) not released: %s", place, exc)
        except Exception:  # noqa: BLE001 - a handler bug must not end the program
            log.exception("evolving monitor: the release of place(%d) failed", place)
