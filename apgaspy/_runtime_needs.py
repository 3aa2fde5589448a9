"""What each part of a place needs from its runtime, as narrow protocols.

A place's :class:`~apgaspy._runtime.Runtime` owns its rooms and hands each one itself
(``Membership(rt)``, ``Requests(rt)``, ``Finishes(rt)``, ``install_forwarding(rt)``; place 0's
malleability names its own needs in :mod:`apgaspy.elastic._interfaces`).  A room does
not import the runtime to name that argument's type: it names the protocol here that lists
the few members it uses, so that the runtime imports its rooms and no room imports the
runtime back, not even for the type checker (docs/design/runtime-structure.md).  The runtime
satisfies every protocol here structurally (PEP 544); this module imports no module of
apgaspy at run time (only :mod:`._messages`, a leaf, to name the control messages' type).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._messages import ControlMessage, Request

__all__ = ["AckRequests", "RequestsHost", "DeadPlaces", "FinishHost", "FinishesOfDead",
           "FinishMembership", "FinishPool", "FinishTransport", "MembershipHost",
           "MembershipTransport", "OutputHost", "PendingTasks", "RoomHost"]


class DeadPlaces(Protocol):
    """The membership room as the requests room sees it: the places known to be dead."""

    @property
    def dead(self) -> set[int]:
        """The ids of the places known to be dead."""
        ...


class RoomHost(Protocol):
    """What every room needs from its runtime: the place, the shared lock, the control
    messages' send."""

    @property
    def here(self) -> int:
        """This place's id."""
        ...

    @property
    def state_lock(self) -> threading.Lock:
        """The runtime's lock over finish records, the place table and the acks."""
        ...

    def send_ctrl(self, dest: int, message: ControlMessage) -> None:
        """Send the control message ``message`` to place ``dest``."""


class RequestsHost(RoomHost, Protocol):
    """What the requests room (:class:`~apgaspy._requests.Requests`) needs from its
    runtime."""

    @property
    def membership(self) -> DeadPlaces:
        """The membership room."""
        ...


class OutputHost(Protocol):
    """What the forwarded print output (:mod:`apgaspy._output`) needs from its runtime."""

    output_dirty: bool

    def send_output(self, stream: int, text: str) -> None:
        """Forward ``text`` written on ``stream`` (1: stdout, 2: stderr) to place 0."""


class MembershipTransport(Protocol):
    """The transport (:class:`~apgaspy._transport.Transport`) as the membership room uses it."""

    def add_peer(self, place: int, endpoint: str, watch: bool = False) -> None:
        """Open the connection to ``place`` at ``endpoint`` (``watch``: detect its failure)."""

    def remove_peer(self, place: int, linger_s: float = ...) -> None:
        """Close the connection to ``place`` (``linger_s`` seconds for what is queued)."""

    def has_peer(self, place: int) -> bool:
        """Whether a connection to ``place`` is open."""
        ...

    def send(self, dest: int, message: bytes) -> None:
        """Send the encoded ``message`` to place ``dest`` (``KeyError``: no connection)."""


class AckRequests(Protocol):
    """The requests room (:class:`~apgaspy._requests.Requests`) as the membership room
    uses it."""

    def request_all(self, targets: Iterable[int], request: Request,
                    timeout: float | None = None) -> list[int]:
        """Send ``request`` to ``targets``; return those that never acknowledged."""
        ...

    def ack(self, src: int, op: int) -> None:
        """Acknowledge request ``op`` of place ``src``."""

    def stop_waiting_on(self, place: int) -> None:
        """Stop waiting for acknowledgements from ``place``, which died."""


class FinishesOfDead(Protocol):
    """The finish room (:class:`~apgaspy._finish.Finishes`) as the membership room uses it."""

    @property
    def remotes(self) -> dict[Any, Any]:
        """The remote finishes with tasks at this place, by finish id."""
        ...

    def fail_waiting_on(self, place: int) -> None:
        """Fail the finishes whose home is here and that wait on ``place``, which died."""

    def places_gone(self, gone: Iterable[int]) -> None:
        """``gone`` died or left: send again what went through a gone aggregator."""

    def holding(self) -> bool:
        """True while this place keeps updates that no home acknowledged yet."""
        ...


class PendingTasks(Protocol):
    """A worker pool (:class:`~apgaspy._pool.Pool`) as the membership room uses it."""

    @property
    def pending(self) -> int:
        """The tasks submitted and not yet ended."""
        ...


class MembershipHost(RoomHost, Protocol):
    """What the membership room (:class:`~apgaspy._membership.Membership`) needs from its
    runtime: its sends, its transport, the other rooms and the pools."""

    @property
    def transport(self) -> MembershipTransport:
        """The connections to the other places."""
        ...

    @property
    def requests(self) -> AckRequests:
        """The requests room."""
        ...

    @property
    def finishes(self) -> FinishesOfDead:
        """The finish room."""
        ...

    @property
    def pool(self) -> PendingTasks:
        """The worker pool."""
        ...

    @property
    def immediate(self) -> PendingTasks:
        """The immediate pool."""
        ...

    def flush_output(self) -> None:
        """Push this place's buffered print output to place 0."""


class FinishMembership(DeadPlaces, Protocol):
    """The membership room as the finish room uses it: the place table, the dead places and
    the places a shrink releases."""

    @property
    def table(self) -> dict[int, Any]:
        """The live places: place id → its ``PlaceInfo`` (``endpoint``, ``slot``)."""
        ...

    @property
    def released(self) -> set[int]:
        """The places that a shrink is releasing."""
        ...

    def bad_place(self, dest: int) -> Exception:
        """The error for naming place ``dest``, which is not live."""
        ...


class FinishTransport(Protocol):
    """The transport (:class:`~apgaspy._transport.Transport`) as the finish room uses it."""

    def post(self, dest: Any, message: bytes) -> None:
        """Queue ``message`` for ``dest`` (``KeyError``: no connection)."""

    def pump(self, dest: Any) -> None:
        """Send what is queued for ``dest``."""

    def flush(self) -> None:
        """Send everything queued."""

    def has_peer(self, place: Any) -> bool:
        """Whether a connection to ``place`` is open."""
        ...

    def add_peer(self, place: Any, endpoint: str, watch: bool = False) -> None:
        """Open the connection to ``place`` at ``endpoint``."""

    def wait_inbox(self, inbox: Any, done: Any) -> None:
        """Handle the messages of ``inbox`` until ``done()``."""


class FinishPool(Protocol):
    """A worker pool (:class:`~apgaspy._pool.Pool`) as the finish room uses it."""

    def submit(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the pool."""


class FinishHost(RoomHost, Protocol):
    """What the finish room (:class:`~apgaspy._finish.Finishes`) needs from its runtime: its
    sends, its transport, the membership room, the pools and the print output's state."""

    @property
    def membership(self) -> FinishMembership:
        """The membership room."""
        ...

    @property
    def transport(self) -> FinishTransport:
        """The connections to the other places."""
        ...

    @property
    def pool(self) -> FinishPool:
        """The worker pool."""
        ...

    @property
    def immediate(self) -> FinishPool:
        """The immediate pool."""
        ...

    #: True while print output waits to be forwarded to place 0.
    output_dirty: bool
    #: The last print output this place sent to place 0.
    output_seq: int

    def send(self, dest: int, msg: bytes, soon: bool = False) -> None:
        """Send the encoded message ``msg`` to place ``dest``."""

    def flush_output(self) -> None:
        """Forward the print output written so far to place 0."""

    def wait_output(self, src: int, seq: int) -> None:
        """At place 0: wait until output ``seq`` of place ``src`` is written."""
