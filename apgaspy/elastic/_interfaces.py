"""The interfaces around place 0's malleability: what an order did (:class:`OrderReport`),
what a communicator needs of the object that carries orders out (:class:`OrderTaker`), and
what that object needs of its runtime (:class:`MalleabilityHost`).

A leaf: the communicator (:mod:`apgaspy.elastic._communicator`) hands its orders to place 0's
:class:`~apgaspy.elastic._malleability.Malleability` through :class:`OrderTaker`, without
importing it (the malleability imports the communicator it starts); the malleability names
the runtime through :class:`MalleabilityHost`, without importing it (the runtime holds the
malleability).  The runtime and the malleability satisfy these protocols structurally
(PEP 544).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .._place import Place

if TYPE_CHECKING:
    from .._membership import Membership
    from .._messages import Request

__all__ = ["MalleabilityHost", "OrderReport", "OrderTaker", "RequestSender"]


@dataclass
class OrderReport:
    """What an order did and how long it took.

    Attributes:
        kind: ``"shrink"`` or ``"grow"`` (orders), ``"release"`` (the program gave places
            back by itself, :func:`apgaspy.release_places`).
        hosts: the number of hosts in the order.
        places: the places released or added.
        host_names: for a shrink, the released hosts (each once, as given); for a grow, the
            order's hosts (one entry per slot, as given).
        total_ns: the whole order, nanoseconds.
        handler_ns: time spent in the handler's pre and post methods, nanoseconds.
        runtime_ns: ``total_ns - handler_ns``.
        died: the places that died while the order ran (a released place that died on its
            way out is in both ``places`` and ``died``).
    """

    kind: str
    hosts: int
    places: list[Place] = field(default_factory=list)
    host_names: list[str] = field(default_factory=list)
    total_ns: int = 0
    handler_ns: int = 0
    died: list[Place] = field(default_factory=list)

    @property
    def runtime_ns(self) -> int:
        return self.total_ns - self.handler_ns


class OrderTaker(Protocol):
    """What a communicator calls to carry out a scheduler's order (place 0's malleability)."""

    def shrink(self, n_hosts: int,
               on_released: Callable[[list[str]], None] | None = None,
               hosts: Sequence[str] = ()) -> OrderReport:
        """Release ``n_hosts`` hosts (``hosts``: exactly these, a named shrink);
        ``on_released`` gets their names once they are gone."""
        ...

    def grow(self, hosts: Sequence[str]) -> OrderReport:
        """Start places on ``hosts`` (one entry per host)."""
        ...


class RequestSender(Protocol):
    """The requests room as place 0's malleability sees it."""

    def request_all(self, targets: Iterable[int], request: Request,
                    timeout: float | None = None) -> list[int]:
        """Send ``request`` (a control message of :mod:`apgaspy._messages`) to ``targets``;
        return those that never acknowledged."""
        ...


class MalleabilityHost(Protocol):
    """What place 0's malleability (:class:`~apgaspy.elastic._malleability.Malleability`) needs
    from its runtime: where it runs, the place table, the control requests."""

    @property
    def here(self) -> int:
        """This place's id (0: the malleability lives at place 0)."""
        ...

    @property
    def membership(self) -> Membership:
        """The membership room: the place table, deaths, grow and shrink."""
        ...

    @property
    def requests(self) -> RequestSender:
        """The requests room."""
        ...
