"""Pluggable links between a running apgaspy program and a batch scheduler.

Each implements :class:`apgaspy.elastic.MalleableCommunicator` (its one home) and speaks
the scheduler wire protocol of the leaf package :mod:`apgaspy.wire` (messages, line keys,
framing), which the scheduler speaks too:

* :class:`SocketMalleableCommunicator` (``APGAS_COMMUNICATOR=socket``, the default when
  ``SCHEDULER_PORT`` is set): the job side of that protocol over TCP
  (docs/reference/protocol.md).
* :class:`ScheduleMalleableCommunicator` (``APGAS_COMMUNICATOR=schedule``): plays a fixed
  schedule of orders from ``APGAS_SCHEDULE``, for demos and tests.
* :mod:`communicators.testing`: the scheduler's end, standing in for a scheduler in
  tests and benchmarks.
* ``python -m communicators.order_cli``: send one order by hand.

The names below are loaded on first use; :class:`Order` and its parsers are
:mod:`apgaspy.wire.protocol`'s, here for a communicator's author.  The base class
``MalleableCommunicator`` is :mod:`apgaspy.elastic`'s.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apgaspy.wire.protocol import Order, OrderError, format_order, parse_order

    from .schedule import ScheduleMalleableCommunicator, parse_schedule
    from .socket import SocketMalleableCommunicator

__all__ = [
    "SocketMalleableCommunicator",
    "ScheduleMalleableCommunicator",
    "Order",
    "OrderError",
    "parse_order",
    "format_order",
    "parse_schedule",
]

_LAZY = {
    "Order": "apgaspy.wire.protocol",
    "OrderError": "apgaspy.wire.protocol",
    "format_order": "apgaspy.wire.protocol",
    "parse_order": "apgaspy.wire.protocol",
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
