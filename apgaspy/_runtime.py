"""The place runtime: one :class:`Runtime` per process, holding the transport, the pools and
the finish bookkeeping of its place.

Messages (each a pickled tuple; see ``_transport`` for how they travel):

==========  =============================================  =====================================
kind        fields                                         handled by
==========  =============================================  =====================================
TASK        fid, flags, body                               worker pool (counted in finish ``fid``)
UNCOUNTED   body                                           worker pool, no finish
IMMEDIATE   body                                           immediate pool, no finish
UPDATE      fid, src, deltas, exceptions, result, at_error  receiver thread, at the finish's home
CTRL        src, name, args                                receiver thread (or a control thread)
OUTPUT      stream (1 or 2), text                          place 0's stdout/stderr
==========  =============================================  =====================================

``body`` is the cloudpickled ``(fn, args, kwargs)``; it is unpickled by the worker that runs it,
so a task that fails to unpickle is reported to its finish like any other failure.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import sys
import threading
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from . import _testing
from ._config import setting
from ._exceptions import ApgasError, BadPlaceError, DeadPlaceError, RemoteError
from ._finish import RemoteFinish, RootFinish
from ._pool import Pool, current_pool
from ._serialization import PackedException, dumps, loads, pack_exception
from ._transport import Transport

__all__ = ["Runtime", "PlaceInfo", "runtime", "current_finish", "finish_stack"]

log = logging.getLogger("apgaspy")

TASK, UNCOUNTED, IMMEDIATE, UPDATE, CTRL, OUTPUT = range(6)
F_AT = 1  # TASK flag: the task of an ``at``; its return value travels back with the UPDATE

_PROTO = 5
_dumps_msg = pickle.dumps

_tls = threading.local()


def finish_stack() -> list[Any]:
    """The calling thread's stack of governing finishes (innermost last)."""
    try:
        return _tls.stack
    except AttributeError:
        _tls.stack = []
        return _tls.stack


def current_finish() -> RootFinish | RemoteFinish:
    """The innermost finish governing the calling thread.

    Raises:
        ApgasError: the thread runs no counted task and is not inside ``with finish():``.
    """
    stack = getattr(_tls, "stack", None)
    if not stack:
        raise ApgasError(
            "async_() and async_at() must run inside a finish: wrap the code that spawns "
            "tasks in 'with finish():' (uncounted and immediate tasks have no finish of their own)"
        )
    return stack[-1]


@dataclass
class PlaceInfo:
    """What every place knows about a place.

    Attributes:
        id: the place id.
        endpoint: its ZeroMQ address, ``tcp://ip:port``.
        host: the host name it was started for, in the spelling it was given.
        pid: its process id on that host.
        origin: ``"world"`` (an mpiexec rank), ``"embedded"`` (place 0 without mpiexec) or
            ``"spawned"`` (started by MPI_Comm_spawn).
        slot: the host allotment it belongs to: the places started for one host of the
            scheduler's allotment share a slot, and a shrink releases whole slots.
    """

    id: int
    endpoint: str
    host: str
    pid: int
    origin: str
    slot: int = 0


_RUNTIME: Runtime | None = None


def runtime() -> Runtime:
    """The runtime of this process.

    Raises:
        ApgasError: the runtime is not running (outside ``apgaspy.run``/``apgaspy.session``).
    """
    rt = _RUNTIME
    if rt is None:
        raise ApgasError(
            "the apgaspy runtime is not running: start the program with apgaspy.run(main) "
            "(or inside 'with apgaspy.session():')"
        )
    return rt


def set_runtime(rt: Runtime | None) -> None:
    """Install (or clear) the process's runtime."""
    global _RUNTIME
    _RUNTIME = rt


