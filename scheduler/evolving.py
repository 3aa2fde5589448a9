"""Deprecated address of :mod:`scheduler.evolving_simulation` (the simulated evolving jobs)
and of the evolving study, now :mod:`scheduler.studies.evolving`.

Importing it warns ``DeprecationWarning``; every name it had is still found here.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from .evolving_simulation import *  # noqa: F403
from .evolving_simulation import __all__ as _simulation_names

_STUDY_NAMES = ("EVOLVING_RANGES", "MIXES", "evolving_batch", "evolving_study",
                "plot_evolving_study")
__all__ = [*_simulation_names, *_STUDY_NAMES]  # noqa: PLE0604

warnings.warn("scheduler.evolving is now scheduler.evolving_simulation (the simulation) and "
              "scheduler.studies.evolving (the study)", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> Any:
    """The evolving study's names, from :mod:`scheduler.studies.evolving` (loaded on first
    use); ``AttributeError`` for any other name."""
    if name not in _STUDY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("scheduler.studies.evolving"), name)
