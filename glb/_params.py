"""The parameters of one GLB computation (read by ``glb._compute`` from ``glb._config``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Params"]


@dataclass
class Params:
    """GLB parameters of one computation (see ``glb._config`` for their meaning and defaults).

    Attributes:
        n: work units per ``Bag.process`` call (≥ 1).
        w: random steal attempts before lifelines (≥ 1).
        l: base of the lifeline hypercube (≥ 2).
        z: dimensions of the hypercube, or ``None`` for the fewest that reach every place.
        resilient: recover the work of places that die (``glb._store``).
        backup_interval: seconds between two backups of a place to place 0 (resilient only).
        workers: worker threads per place, each with its own bag (≥ 1).
        pin_workers: in a pinned job (``APGAS_CORES``), worker i's thread runs on core
            i mod len(share) of its place's share (:func:`apgaspy.pinning.pinned_worker`).
    """

    n: int
    w: int
    l: int  # noqa: E741 - the paper's name
    z: int | None
    resilient: bool = False
    backup_interval: float = 1.0
    workers: int = 1
    pin_workers: bool = True
