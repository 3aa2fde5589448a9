"""What this place has sent and received (public): for measurements and tools.

    from apgaspy.traffic import traffic

    before = traffic()
    ...  # a finish over all places
    after = traffic()
    messages_home = after["messages_in"] - before["messages_in"]

The counters are plain integers kept by the transport (a frame is a batch of messages, its
bytes include the MAC and the lengths); concurrent senders may very rarely lose an increment.
"""

from __future__ import annotations

from ._exceptions import ApgasError
from ._spawn import LaunchTraffic
from ._runtime import current_runtime

__all__ = ["traffic", "launch_traffic"]


def traffic() -> dict[str, int]:
    """This place's ZeroMQ traffic since it started.

    Returns:
        ``frames_in``, ``messages_in``, ``bytes_in``, ``frames_out``, ``messages_out`` and
        ``bytes_out`` (counts and bytes).

    Raises:
        ApgasError: the runtime is not running in this process.
    """
    rt = current_runtime()
    if rt is None:
        raise ApgasError("traffic() needs a running apgaspy runtime (call it inside run())")
    return rt.transport.traffic()


def launch_traffic() -> dict[str, int]:
    """What this process (place 0) sent the launchers of its places over MPI so far.

    Returns:
        ``launches`` (``MPI_Comm_spawn`` calls, one per host and launch group), ``places``
        (places started) and ``bytes`` (the pickled start data and tables sent to them); all
        0 at a place that started none.
    """
    return {"launches": LaunchTraffic.launches, "places": LaunchTraffic.places,
            "bytes": LaunchTraffic.bytes}
