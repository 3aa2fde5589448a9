"""Which implementation the benchmark kernels run: compiled (numba) or plain numpy.

Every kernel of :mod:`benchmarks.kernels` has a numpy implementation, and the hot ones also
have a compiled one written with numba (``@njit(cache=True)`` over numpy arrays).  Both give
bit-identical answers; the numpy one is the fallback where numba is not installed.

Choice, read once per process through :func:`apgaspy.config.setting`:

=========  =======  ===============================================================
variable   default  meaning
=========  =======  ===============================================================
KERNELS    auto     ``auto``: numba where it imports, else numpy; ``numba``: numba
                    or an error; ``numpy``: the numpy kernels even where numba is
                    installed
=========  =======  ===============================================================

(environment variable ``APGAS_KERNELS``; :func:`select` also takes the value as an argument).

Compiled code is cached on disk, once per machine, so that a place spawned by a grow loads
the kernels (about 0.1 s) instead of compiling them (seconds).  Unless ``NUMBA_CACHE_DIR`` is
already set, this module points numba's cache at ``$XDG_CACHE_HOME/apgaspy/numba`` (default
``~/.cache/apgaspy/numba``), a directory the user can write even when the package itself is
installed read-only.  The variable is set in the environment before numba is imported, so
places started from this process inherit it.

Warm-up: the first call of a compiled kernel in a process compiles it (seconds, once per
machine and kernel version) or loads it from the cache (tens of milliseconds, after importing
numba: about 0.2 s).  A kernel module registers a function that calls each of its compiled
kernels once on tiny inputs with :func:`register_warm_up`; :func:`warm_up` runs those of the
modules imported so far.  The benchmarks' command line calls it at every place before the
computation starts, so that neither the first ``process`` call nor a place spawned later by a
grow compiles.

A place started by a grow loads its compiled kernels in a background thread while it joins
the computation (:func:`warm_up_in_background`); until they are loaded, the bags'
``process`` runs the numpy kernels instead (:func:`compiled_now`), which give the same
answers, so the new place works from its first loot on instead of waiting for numba (a tiered
start, as a JIT interprets a function until its compiled code is ready).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from apgaspy import ConfigurationError
from apgaspy.config import Setting, setting

__all__ = ["BACKENDS", "KERNEL_SETTINGS", "backend", "cache_dir", "numba_available",
           "compiled_now", "register_warm_up", "select", "warm_up", "warm_up_in_background",
           "warm_up_modules"]

BACKENDS = ("auto", "numba", "numpy")
"""The accepted values of the ``KERNELS`` setting."""


def _backend_name(raw: Any) -> str:
    text = str(raw).strip().lower()
    if text not in BACKENDS:
        raise ValueError("expected auto, numba or numpy")
    return text


KERNEL_SETTINGS: dict[str, Setting] = {
    "KERNELS": Setting(
        "KERNELS", "auto", _backend_name, lambda v: None,
        "kernel implementation: auto (numba where installed, else numpy), numba, or numpy",
    ),
}
"""The kernels' settings table (read with prefix ``APGAS_``)."""

_lock = threading.Lock()
_numba_ok: bool | None = None
_chosen: dict[str, str] = {}


def cache_dir() -> Path:
    """The directory of numba's on-disk cache for the compiled kernels.

    ``NUMBA_CACHE_DIR`` where set; else ``$XDG_CACHE_HOME/apgaspy/numba``, with
    ``XDG_CACHE_HOME`` defaulting to ``~/.cache``.  Created if missing.
    """
    given = os.environ.get("NUMBA_CACHE_DIR", "").strip()
    if given:
        path = Path(given)
    else:
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
        path = Path(base) / "apgaspy" / "numba"
    path.mkdir(parents=True, exist_ok=True)
    return path


def numba_available() -> bool:
    """Whether numba imports in this process (checked once; the cache directory is set first).

    Returns False, without raising, when numba is not installed or fails to import.
    """
    global _numba_ok
    with _lock:
        if _numba_ok is None:
            try:
                os.environ["NUMBA_CACHE_DIR"] = str(cache_dir())
            except OSError:
                pass  # no writable cache: numba then compiles in memory, once per process
            try:
                import numba  # noqa: F401
            except Exception:  # ImportError, or a broken install (llvmlite mismatch)
                _numba_ok = False
            else:
                _numba_ok = True
        return _numba_ok


