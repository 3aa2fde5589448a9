"""The messages places send each other: one named tuple per kind, and their encoding.

The rooms of a place's runtime (:mod:`._finish`, :mod:`._membership`, :mod:`._requests`)
and the runtime itself (:mod:`._runtime`, which dispatches them) build and read these messages.
They live in this small module of their own so that every room can import them without importing
the runtime.

=================  =====================================================  ====================
message            fields                                                 handled by
=================  =====================================================  ====================
:class:`Task`      fid, flags, body                                       worker pool (counted
                                                                          in finish ``fid``)
:class:`Uncounted` body                                                   worker pool
:class:`Immediate` body                                                   immediate pool
:class:`Update`    fid, src, deltas, exceptions, result, at_error,        the finish's home
                   output_seq, seq                                        (or an ``at``'s
                                                                          waiting thread)
:class:`Ctrl`      src, code, fields (a control message, below)           receiver thread
:class:`Output`    stream, text, src, seq                                 place 0's stdout/err
=================  =====================================================  ====================

On the wire a message is the plain tuple ``(kind, *fields)`` pickled at protocol 5 (the
``body`` of a task inside it is pickled with cloudpickle beforehand): each class's ``encode``
builds those bytes straight from the fields, and :func:`decode` gives the named tuple back
(its ``kind`` first).  A named tuple pickled as such would carry its class's name and cost
about 2.5 µs more per message; encoded this way a message costs what a bare tuple costs, and
reading one about 0.3 µs more.

Control messages (membership, acknowledged requests, the finish's aggregation; none is on the
path of a task) are typed records too, one named tuple per message with named fields, sent inside a
:class:`Ctrl` as ``(CTRL, src, code, fields)``: ``code`` is the type's index in
:data:`CONTROL_TYPES` and ``fields`` the plain tuple of its fields.  Building one checks its
fields where it is sent, and :meth:`Ctrl.encode` refuses anything else; the receiver gets
the record back with :func:`control_message` and dispatches it by its type.

======================  ==============  ===============  ==================================
control message         fields          from → to        handled by
======================  ==============  ===============  ==================================
:class:`Ready`          (none)          new place → 0    membership (readiness)
:class:`Shutdown`       code            0 → every place  membership (answers ``Bye``)
:class:`Bye`            (none)          place → 0        membership (shutdown)
:class:`Dead`           place           0 → every place  membership (deaths)
:class:`ReleasedDied`   place           0 → every place  membership (a shrink's death)
:class:`AddPlaces`      infos, op       0 → every place  membership (grow; answers ``Ack``)
:class:`RemovePlaces`   removed, op     0 → every place  membership (shrink; answers ``Ack``)
:class:`Ack`            op              place → sender   requests room
:class:`Fin`            (none)          place → r        membership (released place r)
:class:`Released`       (none)          r → 0            membership (shrink)
:class:`FinUp`          home, entry,    place → its      finish room (aggregation: held,
                        want_ack        aggregator       forwarded in a ``FinBatch``)
:class:`FinBatch`       entries,        aggregator (or   finish room (applies each entry
                        want_ack        place) → home    once, in order; ``FinAcked``)
:class:`FinAcked`       home, acks      home → aggr. →   finish room (drops the kept
                                        place            updates)
:class:`Interrupt`      signal          place → 0        interrupts (place 0 ends the run)
======================  ==============  ===============  ==================================
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

from ._exceptions import UnknownMessageError

__all__ = ["TASK", "UNCOUNTED", "IMMEDIATE", "UPDATE", "CTRL", "OUTPUT", "F_AT", "Task",
           "Uncounted", "Immediate", "Update", "Ctrl", "Output", "Message", "decode",
           "UnknownMessageError", "Ready", "Shutdown", "Bye", "Dead", "ReleasedDied",
           "AddPlaces", "RemovePlaces", "Ack", "Fin", "Released", "FinUp", "FinBatch", "FinAcked",
           "Interrupt", "ControlMessage", "Request",
           "CONTROL_TYPES", "control_message"]

TASK, UNCOUNTED, IMMEDIATE, UPDATE, CTRL, OUTPUT = range(6)
F_AT = 1  # Task flag: the task of an ``at``; its return value travels back with the Update

_PROTO = 5
_dumps = pickle.dumps
_loads = pickle.loads
_new = tuple.__new__

FinishId = tuple  # (home place, number) or (home place, number, inbox endpoint)


class Task(NamedTuple):
    """A task counted by finish ``fid``: ``body`` is the cloudpickled ``(fn, args, kwargs)``;
    ``flags`` is 0 or :data:`F_AT`."""

    kind: int
    fid: FinishId
    flags: int
    body: bytes

    @staticmethod
    def encode(fid: FinishId, flags: int, body: bytes) -> bytes:
        """The wire form of a :class:`Task`."""
        return _dumps((TASK, fid, flags, body), _PROTO)


class Uncounted(NamedTuple):
    """A task no finish waits for, run on the worker pool."""

    kind: int
    body: bytes

    @staticmethod
    def encode(body: bytes) -> bytes:
        """The wire form of an :class:`Uncounted` task."""
        return _dumps((UNCOUNTED, body), _PROTO)


class Immediate(NamedTuple):
    """A task no finish waits for, run on the immediate pool."""

    kind: int
    body: bytes

    @staticmethod
    def encode(body: bytes) -> bytes:
        """The wire form of an :class:`Immediate` task."""
        return _dumps((IMMEDIATE, body), _PROTO)


class Update(NamedTuple):
    """What the tasks of finish ``fid`` at place ``src`` did since the last update: the change
    of the task counts by place (``deltas``), the packed exceptions, an ``at``'s pickled
    ``result`` or packed ``at_error``, (to an inbox) ``output_seq``, the last print output
    ``src`` sent to place 0 before it (0: none to wait for), and ``seq``, the update's number
    among those ``src`` sent to the finish's home (0: to an inbox, not numbered); the home
    applies a place's numbered updates in that order."""

    kind: int
    fid: FinishId
    src: int
    deltas: dict[int, int]
    exceptions: list[Any]
    result: bytes | None
    at_error: Any
    output_seq: int
    seq: int = 0

    @staticmethod
    def encode(fid: FinishId, src: int, deltas: dict[int, int], exceptions: list[Any],
               result: bytes | None, at_error: Any, output_seq: int, seq: int = 0) -> bytes:
        """The wire form of an :class:`Update`."""
        return _dumps((UPDATE, fid, src, deltas, exceptions, result, at_error, output_seq,
                       seq), _PROTO)


