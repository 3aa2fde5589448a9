"""Serialization of tasks, values and exceptions between places.

Tasks and values are pickled with cloudpickle (protocol 5), so lambdas, closures and functions
of ``__main__`` travel by value.  Exceptions travel as :class:`PackedException`: the pickled
exception (when it pickles) plus the formatted remote traceback and the place it came from;
:meth:`PackedException.unpack` rebuilds it with the traceback chained as ``__cause__`` and a
note naming the place, as ``concurrent.futures.process`` does.
"""

from __future__ import annotations

import io
import os
import pickle
import socket
import sys
import traceback
import types
from typing import Any

import cloudpickle

from ._exceptions import RemoteError, RemoteTraceback

__all__ = ["dumps", "loads", "dumps_call", "loads_call", "PackedException", "pack_exception"]

PROTOCOL = 5


def _main_is_shared() -> bool:
    """True when the other places have imported the same main module (a script or -m)."""
    main = sys.modules.get("__main__")
    return main is not None and (
        getattr(main, "__file__", None) is not None
        or getattr(getattr(main, "__spec__", None), "name", None) is not None
    )


def _resolve_main(qualname: str) -> Any:
    obj: Any = sys.modules["__main__"]
    try:
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except AttributeError:
        from ._exceptions import ApgasError

        raise ApgasError(
            f"{qualname} is not defined in this place's copy of the main module: define the "
            f"functions and classes that tasks use at the module's top level, not under "
            f"'if __name__ == \"__main__\":'"
        ) from None
    return obj


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, except that top-level functions and classes of ``__main__`` go by name.

    Every place imports the program's main module (mpiexec runs it at every rank; spawned
    places import it as ``__mp_main__`` like ``multiprocessing``), so such objects can be
    looked up by name at the receiver, as ``multiprocessing`` does, instead of travelling by
    value with every global they touch.  Lambdas, closures and objects of an interactive
    session still travel by value.
    """

    def reducer_override(self, obj: Any) -> Any:
        if (isinstance(obj, (types.FunctionType, type))
                and getattr(obj, "__module__", None) == "__main__" and _main_by_name(obj)):
            return (_resolve_main, (obj.__qualname__,))
        return super().reducer_override(obj)


def _main_by_name(obj: Any) -> bool:
    """True when ``obj``, a function or class of ``__main__``, goes by name: it is a top-level
    name of a main module that every place has imported."""
    if "<" in obj.__qualname__ or not _main_is_shared():
        return False
    try:
        return _resolve_main(obj.__qualname__) is obj
    except Exception:  # noqa: BLE001 - not reachable by name: by value
        return False


# Exact types that plain pickle and cloudpickle write the same way (no function, class or
# module inside that cloudpickle might send by value).
_PLAIN = frozenset({type(None), bool, int, float, complex, str, bytes})


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` with cloudpickle (protocol 5); ``__main__``'s top-level names by name.

    A value of a plain type (None, bool, int, float, complex, str, bytes) takes the C pickler
    directly: the bytes are the same, without cloudpickle's Python-level set-up.
    """
    if type(obj) in _PLAIN:
        return pickle.dumps(obj, PROTOCOL)
    buf = io.BytesIO()
    _Pickler(buf, protocol=PROTOCOL).dump(obj)
    return buf.getvalue()


loads = pickle.loads

# ---------------------------------------------------------------- task bodies
#
# A task body is ``dumps((fn, args, kwargs))``, except when ``fn`` goes by reference (a
# function of an importable module, or a top-level function of a shared ``__main__``): then
# it is ``_SPLIT`` ‖ length of fn's pickle (4 bytes, little-endian) ‖ fn's pickle (cached per
# function: only its module and name) ‖ the pickle of ``(args, kwargs)`` (by the C pickler when
# every argument is of a plain type, as for most tasks).  Both parts hold no object in common
# that pickling one piece would have kept shared: a function sent by reference is looked up,
# not rebuilt.  A pickle starts with the PROTO opcode (0x80), so the first byte tells them apart.

_SPLIT = b"\x00"
_FN_CACHE: dict[Any, bytes] = {}  # function sent by reference → its pickle
_FN_CACHE_MAX = 4096
# The receiving side: fn's pickle → the function.  Loading a function by reference imports its
# module and looks up its name, 1.1 µs per task; a place looks each name up once,
# as a JVM loads a class once.  A place that rebinds a module-level name after a task used it
# keeps running the function it first found.
_FN_LOADED: dict[bytes, Any] = {}
_NO_ARGS = pickle.dumps(((), {}), PROTOCOL)
_FUNCTION_TYPES = (types.FunctionType, types.BuiltinFunctionType)


