"""Pluggable links between a running apgaspy program and a batch scheduler.

* :mod:`communicators.protocol`: the scheduler wire protocol (every message, its format,
  who sends it); pure, shared by the job side here and the scheduler (:mod:`scheduler`).
* :mod:`communicators.auth`: a job's line key, and signing and checking lines with it
  (both ends; docs/reference/security.md).
* :mod:`communicators.framing`: reading the protocol's lines off a connection (both ends).
* :class:`SocketMalleableCommunicator` (``APGAS_COMMUNICATOR=socket``, the default when
  ``SCHEDULER_PORT`` is set): the job side of that protocol over TCP
  (docs/reference/protocol.md).
* :class:`ScheduleMalleableCommunicator` (``APGAS_COMMUNICATOR=schedule``): plays a fixed
  schedule of orders from ``APGAS_SCHEDULE``, for demos and tests.
* :mod:`communicators.testing`: the scheduler's end, standing in for a scheduler in
  tests and benchmarks.
* ``python -m communicators.order_cli``: send one order by hand.

The names below are loaded on first use, so that ``import communicators.protocol`` (the
scheduler does) imports neither the apgaspy runtime nor anything else of this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apgaspy.elastic import MalleableCommunicator

    from .protocol import Order, OrderError, format_order, parse_order
    from .schedule import ScheduleMalleableCommunicator, parse_schedule
    from .socket import SocketMalleableCommunicator

__all__ = [
    "MalleableCommunicator",
    "SocketMalleableCommunicator",
    "ScheduleMalleableCommunicator",
    "Order",
    "OrderError",
    "parse_order",
    "format_order",
    "parse_schedule",
]

_LAZY = {
    "Order": "communicators.protocol",
    "OrderError": "communicators.protocol",
    "format_order": "communicators.protocol",
    "parse_order": "communicators.protocol",
    "MalleableCommunicator": "apgaspy.elastic",
    "SocketMalleableCommunicator": "communicators.socket",
    "ScheduleMalleableCommunicator": "communicators.schedule",
    "parse_schedule": "communicators.schedule",
}


def __getattr__(name: str) -> Any:
    """Load the runtime-backed names on first use (module docstring)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'communicators' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
