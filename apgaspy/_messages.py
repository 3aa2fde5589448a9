"""The messages places send each other: one named tuple per kind, and their encoding.

The rooms of a place's runtime (:mod:`._finish`, :mod:`._membership`, :mod:`._control`) and the
runtime itself (:mod:`._runtime`, which dispatches them) build and read these messages.  They
live in this small module of their own so that every room can import them without importing
the runtime.

=================  =====================================================  ====================
message            fields                                                 handled by
=================  =====================================================  ====================
:class:`Task`      fid, flags, body                                       worker pool (counted
                                                                          in finish ``fid``)
:class:`Uncounted` body                                                   worker pool
:class:`Immediate` body                                                   immediate pool
:class:`Update`    fid, src, deltas, exceptions, result, at_error,        the finish's home
                   output_seq                                             (or an ``at``'s
                                                                          waiting thread)
:class:`Ctrl`      src, name, args                                        receiver thread
:class:`Output`    stream, text, src, seq                                 place 0's stdout/err
=================  =====================================================  ====================

On the wire a message is the plain tuple ``(kind, *fields)`` pickled at protocol 5 (the
``body`` of a task inside it is pickled with cloudpickle beforehand): each class's ``encode``
builds those bytes straight from the fields, and :func:`decode` gives the named tuple back
(its ``kind`` first).  A named tuple pickled as such would carry its class's name and cost
about 2.5 µs more per message; encoded this way a message costs what a bare tuple costs, and
reading one about 0.3 µs more.
"""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

__all__ = ["TASK", "UNCOUNTED", "IMMEDIATE", "UPDATE", "CTRL", "OUTPUT", "F_AT", "Task",
           "Uncounted", "Immediate", "Update", "Ctrl", "Output", "Message", "decode",
           "UnknownMessageError"]

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
    ``result`` or packed ``at_error``, and (to an inbox) ``output_seq``, the last print output
    ``src`` sent to place 0 before it (0: none to wait for)."""

    kind: int
    fid: FinishId
    src: int
    deltas: dict[int, int]
    exceptions: list[Any]
    result: bytes | None
    at_error: Any
    output_seq: int

    @staticmethod
    def encode(fid: FinishId, src: int, deltas: dict[int, int], exceptions: list[Any],
               result: bytes | None, at_error: Any, output_seq: int) -> bytes:
        """The wire form of an :class:`Update`."""
        return _dumps((UPDATE, fid, src, deltas, exceptions, result, at_error, output_seq),
                      _PROTO)


class Ctrl(NamedTuple):
    """Control message ``name`` from place ``src`` with plain-pickled ``args``."""

    kind: int
    src: int
    name: str
    args: tuple

    @staticmethod
    def encode(src: int, name: str, args: tuple) -> bytes:
        """The wire form of a :class:`Ctrl` message."""
        return _dumps((CTRL, src, name, args), _PROTO)


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


class UnknownMessageError(ValueError):
    """A frame that decodes to no known kind of message."""
