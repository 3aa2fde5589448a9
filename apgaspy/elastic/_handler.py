"""The malleable handler: what a program does before and after its places change.

Follows APGAS for Java's ``apgas.impl.elastic.MalleableHandler``; all four methods run at
place 0, on the thread that carries out the scheduler's order, one order at a time.  They
may use ``finish``/``async_at``/``at`` to act on other places.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from .._place import Place

__all__ = ["MalleableHandler"]


class MalleableHandler(ABC):
    """Abstract base class of a program's reaction to shrink and grow orders.

    Define it with :func:`apgaspy.define_malleable_handler` at place 0; from then on a
    scheduler may order the program to release places (shrink) or to add places (grow).
    Orders count hosts; with ``APGAS_PLACES_PER_HOST`` = k the handler is asked for k
    places per host.
    """

    @abstractmethod
    def pre_shrink(self, n: int) -> list[Place]:
        """Choose the ``n`` places to release and move their work and data off them.

        Args:
            n: the number of places to release (hosts in the order × places per host).

        Returns:
            Exactly ``n`` distinct places of ``places()``, never place 0, making up whole
            hosts (every place of a released host).  A wrong answer refuses the order (the
            scheduler is told why; :meth:`post_shrink` then runs with an empty list so the
            handler can undo what it prepared).
        """

    @abstractmethod
    def post_shrink(self, n: int, removed: list[Place]) -> None:
        """Called after the released places are gone and their hosts went back.

        Args:
            n: the number of places now.
            removed: the places that were released (empty if the order was refused).  A
                released place that died on its way out is here too (it counts as released;
                its unfinished tasks are lost); a place that died otherwise during the order
                is simply no longer in ``places()``.
        """

    def pre_release(self, chosen: list[Place]) -> list[Place]:
        """Called when the program gives places back by itself (an evolving job:
        :func:`apgaspy.release_places`, or the evolving monitor); answers the places that
        leave, as APGAS for Java's evolving ``preShrink``.

        The default answers ``pre_shrink(len(chosen))``: the handler's own choice of as many
        places (override this method to release exactly ``chosen`` and move their work).

        Args:
            chosen: the places the program (or the monitor) chose, whole hosts, never place 0.

        Returns:
            As many places as ``chosen``, on as many whole hosts, never place 0; a wrong
            answer refuses the release (``post_shrink`` then runs with an empty list).
        """
        return self.pre_shrink(len(chosen))

    @abstractmethod
    def pre_grow(self, n: int) -> None:
        """Called before ``n`` places are started (hosts in the order × places per host)."""

    @abstractmethod
    def post_grow(self, n: int, continued: list[Place], added: list[Place]) -> None:
        """Called after the new places are running and every place sees them.

        Args:
            n: the number of places now.
            continued: the places that were there before the grow (one that died during the
                grow is listed but no longer in ``places()``).
            added: the new places that started (empty if the grow failed); a new place that
                died before it was ready is left out and the order then reports an error.
        """
