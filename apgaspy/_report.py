"""What a user sees when a computation fails and nothing catches the error: a short form.

A failed task of a computation reaches the program's top as a :class:`MultipleException`
of nested finishes, each remote member with its remote traceback: dozens of lines in which
the one that matters (which place, which bag, which exception) is hard to find.  So
``run``/``session`` install :func:`excepthook` at place 0, and an uncaught error of the
runtime prints::

    error: place 2, bag UTSBag: ZeroDivisionError: division by zero (APGAS_DEBUG=1 shows
           every remote traceback)            <- one line: the first failure, where it rose
      File "uts.py", line 40, in process      <- its last frames (the remote traceback's)
        1 / 0
    MultipleException: 1 task of a finish failed (1 failure in all)

and a :class:`ConfigurationError` or a :class:`StartupError` (whose message names every place
that did not start, with its host and cause) prints its message on one line.  The exit status stays 1
(Python's for an uncaught exception).  ``APGAS_DEBUG=1`` (docs/reference/settings.md) gives
the full traceback instead, and any other exception goes to the hook that was there before.
A program that catches the error itself sees the same exception object as before: the hook
only changes what an uncaught one prints.  The place comes from the note ``raised at
place(N)`` that every finish adds, and what raised it from a note ``raised by <what>`` that a
library built on apgaspy may add (:data:`ORIGIN_NOTE`; GLB adds ``raised by bag <class>`` to
what a bag's method raised).
"""

from __future__ import annotations

import re
import sys
import traceback
from types import TracebackType

from ._config import setting
from ._exceptions import ConfigurationError, MultipleException, RemoteTraceback, StartupError

__all__ = ["ORIGIN_NOTE", "excepthook", "first_failure", "install", "short_report"]

#: A note that names what raised an exception (``%s``: e.g. ``bag UTSBag``); the short form
#: shows it beside the place.
ORIGIN_NOTE = "raised by %s"
_BY_RE = re.compile(r"^raised by (.+)$")
_PLACE_RE = re.compile(r"^raised at place\((\d+)\)$")
_FRAMES = 2  # the last frames shown of the first failure's traceback
_installed = False


def leaves(exc: BaseException) -> list[BaseException]:
    """The non-group exceptions of ``exc`` (itself when it is no group), depth first."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaves(sub)]
    return [exc]


def first_failure(exc: BaseException) -> BaseException:
    """The first non-group exception of ``exc``: the one the short form shows."""
    return leaves(exc)[0]


def _where(exc: BaseException) -> str:
    place = bag = None
    for note in getattr(exc, "__notes__", ()) or ():
        if (m := _PLACE_RE.match(note)) and place is None:
            place = m.group(1)
        elif m := _BY_RE.match(note):
            bag = m.group(1)
    if place is None and not isinstance(exc.__cause__, RemoteTraceback):
        place = "0"  # no note, not remote: raised by the program's main, at place 0
    parts = ([f"place {place}"] if place is not None else []) + \
        ([bag] if bag is not None else [])
    return ", ".join(parts)


def _last_frames(exc: BaseException) -> list[str]:
    """The last frames of ``exc``'s traceback: the remote one's text where it crossed
    places, else its own; without the caret lines."""
    cause = exc.__cause__
    if isinstance(cause, RemoteTraceback):
        lines = cause.tb.splitlines()
        starts = [i for i, line in enumerate(lines) if line.startswith('  File "')]
        if not starts:
            return []
        end = starts[-1] + 1
        while end < len(lines) and lines[end].startswith("    "):
            end += 1
        frames = lines[starts[max(0, len(starts) - _FRAMES)]:end]
    else:
        entries = traceback.extract_tb(exc.__traceback__)[-_FRAMES:]
        frames = "".join(traceback.format_list(entries)).splitlines()
    return [f for f in frames if f.strip() and set(f.strip()) - set("^~")]


def short_report(exc: BaseException) -> str | None:
    """The short form of an uncaught ``exc`` (module docstring), or ``None`` for an
    exception that is printed as usual (not a :class:`MultipleException` nor a
    :class:`ConfigurationError` nor a :class:`StartupError`)."""
    if isinstance(exc, (ConfigurationError, StartupError)):
        return f"{type(exc).__name__}: {exc} (APGAS_DEBUG=1 shows the traceback)"
    if not isinstance(exc, MultipleException):
        return None
    all_leaves = leaves(exc)
    first = all_leaves[0]
    where = _where(first)
    head = f"error: {where}: " if where else "error: "
    what = f"{type(first).__name__}: {first}" if str(first) else type(first).__name__
    lines = [f"{head}{what} (APGAS_DEBUG=1 shows every remote traceback)"]
    lines += _last_frames(first)
    count = len(all_leaves)
    lines.append(f"{type(exc).__name__}: {exc.message} "
                 f"({count} failure{'s' if count != 1 else ''} in all)")
    return "\n".join(lines)


def _debug() -> bool:
    try:
        return bool(setting("DEBUG"))
    except ConfigurationError:
        return True  # a bad APGAS_DEBUG: show everything rather than guess


def excepthook(kind: type[BaseException], value: BaseException,
               tb: TracebackType | None, *, previous: object = None) -> None:
    """:data:`sys.excepthook` of place 0: the short form for the runtime's errors, unless
    ``APGAS_DEBUG`` is set; anything else to ``previous`` (default Python's own)."""
    text = None if _debug() else short_report(value)
    if text is None:
        hook = previous if callable(previous) else sys.__excepthook__
        hook(kind, value, tb)
        return
    sys.stdout.flush()
    print(text, file=sys.stderr, flush=True)


def install() -> None:
    """Make :func:`excepthook` this process's ``sys.excepthook`` (once; the hook there
    before, a program's own, gets every other exception)."""
    global _installed
    if _installed:
        return
    _installed = True
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException,
             tb: TracebackType | None) -> None:
        excepthook(kind, value, tb, previous=previous)

    sys.excepthook = hook
