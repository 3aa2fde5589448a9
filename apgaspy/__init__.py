"""apgaspy: the APGAS programming model for Python, malleable.

Places (one process each), ``finish``, ``async_at``, ``at``, ``GlobalRef`` and
``PlaceLocalObject``, over MPI process management and ZeroMQ messages.  Names follow
APGAS for Java (``apgas.Constructs``, in PEP 8 spelling)::

    from apgaspy import finish, async_at, places, here, run

    def main():
        with finish():
            for p in places():
                async_at(p, lambda: print(f"Hello from {here()}"))
        print("Bye")

    if __name__ == "__main__":
        run(main)

``import apgaspy`` loads no runtime: each name below is loaded from its module on first use
(PEP 562), so that the leaf package :mod:`apgaspy.wire` (the scheduler wire protocol) is
imported by the scheduler without ZeroMQ, MPI or the runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._api import (
        async_,
        async_at,
        at,
        finish,
        here,
        immediate_async_at,
        place,
        places,
        run,
        session,
        uncounted_async_at,
    )
    from ._exceptions import (
        ApgasError,
        BadPlaceError,
        ConfigurationError,
        DeadPlaceError,
        Interrupted,
        MalleabilityError,
        MultipleException,
        OrdersEndedError,
        RemoteError,
        RemoteTraceback,
        StartupError,
    )
    from ._global import GlobalRef, PlaceLocalObject
    from ._place import Place
    from .elastic import (
        MalleableHandler,
        define_malleable_handler,
        disable_malleable_handler,
        notify_scheduler,
        release_places,
        request_places,
    )

__version__ = "0.1.0"

#: The public names and the modules they are loaded from on first use.
_LAZY = {
    "async_": "_api",
    "async_at": "_api",
    "at": "_api",
    "finish": "_api",
    "here": "_api",
    "immediate_async_at": "_api",
    "place": "_api",
    "places": "_api",
    "run": "_api",
    "session": "_api",
    "uncounted_async_at": "_api",
    "ApgasError": "_exceptions",
    "BadPlaceError": "_exceptions",
    "ConfigurationError": "_exceptions",
    "DeadPlaceError": "_exceptions",
    "Interrupted": "_exceptions",
    "MalleabilityError": "_exceptions",
    "MultipleException": "_exceptions",
    "OrdersEndedError": "_exceptions",
    "RemoteError": "_exceptions",
    "RemoteTraceback": "_exceptions",
    "StartupError": "_exceptions",
    "GlobalRef": "_global",
    "PlaceLocalObject": "_global",
    "Place": "_place",
    "MalleableHandler": "elastic",
    "define_malleable_handler": "elastic",
    "disable_malleable_handler": "elastic",
    "notify_scheduler": "elastic",
    "release_places": "elastic",
    "request_places": "elastic",
}


def __getattr__(name: str) -> Any:
    """One of :data:`_LAZY`'s names, loaded from its module on first use (and kept);
    ``AttributeError`` for any other name."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def _load_all() -> None:
    """Import every module a name of this package comes from, now: the launcher's forker
    calls it before it forks a host's places, so that they share those pages and skip the
    imports (apgaspy._child)."""
    for home in set(_LAZY.values()):
        importlib.import_module(f"{__name__}.{home}")
    for module in ("_runtime", "_launch", "_keys", "_hosts", "_logging"):
        importlib.import_module(f"{__name__}.{module}")


def __dir__() -> list[str]:
    """The module's names, the ones not loaded yet included."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "Place",
    "places",
    "here",
    "place",
    "finish",
    "async_",
    "async_at",
    "at",
    "uncounted_async_at",
    "immediate_async_at",
    "GlobalRef",
    "PlaceLocalObject",
    "run",
    "session",
    "MalleableHandler",
    "define_malleable_handler",
    "disable_malleable_handler",
    "notify_scheduler",
    "request_places",
    "release_places",
    "ApgasError",
    "BadPlaceError",
    "DeadPlaceError",
    "MultipleException",
    "RemoteError",
    "RemoteTraceback",
    "ConfigurationError",
    "MalleabilityError",
    "OrdersEndedError",
    "StartupError",
    "Interrupted",
]
