"""Results that fold in any order: the ``Fold`` protocol and the stock result types.

A GLB computation keeps one result object per place.  Bags add their work's outcome to the
local result (``Bag.process``/``Bag.submit``); at the end the per-place results are folded
into one on place 0.  ``fold`` must be associative and commutative, so the final value does
not depend on which place did which work, nor in what order results meet.

Source: the ``Fold`` interface of LifelineGLB (Posner, Java) and the reducers of
Saraswat et al., "Lifeline-based global load balancing", PPoPP 2011.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["Fold", "LongSum", "ArraySum"]


class Fold(ABC):
    """A partial result that can absorb another partial result of the same type.

    Subclasses must be picklable: results travel between places when a place is released
    by a shrink and at the final reduction.
    """

    @abstractmethod
    def fold(self, other: Fold) -> None:
        """Add ``other`` into ``self`` in place.

        Args:
            other: a result of the same type; it is not modified.

        Raises:
            TypeError: ``other`` is of another result type.
        """

    @abstractmethod
    def value(self) -> Any:
        """The plain value of the result (an ``int``, a numpy array, ...).

        A method, called as ``result.value()`` (a fold's subclass computes it); a
        computation's :class:`~glb.GLBResult` has the property ``res.value``, which calls it
        (``res.value == res.result.value()``)."""


class LongSum(Fold):
    """An integer sum (Java ``LongSum``; Python ints never overflow).

    Args:
        start: the initial value, an integer (default 0).
    """

    __slots__ = ("total",)

    def __init__(self, start: int = 0) -> None:
        self.total = int(start)

    def add(self, amount: int) -> None:
        """Add ``amount`` (an integer) to the sum."""
        self.total += int(amount)

    def fold(self, other: Fold) -> None:
        if not isinstance(other, LongSum):
            raise TypeError(f"cannot fold {type(other).__name__} into LongSum")
        self.total += other.total

    def value(self) -> int:
        """The sum, an ``int`` (a method: ``LongSum(3).value() == 3``; ``.total`` holds it
        too)."""
        return self.total

    def __repr__(self) -> str:
        return f"LongSum({self.total})"

    def __getstate__(self) -> int:
        return self.total

    def __setstate__(self, state: int) -> None:
        self.total = state


class ArraySum(Fold):
    """An element-wise sum of numpy arrays of one fixed shape and dtype.

    Args:
        shape_or_array: either a shape (an int or a tuple of ints), giving a zero array of
            ``dtype``, or an existing numpy array that becomes the initial value (not copied).
        dtype: element type when a shape is given (default ``float64``).
    """

    __slots__ = ("array",)

    def __init__(self, shape_or_array: Any, dtype: Any = np.float64) -> None:
        if isinstance(shape_or_array, np.ndarray):
            self.array = shape_or_array
        else:
            self.array = np.zeros(shape_or_array, dtype=dtype)

    def fold(self, other: Fold) -> None:
        if not isinstance(other, ArraySum):
            raise TypeError(f"cannot fold {type(other).__name__} into ArraySum")
        if other.array.shape != self.array.shape:
            raise TypeError(
                f"cannot fold an array of shape {other.array.shape} into one of shape "
                f"{self.array.shape}"
            )
        self.array += other.array

    def value(self) -> np.ndarray:
        return self.array

    def __repr__(self) -> str:
        return f"ArraySum(shape={self.array.shape}, dtype={self.array.dtype})"

    def __getstate__(self) -> np.ndarray:
        return self.array

    def __setstate__(self, state: np.ndarray) -> None:
        self.array = state
