"""Deprecated address of :mod:`scheduler.control_client` (the control socket's client side).

Importing it warns ``DeprecationWarning``; every name it had is still found here.
"""

from __future__ import annotations

import warnings

from .control_client import *  # noqa: F403
from .control_client import __all__

__all__ = list(__all__)

warnings.warn("scheduler.control is now scheduler.control_client", DeprecationWarning, stacklevel=2)
