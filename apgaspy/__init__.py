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
"""

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
