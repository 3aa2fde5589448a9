"""The abstract link between a running program and a batch scheduler.

It belongs to the runtime's malleability layer (as ``MalleableCommunicator`` belongs to APGAS
for Java's ``impl.elastic``): the runtime creates and stops it; the top-level
``communicators`` package implements it for particular schedulers, through this class and
the public API only.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._exceptions import MalleabilityError

if TYPE_CHECKING:
    from ._interfaces import OrderReport, OrderTaker

__all__ = ["MalleableCommunicator"]

log = logging.getLogger("apgaspy")


class MalleableCommunicator(ABC):
    """Base class of a communicator: where a program gets its shrink and grow orders.

    The runtime creates the configured communicator (``APGAS_COMMUNICATOR``) without
    arguments when the program defines its malleable handler, calls :meth:`start`, and
    :meth:`stop` when the handler is disabled or the program ends.  A subclass turns the
    scheduler's orders into calls of :meth:`shrink` and :meth:`grow` (which carry them out,
    one at a time) and sends :meth:`notify` messages its own way.  Supporting another
    scheduler means writing one subclass; nothing else changes (APGAS for Java's
    ``MalleableCommunicator``).

    Attributes:
        malleability: place 0's :class:`~apgaspy.elastic._malleability.Malleability`, which carries
            the orders out; the runtime sets it before :meth:`start` (``None`` before).
    """

    malleability: OrderTaker | None = None
    #: Whether :meth:`request` and :meth:`release` reach the scheduler (an evolving job's
    #: own requests, docs/guides/evolving.md); a subclass that implements them sets it.
    EVOLVING: bool = False

    @classmethod  # noqa: B027 - optional, empty by default
    def check_configuration(cls) -> None:
        """Check the settings this communicator will read, before any place starts.

        :func:`apgaspy.run` and :func:`apgaspy.session` call it for the configured
        communicator, so that a bad setting (an ``APGAS_SCHEDULE`` entry that does not parse,
        say) ends the program at once with one clear error instead of when the handler is
        defined, after the places have started.  The default checks nothing.

        Raises:
            ConfigurationError: a setting is missing or malformed (the message names it).
        """

    @classmethod
    def load_notifier(cls) -> Any:
        """What reports the load of a job the scheduler runs as rigid (``ELASTIC=rigid``),
        which gets no communicator: an object with ``start()`` and ``stop()`` (the socket
        communicator: its :class:`~communicators.socket.SocketNotifier`), or ``None`` (the
        default: this scheduler is told nothing).

        Raises:
            ConfigurationError: a setting the notifier reads is bad.
        """
        return None

    @abstractmethod
    def start(self) -> None:
        """Begin accepting orders (and tell the scheduler so).

        Raises:
            OSError or ConfigurationError: the link cannot be set up.
        """

    @abstractmethod
    def stop(self) -> None:
        """Stop accepting orders (and tell the scheduler so); must not raise."""

    def notify(self, message: str) -> None:  # noqa: B027 - optional, empty by default
        """Send a notification (``growTimeAPGAS;2;1234``, say) to the scheduler.

        The default sends nothing; override it when the scheduler listens.
        """

    def request(self, n: int) -> None:
        """Ask the scheduler for ``n`` more hosts (an evolving job); it answers, when it
        can, with an ordinary grow order.

        Raises:
            MalleabilityError: by default ("this communicator does not support evolving
                requests"); an implementation raises it when the request cannot be sent.
        """
        raise MalleabilityError(
            f"this communicator does not support evolving requests ({type(self).__name__})")

    def release(self, hosts: list[str]) -> None:
        """Tell the scheduler that ``hosts`` are given back: their places have ended
        (called by :meth:`~apgaspy.elastic._malleability.Malleability.release` before
        ``post_shrink``).  Must not raise for an unreachable scheduler (log it): the places
        are gone either way.

        Raises:
            MalleabilityError: by default, as :meth:`request`.
        """
        raise MalleabilityError(
            f"this communicator does not support evolving requests ({type(self).__name__})")

    # ---------------------------------------------------------------- for subclasses
    def shrink(self, n_hosts: int,
               on_released: Callable[[list[str]], None] | None = None,
               hosts: Sequence[str] = ()) -> OrderReport:
        """Carry out a shrink of ``n_hosts`` hosts (waits for an order under way).

        Args:
            on_released: receives the released host names when their places are gone,
                before the handler's ``post_shrink`` (reply to the scheduler there).
            hosts: empty (the handler chooses), or the ``n_hosts`` hosts to release (a
                named shrink: the scheduler drains those nodes).

        Raises:
            MalleabilityError: the order is refused; the program runs on unchanged.
        """
        return self._orders().shrink(n_hosts, on_released, hosts)

    def grow(self, hosts: Sequence[str]) -> OrderReport:
        """Carry out a grow onto ``hosts`` (one entry per host; waits for an order under way).

        Raises:
            MalleabilityError: the order is refused (an unreachable host, say).
        """
        return self._orders().grow(hosts)

    def _orders(self) -> OrderTaker:
        if self.malleability is None:
            raise MalleabilityError("this communicator was not started by the runtime: it has "
                                    "no orders to carry out")
        return self.malleability
