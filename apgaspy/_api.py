"""The APGAS constructs: places, finish, async_at, at, and starting the runtime.

Names follow APGAS for Java (``apgas.Constructs``) in PEP 8 spelling.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, overload

from . import _interrupt, _launch, _report
from ._exceptions import ConfigurationError, MultipleException
from ._finish import RootFinish, finish_stack, local_exception
from ._logging import configure_logging
from ._messages import F_AT
from ._place import Place
from ._pool import current_pool
from ._runtime import runtime
from ._serialization import loads
from .elastic._registry import check_communicator

__all__ = [
    "places",
    "here",
    "place",
    "finish",
    "async_",
    "async_at",
    "at",
    "uncounted_async_at",
    "immediate_async_at",
    "run",
    "session",
]

T = TypeVar("T")

_PLACES: dict[int, Place] = {}


def _place_obj(pid: int) -> Place:
    p = _PLACES.get(pid)
    if p is None:
        p = _PLACES[pid] = Place(pid)
    return p


def _pid(p: Place | int) -> int:
    if type(p) is Place:
        return p.id
    if isinstance(p, int) and not isinstance(p, bool):
        return p
    raise TypeError(f"a place is a Place or an int id, got {type(p).__name__}")


def _check_callable(fn: Any, who: str) -> None:
    if not callable(fn):
        raise TypeError(f"{who}() needs a callable as the task, got {type(fn).__name__}")


# ---------------------------------------------------------------------- places
def places() -> list[Place]:
    """The places of the computation, ascending by id.

    The list changes when a malleable program shrinks or grows; ids are never reused.

    Raises:
        ApgasError: the runtime is not running.
    """
    return [_place_obj(i) for i in runtime().membership.place_ids()]


def here() -> Place:
    """The place running the caller.

    Raises:
        ApgasError: the runtime is not running.
    """
    return _place_obj(runtime().here)


def place(id: int) -> Place:  # noqa: A002 - the APGAS name
    """The place with id ``id``, a live place of the computation.

    Args:
        id: a place id (an ``int``, or a :class:`Place`).

    Raises:
        DeadPlaceError: the place died (a :class:`BadPlaceError`; also a new place of a grow
            that never became ready).
        BadPlaceError: the id never named a place, or a shrink released that place.
        TypeError: ``id`` is not an int nor a Place.
    """
    pid = _pid(id)
    runtime().membership.check_place(pid)
    return _place_obj(pid)


# ---------------------------------------------------------------------- finish
class _FinishScope:
    """The context manager returned by ``finish()``."""

    __slots__ = ("_fin",)

    def __enter__(self) -> None:
        rt = runtime()
        self._fin = RootFinish(rt.here)
        finish_stack().append(self._fin)

    def __exit__(self, et: Any, ev: BaseException | None, tb: Any) -> None:
        fin = self._fin
        stack = finish_stack()
        if stack and stack[-1] is fin:
            stack.pop()
        if ev is not None and not isinstance(ev, Exception):
            return  # KeyboardInterrupt, SystemExit: leave at once
        runtime().finishes.wait_root(fin)
        errors: list[Exception] = list(fin.exceptions)
        if ev is not None:
            errors.insert(0, ev)  # type: ignore[arg-type]
        if errors:
            raise MultipleException(
                f"{len(errors)} task{'s' if len(errors) > 1 else ''} of a finish failed", errors
            ) from None


@overload
def finish() -> _FinishScope: ...
@overload
def finish(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T: ...


def finish(fn: Callable[..., Any] | None = None, /, *args: Any, **kwargs: Any) -> Any:
    """Wait for every task spawned inside, on any place, transitively.

    Two forms::

        with finish():
            async_at(p, f)          # the block and every task it spawns
        value = finish(g, x)        # runs g(x) as the body, returns its value

    Like a trio nursery, any failure (of the body or of any task) is raised as one
    :class:`MultipleException` after all tasks have ended, each member with the place it
    came from and, for remote ones, the remote traceback as ``__cause__``.  A
    ``KeyboardInterrupt`` in the body leaves at once without waiting.

    Termination detection: the counting protocol of X10/APGAS (see ``apgaspy._finish``);
    no message per spawned task.

    Raises:
        MultipleException: a task or the body raised.
        ApgasError: the runtime is not running.
    """
    if fn is None:
        if args or kwargs:
            raise TypeError("finish() takes arguments only after a function: finish(fn, *args)")
        return _FinishScope()
    _check_callable(fn, "finish")
    with _FinishScope():
        return fn(*args, **kwargs)


# ---------------------------------------------------------------------- tasks
def async_(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Spawn ``fn(*args, **kwargs)`` as a task here, counted by the innermost finish.

    Local tasks are not copied: ``fn`` and the arguments are used as they are.

    Raises:
        ApgasError: not inside a finish (nor a counted task).
        TypeError: ``fn`` is not callable.
    """
    _check_callable(fn, "async_")
    rt = runtime()
    rt.finishes.spawn(rt.here, fn, args, kwargs)


