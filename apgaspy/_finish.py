"""Distributed termination detection for ``finish``.

Algorithm (the counting protocol of X10's default finish, as implemented by APGAS for Java's
``DefaultFinish``; Tardieu et al., "X10 and APGAS at Petascale", PPoPP 2014, §3.1):

* The place where a finish starts is its *home*.  The home keeps ``counts[p]`` = tasks spawned
  to place p minus tasks completed at place p, as far as it knows, and the number of non-zero
  entries.  The finish body counts as one task at home.  The finish is done when every entry
  is zero.
* Every other place p that runs tasks of the finish keeps a :class:`RemoteFinish` record:
  ``live`` (tasks of the finish that arrived at p and have not completed) and ``deltas``
  (+1 for each task p spawned to q, -1 for each task completed at p).  When ``live`` drops to
  zero, p sends its deltas (with the exceptions and any ``at`` result) to the home in one
  UPDATE message and forgets the record.
* Events at the home itself are applied at once.

Why it is correct: a task's +1 travels in the same UPDATE as its spawner's -1 (the spawner is
live at p until it completes, so p cannot flush in between), and a place reports a -1 only when
it has nothing live, so a task in flight towards a place cannot be hidden by that place's
earlier report; an all-zero vector therefore means no task is live or in flight.

Cost: no message per spawn; one UPDATE per place each time it becomes quiescent for the finish.
Local-only finishes send nothing.  UPDATEs from one place to one home are sent in the order of
the snapshots they carry.

The room (:class:`Finishes`, one per place, ``runtime().finishes``) holds the records of this
place (:class:`RootFinish` for the finishes whose home is here, :class:`RemoteFinish` for the
others, :class:`DetachedFinish` for tasks of a finish that no longer exists) and runs the protocol
above::

    home place h                                         place p
    ────────────                                         ───────
    spawn(p, f) in finish F: counts[p] += 1 (F's
      first remote spawn gives it its fid (h, seq)
      and enters it in ``roots``)
      ═══════════ TASK(fid, flags, body) ════════════►  receiver: the RemoteFinish of fid in
                                                           ``remotes`` (created), live += 1
                                                           ─► worker: run_remote ─► f()
                                                         f spawns to q: deltas[q] += 1
                                                         f ends (_complete): deltas[p] -= 1,
                                                           live -= 1; at zero: forget the
                                                           record, send its deltas
    receiver: on_update ◄═ UPDATE(fid, p, deltas, exceptions, result, at_error) ══
      apply the deltas; all zero ─► _release_root ─► wait_root returns

An ``at`` called outside the worker pool gives its finish the fid (h, seq, endpoint) of the
calling thread's inbox (``Transport.inbox``): every place sends that finish's UPDATEs there,
and the waiting thread runs ``on_update`` itself (``wait_root`` → ``Transport.wait_inbox``);
a release from another thread (a local task, a death) wakes it through the inbox.  Such an
UPDATE also carries ``output_seq``, the last print output its place sent to place 0's receiver
before it; the waiting thread handles it once that output is written
(``Runtime.wait_output``), so what the ``at``'s place printed appears before ``at`` returns.

Aggregated updates (per host, as the X10 runtime's dense finish, ``FINISH_DENSE``, routes a
place's termination messages through one place of its group; keeping what a dead place held
recoverable follows the resilient finishes of Cunningham et al., "Resilient X10", PPoPP 2014):
the places of one host slot
(``PlaceInfo.slot``; ``APGAS_PLACES_PER_HOST`` on one machine) send their UPDATEs for a home
through the slot's *aggregator*, its lowest live place other than the home
(:meth:`Finishes._aggregator`), as a ``FinUp`` control message.  The aggregator holds what
arrives until nothing came for ``AGG_WINDOW_S`` (2 ms; ``AGG_HOLD_S``, 10 ms, at most) and
forwards it, its own updates included, as one
``FinBatch`` per home, in arrival order; the home applies the entries one by one.  An empty
finish over P places on H hosts sends about H messages into its home instead of P − 1.
A place numbers every update it sends to a home, direct or aggregated (not one to an
inbox), and the home applies a place's updates in that order, holding one that comes ahead
of a gap (``_seen``): a place whose route changes (a grow gives its slot an aggregator; a
shrink releases an aggregator) has updates on two ways at once, and applying a later one
first could bring the counts to zero early (docs/design/finish.md, "Order").
A slot of one live place, an ``at``'s inbox and a place leaving after a shrink send directly.

A dead aggregator loses nothing: a place keeps each update it sent through an aggregator, with
its number, until the home acknowledges it (``ACK_EVERY`` updates ask for
an acknowledgement, ``FinAcked``, which the aggregator passes on).  When the aggregator dies
or leaves, its places send every kept update to the home directly, before any later one
(:meth:`Finishes.places_gone`, under the lock that takes the place out of the table); the home
applies each (place, seq) once (``_seen``), so an update forwarded and sent again counts once.
The aggregator's own updates are lost with it, as a dead place's always are: the finish waits
on the aggregator and fails with :class:`DeadPlaceError`.  A released place sends its kept
updates to the home and leaves only once they are acknowledged (:meth:`Finishes.holding`).

::

    place q (slot s)               aggregator a (slot s)              home h
    ────────────────               ─────────────────────              ──────
    record at zero: seq += 1,
      keep (seq, a, entry)
      ══ CTRL FinUp(h, entry) ══►  outbox[h] += entry; 2 ms quiet:
                                     ══ CTRL FinBatch(entries) ══►  apply each entry once
                                                                       (src, seq) in _seen
    a dies: kept entries ═══════════ CTRL FinBatch(entries) ═══════►  (applied once)

Who calls it: the constructs of :mod:`._api` (``finish`` → :meth:`Finishes.wait_root`,
``async_``/``async_at``/``at`` → :meth:`Finishes.spawn`); the runtime's receiver thread (a
TASK is entered in :attr:`Finishes.remotes` inline, for speed, then runs
:meth:`Finishes.run_remote` on the worker pool; an UPDATE goes to :meth:`Finishes.on_update`);
the membership room when a place dies (:meth:`Finishes.fail_waiting_on`: every finish here that
waits on it fails at once with :class:`DeadPlaceError`, and :meth:`Finishes.places_gone`),
when a shrink removes places (:meth:`Finishes.places_gone`) and when a released place drains
(no :attr:`Finishes.remotes` left, nothing :meth:`Finishes.holding`).  The room handles the
control messages ``FinUp``, ``FinBatch`` and ``FinAcked`` of the aggregation.

Locking: the records and both tables change only under the runtime's lock ``state_lock``, which the
membership and requests rooms share (see :mod:`._runtime`): a death (``Membership.place_died``)
takes the place out of the table and fails the finishes waiting on it in one step, and
:meth:`Finishes.on_update` reads the dead places under the same lock, to fail a finish that an
UPDATE leaves waiting on a place that died meanwhile.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from typing import Any

from ._exceptions import ApgasError, DeadPlaceError, RemoteError
from ._messages import F_AT, Ctrl, FinAcked, FinBatch, FinUp, Task, Update
from ._pool import current_pool
from ._runtime_needs import FinishHost
from ._serialization import PackedException, dumps, dumps_call, loads_call, pack_exception

__all__ = ["RootFinish", "RemoteFinish", "FID", "Finishes", "finish_stack", "current_finish",
           "local_exception", "ACK_EVERY"]

#: A place asks for the home's acknowledgement of its aggregated updates once it holds this
#: many unacknowledged ones (they are kept until then, to be sent again if their aggregator
#: dies or leaves).
ACK_EVERY = 32

#: An aggregator forwards its batch once no update came for this long (s) ...
AGG_WINDOW_S = 0.002
#: ... or this long (s) after the batch's first update.
AGG_HOLD_S = 0.01

log = logging.getLogger("apgaspy")

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

FID = tuple  # (home place id, sequence number at home[, endpoint of the waiting inbox])


class RootFinish:
    """The home-side state of one finish.

    All methods that change counts are called with the runtime's finish lock held.

    Attributes:
        fid: (home, seq) once the finish has spawned a remote task, else ``None``;
            (home, seq, endpoint) when its waiting thread receives its UPDATEs on an inbox of
            its own (``inbox``, see ``Transport.inbox``).
        exceptions: exceptions collected so far (``Exception`` objects).
        result: for ``at``: the pickled return value of the called function, or ``None``.
        at_error: for ``at``: the called function's own exception, or ``None``.
    """

    __slots__ = ("fid", "counts", "nonzero", "exceptions", "event", "result", "at_error",
                 "here", "failed", "inbox")

    def __init__(self, here: int) -> None:
        self.here = here
        self.fid: Any = None
        self.counts: dict[int, int] = {here: 1}  # the body is a task at home
        self.nonzero = 1
        self.exceptions: list[Exception] = []
        self.event: Any = None  # a held lock the waiting thread blocks on, or None
        self.result: bytes | None = None
        self.at_error: Exception | None = None
        self.failed = False
        self.inbox: Any = None  # the waiting thread's transport inbox, or None

    def add(self, place: int, delta: int) -> bool:
        """Apply ``delta`` to ``counts[place]``; return True when the finish became done."""
        counts = self.counts
        old = counts.get(place, 0)
        new = old + delta
        if new:
            counts[place] = new
            if not old:
                self.nonzero += 1
        else:
            del counts[place]
            if old:
                self.nonzero -= 1
        return self.nonzero == 0

    def apply(self, deltas: dict[int, int]) -> bool:
        """Apply an UPDATE's deltas; return True when the finish became done."""
        for place, delta in deltas.items():
            if delta:
                self.add(place, delta)
        return self.nonzero == 0

    @property
    def done(self) -> bool:
        """True when no task of the finish is live or in flight."""
        return self.nonzero == 0

    def waits_on(self, place: int) -> bool:
        """True when the finish still expects something from ``place``."""
        return self.counts.get(place, 0) != 0

    def release(self) -> None:
        """Wake the thread waiting for this finish (lock held)."""
        event = self.event
        if event is not None:
            self.event = None
            event.release()


