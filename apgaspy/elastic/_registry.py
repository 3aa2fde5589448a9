"""The communicator registry: the malleable communicator chosen from configuration, not code.

``APGAS_COMMUNICATOR`` names it: ``module:Class`` imports that class; a bare name looks it up
among the entry points of group ``apgaspy.communicators``, the one registry of communicators
(apgaspy's ``pyproject.toml`` registers ``socket`` and ``schedule``; another package
registers its own the same way).  Unset: the socket communicator when
``SCHEDULER_PORT`` is set, else none (the handler is defined, but no scheduler talks to us).

A job the scheduler runs as rigid (``ELASTIC=rigid``) gets no communicator, but under a
scheduler (``SCHEDULER_IP`` and ``SCHEDULER_PORT`` set) the configured communicator's
:meth:`~apgaspy.elastic.MalleableCommunicator.load_notifier` still reports its load from the
start of the runtime (:func:`make_load_notifier`), so that co-location can judge it
(docs/guides/colocation.md).
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
from typing import TYPE_CHECKING, Any

from .._config import setting
from .._exceptions import ConfigurationError

if TYPE_CHECKING:
    from ._communicator import MalleableCommunicator

__all__ = ["check_communicator", "make_communicator", "make_load_notifier",
           "load_communicator_class"]

log = logging.getLogger("apgaspy")

GROUP = "apgaspy.communicators"


def load_communicator_class(spec: str) -> type[MalleableCommunicator]:
    """The communicator class named by ``spec`` (``module:Class`` or an entry point name).

    Raises:
        ConfigurationError: nothing by that name, or not a MalleableCommunicator subclass.
    """
    from ._communicator import MalleableCommunicator

    target = spec
    if ":" not in spec:
        # here, not at import: importlib.metadata is a tenth of the import of apgaspy, on
        # every place's start (and so on every grow's path)
        from importlib.metadata import entry_points

        found = [ep for ep in entry_points(group=GROUP) if ep.name == spec]
        if not found:
            names = sorted({ep.name for ep in entry_points(group=GROUP)})
            close = difflib.get_close_matches(spec, names, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigurationError(
                f"APGAS_COMMUNICATOR={spec!r}: no communicator of that name ({hint}known: "
                f"{', '.join(names) or 'none: is apgaspy installed (pip install -e .)?'}; "
                "or give module:Class)")
        target = found[0].value
    module_name, _, class_name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"APGAS_COMMUNICATOR={spec!r}: cannot load {target}: {exc}") \
            from None
    if not (isinstance(cls, type) and issubclass(cls, MalleableCommunicator)):
        raise ConfigurationError(
            f"APGAS_COMMUNICATOR={spec!r}: {target} is not a MalleableCommunicator subclass")
    return cls


def check_communicator() -> None:
    """Load the communicator that ``APGAS_COMMUNICATOR`` names and check its settings
    (:meth:`~apgaspy.elastic.MalleableCommunicator.check_configuration`), without starting
    it; nothing when the variable is unset (the default socket communicator has nothing to
    check) or the job runs as rigid.

    Raises:
        ConfigurationError: no such communicator, or one of its settings is bad.
    """
    if os.environ.get("ELASTIC", "").strip().lower() == "rigid":
        return
    spec = setting("COMMUNICATOR")
    if spec is not None:
        load_communicator_class(spec).check_configuration()


def make_communicator() -> Any:
    """A new communicator as configured, or ``None`` when none is configured.

    A job the scheduler started as rigid (``ELASTIC=rigid``, as the Java ElasticJobScheduler
    sets it) gets none: it announces nothing and takes no order port (its load goes out
    through :func:`make_load_notifier`).
    """
    if os.environ.get("ELASTIC", "").strip().lower() == "rigid":
        log.info("ELASTIC=rigid: the scheduler runs this job as rigid; no communicator")
        return None
    spec = setting("COMMUNICATOR")
    if spec is None:
        if not os.environ.get("SCHEDULER_PORT"):
            log.info("malleable handler defined, but no communicator is configured")
            return None
        spec = "socket"
    return load_communicator_class(spec)()


def make_load_notifier() -> Any:
    """What reports a rigid job's load (module docstring): the configured communicator's
    :meth:`~apgaspy.elastic.MalleableCommunicator.load_notifier`, not started, or ``None``:
    the job is not rigid (its communicator reports), no scheduler is named, or the notifier
    cannot be made (logged as an error: a rigid job computes on without reports).
    """
    if os.environ.get("ELASTIC", "").strip().lower() != "rigid":
        return None
    if not os.environ.get("SCHEDULER_IP", "").strip() or \
            not os.environ.get("SCHEDULER_PORT", "").strip():
        return None
    try:
        return load_communicator_class(setting("COMMUNICATOR") or "socket").load_notifier()
    except ConfigurationError as exc:
        log.error("ELASTIC=rigid: no load reports to the scheduler: %s", exc)
        return None
