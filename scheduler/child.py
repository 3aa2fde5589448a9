"""A child scheduler: ``python -m scheduler serve --parent``, run as a job of another one.

After Flux's nested instances (Milroy et al.: any instance may start child instances on
part of its allocation; a request a child cannot meet goes to its parent, MatchGrow, and
released nodes go back up), one level of it on the text protocol.  The child is an
*evolving* job of its parent (the parent runs an evolving policy and the job is
``#JOB_CLASS evolving``): it serves its own queue on the nodes its parent gave it (its
``NODE_FILE``) and speaks to the parent as any evolving job does, through
:class:`communicators.socket.SocketMalleableCommunicator` and the variables (and key) its
parent gave it:

::

    parent scheduler ──grow 1 <node>──► ParentLink.grow ──► node add <node> (scheduler.pool)
          ▲                                                   ─► a queued job starts there
          │ Evolving;Request;1       ParentLink, every 0.2 s:
          ├──────────────────────── a queued job needs more nodes than the child has
          │ Evolving;Release;<node>  (one request at a time, as the Java scheduler serves)
          └──────────────────────── a node the parent granted is free and no queued job
                                     waits: node remove here, then the release once gone
    parent's named shrink (it drains a node) ─► ParentLink.shrink: node remove here, the
                                     reply once the node has left (its jobs moved off or
                                     ended, as any drain)

The child never gives back the nodes it started on.  Before its jobs start, the parent's
variables are taken out of the child's environment, so that its jobs see only their own
scheduler's (:func:`scrub_parent_env`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from apgaspy.wire.auth import KEY_ENV, KEY_FILE_ENV
from apgaspy.wire.protocol import ORDER_PORT_ENV

if TYPE_CHECKING:
    from .server import Server

__all__ = ["PARENT_ENV", "ParentLink", "scrub_parent_env"]

log = logging.getLogger("scheduler.child")

#: The variables a parent scheduler gives its job, taken out of a child's environment once
#: read, so that the child's own jobs never see them.
PARENT_ENV = ("SCHEDULER_IP", "SCHEDULER_PORT", "JOBNAME", "NODE_FILE", "NODES", "ELASTIC",
              KEY_ENV, KEY_FILE_ENV, "APGAS_CORES", "APGAS_CORES_FILE",
              "APGAS_PLACES_PER_HOST", "GLB_WORKERS", ORDER_PORT_ENV)

_TICK_S = 0.2


def scrub_parent_env() -> None:
    """Take :data:`PARENT_ENV` out of this process's environment."""
    for name in PARENT_ENV:
        os.environ.pop(name, None)