class Runtime:
    """The runtime of one place.

    Args:
        here: this place's id.
        secret: the job's 32-byte HMAC key.
        bind_host: the IP address to bind the transport to.
    """

    def __init__(self, here: int, secret: bytes, bind_host: str) -> None:
        self.here = here
        self.secret = secret
        self.flock = threading.Lock()  # guards finish records and the place table
        self.roots: dict[int, RootFinish] = {}
        self.remotes: dict[Any, RemoteFinish] = {}
        self._seq = itertools.count(1)
        self.table: dict[int, PlaceInfo] = {}
        self.dead: set[int] = set()
        self.released: set[int] = set()
        self.stopping = False
        self.exit_code = 0
        self.stopped = threading.Event()
        self._byes: set[int] = set()
        self._byes_expected: set[int] = set()
        self._byes_done = threading.Event()
        self.objects: dict[int, Any] = {}  # GlobalRef registry
        self._object_ids = itertools.count(1)
        self.plos: dict[Any, Any] = {}  # PlaceLocalObject registry
        self.ctrl_handlers: dict[str, Callable[..., None]] = {
            "shutdown": self._ctrl_shutdown,
            "bye": self._ctrl_bye,
            "dead": self._ctrl_dead,
            "ack": self._ctrl_ack,
            "add_places": self._ctrl_add_places,
            "remove_places": self._ctrl_remove_places,
            "fin": self._ctrl_fin,
            "released": self._ctrl_released,
            "ready": self._ctrl_ready,
        }
        self._ready: set[int] = {here}
        self._ready_cv = threading.Condition()
        self._ops = itertools.count(1)
        self._pending_acks: dict[int, tuple[set[int], threading.Event]] = {}
        self.leaving: dict[int, threading.Event] = {}  # place 0: places being released
        self.released_here: dict[int, threading.Event] = {}  # place 0: 'released' received
        self._fins_expected: set[int] | None = None  # at a place being released
        self._fins: set[int] = set()
        self.retired = False  # this place was released by a shrink
        threads = setting("THREADS")
        max_threads = setting("MAX_THREADS")
        self.pool = Pool("apgaspy-worker", threads, max_threads)
        self.immediate = Pool("apgaspy-immediate", setting("IMMEDIATE_THREADS"), max_threads)
        self.transport = Transport(
            secret,
            bind_host,
            self._on_message,
            self._on_peer_lost,
            dead_timeout=setting("DEAD_PLACE_TIMEOUT"),
            connect_grace=setting("CONNECT_GRACE"),
            heartbeat=setting("HEARTBEAT"),
            on_peer_down=self._on_peer_down,
        )
        self.forward_output = setting("FORWARD_OUTPUT") and here != 0
        self._streams: list[Any] = []

    # ================================================================== start and stop
    def start(self, table: Iterable[PlaceInfo]) -> None:
        """Learn the places, open the connections every place needs, start receiving."""
        for info in table:
            self.table[info.id] = info
        for pid, info in self.table.items():
            if pid == self.here:
                continue
            if self.here == 0 or pid == 0:
                self.transport.add_peer(pid, info.endpoint, watch=True)
        if self.forward_output:  # before any task can run and print
            from ._output import install_forwarding

            self._streams = install_forwarding(self)
        self.transport.start()

    def flush_output(self) -> None:
        """Push buffered print output of this place to place 0 (no-op on place 0)."""
        for stream in self._streams:
            stream.flush()

    def shutdown(self, code: int = 0) -> None:
        """On place 0: stop every other place and wait (bounded) for their goodbyes.

        Waits at most ``APGAS_SHUTDOWN_TIMEOUT`` seconds (then logs the places that did not
        answer).  A place that dies meanwhile (or was already dying) counts as gone as soon as
        its death is detected (``APGAS_DEAD_PLACE_TIMEOUT``): shutdown never waits the full
        timeout for a dead place, and the exit code stays ``code``.

        Args:
            code: the exit code the other places end with (0, or 1 after a failure).
        """
        self.stopping = True
        self.exit_code = code
        others = [p for p in self.table if p != self.here]
        self._byes_expected = set(others)
        if not others:
            self._byes_done.set()
        for p in others:
            try:
                self.send_ctrl(p, "shutdown", code)
            except ApgasError:
                self._ctrl_bye(p)
        with self.flock:  # died between the table snapshot and now: no goodbye will come
            gone = [p for p in others if p in self.dead]
        for p in gone:
            self._ctrl_bye(p)
        if not self._byes_done.wait(setting("SHUTDOWN_TIMEOUT")):
            missing = sorted(self._byes_expected - self._byes)
            log.warning("places %s did not confirm shutdown in time", missing)
        self.stopped.set()

    def close(self) -> None:
        """Release the pools and sockets of this place."""
        if self._streams:
            from ._output import uninstall_forwarding

            uninstall_forwarding(self._streams)
            self._streams = []
        self.pool.close()
        self.immediate.close()
        self.transport.close(setting("CLOSE_LINGER"))

    def _ctrl_shutdown(self, src: int, code: int) -> None:
        self.stopping = True
        self.exit_code = code
        self.flush_output()
        try:
            self.send_ctrl(0, "bye")
        except ApgasError:
            pass
        self.stopped.set()

    def _ctrl_bye(self, src: int) -> None:
        self._byes.add(src)
        if self._byes >= self._byes_expected:
            self._byes_done.set()

    # ================================================================== places
    def place_ids(self) -> list[int]:
        """Ids of the places of the computation, ascending."""
        return sorted(self.table)

    def check_place(self, dest: int) -> None:
        """Raise the right error if ``dest`` is not a live place."""
        if dest not in self.table:
            raise self.bad_place(dest)

    def bad_place(self, dest: int) -> ApgasError:
        """The error for naming place ``dest``, which is not live."""
        if dest in self.dead:
            return DeadPlaceError(dest)
        if dest in self.released:
            return BadPlaceError(f"place({dest}) was released by a shrink", dest)
        return BadPlaceError(
            f"there is no place({dest}); the places are {self.place_ids()}", dest
        )

    # ================================================================== sending
    def _send(self, dest: int, msg: bytes) -> None:
        if _testing.ACTIVE and _testing.delay_send(self, dest, msg):
            return  # test hook APGAS_TEST_DELAY (off by default): a delay thread sends it
        try:
            self.transport.send(dest, msg)
        except KeyError:
            info = self.table.get(dest)
            if info is None:
                raise self.bad_place(dest) from None
            self.transport.add_peer(dest, info.endpoint, watch=(self.here == 0))
            self.transport.send(dest, msg)

    def send_ctrl(self, dest: int, name: str, *args: Any) -> None:
        """Send control message ``name`` to ``dest`` (plain-pickled arguments)."""
        self._send(dest, _dumps_msg((CTRL, self.here, name, args), _PROTO))

    def send_output(self, stream: int, text: str) -> None:
        """Send print output to place 0."""
        self._send(0, _dumps_msg((OUTPUT, stream, text), _PROTO))

    # ================================================================== spawning
    def spawn(self, dest: int, fn: Callable[..., Any], args: tuple, kwargs: dict,
              fin: RootFinish | RemoteFinish | None = None, flags: int = 0) -> None:
        """Spawn ``fn(*args, **kwargs)`` at place ``dest``, counted in ``fin``.

        Args:
            fin: the governing finish (default: the calling thread's innermost one).

        Raises:
            ApgasError: no governing finish.
            BadPlaceError, DeadPlaceError: ``dest`` is not a live place.
        """
        if fin is None:
            fin = current_finish()
        here = self.here
        if dest == here:
            with self.flock:
                if isinstance(fin, RootFinish):
                    fin.add(here, 1)
                else:
                    d = fin.deltas
                    d[here] = d.get(here, 0) + 1
                    fin.live += 1
            self.pool.submit(self._run_local, fin, fn, args, kwargs)
            return
        if dest not in self.table:
            raise self.bad_place(dest)
        body = dumps((fn, args, kwargs))
        with self.flock:
            if isinstance(fin, RootFinish):
                if fin.fid is None:
                    fin.fid = (here, next(self._seq))
                    self.roots[fin.fid[1]] = fin
                fin.add(dest, 1)
            else:
                d = fin.deltas
                d[dest] = d.get(dest, 0) + 1
            fid = fin.fid
        try:
            self._send(dest, _dumps_msg((TASK, fid, flags, body), _PROTO))
        except BaseException:
            with self.flock:
                if isinstance(fin, RootFinish):
                    fin.add(dest, -1)
                else:
                    fin.deltas[dest] -= 1
            raise

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
        if dest not in self.table:
            raise self.bad_place(dest)
        body = dumps((fn, args, kwargs))
        self._send(dest, _dumps_msg((IMMEDIATE if immediate else UNCOUNTED, body), _PROTO))

    # ================================================================== running tasks
    def _run_local(self, fin: Any, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        stack = finish_stack()
        stack.append(fin)
        try:
            fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - reported to the finish
            self._task_failed(fin, exc, 0)
        finally:
            del stack[-1]
            self._complete(fin)

    def _run_remote(self, fin: Any, body: bytes, flags: int) -> None:
        stack = finish_stack()
        stack.append(fin)
        try:
            fn, args, kwargs = loads(body)
            value = fn(*args, **kwargs)
            if flags & F_AT:
                fin.result = dumps(value)
        except BaseException as exc:  # noqa: BLE001 - reported to the finish
            self._task_failed(fin, exc, flags)
        finally:
            del stack[-1]
            self._complete(fin)

    def _run_uncounted(self, fn: Callable[..., Any], args: tuple, kwargs: dict) -> None:
        try:
            fn(*args, **kwargs)
        except BaseException:  # noqa: BLE001 - nobody waits for this task
            log.exception("an uncounted task failed at place(%d)", self.here)

    def _run_uncounted_body(self, body: bytes) -> None:
        try:
            fn, args, kwargs = loads(body)
        except BaseException:  # noqa: BLE001
            log.exception("an uncounted task could not be unpickled at place(%d)", self.here)
            return
        self._run_uncounted(fn, args, kwargs)

    def _task_failed(self, fin: Any, exc: BaseException, flags: int) -> None:
        if isinstance(fin, RootFinish):
            err = local_exception(exc, self.here)
            with self.flock:
                if flags & F_AT:
                    fin.at_error = err
                else:
                    fin.exceptions.append(err)
        else:
            packed = pack_exception(exc, self.here)
            with self.flock:
                if flags & F_AT:
                    fin.at_error = packed
                else:
                    fin.exceptions.append(packed)

    def _complete(self, fin: Any) -> None:
        here = self.here
        cls = type(fin)
        if cls is RootFinish:
            with self.flock:
                if fin.add(here, -1):
                    self._release_root(fin)
            return
        if cls is _Detached:
            for pe in fin.exceptions:
                log.error("a task of a failed finish raised:%s", pe.tb)
            fin.exceptions.clear()
            return
        if self._streams:
            self.flush_output()
        home = fin.fid[0]
        with self.flock:
            d = fin.deltas
            d[here] = d.get(here, 0) - 1
            fin.live -= 1
            if fin.live:
                return
            del self.remotes[fin.fid]
            msg = _dumps_msg(
                (UPDATE, fin.fid, here, fin.deltas, fin.exceptions, fin.result, fin.at_error),
                _PROTO,
            )
            try:
                self.transport.post(home, msg)
                posted = True
            except KeyError:
                posted = False
        if posted:
            self.transport.pump(home)
        else:
            try:
                self._send(home, msg)
            except ApgasError:
                log.debug("finish %s: home place %d is gone, update dropped", fin.fid, home)

    def _release_root(self, fin: RootFinish) -> None:
        # flock held
        if fin.fid is not None:
            self.roots.pop(fin.fid[1], None)
        fin.release()

    def wait_root(self, fin: RootFinish) -> None:
        """Complete the body of ``fin`` (the calling thread) and wait for all its tasks."""
        with self.flock:
            if fin.add(self.here, -1):
                self._release_root(fin)
                return
            event = fin.event = threading.Event()
        pool = current_pool()
        with pool.blocking() if pool is not None else nullcontext():
            event.wait()

    # ================================================================== receiving
    def _on_message(self, frame: bytes) -> None:
        msg = loads(frame)
        kind = msg[0]
        if kind == TASK:
            _, fid, flags, body = msg
            if fid[0] == self.here:
                with self.flock:
                    fin: Any = self.roots.get(fid[1])
                if fin is None:
                    fin = _Detached(fid)
            else:
                with self.flock:
                    fin = self.remotes.get(fid)
                    if fin is None:
                        fin = self.remotes[fid] = RemoteFinish(fid)
                    fin.live += 1
            self.pool.submit(self._run_remote, fin, body, flags)
        elif kind == UPDATE:
            self._on_update(*msg[1:])
        elif kind == UNCOUNTED:
            self.pool.submit(self._run_uncounted_body, msg[1])
        elif kind == IMMEDIATE:
            self.immediate.submit(self._run_uncounted_body, msg[1])
        elif kind == CTRL:
            _, src, name, args = msg
            handler = self.ctrl_handlers.get(name)
            if handler is None:
                log.error("unknown control message %r from place(%d)", name, src)
            else:
                handler(src, *args)
        elif kind == OUTPUT:
            stream = sys.stdout if msg[1] == 1 else sys.stderr
            try:
                stream.write(msg[2])
                stream.flush()
            except (OSError, ValueError):
                pass
        else:
            log.error("unknown message kind %r", kind)

    def _on_update(self, fid: Any, src: int, deltas: dict[int, int],
                   excs: list[PackedException], result: bytes | None,
                   at_error: PackedException | None) -> None:
        errors = [pe.unpack() for pe in excs]
        at_exc = at_error.unpack() if at_error is not None else None
        with self.flock:
            fin = self.roots.get(fid[1])
            if fin is None:
                return  # the finish already failed (a place died); late news
            fin.exceptions.extend(errors)
            if result is not None:
                fin.result = result
            if at_exc is not None:
                fin.at_error = at_exc
            if fin.apply(deltas):
                self._release_root(fin)
            elif self.dead:
                for p in self.dead:
                    if fin.waits_on(p):
                        self._fail_root(fin, p)
                        break

    # ================================================================== failures
    def _fail_root(self, fin: RootFinish, place: int) -> None:
        # flock held
        fin.exceptions.append(DeadPlaceError(place))
        fin.failed = True
        fin.counts.clear()
        fin.nonzero = 0
        self._release_root(fin)

    def _on_peer_lost(self, place: int) -> None:
        """The transport's verdict: the connection to ``place`` broke for good (receiver
        thread).  Place 0 watches every place; the others watch only place 0."""
        if place == 0:
            if not self.stopping:
                log.error("place(0) is gone: place(%d) exits", self.here)
                self.exit_code = 1
                self.stopping = True
                self.stopped.set()
            return
        if self.stopping:
            # During shutdown: a place that died before saying goodbye counts as gone now.
            if place in self._byes_expected and place not in self._byes:
                log.warning("place(%d) died during shutdown", place)
                self.place_died(place)
            return
        if place in self.leaving:
            said_released = self.released_here.get(place)
            if said_released is None or not said_released.is_set():
                self._leaving_place_died(place)
            return  # else it left as it should; its connection closed when it exited
        if place in self.released or place not in self.table:
            return
        log.error("place(%d) died", place)
        self.place_died(place)
        self.announce_dead(place)

    def announce_dead(self, place: int, targets: Iterable[int] | None = None) -> None:
        """Tell ``targets`` (default: every place of the table and every place being
        released, but not ``place`` nor this one) that ``place`` died.

        Idempotent at the receiver (a place it no longer knows is ignored), so it may be sent
        again, e.g. to places that joined during a grow after the first announcement.
        """
        if targets is None:
            targets = set(self.table) | set(self.leaving)
        for p in sorted(set(targets) - {self.here, place}):
            try:
                self.send_ctrl(p, "dead", place)
            except ApgasError:
                pass

    def _leaving_place_died(self, place: int) -> None:
        """At place 0: a place being released by a shrink died before it finished leaving.

        It counts as released (the shrink completes; its host goes back), and as dead: its
        unfinished tasks are lost, so every finish still waiting on it, here or at any other
        place, fails with :class:`DeadPlaceError`, and naming it raises
        :class:`DeadPlaceError`.  The other places have already dropped it from their tables
        (they ignore a plain 'dead' notice for it), so place 0 sends each of them a short
        immediate task that records the death there.  The other places being released (no
        longer in place 0's table, so no task reaches them) were waiting for its 'fin'
        marker: place 0 sends it in its name (nothing more can come from a dead process).
        """
        log.warning("place(%d) died while it was being released; it counts as released, "
                    "its unfinished tasks are lost", place)
        self.place_died(place)
        for p in sorted(set(self.table) - {self.here, place}):
            try:
                self.spawn_uncounted(p, Runtime._released_place_died_here, (place,), {},
                                     immediate=True)
            except ApgasError:
                pass
        fin = _dumps_msg((CTRL, place, "fin", ()), _PROTO)
        for other in list(self.leaving):
            if other != place:
                try:
                    self.transport.send(other, fin)
                except KeyError:
                    pass
        event = self.released_here.get(place)
        if event is not None:
            event.set()
        event = self.leaving.get(place)
        if event is not None:
            event.set()

    @staticmethod
    def _released_place_died_here(place: int) -> None:
        """At any place (an immediate task from place 0): ``place``, which a shrink was
        releasing, died before it left; fail what still waits on it here."""
        rt = runtime()
        if place not in rt.dead:
            rt.place_died(place)

    def _ctrl_dead(self, src: int, place: int) -> None:
        if place in self.table:
            self.place_died(place)

    def place_died(self, place: int) -> None:
        """Take ``place`` out of the computation and fail, at once, everything here that
        waits on it.

        What waits on a place and how it ends: a finish (or an ``at``) whose home is here and
        that expects something from ``place`` raises :class:`DeadPlaceError`; a control
        request (:meth:`request_all`) stops waiting for its acknowledgement; start-up and grow
        (:meth:`wait_ready`) stop waiting for it to report ready; shutdown counts it as gone.
        Idempotent.

        Args:
            place: the id of the dead place.
        """
        with self.flock:
            self.table.pop(place, None)
            self.dead.add(place)
            for fin in list(self.roots.values()):
                if fin.waits_on(place):
                    self._fail_root(fin, place)
            for waiting, event in list(self._pending_acks.values()):
                waiting.discard(place)
                if not waiting:
                    event.set()
        with self._ready_cv:
            self._ready_cv.notify_all()
        self.transport.remove_peer(place, linger_s=0)
        if self.stopping and self._byes_expected:
            self._ctrl_bye(place)

    # ================================================================== requests with acks
    def request_all(self, targets: Iterable[int], name: str, *args: Any,
                    timeout: float | None = None) -> list[int]:
        """Send control request ``name`` to ``targets`` and wait until each one acknowledged
        it or died.

        A target that is or becomes dead (or cannot be sent to: unknown or released) stops
        being waited for at once (see :meth:`place_died`); it is not in the returned list, and
        the caller finds it in ``self.dead``.  The handler of ``name`` at the target receives
        ``(src, op, *args)`` and must answer with :meth:`_ack`.

        Args:
            targets: place ids (this place is skipped).
            name: a key of ``ctrl_handlers``.
            args: the request's arguments (plain-pickled).
            timeout: seconds to wait for the acknowledgements; ``None``: no limit.

        Returns:
            The live targets that did not acknowledge within ``timeout`` seconds, ascending.
        """
        targets = [t for t in targets if t != self.here]
        op = next(self._ops)
        waiting = set(targets)
        event = threading.Event()
        with self.flock:
            self._pending_acks[op] = (waiting, event)
        try:
            for t in targets:
                try:
                    self.send_ctrl(t, name, op, *args)
                except ApgasError:
                    self._ctrl_ack(t, op)
            with self.flock:  # died before the entry existed: place_died could not see it
                waiting.difference_update(self.dead)
                if not waiting:
                    event.set()
            event.wait(timeout)
        finally:
            with self.flock:
                self._pending_acks.pop(op, None)
                late = sorted(waiting - self.dead)
        return late

    def _ctrl_ack(self, src: int, op: int) -> None:
        with self.flock:
            entry = self._pending_acks.get(op)
            if entry is not None:
                waiting, event = entry
                waiting.discard(src)
                if not waiting:
                    event.set()

    def _ack(self, src: int, op: int) -> None:
        try:
            self.send_ctrl(src, "ack", op)
        except ApgasError:
            pass

    # ================================================================== table changes
    def add_places(self, infos: Iterable[PlaceInfo]) -> None:
        """Make ``infos`` part of this place's table (place 0 also watches them)."""
        with self.flock:
            for info in infos:
                self.table[info.id] = info
        if self.here == 0:
            for info in infos:
                self.transport.add_peer(info.id, info.endpoint, watch=True)

    def _ctrl_add_places(self, src: int, op: int, infos: list[PlaceInfo]) -> None:
        self.add_places(infos)
        self._ack(src, op)

    def remove_places(self, removed: list[int]) -> None:
        """Take ``removed`` out of the table and tell each of them that nothing more will come
        from here (a 'fin' marker, after anything already sent on the same connection)."""
        with self.flock:
            before = set(self.table)
            infos = {r: self.table.pop(r) for r in removed if r in self.table}
            self.released.update(removed)
        if self.here in removed:
            self._fins_expected = before - {self.here} - self.dead
            threading.Thread(target=self._drain_and_leave, name="apgaspy-release",
                             daemon=True).start()
        fin = _dumps_msg((CTRL, self.here, "fin", ()), _PROTO)
        for r, info in infos.items():
            if r == self.here:
                continue
            if not self.transport.has_peer(r):
                self.transport.add_peer(r, info.endpoint)
            try:
                self.transport.send(r, fin)
            except KeyError:
                pass
            if self.here != 0:
                self.transport.remove_peer(r, linger_s=setting("RELEASE_LINGER"))

    def _ctrl_remove_places(self, src: int, op: int, removed: list[int]) -> None:
        self.remove_places(removed)
        self._ack(src, op)

    def _ctrl_fin(self, src: int) -> None:
        self._fins.add(src)

    def _drain_and_leave(self) -> None:
        """At a released place: wait until every place's last message arrived and no task is
        left, then tell place 0 and stop (the process exits, or an mpiexec rank retires)."""
        import time

        expected = self._fins_expected or set()
        next_warning = time.monotonic() + 10.0
        delay = 0.0005
        while True:
            expected -= self.dead
            idle = self.pool.pending == 0 and self.immediate.pending == 0
            if idle and self._fins >= expected and not self.remotes:
                break
            if time.monotonic() > next_warning:
                log.warning("released place(%d) still has work: %d task(s), waiting for %s",
                            self.here, self.pool.pending, sorted(expected - self._fins))
                next_warning += 10.0
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        self.flush_output()
        try:
            self.send_ctrl(0, "released")
        except ApgasError:
            pass
        self.retired = True
        self.stopping = True
        self.exit_code = 0
        self.stopped.set()

    def _ctrl_ready(self, src: int) -> None:
        with self._ready_cv:
            self._ready.add(src)
            self._ready_cv.notify_all()

    def report_ready(self) -> None:
        """Tell place 0 that this place serves tasks (its main module is imported)."""
        if self.here != 0:
            self.send_ctrl(0, "ready")

    def wait_ready(self, places: Iterable[int], timeout: float) -> list[int]:
        """Wait (at most ``timeout`` seconds) until ``places`` reported ready or died; return
        the ones that did not."""
        import time

        deadline = time.monotonic() + timeout
        wanted = set(places)
        with self._ready_cv:
            while True:
                missing = wanted - self._ready - self.dead
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    return sorted(missing)
                self._ready_cv.wait(min(left, 0.5))

    def abandon_place(self, place: int) -> None:
        """At place 0: give up a new place that never became ready (a failed grow): tell it
        to stop, and count it as dead, so that naming it raises :class:`DeadPlaceError`."""
        try:
            self.send_ctrl(place, "shutdown", 1)
        except ApgasError:
            pass
        with self.flock:
            self.table.pop(place, None)
            self.dead.add(place)
        self.transport.remove_peer(place, linger_s=1.0)

    def _ctrl_released(self, src: int) -> None:
        event = self.released_here.get(src)
        if event is not None:
            event.set()

    def _on_peer_down(self, place: int) -> None:
        event = self.leaving.get(place)
        if event is not None:
            event.set()

    # ================================================================== registries
    def register_object(self, obj: Any) -> int:
        """Keep ``obj`` reachable from other places; return its id here."""
        oid = next(self._object_ids)
        self.objects[oid] = obj
        return oid


class _Detached(RemoteFinish):
    """Stands in for a home finish that no longer exists (it failed): reports nothing."""

    __slots__ = ()


def local_exception(exc: BaseException, place: int) -> Exception:
    """``exc`` as collected by a finish at the place where it was raised."""
    if not isinstance(exc, Exception):
        cls = type(exc)
        err: Exception = RemoteError(f"{cls.__module__}.{cls.__qualname__}", str(exc))
        err.__cause__ = exc
    else:
        err = exc
    try:
        err.add_note(f"raised at place({place})")
    except Exception:  # noqa: BLE001
        pass
    return err