def select(value: str | None = None) -> str:
    """Resolve the ``KERNELS`` setting to the backend that runs: ``"numba"`` or ``"numpy"``.

    Args:
        value: ``"auto"``, ``"numba"`` or ``"numpy"``; ``None`` reads ``APGAS_KERNELS``
            (default ``auto``).

    Raises:
        ConfigurationError: the value is none of the three, or ``numba`` is asked for and numba
            does not import in this process.
    """
    wanted = setting("KERNELS", value, table=KERNEL_SETTINGS)
    if wanted == "numpy":
        return "numpy"
    if numba_available():
        return "numba"
    if wanted == "numba":
        raise ConfigurationError(
            "APGAS_KERNELS=numba, but numba does not import here; install it with "
            "pip install 'apgaspy[fast]', or set APGAS_KERNELS=auto or numpy"
        )
    return "numpy"


def backend() -> str:
    """The backend this process's kernels use, ``"numba"`` or ``"numpy"``.

    Resolved from ``APGAS_KERNELS`` on first use and then fixed for the process, keyed by the
    variable's value (a test that changes the variable gets the new choice).

    Raises:
        ConfigurationError: as :func:`select`.
    """
    key = os.environ.get("APGAS_KERNELS", "")
    found = _chosen.get(key)
    if found is None:
        found = _chosen[key] = select()
    return found


_warm_ups: dict[str, Callable[[], None]] = {}


def register_warm_up(fn: Callable[[], None]) -> Callable[[], None]:
    """Register ``fn``, which calls each compiled kernel of a module once (tiny inputs).

    Called by a kernel module at import; ``fn`` runs only when :func:`warm_up` is called and
    the backend is numba, so it may import numba.  Registering the same function again (same
    module and name, e.g. after a reload) replaces it.  Returns ``fn`` (usable as a decorator).

    In a place that is starting (one spawned at start-up or by a grow, importing the program's
    main module), ``fn`` also starts at once in a background thread
    (:func:`warm_up_in_background`), so that numba's import and the kernels' load from the
    cache overlap the place's waits for place 0 (its place table, its admission to the
    computation, its first loot) instead of following them.
    """
    _warm_ups[f"{fn.__module__}.{fn.__qualname__}"] = fn
    if _starting_place():
        warm_up_in_background(fn)
    return fn


def _starting_place() -> bool:
    """Whether this process is an apgaspy place importing the program's main module."""
    child = sys.modules.get("apgaspy._child")
    return child is not None and getattr(child, "importing_main", None) is not None


def warm_up_in_background(fn: Callable[[], None]) -> threading.Thread:
    """Run the warm-up function ``fn`` in a daemon thread, after the import of its module.

    The thread first resolves the backend (under numba: imports numba, the larger part of the
    cost), then waits until ``fn``'s module has finished importing (a module registers its
    warm-up while it is being imported), then runs ``fn`` when the backend is numba.  A
    kernel called meanwhile on another thread waits for numba's compiler lock and then finds
    the kernel loaded: nothing is loaded twice.  Errors are logged, not raised: the first
    real call of the kernel meets them again and raises them.

    Args:
        fn: a function registered with :func:`register_warm_up` (no arguments).

    Returns:
        The started thread (named ``kernels-warm-up``).
    """

    done = threading.Event()
    with _lock:
        _loading.setdefault(fn.__module__, []).append(done)

    def run() -> None:
        try:
            if backend() != "numba":
                return
            importlib.import_module(fn.__module__)  # blocks until the module is imported
            _thread.warming_up = True  # the warm-up itself calls the compiled kernels
            fn()
        except Exception:  # noqa: BLE001 - the kernel's first real call raises it again
            logging.getLogger("benchmarks.kernels").debug(
                "background warm-up %s.%s failed", fn.__module__, fn.__qualname__,
                exc_info=True)
        finally:
            done.set()

    thread = threading.Thread(target=run, name="kernels-warm-up", daemon=True)
    thread.start()
    return thread