class ParentLink:
    """The child's side of its parent (module docstring): asks for nodes, takes grants as
    ``node add``, gives idle granted nodes back, carries out the parent's named shrinks.

    It is the communicator's order taker (``malleability``) in place of the apgaspy
    runtime: the parent's orders come to :meth:`grow` and :meth:`shrink`.

    Args:
        server: the child scheduler (started).
        first: the nodes it started on (never given back).

    Raises:
        apgaspy.ConfigurationError: the parent's variables (``SCHEDULER_IP``,
            ``SCHEDULER_PORT``, the key) are missing or malformed.
    """

    def __init__(self, server: Server, first: Sequence[str]) -> None:
        from communicators.socket import SocketMalleableCommunicator

        self.server = server
        self.first = tuple(first)
        self.comm = SocketMalleableCommunicator()  # reads the parent's variables
        self.comm.malleability = self
        self.comm.evolving = True  # it asks and gives back by itself
        #: Nodes the parent granted (a restarted child: the pool's added nodes).
        self.granted: list[str] = [n for n in server.status()["pool"]["added"]
                                   if n not in self.first]
        self.asked = False
        self.releasing: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="parent-link", daemon=True)

    def start(self) -> None:
        """Listen for the parent's orders (``APGAS-Ready`` to the parent) and start asking
        and releasing."""
        self.comm.start()
        self._thread.start()

    def stop(self) -> None:
        """Stop asking and listening (``APGAS-Disabled`` to the parent).  Idempotent."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self.comm.stop()

    # ---------------------------------------------------------------- asking and releasing

    def _run(self) -> None:
        while not self._stop.wait(_TICK_S):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the link must not stop the scheduler
                log.exception("parent link")

    def tick(self) -> None:
        """One look at the child's queue and nodes (module docstring)."""
        st = self.server.status()
        states = {n["name"]: n["state"] for n in st["nodes"]}
        serving = [n for n, s in states.items() if s in ("free", "busy")]
        waiting = [j for j in st["jobs"] if j["state"] in ("waiting", "pending")]
        short = any(j["min_nodes"] > len(serving) for j in waiting)
        if short and not self.asked and not self.releasing:
            self.comm.request(1)
            self.asked = True
            log.info("asked the parent for a node (%d here)", len(serving))
        for node in sorted(self.releasing):
            if states.get(node, "gone") == "gone":
                self.releasing.discard(node)
                self.granted.remove(node)
                self.comm.release([node])
                log.info("gave %s back to the parent", node)
        if not waiting and not self.asked:
            idle = [n for n in self.granted if states.get(n) == "free"
                    and n not in self.releasing]
            for node in idle:
                self.server.node_remove([node])
                self.releasing.add(node)

    # ---------------------------------------------------------------- the parent's orders

    def grow(self, hosts: Sequence[str]) -> Any:
        """The parent's grant: the hosts join the child's pool."""
        from apgaspy import MalleabilityError
        from apgaspy.elastic import OrderReport

        from ._exceptions import PoolError

        t0 = time.perf_counter_ns()
        try:
            self.server.node_add(list(hosts))
        except PoolError as exc:
            raise MalleabilityError(f"the child scheduler cannot add {' '.join(hosts)}: "
                                    f"{exc}") from None
        self.granted.extend(hosts)
        self.asked = False
        report = OrderReport("grow", len(hosts))
        report.total_ns = time.perf_counter_ns() - t0
        return report

    def shrink(self, n_hosts: int, on_released: Callable[[list[str]], None] | None = None,
               hosts: Sequence[str] = ()) -> Any:
        """The parent takes ``hosts`` back (its named shrink; plain: granted nodes, free ones
        first): they are removed here, and the reply goes once they have left.

        Raises:
            MalleabilityError: a first node, an unknown one, or the nodes did not leave in
                time (``APGAS_SHRINK_REPLY_TIMEOUT``, less a second).
        """
        from apgaspy import MalleabilityError
        from apgaspy.config import setting
        from apgaspy.elastic import OrderReport

        from ._exceptions import PoolError

        t0 = time.perf_counter_ns()
        wanted = list(hosts)
        if not wanted:
            states = {n["name"]: n["state"] for n in self.server.status()["nodes"]}
            wanted = sorted(self.granted, key=lambda n: states.get(n) != "free")[:n_hosts]
        if len(wanted) != n_hosts or any(h in self.first for h in wanted):
            raise MalleabilityError(f"the child scheduler gives back granted nodes only, "
                                    f"not {n_hosts} of {wanted}")
        try:
            self.server.node_remove(wanted)
        except PoolError as exc:
            raise MalleabilityError(str(exc)) from None
        deadline = time.monotonic() + max(1.0, setting("SHRINK_REPLY_TIMEOUT") - 1.0)
        while time.monotonic() < deadline:
            gone = {n["name"] for n in self.server.status()["nodes"] if n["state"] == "gone"}
            if set(wanted) <= gone:
                break
            time.sleep(0.1)
        else:
            raise MalleabilityError(f"{' '.join(wanted)} still hold jobs of the child")
        for node in wanted:
            if node in self.granted:
                self.granted.remove(node)
        if on_released is not None:
            on_released(wanted)
        report = OrderReport("shrink", n_hosts)
        report.host_names = wanted
        report.total_ns = time.perf_counter_ns() - t0
        return report
