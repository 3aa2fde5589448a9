"""Deprecated address of :mod:`communicators.testing` (stand-ins for a scheduler in tests
and benchmarks).

Importing it warns ``DeprecationWarning``; every name it had is still found here.
"""

from __future__ import annotations

import warnings

from .testing import *  # noqa: F403
from .testing import __all__

__all__ = list(__all__)

warnings.warn("communicators.scheduler_side is now communicators.testing", DeprecationWarning,
              stacklevel=2)
