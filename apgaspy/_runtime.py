"""The place runtime: one :class:`Runtime` per process, holding the transport, the pools, the
object registries and the rooms of its place.

The rooms, each a module with its protocol in its docstring:

* :mod:`._finish` (``rt.finishes``): the finish records and the counting protocol of ``finish``
  (spawning counted tasks, running them, UPDATEs, failing finishes that wait on a dead place).
* :mod:`._membership` (``rt.membership``): the place table, dead and released places,
  readiness, grow, deaths, the shrink protocol and the shutdown handshake.
* :mod:`._requests` (``rt.requests``): control requests that wait for acknowledgements.

Interrupts (SIGINT, SIGTERM) are not a room of the runtime but of the process:
:mod:`._interrupt` (one per process), whose ``ctrl_interrupt`` handles the ``Interrupt``
control message at place 0.

The runtime creates them, sends for them (:meth:`Runtime.send`, :meth:`Runtime.send_ctrl`),
runs uncounted tasks, and dispatches every message its transport receives
(:meth:`Runtime._on_message`; control messages through :attr:`Runtime.ctrl_handlers`, which maps
each control message type of :mod:`._messages` to the room method that handles it).

Messages: the named tuples of :mod:`._messages` (its docstring has the table of kinds, their
fields and who handles each; see ``_transport`` for how they travel).

``body`` is the cloudpickled ``(fn, args, kwargs)``; it is unpickled by the worker that runs it,
so a task that fails to unpickle is reported to its finish like any other failure.

Locking: one lock, :attr:`Runtime.state_lock`, shared by the three rooms (each keeps a reference
under the same name), guards the finish records, the place table (with the dead and released
places) and the pending acknowledgements.  It stays one lock because a death must take the
place out of the table, fail the finishes that wait on it and resolve the acknowledgements that
wait on it in one step (``Membership.place_died``), and because a spawn, an UPDATE or a new
request must see either the live place or its death completely.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from . import _test_delay
from ._config import setting
from ._requests import Requests
from ._exceptions import ApgasError
from ._finish import DetachedFinish, Finishes, RemoteFinish
from ._interrupt import ctrl_interrupt
from ._membership import Membership, PlaceInfo
from ._messages import (
    CONTROL_TYPES,
    CTRL,
    IMMEDIATE,
    OUTPUT,
    TASK,
    UNCOUNTED,
    UPDATE,
    Ack,
    AddPlaces,
    Bye,
    ControlMessage,
    Ctrl,
    Dead,
    Fin,
    FinAcked,
    FinBatch,
    FinUp,
    Immediate,
    Interrupt,
    Output,
    Ready,
    Released,
    ReleasedDied,
    RemovePlaces,
    Shutdown,
    Uncounted,
    UnknownMessageError,
    control_message,
    decode,
)
from ._pool import Pool
from ._serialization import dumps_call, loads_call
from ._transport import Transport

if TYPE_CHECKING:
    from .elastic._malleability import Malleability

__all__ = ["Runtime", "runtime", "current_runtime", "set_runtime"]

log = logging.getLogger("apgaspy")

_RUNTIME: Runtime | None = None
_ENDED = False  # a runtime ran in this process and has ended (runtime()'s message)


def runtime() -> Runtime:
    """The runtime of this process.

    Raises:
        ApgasError: the runtime is not running (outside ``apgaspy.run``/``apgaspy.session``).
    """
    rt = _RUNTIME
    if rt is None:
        if _ENDED:  # a task still running while its place ends: no advice to give
            raise ApgasError("the apgaspy runtime of this process has ended")
        raise ApgasError(
            "the apgaspy runtime is not running: start the program with apgaspy.run(main) "
            "(or inside 'with apgaspy.session():')"
        )
    return rt


def current_runtime() -> Runtime | None:
    """The runtime of this process, or ``None`` when it is not running (never raises)."""
    return _RUNTIME


def set_runtime(rt: Runtime | None) -> None:
    """Install (or clear) the process's runtime."""
    global _RUNTIME, _ENDED
    _ENDED = rt is None and (_RUNTIME is not None or _ENDED)
    _RUNTIME = rt


