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

    The contract (docs/concepts/malleability.md says the same):

    * ``n`` in ``pre_grow`` and ``pre_shrink`` is the number of places the order adds or
      releases; ``n`` in ``post_grow`` and ``post_shrink`` is the number of places now.
    * An order refused before the handler is asked (malformed, no handler, a grow naming a
      host that cannot run a place, a shrink of more hosts than the job holds besides place
      0's) calls no method at all.
    * Once ``pre_grow`` or ``pre_shrink`` has returned, the matching ``post_*`` runs exactly
      once: ``post_grow`` with the places that did start (maybe none), ``post_shrink`` with
      an empty ``removed`` when ``pre_shrink``'s answer was refused.
    * A method that raises ends the order with that exception; the matching ``post_*`` is
      then not called.
    """

    @abstractmethod
    def pre_shrink(self, n: int) -> list[Place]:
        """Choose the ``n`` places to release and move their work and data off them.

        Called once the order is checked: a shrink of more hosts than the job holds
        besides place 0's is refused before, and calls no method.

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
        """Called after the released places are gone and their hosts went back, or after
        :meth:`pre_shrink`'s answer was refused (then with an empty ``removed``).

        Args:
            n: the number of places now (the released ones no longer counted).
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
        """Called before the new places are started, once every host of the order was found
        able to run a place (an order refused before calls no method).

        Args:
            n: the number of places about to be added (hosts in the order × places per
                host).
        """

    @abstractmethod
    def post_grow(self, n: int, continued: list[Place], added: list[Place]) -> None:
        """Called after the new places are running and every place sees them; also when
        some or all of them failed to start (the order is reported as failed afterwards).

        Args:
            n: the number of places now (the added ones included).
            continued: the places that were there before the grow (one that died during the
                grow is listed but no longer in ``places()``).
            added: the new places that started (empty if the grow failed); a new place that
                died before it was ready is left out and the order then reports an error.
        """
