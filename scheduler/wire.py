"""Deprecated address of :mod:`scheduler.order_transport` (the scheduler's TCP transport:
orders to jobs, notifications from jobs).

Importing it warns ``DeprecationWarning``; every name it had is still found here.
"""

from __future__ import annotations

import warnings

from .order_transport import *  # noqa: F403
from .order_transport import __all__

__all__ = list(__all__)

warnings.warn("scheduler.wire is now scheduler.order_transport", DeprecationWarning,
              stacklevel=2)
