"""Former address of :mod:`apgaspy.wire.auth` (a job's line key, signing and checking lines).

The wire protocol's modules live in the leaf package :mod:`apgaspy.wire`, which the runtime,
GLB, the communicators and the scheduler all import.  Importing this module warns
``DeprecationWarning``; every name of the new module is still found here.
"""

from __future__ import annotations

import warnings
from typing import Any

from apgaspy.wire import auth as _home
from apgaspy.wire.auth import *  # noqa: F403
from apgaspy.wire.auth import __all__

__all__ = list(__all__)


def __getattr__(name: str) -> Any:
    """The names of :mod:`apgaspy.wire.auth` left out of its ``__all__``."""
    return getattr(_home, name)


warnings.warn("communicators.auth is now apgaspy.wire.auth", DeprecationWarning, stacklevel=2)