_loading: dict[str, list[threading.Event]] = {}
"""Module → the events of its background warm-ups (set when each has ended)."""
_thread = threading.local()
"""``warming_up``: true on a background warm-up's own thread."""


def compiled_now(module: str) -> bool:
    """Whether a bag of ``module`` (its ``__name__``) runs its compiled kernels in this call:
    the backend is numba and no background warm-up of that module is still loading them.

    While a place started by a grow loads its kernels in the background
    (:func:`warm_up_in_background`), this is false and the bag runs its numpy kernels, which
    give the same answers; a failed warm-up counts as ended (the compiled call then raises
    its error); on the warm-up's own thread it is true, since the warm-up calls the compiled
    kernels to load them.  Never blocks.

    Raises:
        ConfigurationError: as :func:`select`.
    """
    if backend() != "numba":
        return False
    loading = _loading.get(module)
    if loading is None or getattr(_thread, "warming_up", False):
        return True
    if all(e.is_set() for e in loading):
        _loading.pop(module, None)
        return True
    return False


def warm_up_modules() -> list[str]:
    """The modules whose warm-up functions are registered in this process (for
    :func:`warm_up`'s ``modules`` at another place)."""
    return sorted({fn.__module__ for fn in _warm_ups.values()})


def warm_up(modules: list[str] | tuple[str, ...] = ()) -> dict[str, float]:
    """Compile, or load from the on-disk cache, every registered compiled kernel.

    Imports ``modules`` (kernel modules, e.g. ``["benchmarks.kernels.uts"]``; they register
    their warm-up functions at import), then runs every function registered with
    :func:`register_warm_up`; does nothing when the backend is numpy.  Cheap when already done
    in this process (each kernel is compiled or loaded once per process).

    A warm-up that takes longer than :data:`ANNOUNCE_AFTER_S` seconds at place 0 (numba
    compiling into its cache, on a machine's first run) says so on stderr, once per process,
    and how long it took.

    Returns:
        ``{registered name: seconds}``, the time each function took (empty under numpy).

    Raises:
        ConfigurationError: as :func:`select`.
    """
    if backend() != "numba":
        return {}
    with _announced_if_slow():
        for name in modules:
            importlib.import_module(name)
        took: dict[str, float] = {}
        for name, fn in list(_warm_ups.items()):
            t = time.perf_counter()
            fn()
            took[name] = time.perf_counter() - t
    return took


#: Seconds a warm-up may take before :func:`warm_up` says on stderr that it compiles.
ANNOUNCE_AFTER_S = 1.0
_announced = threading.Event()


def _at_place_zero() -> bool:
    """Whether this process is place 0, or runs no apgaspy place: the other places warm up
    after place 0 has filled the cache, so only place 0 announces a compilation."""
    try:
        from apgaspy import here  # noqa: PLC0415 - only when a warm-up is slow

        return here().id == 0
    except Exception:  # noqa: BLE001 - no runtime in this process
        return True


@contextmanager
def _announced_if_slow() -> Iterator[None]:
    """While the block runs longer than :data:`ANNOUNCE_AFTER_S`, say once per process on
    stderr what the wait is (numba compiling into its cache) and, at the end, how long it
    took: a first run otherwise sits silent for tens of seconds."""
    t0 = time.perf_counter()
    said = threading.Event()

    def say() -> None:
        if _announced.is_set():
            return
        _announced.set()
        said.set()
        print(f"compiling the numba kernels into {os.environ.get('NUMBA_CACHE_DIR') or cache_dir()}"
              f" (the first run on a machine compiles them: up to a minute, once; later runs "
              f"load them in under a second; APGAS_KERNELS=numpy skips them) ...",
              file=sys.stderr, flush=True)

    timer = threading.Timer(ANNOUNCE_AFTER_S, say)
    timer.daemon = True
    if not _announced.is_set() and _at_place_zero():
        timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            print(f"kernels ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr,
                  flush=True)