class Ctrl(NamedTuple):
    """A control message from place ``src``: ``code`` names its type (its index in
    :data:`CONTROL_TYPES`) and ``fields`` are its fields, plain-pickled.  Read it with
    :func:`control_message`."""

    kind: int
    src: int
    code: int
    fields: tuple

    @staticmethod
    def encode(src: int, message: ControlMessage) -> bytes:
        """The wire form of control message ``message`` sent by place ``src``.

        Raises:
            TypeError: ``message`` is not one of :data:`CONTROL_TYPES`.
        """
        try:
            code = _CONTROL_CODES[type(message)]
        except KeyError:
            raise TypeError(f"not a control message: {message!r}") from None
        return _dumps((CTRL, src, code, tuple(message)), _PROTO)


class Output(NamedTuple):
    """Print output ``text`` of place ``src`` for place 0's ``stream`` (1: stdout, 2: stderr),
    the ``seq``-th output that place sent."""

    kind: int
    stream: int
    text: str
    src: int
    seq: int

    @staticmethod
    def encode(stream: int, text: str, src: int, seq: int) -> bytes:
        """The wire form of an :class:`Output` message."""
        return _dumps((OUTPUT, stream, text, src, seq), _PROTO)


# ====================================================================== control messages
# One record per control message, with named fields: a misspelt type or field, or a missing
# one, fails where the message is built (at the sender), not at the receiver.  The runtime
# dispatches them by type (``Runtime.ctrl_handlers``: type -> the room method, called as
# ``handler(src, message)``).


class Ready(NamedTuple):
    """To place 0: the sender serves tasks (start-up, grow)."""


class Shutdown(NamedTuple):
    """From place 0: end with exit status ``code`` (0, or 1 after a failure); answered by
    :class:`Bye`."""

    code: int


class Bye(NamedTuple):
    """To place 0: the sender ends (the answer to :class:`Shutdown`)."""


class Dead(NamedTuple):
    """From place 0: place ``place`` died."""

    place: int


