"""The bag protocol: what an application implements to run under GLB.

A bag holds a place's pending work.  The GLB worker of a place calls ``process(n, result)``
repeatedly; between calls it answers thieves with ``split`` and receives loot with ``merge``.
The protocol follows the ``Bag`` interface of LifelineGLB (Posner, Java) and the ``TaskQueue``
of Saraswat et al., "Lifeline-based global load balancing", PPoPP 2011.

Contract (what GLB relies on):

* ``process(n, result)`` does at most about ``n`` units of work (the unit is the bag's own:
  tree nodes, board rows, source vertices, samples) and returns; it should take milliseconds,
  not seconds, because thieves wait until it returns.  It may add its outcome to ``result``
  directly, or keep a partial result inside the bag and add it in ``submit``.
* ``split(take_all)`` removes a part of the work (about half) and returns it as a new bag, or
  returns ``None`` when there is nothing to give.  With ``take_all`` true and a bag that is not
  splittable, it gives all of its work (GLB uses this to move work off a released place).
* ``merge(other)`` adds all of ``other``'s work to ``self``; ``other`` is discarded afterwards.
* ``is_empty()`` is true when no work is left; ``is_splittable()`` is true when ``split(False)``
  would return a non-empty bag.
* ``submit(result)`` adds any partial result kept inside the bag to ``result``; GLB calls it
  once per bag before the bag is dropped or leaves its place.
* Bags must be picklable (they travel between places).  Keep them compact: numpy arrays,
  not lists of Python objects.

Whatever the sequence of splits and merges, the folded result must be the same.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from ._fold import Fold

__all__ = ["Bag", "process_all"]

R = TypeVar("R", bound=Fold)
B = TypeVar("B", bound="Bag")


class Bag(ABC, Generic[R]):
    """Abstract base class of a GLB work bag; see the module docstring for the contract."""

    @abstractmethod
    def process(self, n: int, result: R) -> None:
        """Do up to about ``n`` units of work (``n`` ≥ 1), adding outcomes to ``result``."""

    @abstractmethod
    def split(self, take_all: bool) -> Bag[R] | None:
        """Remove about half of the work and return it as a new bag, or ``None`` if none.

        Args:
            take_all: when true and the bag is not splittable, give all remaining work.
        """

    @abstractmethod
    def merge(self, other: Bag[R]) -> None:
        """Add all of ``other``'s work to this bag (``other`` is of the same class)."""

    @abstractmethod
    def is_empty(self) -> bool:
        """True when the bag holds no work."""

    @abstractmethod
    def is_splittable(self) -> bool:
        """True when ``split(False)`` would return a non-empty bag."""

    def submit(self, result: R) -> None:
        """Add a partial result kept inside the bag to ``result`` (default: nothing kept)."""


def process_all(bag: Bag[R], result: R, n: int) -> R:
    """Run ``bag`` to exhaustion on this thread, without places: the sequential baseline.

    Args:
        bag: the work.
        result: the result to fold into; returned.
        n: work units per ``process`` call (≥ 1).

    Raises:
        ValueError: ``n`` < 1.
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    while not bag.is_empty():
        bag.process(n, result)
    bag.submit(result)
    return result
