"""What each part of a place needs from its runtime, as narrow protocols.

A place's :class:`~apgaspy._runtime.Runtime` owns its rooms and hands each one itself
(``Control(rt)``, ``Finishes(rt)``, ``install_forwarding(rt)``; place 0's malleability
names its own needs in :mod:`apgaspy.elastic._interfaces`).  A room does
not import the runtime to name that argument's type: it names the protocol here that lists
the few members it uses, so that the runtime imports its rooms and no room imports the
runtime back, not even for the type checker (docs/design/runtime-structure.md).  The runtime
satisfies every protocol here structurally (PEP 544); this module imports no module of
apgaspy at run time.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

__all__ = ["ControlHost", "DeadPlaces", "FinishHost", "OutputHost"]


class DeadPlaces(Protocol):
    """The membership room as the control room sees it: the places known to be dead."""

    @property
    def dead(self) -> set[int]:
        """The ids of the places known to be dead."""
        ...


class ControlHost(Protocol):
    """What the control room (:class:`~apgaspy._control_requests.Control`) needs from its
    runtime."""

    @property
    def here(self) -> int:
        """This place's id."""
        ...

    @property
    def state_lock(self) -> threading.Lock:
        """The runtime's lock over finish records, the place table and the acks."""
        ...

    @property
    def membership(self) -> DeadPlaces:
        """The membership room."""
        ...

    def send_ctrl(self, dest: int, name: str, *args: Any) -> None:
        """Send the control message ``name(*args)`` to place ``dest``."""


class OutputHost(Protocol):
    """What the forwarded print output (:mod:`apgaspy._output`) needs from its runtime."""

    output_dirty: bool

    def send_output(self, stream: int, text: str) -> None:
        """Forward ``text`` written on ``stream`` (1: stdout, 2: stderr) to place 0."""


class FinishHost(Protocol):
    """What the finish room (:class:`~apgaspy._finish.Finishes`) needs from its runtime."""

    @property
    def here(self) -> int:
        """This place's id."""
        ...

    @property
    def state_lock(self) -> threading.Lock:
        """The runtime's lock over finish records, the place table and the acks."""
        ...

    #: The membership room (``table``, ``dead``, ``released``, ``bad_place``).
    membership: Any
    #: The place's ZeroMQ transport (``post``, ``pump``, ``flush``, ``has_peer``,
    #: ``add_peer``, ``wait_inbox``).
    transport: Any
    #: The worker pool and the pool of immediate tasks (``submit``).
    pool: Any
    immediate: Any
    #: True while print output waits to be forwarded to place 0.
    output_dirty: bool
    #: The last print output this place sent to place 0.
    output_seq: int

    def send(self, dest: int, msg: bytes, soon: bool = False) -> None:
        """Send the encoded message ``msg`` to place ``dest``."""

    def send_ctrl(self, dest: int, name: str, *args: Any) -> None:
        """Send the control message ``name(*args)`` to place ``dest``."""

    def flush_output(self) -> None:
        """Forward the print output written so far to place 0."""

    def wait_output(self, src: int, seq: int) -> None:
        """At place 0: wait until output ``seq`` of place ``src`` is written."""
