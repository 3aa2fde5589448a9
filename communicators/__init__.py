"""Pluggable links between a running apgaspy program and a batch scheduler.

* :class:`MalleableCommunicator`: the abstract base (one subclass per kind of scheduler).
* :class:`SocketMalleableCommunicator` (``APGAS_COMMUNICATOR=socket``, the default when
  ``SCHEDULER_PORT`` is set): the text protocol of the Java ElasticJobScheduler (SPEC.md §2).
* :class:`ScheduleMalleableCommunicator` (``APGAS_COMMUNICATOR=schedule``): plays a fixed
  schedule of orders from ``APGAS_SCHEDULE``, for demos and tests.
* ``python -m communicators.order``: send one order by hand.
"""

from apgaspy.elastic import MalleableCommunicator

from ._protocol import Order, OrderError, format_order, parse_order
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
