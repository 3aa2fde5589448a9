"""What each place did during a GLB computation (:class:`PlaceStats`, in ``GLBResult.log``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PlaceStats"]


@dataclass
class PlaceStats:
    """What one place did during a computation.

    Attributes:
        place: the place id.
        processed: units of work processed (``n`` per ``process`` call, at most).
        process_calls: calls of ``Bag.process``.
        steals_tried, steals_won: random steal attempts made, and those that brought loot.
        steals_late: loot that answered an attempt the thief had given up on (its victim was
            released meanwhile); it was merged like any other loot.
        lifeline_steals: lifeline registrations sent to buddies.
        lifeline_loot: loot received from lifeline buddies.
        lifeline_answers: loot sent to lifeline thieves.
        random_answers: loot sent to random thieves.
        busy_s: seconds spent in ``process``; idle_s: the rest of the computation's time.
        released: true for a place released by a shrink during the computation.
        died: true for a place that died during a resilient computation (its work and
            partial result were recovered; its other figures are lost with it).
    """

    place: int
    processed: int = 0
    process_calls: int = 0
    steals_tried: int = 0
    steals_won: int = 0
    steals_late: int = 0
    lifeline_steals: int = 0
    lifeline_loot: int = 0
    lifeline_answers: int = 0
    random_answers: int = 0
    busy_s: float = 0.0
    idle_s: float = 0.0
    released: bool = False
    died: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The statistics as a plain dict (for JSON)."""
        return dict(self.__dict__)