class RemoteFinish:
    """A non-home place's record of one finish: live tasks here and unreported deltas.

    Attributes:
        fid: (home, seq) of the finish.
        live: tasks of the finish that arrived here and have not completed.
        deltas: place id → spawned minus completed, not yet reported to the home.
        exceptions: packed exceptions not yet reported.
        result, at_error: for the task of an ``at``: its packed result or exception.
    """

    __slots__ = ("fid", "live", "deltas", "exceptions", "result", "at_error")

    def __init__(self, fid: Any) -> None:
        self.fid = fid
        self.live = 0
        self.deltas: dict[int, int] = {}
        self.exceptions: list[PackedException] = []
        self.result: bytes | None = None
        self.at_error: PackedException | None = None


class DetachedFinish(RemoteFinish):
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


class Finishes:
    """The finish room of one place: its finish records and the counting protocol.

    Created by the :class:`~apgaspy._runtime.Runtime` after its membership room.

    Args:
        rt: the runtime of this place (its pools, its transport and its sends).

    Attributes:
        roots: seq → the :class:`RootFinish` of a finish whose home is here and that has
            spawned a remote task (it has a fid) and is not done.
        remotes: fid → the :class:`RemoteFinish` of a finish of another home with tasks
            live here.
        state_lock: the runtime's lock (shared with the membership and requests rooms).
    """

    def __init__(self, rt: FinishHost) -> None:
        self.rt = rt
        self.here = rt.here
        self.state_lock = rt.state_lock  # shared: guards the records, the place table and the acks
        self.membership = rt.membership
        self.roots: dict[int, RootFinish] = {}
        self.remotes: dict[Any, RemoteFinish] = {}
        self._seq = itertools.count(1)
        # Aggregation per host (see "Aggregated updates" in the module docstring).
        self._members: list[int] = []  # this place's host slot, live members, sorted
        self._members_n = -1  # len(table) when _members was computed
        self._up_seq: dict[int, int] = {}  # home → the number of this place's last update to it
        self._unacked: dict[int, list[tuple[int, int, tuple]]] = {}  # home → (seq, via, entry)
        # at a home: src → [low (applied up to), {seq > low + 1: an update that came early}]
        self._seen: dict[int, list[Any]] = {}
        self._agg_cv = threading.Condition(threading.Lock())  # an aggregator's outbox
        self._outbox: dict[int, list[tuple]] = {}  # home → entries to forward
        self._out_want: set[int] = set()  # homes asked for an acknowledgement
        self._flusher: threading.Thread | None = None
        self._sending = False

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
            with self.state_lock:
                if isinstance(fin, RootFinish):
                    fin.add(here, 1)
                else:
                    d = fin.deltas
                    d[here] = d.get(here, 0) + 1
                    fin.live += 1
            self.rt.pool.submit(self._run_local, fin, fn, args, kwargs)
            return
        if dest not in self.membership.table:
            raise self.membership.bad_place(dest)
        body = dumps_call(fn, args, kwargs)
        with self.state_lock:
            if isinstance(fin, RootFinish):
                if fin.fid is None:
                    fin.fid = (here, next(self._seq))
                    if fin.inbox is not None:
                        fin.fid += (fin.inbox.endpoint,)
                    self.roots[fin.fid[1]] = fin
                fin.add(dest, 1)
            else:
                d = fin.deltas
                d[dest] = d.get(dest, 0) + 1
            fid = fin.fid
        try:
            # an async_at may leave with the tasks that follow it; an at's task leaves now
            self.rt.send(dest, Task.encode(fid, flags, body), soon=not flags)
        except BaseException:
            with self.state_lock:
                if isinstance(fin, RootFinish):
                    fin.add(dest, -1)
                else:
                    fin.deltas[dest] -= 1
            raise

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

    def run_remote(self, fin: Any, body: bytes, flags: int) -> None:
        """Run a received task (worker pool) counted by ``fin``; ``flags`` as in a ``Task``."""
        stack = finish_stack()
        stack.append(fin)
        try:
            fn, args, kwargs = loads_call(body)
            value = fn(*args, **kwargs)
            if flags & F_AT:
                fin.result = dumps(value)
        except BaseException as exc:  # noqa: BLE001 - reported to the finish
            self._task_failed(fin, exc, flags)
        finally:
            del stack[-1]
            self._complete(fin)

    def _task_failed(self, fin: Any, exc: BaseException, flags: int) -> None:
        # at home the exception is kept as is; elsewhere packed for the UPDATE to the home
        err: Any = local_exception(exc, self.here) if isinstance(fin, RootFinish) \
            else pack_exception(exc, self.here)
        with self.state_lock:
            if flags & F_AT:
                fin.at_error = err
            else:
                fin.exceptions.append(err)

    def _complete(self, fin: Any) -> None:
        here = self.here
        cls = type(fin)
        if cls is RootFinish:
            with self.state_lock:
                if fin.add(here, -1):
                    self._release_root(fin)
            return
        if cls is DetachedFinish:
            for pe in fin.exceptions:
                log.error("a task of a failed finish raised:%s", pe.tb)
            fin.exceptions.clear()
            return
        if self.rt.output_dirty:
            self.rt.flush_output()
        fid = fin.fid
        home = fid[0]
        dest: Any = home
        to_inbox = len(fid) == 3  # the waiting thread's inbox at the home (an at)
        if to_inbox:
            dest = (home, fid[2])
            transport = self.rt.transport
            if not transport.has_peer(dest) and home in self.membership.table:
                transport.add_peer(dest, fid[2])
        with self.state_lock:
            d = fin.deltas
            d[here] = d.get(here, 0) - 1
            fin.live -= 1
            if fin.live:
                return
            del self.remotes[fin.fid]
            via = None if to_inbox else self._aggregator(home)
            # every update to a home is numbered, whichever way it goes (the home applies
            # them in this order); one to an inbox is not (the at's finish gets all its
            # updates on that one connection)
            seq = 0 if to_inbox else self._next_seq(home)
            if via is not None:
                entry = (here, seq, fid, d, fin.exceptions, fin.result, fin.at_error)
                if via == here:  # this place aggregates its host: its own entry waits here
                    self._to_outbox(home, entry, False)
                    return
                unacked = self._unacked.setdefault(home, [])
                unacked.append((seq, via, entry))
                msg = Ctrl.encode(here, FinUp(home, entry, len(unacked) >= ACK_EVERY))
                try:
                    self.rt.transport.post(via, msg)
                    dest = via
                    posted = True
                except KeyError:
                    posted = False
            else:
                msg = Update.encode(fin.fid, here, fin.deltas, fin.exceptions, fin.result,
                                    fin.at_error, self.rt.output_seq if to_inbox else 0, seq)
                try:
                    self.rt.transport.post(dest, msg)
                    posted = True
                except KeyError:
                    posted = False
        if posted:
            self.rt.transport.pump(dest)
        elif via is not None:
            try:
                self.rt.send(via, msg)
            except ApgasError:  # it left or died: kept in _unacked, sent again (_places_gone)
                log.debug("finish %s: aggregator place %d is gone", fid, via)
        else:
            try:
                self.rt.send(home, msg)
            except ApgasError:
                log.debug("finish %s: home place %d is gone, update dropped", fin.fid, home)

    def _release_root(self, fin: RootFinish) -> None:
        # state_lock held
        if fin.fid is not None:
            self.roots.pop(fin.fid[1], None)
        fin.release()

    def wait_root(self, fin: RootFinish) -> None:
        """Complete the body of ``fin`` (the calling thread) and wait for all its tasks."""
        with self.state_lock:
            if fin.failed:  # a place it waited on died before the body ended
                return
            if fin.add(self.here, -1):
                self._release_root(fin)
                return
            inbox = fin.inbox
            if inbox is not None:  # the UPDATEs come to this thread's inbox (at)
                fin.event = inbox
            else:
                # A held lock, released by RootFinish.release: a tenth of an Event's cost.
                event = fin.event = _allocate_lock()
                event.acquire()
        self.rt.transport.flush()  # tasks batched by send_soon leave before the wait
        if inbox is not None:
            self.rt.transport.wait_inbox(inbox, lambda: fin.done)
            return
        pool = current_pool()
        with pool.blocking() if pool is not None else nullcontext():
            event.acquire()

    # ================================================================== receiving
    def on_update(self, msg: Update) -> None:
        """Apply an ``Update`` to the finish it names, here at its home."""
        # output_seq: the print output ``src`` had sent to place 0 before this UPDATE to an
        # inbox; it travelled on the other connection, to the receiver (see Runtime.send_output)
        if msg.output_seq:
            self.rt.wait_output(msg.src, msg.output_seq)
        self._apply(msg.fid, msg.src, msg.seq, msg.deltas, msg.exceptions, msg.result,
                    msg.at_error)

    def _next_seq(self, home: int) -> int:
        """The number of this place's next update to ``home`` (state_lock held)."""
        seq = self._up_seq[home] = self._up_seq.get(home, 0) + 1
        return seq

    def _apply(self, fid: Any, src: int, seq: int, deltas: dict[int, int], exceptions: list,
               result: bytes | None, at_error: Any) -> None:
        # one update of place src, here at the home of fid.  seq > 0: the place's seq-th
        # update to this home, applied once however often it arrives, and only after its
        # seq - 1 others (one that comes early waits in _seen until the gap is filled: a
        # direct update and an aggregated one travel by different ways)
        errors = [pe.unpack() for pe in exceptions]
        at_exc = at_error.unpack() if at_error is not None else None
        with self.state_lock:
            if not seq:
                self._apply_one(fid, deltas, errors, result, at_exc)
                return
            seen = self._seen.get(src)
            if seen is None:
                seen = self._seen[src] = [0, {}]
            low, early = seen
            if seq <= low or seq in early:
                return  # sent again after its aggregator died or left: applied already
            if seq != low + 1:
                early[seq] = (fid, deltas, errors, result, at_exc)
                return
            self._apply_one(fid, deltas, errors, result, at_exc)
            low = seq
            while low + 1 in early:
                low += 1
                self._apply_one(*early.pop(low))
            seen[0] = low

    def _apply_one(self, fid: Any, deltas: dict[int, int], errors: list,
                   result: bytes | None, at_exc: Exception | None) -> None:
        # state_lock held: apply one update, in its turn, to the finish fid of this home
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
        elif self.membership.dead:
            for p in self.membership.dead:
                if fin.waits_on(p):
                    self._fail_root(fin, p)
                    break

    # ================================================================== aggregation
    def _aggregator(self, home: int) -> int | None:
        """The place that forwards this place's updates for a finish of ``home``, this place
        itself when it is that place, or ``None``: send them to the home directly (state_lock
        held).

        The aggregator of a host slot is its lowest live place other than the home; a slot of
        one live place, an update to an ``at``'s inbox (not aggregated: one update) and a
        place leaving after a shrink send directly.
        """
        table = self.membership.table
        members = self._members
        if self._members_n != len(table) or (members and members[0] not in table):
            me = table.get(self.here)
            members = self._members = [] if me is None else sorted(
                p for p, info in table.items() if info.slot == me.slot)
            self._members_n = len(table)
        if len(members) < 2 or self.here in self.membership.released:
            return None
        agg = members[0] if members[0] != home else members[1]
        if agg not in table:
            self._members_n = -1
            return None
        if agg != self.here and not self.rt.transport.has_peer(agg):
            self.rt.transport.add_peer(agg, table[agg].endpoint)
        return agg

    def _to_outbox(self, home: int, entry: tuple, want_ack: bool) -> None:
        """At an aggregator: hold ``entry`` for ``home``; the flusher forwards it."""
        with self._agg_cv:
            self._outbox.setdefault(home, []).append(entry)
            if want_ack:
                self._out_want.add(home)
            if self._flusher is None:
                self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                                 name="apgaspy-finish-aggregator")
                self._flusher.start()
            self._agg_cv.notify()

    def _flush_loop(self) -> None:
        """At an aggregator (a thread of its own, started with the first entry): once entries
        wait, let the ones that follow gather until none came for ``AGG_WINDOW_S`` (at most
        ``AGG_HOLD_S`` after the first), then forward them all, one ``FinBatch`` control
        message per home, in the order they arrived."""
        cv = self._agg_cv
        while True:
            with cv:
                while not self._outbox:
                    cv.wait()
                # hold while entries keep coming, AGG_WINDOW_S after the last, AGG_HOLD_S at most
                deadline = time.monotonic() + AGG_HOLD_S
                count = -1
                while count != (count := sum(map(len, self._outbox.values()))):
                    wait = min(AGG_WINDOW_S, deadline - time.monotonic())
                    if wait <= 0:
                        break
                    cv.wait(wait)
                out, self._outbox = self._outbox, {}
                want, self._out_want = self._out_want, set()
                self._sending = True
            try:
                for home, entries in out.items():
                    try:
                        self.rt.send_ctrl(home, FinBatch(entries, home in want))
                    except ApgasError:
                        log.debug("home place %d is gone: %d update(s) dropped", home,
                                  len(entries))
            finally:
                with cv:
                    self._sending = False

    def ctrl_fin_up(self, src: int, message: FinUp) -> None:
        """Control message :class:`~apgaspy._messages.FinUp`: place ``src`` of this host
        sends its update ``message.entry`` (src, seq, fid, deltas, exceptions, result,
        at_error) for ``message.home`` through here."""
        self._to_outbox(message.home, message.entry, message.want_ack)

    def ctrl_fin_batch(self, src: int, message: FinBatch) -> None:
        """Control message :class:`~apgaspy._messages.FinBatch`, here at the home: the updates
        ``message.entries`` (see :meth:`ctrl_fin_up`) forwarded by aggregator ``src`` (or sent
        again by their own place); with ``want_ack``, tell ``src`` up to which seq each
        place's are applied."""
        entries = message.entries
        for s, seq, fid, deltas, exceptions, result, at_error in entries:
            self._apply(fid, s, seq, deltas, exceptions, result, at_error)
        if message.want_ack:
            with self.state_lock:
                acks = {s: self._seen[s][0] for s, seq, *_ in entries if seq and s in self._seen}
            if acks:
                try:
                    self.rt.send_ctrl(src, FinAcked(self.here, acks))
                except ApgasError:
                    pass

    def ctrl_fin_acked(self, src: int, message: FinAcked) -> None:
        """Control message :class:`~apgaspy._messages.FinAcked`: ``home`` applied each place's
        aggregated updates up to the seq in ``acks``; drop ours, pass the others on to their
        places."""
        home = message.home
        for place, low in message.acks.items():
            if place == self.here:
                with self.state_lock:
                    kept = self._unacked.get(home)
                    if kept:
                        self._unacked[home] = [k for k in kept if k[0] > low]
            else:
                try:
                    self.rt.send_ctrl(place, FinAcked(home, {place: low}))
                except ApgasError:
                    pass

    def holding(self) -> bool:
        """True while this place keeps updates that no home acknowledged yet, or holds
        updates of its host to forward."""
        with self._agg_cv:
            if self._outbox or self._sending:
                return True
        with self.state_lock:
            return any(self._unacked.values())

    def places_gone(self, gone: Iterable[int]) -> None:
        """``gone`` died or left (state_lock held; called by the membership room): forget
        the updates kept for a gone home, and send every kept update that went through a gone
        aggregator (all of them when this place leaves) straight to its home again, before
        any later update of this place (the home applies each once)."""
        gone = set(gone)
        leaving = self.here in gone
        self._members_n = -1  # the host's aggregator is chosen again
        for home in gone & set(self._unacked):
            del self._unacked[home]
        table = self.membership.table
        transport = self.rt.transport
        for home, kept in self._unacked.items():
            if not kept or not (leaving or any(via in gone for _, via, _ in kept)):
                continue
            info = table.get(home)
            if info is None:
                continue
            if not transport.has_peer(home):
                transport.add_peer(home, info.endpoint)
            entries = [entry for _, _, entry in kept]
            self._unacked[home] = [(seq, home, entry) for seq, _, entry in kept]
            transport.post(home, Ctrl.encode(self.here, FinBatch(entries, True)))
            self.rt.immediate.submit(transport.pump, home)

    # ================================================================== failures
    def fail_waiting_on(self, place: int) -> None:
        """Fail, at once, every finish whose home is here and that still expects something
        from ``place``, which died (state_lock held; called by ``Membership.place_died``)."""
        for fin in list(self.roots.values()):
            if fin.waits_on(place):
                self._fail_root(fin, place)
        self.places_gone((place,))

    def _fail_root(self, fin: RootFinish, place: int) -> None:
        # state_lock held
        fin.exceptions.append(DeadPlaceError(place))
        fin.failed = True
        fin.counts.clear()
        fin.nonzero = 0
        self._release_root(fin)
