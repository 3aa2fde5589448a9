"""The scheduler wire protocol: the text both ends of a malleable job's link speak.

A leaf package: its modules import the standard library and each other, nothing else of
apgaspy (``import apgaspy.wire.protocol`` loads neither the runtime nor ZeroMQ, since
``apgaspy`` loads its runtime on first use).  Every product module that reads or writes a
line of the protocol takes its text from here, on both sides of the wire::

    apgaspy.elastic, glb ─────────┐   (timing lines of a shrink, a grow, GLB's phases)
    communicators (the job's end) ┼──► apgaspy.wire ──► the standard library
    scheduler (the other end) ────┘   (orders, replies, notifications, keys, MACs)

* :mod:`apgaspy.wire.protocol`: every message, its format and who sends it (the table of
  docs/reference/protocol.md; ``python -m apgaspy.wire.protocol --write`` regenerates it).
* :mod:`apgaspy.wire.auth`: a job's line key, and signing and checking lines with it
  (docs/reference/security.md).
* :mod:`apgaspy.wire.framing`: reading the protocol's lines off a connection.
* :mod:`apgaspy.wire.cores`: the cores a scheduler gives a job on each host
  (``APGAS_CORES``, Linux CPU lists), which the runtime pins its places to.

Their errors are each a :class:`WireError` (a line that does not parse:
:class:`OrderError`; does not authenticate: :class:`LineAuthError`; does not arrive:
:class:`LineTimeoutError`, :class:`LineTooLongError`), found here and in the module that
raises each.

(They were ``communicators.protocol``, ``communicators.auth`` and ``communicators.framing``
before version 0.1's last changes.)
"""

from ._exceptions import LineAuthError, LineTimeoutError, LineTooLongError, OrderError, WireError

__all__ = ["LineAuthError", "LineTimeoutError", "LineTooLongError", "OrderError", "WireError"]
