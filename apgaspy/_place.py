"""The :class:`Place` value type."""

from __future__ import annotations

from functools import total_ordering
from typing import Any

__all__ = ["Place"]


@total_ordering
class Place:
    """A place: one process of the computation, named by an integer id.

    Place 0 runs the program's ``main`` and is never removed; ids are never reused, so after
    a shrink and a grow ``places()`` may have gaps.  Places are hashable, ordered by id and
    picklable; ``str(Place(3))`` is ``"place(3)"`` as in APGAS for Java.

    Args:
        id: the place id, an integer ≥ 0.

    Raises:
        TypeError: ``id`` is not an integer.
        ValueError: ``id`` is negative.
    """

    __slots__ = ("id",)
    id: int

    def __init__(self, id: int) -> None:  # noqa: A002 - the APGAS name
        if isinstance(id, Place):
            id = id.id
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"a place id is an int, got {type(id).__name__}")
        if id < 0:
            raise ValueError(f"a place id is >= 0, got {id}")
        object.__setattr__(self, "id", int(id))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Place is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Place) and other.id == self.id

    def __lt__(self, other: Place) -> bool:
        if not isinstance(other, Place):
            return NotImplemented
        return self.id < other.id

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return f"place({self.id})"

    def __index__(self) -> int:
        return self.id

    def __reduce__(self) -> tuple[Any, ...]:
        return (Place, (self.id,))
