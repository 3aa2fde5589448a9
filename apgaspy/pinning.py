"""Pinning places and their threads to the cores a job holds (public).

``APGAS_CORES`` (``host=cpulist;host=cpulist``) gives the cores of each host of a job; each
place binds to its share of its host's cores at its start (docs/guides/pinning.md).  An
extension that runs threads of its own (GLB's workers) binds each to one core of the share
with :func:`pinned_worker`; a scheduler writes the variable with :func:`format_cores_env`::

    from apgaspy.pinning import pinned_worker, place_cores

    with pinned_worker(i) as core:     # this thread on core i mod len(place_cores())
        work()                         # (None: the place is not pinned)
"""

from .wire.cores import format_cores_env, format_cpulist, parse_cores_env, parse_cpulist
from ._pinning import pin_thread, place_cores, pinned_worker

__all__ = ["format_cores_env", "format_cpulist", "parse_cores_env", "parse_cpulist",
           "pin_thread", "place_cores", "pinned_worker"]
