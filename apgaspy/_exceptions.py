"""Every error apgaspy raises, in one place.

Each class says who raises it and when.  Errors that cross places carry the place they came
from (``place`` attribute where the class has one, and a note) and the remote traceback text
as ``__cause__`` (a :class:`RemoteTraceback`), as ``concurrent.futures`` and ``mpi4py.futures``
do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
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
    "UnknownMessageError",
]


class ApgasError(RuntimeError):
    """Base class of the errors raised by the apgaspy runtime itself (not by user tasks)."""


class ConfigurationError(ApgasError, ValueError):
    """A configuration value is malformed or out of range.

    Raised by any function that reads a setting (a keyword argument, then an ``APGAS_*``
    environment variable, then the documented default) when the value it finds cannot be
    used; the message names the setting, the value and what is expected.  Raised alone,
    never inside a group: ``run`` takes it out of the root finish's
    :class:`MultipleException` when every failure of ``main`` is one (a GLB setting read in
    ``main``), and uncaught it prints as one line (``APGAS_DEBUG=1``: with its traceback).
    A ``ValueError`` too, so that ``except ValueError`` catches it.
    """


class BadPlaceError(ApgasError, ValueError):
    """A place that is not (or no longer) part of the computation was named: "that place is
    gone".

    Raised synchronously by ``place``, ``async_at``, ``at``, ``uncounted_async_at`` and
    ``immediate_async_at`` for an id that never existed or that a shrink released, and by
    ``GlobalRef.get`` away from the reference's home.  A place whose process died gets the
    subclass :class:`DeadPlaceError`, so one ``except BadPlaceError`` catches every way a place
    can be gone (unknown, released, dead); catch :class:`DeadPlaceError` first where a crash
    must be told apart from a release.

    Args:
        message: the error text (names the place and why it is not usable).
        place: the offending place id (an ``int``), or ``None``.

    Attributes:
        place: the offending place id (an ``int``), or ``None``.
    """

    def __init__(self, message: str, place: int | None = None) -> None:
        super().__init__(message)
        self.place = place

    def __reduce__(self) -> tuple[Any, ...]:
        # Keeps ``place`` (and notes) when the error travels to another place.
        return (type(self), (str(self), self.place), dict(self.__dict__))


class DeadPlaceError(BadPlaceError):
    """The process of a place died (crashed or was killed): a wait on it can never end well.

    A subclass of :class:`BadPlaceError` (hence also an :class:`ApgasError` and a
    ``ValueError``): a dead place is one of the ways a place is gone.

    Raised, at once and never after a hang:

    * by ``place``, ``async_at``, ``at``, ``uncounted_async_at`` and ``immediate_async_at``
      naming a place already known to be dead (also a new place of a grow that never became
      ready, and a released place that died before it finished leaving);
    * by ``at`` whose target died before answering;
    * inside the :class:`MultipleException` of every ``finish`` (at any place) that was
      waiting for a task on that place.

    The runtime declares a place dead when its connection breaks and does not come back within
    ``APGAS_DEAD_PLACE_TIMEOUT`` seconds (default 1 s); place 0 watches every place and tells
    the others.  Malleability orders under way do not wait for a dead place either (see
    ``apgaspy.elastic._malleability``).

    Args:
        place: the dead place id (an ``int``).
        message: the error text (default ``"place(<id>) died"``).

    Attributes:
        place: the dead place id (an ``int``).
    """

    def __init__(self, place: int, message: str | None = None) -> None:
        super().__init__(message or f"place({place}) died", place)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.place, str(self)), dict(self.__dict__))


class MultipleException(ExceptionGroup):  # noqa: N818 - the APGAS name
    """The exceptions raised by the tasks of a ``finish`` (and by its body), as a group.

    Raised by ``finish`` (both forms) and by ``at`` when more than the called function failed.
    Like a trio nursery, ``finish`` raises it for a single error too.  Each member exception
    has a note saying at which place (host, pid) it was raised, and remote ones have the
    remote traceback as ``__cause__``.  Being an ``ExceptionGroup``, it works with
    ``except*`` and ``ExceptionGroup.split``.
    """

    def __new__(cls, message: str, exceptions: Sequence[Exception]) -> MultipleException:
        return super().__new__(cls, message, exceptions)

    def derive(self, excs: Sequence[Exception]) -> MultipleException:  # type: ignore[override]
        return MultipleException(self.message, excs)


class RemoteTraceback(Exception):  # noqa: N818 - the concurrent.futures name
    """The formatted traceback of an exception raised at another place.

    Set as ``__cause__`` of exceptions that crossed places so that printing the exception
    shows where it really came from, headed with the place, host and pid.
    """

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.tb = text

    def __str__(self) -> str:
        return self.tb


class RemoteError(ApgasError):
    """Stands in for a remote exception that could not be pickled or unpickled.

    Raised (inside a :class:`MultipleException` or by ``at``) when a task at another place
    raised an exception object that does not survive pickling, or a ``BaseException`` that
    is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``).

    Attributes:
        type_name: the qualified name of the original exception's class.
    """

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name

    def __reduce__(self) -> tuple[Any, ...]:
        type_name, _, message = str(self).partition(": ")
        return (type(self), (type_name, message))


class MalleabilityError(ApgasError):
    """A malleability order or handler call cannot be carried out.

    Raised by ``define_malleable_handler``/``disable_malleable_handler`` on misuse (not place
    0, defined twice, defined again after disabling), and by the runtime when an order is
    malformed or its handler's answer is invalid (a shrink list that is not exactly the
    requested number of distinct, existing places other than place 0; a grow on a host that
    cannot start a process).  A refused order leaves the running program untouched.
    """


class OrdersEndedError(MalleabilityError):
    """An order arrived when the program no longer takes orders: not carried out.

    Raised to a communicator (``MalleableCommunicator.shrink``/``grow``) by the runtime for
    an order that arrives after the program disabled its malleable handler, which GLB does
    as its computation ends and the runtime does as the program ends: the computation had
    ended.  A :class:`MalleabilityError`, so that ``except MalleabilityError`` still
    refuses it; the communicators of this project report it at INFO level, not as an error,
    since an order due just as a correct run ends is no fault of either side.
    """


class StartupError(ApgasError):
    """A requested place did not start or cannot be reached: the computation never began.

    Raised by ``run`` and ``session`` (at every place under mpiexec) when a place fails to
    start (its host cannot be reached, its process died, it cannot bind its address), when it
    advertises an address its peers cannot reach (a loopback address for a remote host), or
    when it does not report ready within ``APGAS_START_TIMEOUT`` seconds.  The message names
    each place, its host and the cause.  The places that did start are stopped first, so the
    program exits with no process left; it never runs on with fewer places than asked for.

    Attributes:
        places: ``{place id: (host, cause)}`` of the places that failed.
    """

    def __init__(self, message: str, places: dict[int, tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.places = dict(places or {})

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.places))


class Interrupted(KeyboardInterrupt):
    """The run was interrupted: a place received SIGINT (Ctrl-C) or SIGTERM.

    Raised in place 0's main thread, wherever it is (a ``finish``, an ``at``, the program's
    own code), when place 0 receives the first SIGINT or SIGTERM, or when another place tells
    it that it received one.  A ``KeyboardInterrupt``, so ``except KeyboardInterrupt`` and
    ``finally`` blocks see it; once it leaves ``run`` (or ``session``), every place ends and
    the program exits with 128 + the signal's number (130 for SIGINT, 143 for SIGTERM) and one
    line on stderr (docs/concepts/failures.md, "Stopping a run").

    Args:
        signum: the signal's number (``signal.SIGINT`` or ``signal.SIGTERM``).
        place: the id of the place that received it (an ``int``).

    Attributes:
        signal: the signal's number.
        place: the id of the place that received it.
    """

    def __init__(self, signum: int, place: int = 0) -> None:
        import signal as _signal

        super().__init__(f"{_signal.Signals(signum).name} at place({place})")
        self.signal = signum
        self.place = place

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.signal, self.place))


class UnknownMessageError(ApgasError, ValueError):
    """A frame that decodes to no known kind of control message.

    Raised by ``decode`` and ``control_message`` of ``apgaspy._messages`` for a frame whose
    kind or fields match no message of this version; the runtime's receive loops catch it and
    log the frame, so a user never sees it.
    """
