"""The kinds of the messages places send each other, and how a message is encoded.

The rooms of a place's runtime (:mod:`._finish`, :mod:`._membership`, :mod:`._control`) and the
runtime itself (:mod:`._runtime`) build and read these messages; the table of the kinds, their
fields and who handles each is in :mod:`._runtime`'s docstring.  They live in this small module
of their own so that every room can import them without importing the runtime.

A message is a tuple whose first item is its kind, pickled with :data:`_dumps_msg` at protocol
:data:`_PROTO` (the ``body`` of a task inside it is pickled with cloudpickle beforehand).
"""

from __future__ import annotations

import pickle

__all__ = ["TASK", "UNCOUNTED", "IMMEDIATE", "UPDATE", "CTRL", "OUTPUT", "F_AT"]

TASK, UNCOUNTED, IMMEDIATE, UPDATE, CTRL, OUTPUT = range(6)
F_AT = 1  # TASK flag: the task of an ``at``; its return value travels back with the UPDATE

# Package-internal: the encoding of a message (the rooms import them by these names).
_PROTO = 5
_dumps_msg = pickle.dumps
