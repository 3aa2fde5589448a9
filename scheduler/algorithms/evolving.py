"""Deprecated address of :mod:`scheduler.algorithms.evolving_requests` (the policies that
serve evolving jobs' node requests).

Importing it warns ``DeprecationWarning``; every name it had is still found here.
"""

from __future__ import annotations

import warnings

from .evolving_requests import *  # noqa: F403
from .evolving_requests import __all__

__all__ = list(__all__)

warnings.warn("scheduler.algorithms.evolving is now scheduler.algorithms.evolving_requests",
              DeprecationWarning, stacklevel=2)
