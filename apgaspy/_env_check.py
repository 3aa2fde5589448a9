"""Unknown ``APGAS_*``, ``GLB_*`` and ``SCHEDULER_*`` environment variables: named, never
silently ignored.

A setting read from the environment that is misspelt (``APGAS_PLACE=4`` for
``APGAS_PLACES``) changes nothing, and the program runs with the default.  So place 0 (at
the start of ``run``/``session``) and the scheduler (at the start of ``serve``) look at
every variable with one of the three prefixes and warn, once per process, about each one
that no part of the project reads, with the nearest known names
(:func:`difflib.get_close_matches`)::

    environment ──► names with a prefix ──► not in known_names() ──► a warning each
                                                                   "did you mean ...?"

The known names are the settings tables (:data:`apgaspy.config.SETTINGS`, GLB's
``GLB_SETTINGS``, the benchmark kernels' ``KERNEL_SETTINGS``) plus :data:`OTHER_NAMES`, the
variables read outside those tables (the scheduler's job environment, test hooks).  A test
greps the code for every such name it reads and checks that it is known here, so a new
variable cannot be forgotten (docs/reference/settings.md).
"""

from __future__ import annotations

import difflib
import importlib
import logging
import os
from collections.abc import Iterable, Mapping

from ._config import SETTINGS

__all__ = ["OTHER_NAMES", "PREFIXES", "check_environment", "describe", "known_names",
           "unknown_variables"]

log = logging.getLogger("apgaspy")

#: The prefixes whose variables are checked.
PREFIXES = ("APGAS_", "GLB_", "SCHEDULER_")

#: Variables read outside the settings tables, with who reads them.
OTHER_NAMES: dict[str, str] = {
    "SCHEDULER_IP": "a job's scheduler address (communicators.socket)",
    "SCHEDULER_PORT": "a job's notification and order port (communicators.socket)",
    "SCHEDULER_KEY": "a job's line key (apgaspy.wire.auth)",
    "SCHEDULER_KEY_FILE": "a file holding a job's line key (apgaspy.wire.auth)",
    "SCHEDULER_SLURM_NODES": "the node map of the Slurm mode's jobs (scheduler.slurm_helpers_cli)",
    "APGAS_SCHEDULER_CONTROL": "the control socket of python -m scheduler (control_client)",
    **{f"APGAS_SCHEDULER_{name}": "a bound of the scheduler's notification port "
       "(scheduler.notification_listener)"
       for name in ("MAX_CONNECTIONS", "MAX_CONNECTIONS_PER_PEER", "CONNECTION_IDLE",
                    "MAX_LINES_PER_CONNECTION", "MAX_LINE_BYTES")},
    **{f"APGAS_SCHEDULER_{name}_PER_CORE": "a threshold of the scheduler's measured profile "
       "(scheduler.resources.ProfileThresholds)" for name in ("NETWORK_BYTES", "MEMORY_BYTES")},
    "APGAS_CORES": "a job's CPUs on each host, host=cpulist;... (set by scheduler.launch, "
                   "format apgaspy.wire.cores)",
    "APGAS_CORES_FILE": "a job's cores file, host cpulist a line, rewritten at each resize "
                        "(set by scheduler.launch)",
    "APGAS_MACHINE_LABEL": "the machine label of benchmark results (benchmarks._results)",
    "APGAS_GROW_PROBE_DIR": "test hook of benchmarks.grow_latency",
    "APGAS_TEST_FAULTS_IMPORT": "test hook of tests/programs/faults.py",
    "SCHEDULER_TEST_HOSTS": "test hook of tests/test_scheduler_slurm.py",
    "SCHEDULER_TEST_MARK": "test hook of tests/test_scheduler_slurm.py",
}

# (module, table, prefix) of the settings tables outside apgaspy; imported only when a
# variable is not found among the others (GLB and the benchmarks import apgaspy, not the
# reverse).
_TABLES = (("glb._config", "GLB_SETTINGS", "GLB_"),
           ("benchmarks.kernels._backend", "KERNEL_SETTINGS", "APGAS_"))

_checked = False


def known_names(*, other_tables: bool = True) -> set[str]:
    """Every ``APGAS_*``/``GLB_*``/``SCHEDULER_*`` variable some part of the project reads.

    Args:
        other_tables: also import GLB's and the kernels' tables (a module that does not
            import is left out).
    """
    names = {"APGAS_" + name for name in SETTINGS} | set(OTHER_NAMES)
    if other_tables:
        for module, attr, prefix in _TABLES:
            try:
                table = getattr(importlib.import_module(module), attr)
            except (ImportError, AttributeError):
                continue
            names.update(prefix + name for name in table)
    return names


def unknown_variables(environ: Mapping[str, str] | Iterable[str] | None = None
                      ) -> list[tuple[str, list[str]]]:
    """The variables of ``environ`` with a checked prefix that nothing reads.

    Args:
        environ: names (a mapping's keys), default ``os.environ``.

    Returns:
        ``[(name, [nearest known names, at most 2])]``, sorted by name.
    """
    names = sorted(n for n in (os.environ if environ is None else environ)
                   if n.startswith(PREFIXES))
    candidates = [n for n in names if n not in known_names(other_tables=False)]
    if not candidates:
        return []
    known = known_names()
    return [(n, _nearest(n, known)) for n in candidates if n not in known]


def _strip(name: str) -> str:
    return next((name[len(p):] for p in PREFIXES if name.startswith(p)), name)


def _nearest(name: str, known: set[str]) -> list[str]:
    """At most 2 known names nearest to ``name``, compared without their prefixes (so that
    ``APGAS_WORKERS`` finds ``GLB_WORKERS`` and the shared prefix does not make every name
    look near), the same prefix first among equals."""
    word = _strip(name)
    matcher = difflib.SequenceMatcher(b=word)
    scored = []
    for other in known:
        matcher.set_seq1(_strip(other))
        ratio = matcher.ratio()
        if ratio >= 0.75:
            same = other.startswith(name[:len(name) - len(word)])
            scored.append((-ratio, not same, other))
    return [other for _, _, other in sorted(scored)[:2]]


def describe(name: str, close: list[str]) -> str:
    """One line about an unknown variable ``name`` with its nearest known names."""
    hint = f"did you mean {' or '.join(close)}?" if close else \
        "no setting of that name (docs/reference/settings.md lists them)"
    return f"{name} is not a setting apgaspy reads and is ignored ({hint})"


def check_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Warn (``apgaspy`` logger, WARNING) about each unknown variable, once per process.

    Called by place 0 as a computation starts.  Never raises: an unknown variable is a
    warning, not an error (it may belong to a newer version, or another tool).

    Returns:
        The warnings logged (empty on a second call).
    """
    global _checked
    if _checked:
        return []
    _checked = True
    lines = [describe(name, close) for name, close in unknown_variables(environ)]
    for line in lines:
        log.warning("%s", line)
    return lines