def _by_reference(fn: Any) -> bool:
    """True when ``dumps(fn)`` only names ``fn`` (a module and a qualified name); ``fn`` is a
    plain or a built-in function."""
    if isinstance(fn, types.BuiltinFunctionType):
        # a module's function (len, math.sqrt); not a bound method such as ``lst.append``,
        # whose pickle holds its object's state
        return isinstance(fn.__self__, types.ModuleType)
    if fn.__module__ == "__main__":
        return _main_by_name(fn)
    return "<" not in fn.__qualname__ and bool(
        cloudpickle.cloudpickle._should_pickle_by_reference(fn))


def dumps_call(fn: Any, args: tuple, kwargs: dict) -> bytes:
    """The body of a task that runs ``fn(*args, **kwargs)`` (see :func:`loads_call`)."""
    # Only functions that go by reference are cached: module-level ones, alive anyway.  A
    # lambda or a bound method is never kept (it could hold large state alive).
    if type(fn) not in _FUNCTION_TYPES:
        return dumps((fn, args, kwargs))
    ref = _FN_CACHE.get(fn)
    if ref is None:
        if not _by_reference(fn):
            return dumps((fn, args, kwargs))
        ref = dumps(fn)
        if len(_FN_CACHE) >= _FN_CACHE_MAX:
            _FN_CACHE.clear()
        _FN_CACHE[fn] = ref
    if not args and not kwargs:
        rest = _NO_ARGS
    elif all(type(a) in _PLAIN for a in args) and all(type(v) in _PLAIN
                                                      for v in kwargs.values()):
        rest = pickle.dumps((args, kwargs), PROTOCOL)
    else:
        rest = dumps((args, kwargs))
    return b"".join((_SPLIT, len(ref).to_bytes(4, "little"), ref, rest))


def loads_call(body: bytes) -> tuple[Any, tuple, dict]:
    """``(fn, args, kwargs)`` of a task body made by :func:`dumps_call`.

    Raises:
        Exception: whatever unpickling raises (an unknown module, a missing name, ...).
    """
    if body[:1] != _SPLIT:
        return loads(body)  # type: ignore[no-any-return]
    n = int.from_bytes(body[1:5], "little")
    ref = bytes(body[5:5 + n])
    fn = _FN_LOADED.get(ref)
    if fn is None:
        fn = loads(ref)
        if len(_FN_LOADED) >= _FN_CACHE_MAX:
            _FN_LOADED.clear()
        _FN_LOADED[ref] = fn
    if len(body) - n == 5 + len(_NO_ARGS) and body[5 + n:] == _NO_ARGS:
        return fn, (), {}
    args, kwargs = loads(memoryview(body)[5 + n:])
    return fn, args, kwargs

_HOST = socket.gethostname()


class PackedException:
    """An exception on its way between places.

    Attributes:
        payload: the cloudpickled exception, or ``None`` if it did not pickle.
        type_name: qualified name of the exception's class.
        message: ``str`` of the exception.
        tb: formatted traceback text, headed with place, host and pid.
        place: id of the place where it was raised.
    """

    __slots__ = ("payload", "type_name", "message", "tb", "place")

    def __init__(self, payload: bytes | None, type_name: str, message: str, tb: str, place: int):
        self.payload = payload
        self.type_name = type_name
        self.message = message
        self.tb = tb
        self.place = place

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.payload, self.type_name, self.message, self.tb, self.place)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.payload, self.type_name, self.message, self.tb, self.place = state

    def unpack(self, remote: bool = True) -> Exception:
        """Rebuild the exception: the original when possible, else a :class:`RemoteError`.

        Args:
            remote: chain the remote traceback as ``__cause__`` (true when it crossed places).
        """
        exc: BaseException | None = None
        if self.payload is not None:
            try:
                exc = loads(self.payload)
            except Exception:  # noqa: BLE001 - any unpickling failure falls back
                exc = None
        if not isinstance(exc, Exception):
            exc = RemoteError(self.type_name, self.message)
        if remote:
            exc.__cause__ = RemoteTraceback(self.tb)
        try:
            exc.add_note(f"raised at place({self.place})")
        except Exception:  # noqa: BLE001 - exotic exceptions without __notes__ support
            pass
        return exc


def pack_exception(exc: BaseException, place: int) -> PackedException:
    """Pack ``exc`` (raised at ``place``, this process) for sending to another place."""
    tb_text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    header = f'\n"""\nTraceback at place({place}) on {_HOST} (pid {os.getpid()}):\n'
    payload: bytes | None = None
    if isinstance(exc, Exception):
        try:
            # The traceback does not pickle; drop it (the text above keeps it).
            payload = dumps(exc.with_traceback(None))
            loads(payload)
        except Exception:  # noqa: BLE001 - unpicklable exceptions travel as text
            payload = None
    cls = type(exc)
    return PackedException(
        payload, f"{cls.__module__}.{cls.__qualname__}", str(exc), header + tb_text + '"""', place
    )