class Runtime:
    """The runtime of one place.

    Args:
        here: this place's id.
        secret: the job's 32-byte MAC key, or ``None`` while a spawned place waits for it
            (:meth:`set_secret` before :meth:`start`).
        bind_host: the IP address to bind the transport to.

    Attributes:
        here: this place's id.
        secret: the job's MAC key (handed to places this one spawns).
        state_lock: the lock shared by the rooms (see the module docstring).
        membership: the membership room (:class:`~apgaspy._membership.Membership`).
        requests: the requests room (:class:`~apgaspy._requests.Requests`).
        finishes: the finish room (:class:`~apgaspy._finish.Finishes`).
        malleability: at place 0, the :class:`~apgaspy.elastic._malleability.Malleability` that
            owns the handler, the communicator and the orders (set by :mod:`._launch`);
            ``None`` at the other places.
        pool: the worker pool (counted and uncounted tasks).
        immediate: the immediate pool (immediate tasks).
        transport: the connections to the other places.
        objects: id → object, the :class:`~apgaspy.GlobalRef` registry.
        plos: id → instance, the :class:`~apgaspy.PlaceLocalObject` registry.
        ctrl_handlers: control message type (:data:`~apgaspy._messages.CONTROL_TYPES`) → the
            room method that handles it, called as ``handler(src, message)``.
    """

    def __init__(self, here: int, secret: bytes | None, bind_host: str) -> None:
        self.here = here
        self.secret = secret if secret is not None else b""
        self.state_lock = threading.Lock()  # guards finish records, the place table, the acks
        # place 0's malleability state, handed in by the launcher (None at the other places)
        self.malleability: Malleability | None = None
        membership = Membership(self)
        self.membership: Membership = membership
        requests = Requests(self)
        self.requests: Requests = requests
        finishes = Finishes(self)
        self.finishes: Finishes = finishes
        self.objects: dict[int, Any] = {}  # GlobalRef registry
        self._object_ids = itertools.count(1)
        self.plos: dict[Any, Any] = {}  # PlaceLocalObject registry
        self.ctrl_handlers: dict[type, Callable[[int, Any], None]] = {
            Shutdown: membership.ctrl_shutdown,
            Bye: membership.ctrl_bye,
            Dead: membership.ctrl_dead,
            Ack: requests.ctrl_ack,
            AddPlaces: membership.ctrl_add_places,
            RemovePlaces: membership.ctrl_remove_places,
            Fin: membership.ctrl_fin,
            Released: membership.ctrl_released,
            ReleasedDied: membership.ctrl_released_died,
            Ready: membership.ctrl_ready,
            FinUp: finishes.ctrl_fin_up,
            FinBatch: finishes.ctrl_fin_batch,
            FinAcked: finishes.ctrl_fin_acked,
            Interrupt: ctrl_interrupt,
        }
        assert set(self.ctrl_handlers) == set(CONTROL_TYPES), "a control message lacks a handler"
        threads = setting("THREADS")
        max_threads = setting("MAX_THREADS")
        self.pool = Pool("apgaspy-worker", threads, max_threads)
        self.immediate = Pool("apgaspy-immediate", setting("IMMEDIATE_THREADS"), max_threads)
        self.transport = Transport(
            self.secret,
            bind_host,
            self._on_message,
            membership.on_peer_lost,
            dead_timeout=setting("DEAD_PLACE_TIMEOUT"),
            connect_grace=setting("CONNECT_GRACE"),
            heartbeat=setting("HEARTBEAT"),
            on_peer_down=membership.on_peer_down,
            max_message_bytes=setting("MAX_MESSAGE_BYTES"),
        )
        self.forward_output = setting("FORWARD_OUTPUT") and here != 0
        self._streams: list[Any] = []
        # True when a task's end must flush output: something was written to a forwarding
        # stream since the last flush_output, or always with place 0's line streams (a task
        # that printed complete lines flushes the original stream).  Checked at each task's
        # end instead of calling the streams' flush (cheaper per task).
        self.output_dirty = False
        self._always_flush = False
        # OUTPUT messages this place sent to place 0 so far; an UPDATE to an inbox carries it
        self.output_seq = 0
        self._output_lock = threading.Lock()
        # at place 0: the last OUTPUT written, per place (wait_output)
        self._output_written: dict[int, int] = {}
        self._output_cond = threading.Condition(threading.Lock())

    @property
    def table(self) -> dict[int, PlaceInfo]:
        """The place table, ``membership.table`` (the test delay hook of ``_test_delay`` reads
        it here)."""
        return self.membership.table

    # ================================================================== start and stop
    def set_secret(self, secret: bytes) -> None:
        """Key this place's messages with the job ``secret`` (32 bytes), which a spawned place
        receives sealed after its transport is bound (:mod:`apgaspy._keys`); before
        :meth:`start`."""
        self.secret = secret
        self.transport.set_key(secret)

    def start(self, table: Iterable[PlaceInfo]) -> None:
        """Learn the places, open the connections every place needs, start receiving."""
        for info in table:
            self.membership.table[info.id] = info
        for pid, info in self.membership.table.items():
            if pid == self.here:
                continue
            if self.here == 0 or pid == 0:
                self.transport.add_peer(pid, info.endpoint, watch=True)
        if self.forward_output:  # before any task can run and print
            from ._output import install_forwarding

            self._streams = install_forwarding(self)
        elif self.here == 0 and setting("FORWARD_OUTPUT"):
            from ._output import install_line_streams

            self._streams = install_line_streams()
            self._always_flush = self.output_dirty = True
        self.transport.start()

    def flush_output(self) -> None:
        """Push buffered print output of this place to place 0 (at place 0: write the
        calling thread's unfinished line)."""
        self.output_dirty = self._always_flush  # before flushing: a later write sets it again
        for stream in self._streams:
            stream.flush()

    def close(self) -> None:
        """Release the pools and sockets of this place."""
        if self._streams:
            from ._output import uninstall_forwarding

            uninstall_forwarding(self._streams)
            self._streams = []
        self.pool.close()
        self.immediate.close()
        self.transport.close(setting("CLOSE_LINGER"))

    # ================================================================== sending
    def send(self, dest: int, msg: bytes, soon: bool = False) -> None:
        """Send ``msg`` (an encoded message of :mod:`._messages`) to place ``dest``, opening
        the connection when it is the first message; ``soon``: it may leave with a batch of
        the messages that follow (``Transport.send_soon``).

        Raises:
            BadPlaceError, DeadPlaceError: ``dest`` is not in this place's table.
        """
        if _test_delay.ACTIVE and _test_delay.delay_send(self, dest, msg):
            return  # test hook APGAS_TEST_DELAY (off by default): a delay thread sends it
        transport = self.transport
        send = transport.send_soon if soon else transport.send
        try:
            send(dest, msg)
        except KeyError:
            info = self.membership.table.get(dest)
            if info is None:
                raise self.membership.bad_place(dest) from None
            transport.add_peer(dest, info.endpoint, watch=(self.here == 0))
            send(dest, msg)

    def send_ctrl(self, dest: int, message: ControlMessage) -> None:
        """Send control message ``message`` (a record of :mod:`._messages`) to ``dest``.

        Raises:
            TypeError: ``message`` is not a control message.
            BadPlaceError, DeadPlaceError: ``dest`` is not in this place's table.
        """
        self.send(dest, Ctrl.encode(self.here, message))

    def send_output(self, stream: int, text: str) -> None:
        """Send print output to place 0 (counted in :attr:`output_seq` once it left)."""
        with self._output_lock:
            seq = self.output_seq + 1
            self.send(0, Output.encode(stream, text, self.here, seq))
            self.output_seq = seq

    def wait_output(self, src: int, seq: int) -> None:
        """At place 0: wait until the receiver has written output ``seq`` of place ``src``.

        An UPDATE to the inbox of a thread that waits in ``at`` travels on another connection
        than the print output of the place that sends it, which place 0's receiver writes.
        The UPDATE names the last output sent before it, and the waiting thread handles it
        only once that output is written, so what the tasks of an ``at`` printed appears before
        the ``at`` returns.  Gives up, leaving the output to come later, once ``src`` is dead
        or after ``APGAS_DEAD_PLACE_TIMEOUT`` seconds.
        """
        written = self._output_written
        if written.get(src, 0) >= seq or self.transport.on_receiver_thread():
            return  # written, or on the receiver itself (which writes it later)
        deadline = time.monotonic() + setting("DEAD_PLACE_TIMEOUT")
        with self._output_cond:
            while written.get(src, 0) < seq:
                left = deadline - time.monotonic()
                if left <= 0 or src in self.membership.dead:
                    log.debug("output %d of place(%d) did not arrive; not waiting", seq, src)
                    return
                self._output_cond.wait(min(left, 0.1))

    # ================================================================== uncounted tasks
    def spawn_uncounted(self, dest: int, fn: Callable[..., Any], args: tuple, kwargs: dict,
                        immediate: bool = False) -> None:
        """Spawn a task no finish waits for, on the worker or the immediate pool of ``dest``.

        Raises:
            BadPlaceError, DeadPlaceError: ``dest`` is not a live place.
        """
        if dest == self.here:
            pool = self.immediate if immediate else self.pool
            pool.submit(self._run_uncounted, fn, args, kwargs)
            return
        if dest not in self.membership.table:
            raise self.membership.bad_place(dest)
        body = dumps_call(fn, args, kwargs)
        self.send(dest, Immediate.encode(body) if immediate else Uncounted.encode(body))

    def _run_uncounted(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            fn(*args, **kwargs)
        except BaseException:  # noqa: BLE001 - nobody waits for this task
            log.exception("an uncounted task failed at place(%d)", self.here)

    def _run_uncounted_body(self, body: bytes) -> None:
        try:
            fn, args, kwargs = loads_call(body)
        except BaseException:  # noqa: BLE001
            log.exception("an uncounted task could not be unpickled at place(%d)", self.here)
            return
        self._run_uncounted(fn, args, kwargs)

    # ================================================================== receiving
    def _on_message(self, frame: bytes) -> None:
        try:
            msg: Any = decode(frame)
        except UnknownMessageError as exc:
            log.error("%s", exc)
            return
        kind = msg.kind
        if kind == TASK:
            fid = msg.fid
            fins = self.finishes  # the finish protocol's receiving side, inline for speed
            if fid[0] == self.here:
                with self.state_lock:
                    fin: Any = fins.roots.get(fid[1])
                if fin is None:
                    fin = DetachedFinish(fid)
            else:
                with self.state_lock:
                    fin = fins.remotes.get(fid)
                    if fin is None:
                        fin = fins.remotes[fid] = RemoteFinish(fid)
                    fin.live += 1
            self.pool.submit(fins.run_remote, fin, msg.body, msg.flags)
        elif kind == UPDATE:
            self.finishes.on_update(msg)
        elif kind == UNCOUNTED:
            self.pool.submit(self._run_uncounted_body, msg.body)
        elif kind == IMMEDIATE:
            self.immediate.submit(self._run_uncounted_body, msg.body)
        elif kind == CTRL:
            try:
                message = control_message(msg)
            except UnknownMessageError as exc:
                log.error("%s (from place(%d))", exc, msg.src)
                return
            self.ctrl_handlers[type(message)](msg.src, message)
        elif kind == OUTPUT:
            stream = sys.stdout if msg.stream == 1 else sys.stderr
            try:
                stream.write(msg.text)
                stream.flush()
            except (OSError, ValueError):
                pass
            finally:  # written or not, an at waiting for it goes on (wait_output)
                with self._output_cond:
                    self._output_written[msg.src] = msg.seq
                    self._output_cond.notify_all()

    # ================================================================== registries
    def register_object(self, obj: Any) -> int:
        """Keep ``obj`` reachable from other places; return its id here."""
        oid = next(self._object_ids)
        self.objects[oid] = obj
        return oid
