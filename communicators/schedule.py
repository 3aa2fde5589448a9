"""A communicator that plays a fixed schedule of orders, for demos and tests.

``APGAS_COMMUNICATOR=schedule`` and, for example::

    APGAS_SCHEDULE="after 5 s grow 2 on localhost localhost; after 12 s shrink 1"

Times are seconds after the handler was defined.  ``grow <n>`` without hosts means n times
``localhost``.  Refused orders are logged; the program runs on.  Entries whose time had not
come when the handler was disabled (the computation ended first) are named in one warning,
so that a schedule longer than the run never passes unnoticed.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass

from apgaspy import ConfigurationError, MalleabilityError, OrdersEndedError
from apgaspy.config import setting
from apgaspy.elastic import MalleableCommunicator

from apgaspy.wire.protocol import Order, OrderError, parse_order

__all__ = ["ScheduleMalleableCommunicator", "ScheduledOrder", "parse_schedule"]

log = logging.getLogger("apgaspy.communicators")

_ENTRY = re.compile(r"^after\s+(\d+(?:\.\d*)?|\.\d+)\s*s?\s+(.*)$")


@dataclass(frozen=True)
class ScheduledOrder:
    """An order to carry out ``at`` seconds after the start."""

    at: float
    order: Order


def parse_schedule(text: str) -> list[ScheduledOrder]:
    """Parse a schedule: entries ``after <seconds> [s] <order>`` separated by ``;``.

    ``<order>`` is a protocol order (``shrink 1``, ``grow 2 h1 h2``), where ``on`` may stand
    before the hosts and hosts may be left out of a grow (then ``localhost`` each).

    Raises:
        ConfigurationError: an entry does not parse.
    """
    entries = []
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        m = _ENTRY.match(item)
        if not m:
            raise ConfigurationError(
                f"APGAS_SCHEDULE entry {item!r}: expected 'after <seconds> s <order>'")
        at, rest = float(m.group(1)), m.group(2).split()
        if rest and rest[0] == "grow":
            words = [w for w in rest if w != "on"]
            if len(words) == 2 and words[1].isdigit():
                words += ["localhost"] * int(words[1])
            rest = words
        try:
            order = parse_order(" ".join(rest))
        except OrderError as exc:
            raise ConfigurationError(f"APGAS_SCHEDULE entry {item!r}: {exc}") from None
        entries.append(ScheduledOrder(at, order))
    return sorted(entries, key=lambda e: e.at)


class ScheduleMalleableCommunicator(MalleableCommunicator):
    """Carries out the orders of ``APGAS_SCHEDULE`` at their times.

    Attributes:
        results: (entry, report or the error) for each order carried out so far.

    Raises:
        ConfigurationError: ``APGAS_SCHEDULE`` is missing or malformed.
    """

    def __init__(self) -> None:
        self.schedule = self._read_schedule()
        self.results: list[tuple[ScheduledOrder, object]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @staticmethod
    def _read_schedule() -> list[ScheduledOrder]:
        text = setting("SCHEDULE")
        if not text:
            raise ConfigurationError("APGAS_COMMUNICATOR=schedule needs APGAS_SCHEDULE, e.g. "
                                     "'after 1 s grow 2 on localhost localhost; "
                                     "after 3 s shrink 1'")
        return parse_schedule(text)

    @classmethod
    def check_configuration(cls) -> None:
        """Parse ``APGAS_SCHEDULE`` before any place starts.

        Raises:
            ConfigurationError: it is missing or an entry does not parse.
        """
        cls._read_schedule()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._play, name="apgaspy-schedule",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is None or self._thread is threading.current_thread():
            return  # an order's handler stopped it: that entry is still being played
        self._thread.join(timeout=60)
        unplayed = self.schedule[len(self.results):]
        if unplayed and not self._thread.is_alive():
            log.warning("%d scheduled order%s not carried out: the computation ended first "
                        "(%s)", len(unplayed), "s" if len(unplayed) > 1 else "",
                        "; ".join(f"after {e.at:g} s {e.order.kind} {e.order.n}"
                                  + (f" on {' '.join(e.order.hosts)}" if e.order.hosts else "")
                                  for e in unplayed))

    def _play(self) -> None:
        t0 = time.monotonic()
        for entry in self.schedule:
            if self._stop.wait(max(0.0, t0 + entry.at - time.monotonic())):
                return
            try:
                if entry.order.kind == "shrink":
                    result: object = self.shrink(entry.order.n)
                else:
                    result = self.grow(entry.order.hosts)
                log.info("scheduled %s %d: done", entry.order.kind, entry.order.n)
            except OrdersEndedError as exc:  # due just as the computation ended: no fault
                log.info("scheduled %s %d %s", entry.order.kind, entry.order.n, exc)
                result = exc
            except MalleabilityError as exc:
                log.error("scheduled %s %d refused: %s", entry.order.kind, entry.order.n, exc)
                result = exc
            except Exception as exc:  # noqa: BLE001 - a failed order must not end the schedule
                log.error("scheduled %s %d failed: %s: %s", entry.order.kind, entry.order.n,
                          type(exc).__name__, exc)
                result = exc
            self.results.append((entry, result))