def async_at(p: Place | int, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> None:
    """Spawn ``fn(*args, **kwargs)`` as a task at place ``p``, counted by the innermost finish.

    For a remote place, ``fn`` and the arguments are pickled with cloudpickle now (later
    changes to them do not travel).

    Raises:
        BadPlaceError: ``p`` is not a place of the computation (unknown or released).
        DeadPlaceError: ``p`` died.
        ApgasError: not inside a finish (nor a counted task).
        TypeError: ``fn`` is not callable or ``p`` is not a place.
    """
    _check_callable(fn, "async_at")
    runtime().finishes.spawn(_pid(p), fn, args, kwargs)


def uncounted_async_at(p: Place | int, fn: Callable[..., Any], /, *args: Any,
                       **kwargs: Any) -> None:
    """Spawn a task at ``p`` that no finish waits for; its exceptions are only logged.

    Raises:
        BadPlaceError, DeadPlaceError: ``p`` is not a live place.
        TypeError: ``fn`` is not callable.
    """
    _check_callable(fn, "uncounted_async_at")
    runtime().spawn_uncounted(_pid(p), fn, args, kwargs)


def immediate_async_at(p: Place | int, fn: Callable[..., Any], /, *args: Any,
                       **kwargs: Any) -> None:
    """Spawn an uncounted task at ``p`` on its immediate pool, ahead of queued tasks.

    The immediate pool is small (``APGAS_IMMEDIATE_THREADS``, default 1) and separate from
    the workers, so control messages (steal requests, say) never wait behind long tasks.
    Such tasks must be short and should not block.

    Raises:
        BadPlaceError, DeadPlaceError: ``p`` is not a live place.
        TypeError: ``fn`` is not callable.
    """
    _check_callable(fn, "immediate_async_at")
    runtime().spawn_uncounted(_pid(p), fn, args, kwargs, immediate=True)


def at(p: Place | int, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` at place ``p``, wait, and return its value.

    Like APGAS for Java's ``at``, the call also waits for the tasks ``fn`` spawns.  The value
    travels back pickled.

    Errors, and how they differ from Java: APGAS for Java implements ``at`` as
    ``finish(() -> asyncAt(p, f))``, so any failure, even ``f``'s own single exception,
    arrives wrapped in a ``MultipleException``.  apgaspy re-raises the exception ``fn``
    raised as it is (a ``KeyError`` stays a ``KeyError``, with the remote traceback as
    ``__cause__`` and a note naming the place), so ``at`` reads like a function call and
    ``except KeyError`` works; it is the ``concurrent.futures`` / ``mpi4py.futures``
    convention (``future.result()``).  Only when more than one thing failed (``fn`` and tasks
    it spawned, or several such tasks) do they come together as one
    :class:`MultipleException`, as from a ``finish``.  If ``p`` dies before answering,
    ``at`` raises :class:`DeadPlaceError` as soon as the death is detected
    (``APGAS_DEAD_PLACE_TIMEOUT``), never a hang; a task that ``fn`` spawned on a place that
    died gives the same error.

    Args:
        p: the place (a :class:`Place` or an id).
        fn: a callable (pickled with cloudpickle for a remote place); ``args``/``kwargs``
            are its arguments.

    Returns:
        ``fn``'s return value.

    Raises:
        DeadPlaceError: ``p`` died (before the call or before answering), or a place a task
            of ``fn`` ran on died.
        BadPlaceError: ``p`` is not a place of the computation (unknown or released).
        MultipleException: more than one failure (``fn`` and/or tasks it spawned).
        Exception: whatever ``fn`` raised (re-raised as it is).
        TypeError: ``fn`` is not callable or ``p`` is not a place.
    """
    _check_callable(fn, "at")
    rt = runtime()
    dest = _pid(p)
    fin = RootFinish(rt.here)
    value: Any = None
    if dest == rt.here:
        stack = finish_stack()
        stack.append(fin)
        try:
            value = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the tasks
            fin.at_error = local_exception(exc, rt.here)
        finally:
            stack.pop()
    else:
        if current_pool() is None and dest in rt.membership.table:
            # not a worker (a worker blocks with compensation): wait on this thread's inbox
            fin.inbox = rt.transport.inbox()
        rt.finishes.spawn(dest, fn, args, kwargs, fin=fin, flags=F_AT)
    rt.finishes.wait_root(fin)
    errors: list[Exception] = ([fin.at_error] if fin.at_error is not None else [])
    errors += fin.exceptions
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise MultipleException(f"at({p}) failed in {len(errors)} ways", errors)
    if dest != rt.here:
        value = loads(fin.result)  # type: ignore[arg-type]
    return value  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- running
@contextmanager
def session(places: int | None = None) -> Iterator[bool]:
    """Run the enclosed block as the main program of a computation.

    Yields ``True`` at place 0, which runs the block inside a root ``finish``; under mpiexec
    the other ranks serve tasks inside ``__enter__`` until place 0 leaves the block, then get
    ``False`` (write ``if main: ...``), as with ``mpi4py.futures.MPICommExecutor``.  Without
    mpiexec this process becomes place 0 and spawns the others.

    Interrupts: the first SIGINT (Ctrl-C) or SIGTERM at any place raises
    :class:`~apgaspy.Interrupted` (a ``KeyboardInterrupt``) in place 0's main thread, wherever
    the block is; when it leaves the block, one line goes to stderr, every place ends, and the
    process exits with ``SystemExit(128 + signal)``: 130 for SIGINT, 143 for SIGTERM (at the
    other ranks too).  A ``KeyboardInterrupt`` the block raises itself counts as SIGINT.  See
    ``apgaspy._interrupt`` and docs/concepts/failures.md, "Stopping a run".

    Args:
        places: places to start without mpiexec (default ``APGAS_PLACES``, else the cores).

    Raises:
        ApgasError: a runtime already runs in this process.
        ConfigurationError: a setting is invalid.
        SystemExit: the run was interrupted (130 or 143, as above).
    """
    _report.install()  # an uncaught failure prints its short form (APGAS_DEBUG: all of it)
    check_communicator()  # a bad communicator setting fails here, before places start
    rt, is_main = _launch.start(places)
    configure_logging(rt.here)
    _interrupt.install(rt)
    if not is_main:
        try:
            code = _launch.serve(rt)
        finally:
            _interrupt.uninstall()
        if _interrupt.is_interrupt_code(code):  # place 0 ended an interrupted run
            sys.stdout.flush()
            raise SystemExit(code)
        yield False
        return
    code = 0
    interrupted = False
    try:
        with finish():
            yield True
    except KeyboardInterrupt as exc:  # Interrupted (a signal), or the program's own
        _interrupt.begin_ending()
        interrupted = True
        code = _interrupt.exit_code(exc)
        _interrupt.report(exc, len(rt.membership.table))
        raise SystemExit(code) from None
    except BaseException:
        code = 1
        raise
    finally:
        _interrupt.begin_ending()
        try:
            _launch.stop(rt, code, interrupted=interrupted)
        finally:
            late = not interrupted and code == 0 and _interrupt.received_late()
            _interrupt.uninstall()
        if late:  # a signal while the run was ending normally
            _interrupt.report(None, len(rt.membership.table) or 1)
            raise SystemExit(_interrupt.exit_code())


def run(main: Callable[..., T], /, *args: Any, places: int | None = None) -> T:
    """Run ``main(*args)`` at place 0 of a new computation and shut it down afterwards.

    Every mpiexec rank calls ``run``; ranks other than 0 serve tasks and then exit the process
    with status 0 (the code after ``run`` runs only at place 0).  Without mpiexec, this process
    is place 0 and starts ``places`` places in all (default ``APGAS_PLACES``, else the number
    of cores).  ``main`` runs inside a root ``finish``; when it returns, every place ends; if
    it raises, every place ends and the error propagates (the program exits non-zero).

    Args:
        main: the program's main function.
        places: the number of places without mpiexec.

    Returns:
        ``main``'s return value (at place 0).

    An uncaught failure prints a short form (the first failure's place, bag, exception
    and last frames; ``APGAS_DEBUG=1``: every traceback) and exits with status 1
    (:mod:`apgaspy._report`, docs/reference/settings.md).

    Raises:
        MultipleException: ``main`` or a task raised.
        ConfigurationError: the runtime could not start for a bad setting, or every
            failure of ``main`` was a bad setting (raised alone, not in a group).
        ApgasError: the runtime could not start.
        SystemExit: the run was interrupted by SIGINT (Ctrl-C) or SIGTERM at any place (status
            130 or 143, after ``main``'s ``finally`` blocks ran and every place ended; see
            :func:`session`).
    """
    _check_callable(main, "run")
    try:
        with session(places) as is_main:
            if is_main:
                return main(*args)
    except MultipleException as group:
        # A bad setting read inside main (GLB's, say) is a ConfigurationError, not a failed
        # task: raised alone, with no group around it.
        failures = _report.leaves(group)
        if all(isinstance(f, ConfigurationError) for f in failures):
            raise failures[0] from None
        raise
    sys.stdout.flush()
    sys.exit(0)