class ReleasedDied(NamedTuple):
    """From place 0: place ``place``, which a shrink was releasing, died before it left."""

    place: int


class AddPlaces(NamedTuple):
    """Request from place 0 (a grow): add ``infos`` (``PlaceInfo`` records) to the place
    table, then :class:`Ack` request ``op`` (filled in by ``Requests.request_all``)."""

    infos: list[Any]
    op: int = 0


class RemovePlaces(NamedTuple):
    """Request from place 0 (a shrink): drop the places ``removed`` from the table, send each
    a :class:`Fin`, then :class:`Ack` request ``op`` (filled in by ``Requests.request_all``)."""

    removed: list[int]
    op: int = 0


class Ack(NamedTuple):
    """The sender carried out request ``op`` (an :class:`AddPlaces` or
    :class:`RemovePlaces`)."""

    op: int


class Fin(NamedTuple):
    """To a released place: the sender (the message's ``src``) sends it nothing more."""


class Released(NamedTuple):
    """To place 0: the sender, released by a shrink, has finished its work and ends."""


class FinUp(NamedTuple):
    """To the aggregator of the sender's host: hold the update ``entry`` (src, seq, fid,
    deltas, exceptions, result, at_error) for ``home`` and forward it; ``want_ack``: ask the
    home for a :class:`FinAcked`."""

    home: int
    entry: tuple
    want_ack: bool


class FinBatch(NamedTuple):
    """To a finish's home: the updates ``entries`` (each as in :class:`FinUp`), forwarded by
    an aggregator or sent again by their own place; ``want_ack``: answer :class:`FinAcked`."""

    entries: list[tuple]
    want_ack: bool


class FinAcked(NamedTuple):
    """From ``home`` (through the aggregator): it applied each place's updates up to the seq
    in ``acks`` (place → seq)."""

    home: int
    acks: dict[int, int]


class Interrupt(NamedTuple):
    """To place 0: the sender received ``signal`` (SIGINT or SIGTERM, as a number); place 0
    ends the whole run as if it had received it (see ``apgaspy._interrupt``)."""

    signal: int


ControlMessage = (Ready | Shutdown | Bye | Dead | ReleasedDied | AddPlaces | RemovePlaces | Ack
                  | Fin | Released | FinUp | FinBatch | FinAcked | Interrupt)
Request = AddPlaces | RemovePlaces
"""The control messages that wait for an :class:`Ack` (``Requests.request_all``)."""

CONTROL_TYPES: tuple[type, ...] = (Ready, Shutdown, Bye, Dead, ReleasedDied, AddPlaces,
                                   RemovePlaces, Ack, Fin, Released, FinUp, FinBatch, FinAcked,
                                   Interrupt)
"""Every control message type; a type's index is its code on the wire (:class:`Ctrl`)."""
_CONTROL_CODES: dict[type, int] = {t: i for i, t in enumerate(CONTROL_TYPES)}


def control_message(msg: Ctrl) -> ControlMessage:
    """The typed control message that ``msg`` carries.

    Raises:
        UnknownMessageError: ``msg`` names no control message type, or its fields do not
            match that type's (a sender of another version).
    """
    try:
        cls = CONTROL_TYPES[msg.code]
        return cls(*msg.fields)  # type: ignore[no-any-return]
    except (IndexError, TypeError):
        raise UnknownMessageError(
            f"not a control message: code {msg.code!r}, fields {str(msg.fields)[:60]}"
        ) from None


Message = Task | Uncounted | Immediate | Update | Ctrl | Output

_TYPES: dict[Any, type] = {TASK: Task, UNCOUNTED: Uncounted, IMMEDIATE: Immediate,
                           UPDATE: Update, CTRL: Ctrl, OUTPUT: Output}


def decode(frame: bytes) -> Message:
    """The message encoded in ``frame``, as its named tuple.

    Raises:
        Exception: what unpickling raises (a malformed frame).
        UnknownMessageError: not a message of a known kind.
    """
    raw = _loads(frame)
    try:
        return _new(_TYPES[raw[0]], raw)  # type: ignore[no-any-return]
    except (KeyError, IndexError, TypeError):
        raise UnknownMessageError(f"not a message of a known kind: {str(raw)[:60]}") from None
