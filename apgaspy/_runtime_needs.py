"""What each part of a place needs from its runtime, as narrow protocols.

A place's :class:`~apgaspy._runtime.Runtime` owns its rooms and hands each one itself
(``Control(rt)``, ``install_forwarding(rt)``; place 0's malleability names its own needs in
:mod:`apgaspy.elastic._interfaces`).  A room does
not import the runtime to name that argument's type: it names the protocol here that lists
the few members it uses, so that the runtime imports its rooms and no room imports the
runtime back, not even for the type checker (docs/design/runtime-structure.md).  The runtime
satisfies every protocol here structurally (PEP 544); this module imports no module of
apgaspy at run time.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

__all__ = ["ControlHost", "DeadPlaces", "OutputHost"]


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
