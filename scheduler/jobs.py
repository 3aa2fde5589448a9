"""Job descriptions: classes, specifications, job-script headers and batch files.

A job is described by a :class:`JobSpec`: its class (rigid, moldable, malleable, evolving), its node
count or node range, the time it asks for, the command that runs it and, for simulation,
the program and size labels that pick its run time in :mod:`scheduler.model`.

Job scripts
-----------
The header format is the one of the Java ElasticJobScheduler (docs/reference/protocol.md):
bash comment lines, one ``#KEY value`` a line, anywhere in the file.  Every line starting
with ``#`` is a candidate; its first word after the ``#`` is the key.  Known keys:

================  =====================================================================
``JOB_CLASS``     ``rigid`` | ``moldable`` | ``malleable`` | ``evolving`` (see below)
``JOB_TYPE``      free text, kept (the Java scheduler uses ``apgas``)
``NODES``         node count of a rigid job (sets both ends of the range, as in Java)
``MIN_NODES``     smallest node count of a moldable/malleable job
``MAX_NODES``     largest node count of a moldable/malleable job
``JOB_NAME``      free text
``REQUIRED_TIME`` the time the job asks for; a bare number is **milliseconds** (the Java
                  unit); a number with a unit suffix is read in that unit: ``500ms``,
                  ``90s``/``90sec``, ``1.5m``/``1.5min``, ``2h``/``2hr``.
``PRIORITY``      1 (lowest) … 5 (highest), default 3; read by the priority policies
                  (docs/guides/priorities.md).  The Java scheduler ignores the key, so a
                  script that states it still runs there.
``AUTH``          ``key`` (default) | ``plain``: ``plain`` starts the job without a line
                  key, for a program that speaks the plain Java lines (a Java APGAS job);
                  its notifications are then checked by peer address only
                  (docs/reference/security.md).  The Java scheduler ignores the key.
``CORES``         a job of ``n`` cores on any nodes (rigid; no node count with it):
                  placed by its profile (:mod:`scheduler.resources`)
``CORES_PER_NODE`` ``c`` cores on each of its nodes (with ``NODES`` or a node range)
``PROFILE``       ``cpu`` (default) | ``memory`` | ``network``: what limits the job; it
                  chooses its placement and shape (docs/guides/scheduler.md)
``COLOCATE``      ``yes`` | ``no`` (default): a job asking for cores may share its cores
                  with other ``yes`` jobs while their duty cycles sum under the server's
                  ``--colocate-bound`` (docs/guides/colocation.md)
================  =====================================================================

Keys are upper case, as in Java.  A line is a *directive* when ``#`` is followed at once by a
word of capitals, digits and underscores (``#JOBCLASS malleable``, ``#NODE 2``).  A directive
whose word is not a known key is refused with the line number and the nearest known keys
(:func:`difflib.get_close_matches`), where the Java scheduler would silently ignore it: a
misspelt key would otherwise leave the job rigid, or with the default time.  So is a known key
in the wrong case (``#Job_Class``).  Not directives, and ignored: the shebang (``#!/bin/bash``),
ordinary comments (``# build the input``: a space after ``#``; a known key there still counts,
``#   NODES 3``, as in Java), lower-case words (``#set -e``), the directives of other batch
systems (:data:`FOREIGN_DIRECTIVES`: ``#SBATCH``, ``#PBS``, ``#BSUB`` …) and the comment tags
:data:`COMMENT_TAGS` (``#TODO`` …).  A known key with a malformed value raises
:class:`~scheduler._exceptions.JobScriptError` naming the line.  A repeated key: the last one
wins (as in Java).  :func:`job_script_warnings` names what parses but is most likely a slip:
a bare ``REQUIRED_TIME`` below 1000 (milliseconds, the Java unit: ``#REQUIRED_TIME 60`` is
60 ms).

Defaults, as in the Java scheduler: no ``REQUIRED_TIME`` means 60 s; no ``MIN_NODES`` means 1;
no ``MAX_NODES`` means the minimum; no ``JOB_CLASS`` means rigid.

``evolving`` (Java's jobs that ask for and give back nodes themselves) is a class of its own
(:attr:`JobClass.EVOLVING`): it starts like a moldable job, with as many free nodes as its
range allows; while it runs it asks for one more node at a time (``Evolving;Request;1``), which
the evolving policies may grant up to its maximum, and it gives nodes back by itself
(``Evolving;Release;<host>``), every node but its first: the minimum bounds its start, not
its releases, since the runtime's monitor sees loads, not the job script
(docs/guides/evolving-scheduling.md).  Under
the policies that do not serve requests it behaves exactly as a moldable job: it keeps the
nodes it started with, minus those it gives back.
``JobSpec.declared_class`` keeps the word that was written.

Batch files
-----------
:func:`load_batch` reads a list of jobs with submission times, as JSON or CSV:

* JSON: a list of objects (or an object with a ``"jobs"`` list).  Fields are the
  :class:`JobSpec` field names (``name``, ``job_class``, ``nodes``, ``min_nodes``,
  ``max_nodes``, ``required_time_s``, ``command``, ``program``, ``size``, ``job_type``,
  ``priority``, ``cores``, ``cores_per_node``, ``profile``) plus
  ``submit_s`` (seconds from the start of the batch, default 0).  ``command`` is a list of
  strings or one string (split like a shell does).
* CSV: a header row naming the same columns; empty cells mean "not given"; ``command`` is one
  shell-quoted string.
"""

from __future__ import annotations

import csv
import difflib
import enum
import json
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ._exceptions import BatchFileError, JobScriptError
from .resources import parse_profile

__all__ = [
    "DEFAULT_PRIORITY",
    "DEFAULT_REQUIRED_TIME_S",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "COMMENT_TAGS",
    "FOREIGN_DIRECTIVES",
    "BatchEntry",
    "JobClass",
    "JobSpec",
    "job_script_warnings",
    "load_batch",
    "load_job_script",
    "parse_job_script",
    "parse_priority",
    "parse_required_time",
]

#: Required time of a job that does not state one (seconds): the Java scheduler's default.
DEFAULT_REQUIRED_TIME_S = 60.0

#: Priorities run from 1 (least important) to 5 (most important), as in Bhosale et al.
#: (2024), "Elastic scheduling of Charm++ jobs on Kubernetes".
MIN_PRIORITY, MAX_PRIORITY = 1, 5
#: Priority of a job that states none: the middle of the scale, so that a user can mark a
#: job both less and more important than an ordinary one (a default of 1 would make every
#: unmarked job the least important and leave no way to mark a job below it).
DEFAULT_PRIORITY = 3


def parse_priority(value: object) -> int:
    """Check a job priority: an integer from 1 (lowest) to 5 (highest).

    Args:
        value: an ``int`` or a string of decimal digits (``"4"``, `` 4 ``).

    Returns:
        The priority as an ``int``.

    Raises:
        ValueError: not a whole number (a ``bool``, ``"high"``, ``2.5``) or outside 1-5; the
            message names the value.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
        number = int(value)
    if number is None:
        raise ValueError(
            f"a priority is a whole number from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}"
        )
    if not MIN_PRIORITY <= number <= MAX_PRIORITY:
        raise ValueError(
            f"a priority runs from {MIN_PRIORITY} (lowest) to {MAX_PRIORITY} (highest), "
            f"got {number}"
        )
    return number


class JobClass(enum.Enum):
    """How a job's node count may change (Feitelson & Rudolph's classes).

    * ``RIGID``: exactly ``nodes`` nodes, for its whole run.
    * ``MOLDABLE``: the scheduler picks a count in ``[min_nodes, max_nodes]`` at start; fixed
      afterwards.
    * ``MALLEABLE``: like moldable at start, and the scheduler may shrink or grow it within the
      range while it runs (only after it announced ``APGAS-Ready``, docs/reference/protocol.md).
    * ``EVOLVING``: like moldable at start; while it runs the job itself asks for one more
      node at a time (the scheduler may grant it, up to the maximum) and gives nodes back
      (any but its first, below its minimum too).  The scheduler never shrinks it (Posner
      et al. 2024, evolving APGAS programs; docs/guides/evolving-scheduling.md).
    """

    RIGID = "rigid"
    MOLDABLE = "moldable"
    MALLEABLE = "malleable"
    EVOLVING = "evolving"

    @classmethod
    def parse(cls, text: str) -> JobClass:
        """Read a class word (case-insensitive).

        Raises ``ValueError`` for any word other than rigid, moldable, malleable, evolving.
        """
        word = text.strip().lower()
        try:
            return cls(word)
        except ValueError:
            raise ValueError(
                f"unknown job class {text!r}: use rigid, moldable, malleable or evolving"
            ) from None


@dataclass(frozen=True)
class JobSpec:
    """What a job asks for.  Immutable; validated and normalised on construction.

    Args:
        name: a label for people (``#JOB_NAME``); not an id.
        job_class: a :class:`JobClass` or its word (``"rigid"`` …).
        nodes: rigid node count.  For a rigid job it may be left out when ``min_nodes`` and
            ``max_nodes`` agree.  For a moldable/malleable job it is optional information
            (the node count of its rigid form) and must lie in the range.
        min_nodes, max_nodes: node range (nodes).  A rigid job gets ``min = max = nodes``.
            A flexible job needs at least one of ``min_nodes``/``max_nodes``/``nodes``;
            a missing ``min_nodes`` is 1 when ``max_nodes`` is given, a missing
            ``max_nodes`` is ``nodes`` or else ``min_nodes``.
        required_time_s: the time the job asks for (seconds, > 0): used for EASY reservations.
        command: the command line (a list of strings, kept as a tuple) or a script path (one
            string); ``None`` in simulation.
        program, size: labels that pick the job's run time in :mod:`scheduler.model`, e.g.
            ``("uts", 18)``; ``None`` when not simulated.
        job_type: ``#JOB_TYPE`` as written (``"apgas"`` for Java jobs), kept, unused here.
        declared_class: the class word as written (e.g. ``"evolving"``); defaults to
            ``job_class``'s word.
        priority: 1 (lowest) … 5 (highest), default 3 (:data:`DEFAULT_PRIORITY`); only the
            priority policies read it (docs/guides/priorities.md).  Equal priorities are
            ordered by submission time.
        auth: ``"key"`` (default: the real scheduler gives the job a line key and requires
            its lines signed) or ``"plain"`` (no key; plain Java lines, checked by peer
            address only: docs/reference/security.md).
        cores: a job of this many cores on any nodes (``#CORES``): rigid, no node count
            given; its node range is 1…cores (the nodes it may span).
        cores_per_node: this many cores on each of its nodes (``#CORES_PER_NODE``), with
            its node count or range; ``None`` with ``cores``: whole nodes.
        profile: ``"cpu"`` (default), ``"memory"`` or ``"network"``
            (:func:`scheduler.resources.shape`).
        colocate: the job may share its cores with other co-locatable jobs (``#COLOCATE
            yes``; docs/guides/colocation.md); ``False`` (default): never shared.
        profile_declared: the job said its profile (``#PROFILE``, or ``profile`` in a
            batch entry or a submitted job); one that did not is shaped by the profile its
            load reports give (docs/guides/scheduler.md).

    Raises:
        ValueError: a count below 1, ``min_nodes > max_nodes``, a rigid job without a node
            count or with a range, ``nodes`` outside the range, a non-positive or non-finite
            required time, an empty name, a priority that is not a whole number in 1-5,
            an ``auth`` other than ``"key"`` or ``"plain"``, cores below 1, ``cores``
            with a node count, a non-rigid class or ``cores_per_node``, a bad profile.
    """

    name: str = "job"
    job_class: JobClass = JobClass.RIGID
    nodes: int | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None
    required_time_s: float = DEFAULT_REQUIRED_TIME_S
    command: tuple[str, ...] | str | None = None
    program: str | None = None
    size: int | str | None = None
    job_type: str | None = None
    declared_class: str = field(default="", compare=False)
    priority: int = DEFAULT_PRIORITY
    auth: str = "key"
    cores: int | None = None
    cores_per_node: int | None = None
    profile: str = "cpu"
    colocate: bool = False
    profile_declared: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        self._check_cores()
        if self.auth not in AUTH_MODES:
            raise ValueError(f"job {self.name!r}: auth must be 'key' or 'plain', "
                             f"got {self.auth!r}")
        try:
            object.__setattr__(self, "priority", parse_priority(self.priority))
        except ValueError as exc:
            raise ValueError(f"job {self.name!r}: {exc}") from None
        cls = self.job_class
        if not isinstance(cls, JobClass):
            cls = JobClass.parse(str(cls))
            object.__setattr__(self, "job_class", cls)
        if not self.declared_class:
            object.__setattr__(self, "declared_class", cls.value)
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"job name must be a non-empty string, got {self.name!r}")
        for key in ("nodes", "min_nodes", "max_nodes"):
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"job {self.name!r}: {key} must be an integer, got {value!r}")
            if value < 1:
                raise ValueError(f"job {self.name!r}: {key} must be at least 1, got {value}")
        nodes, lo, hi = self.nodes, self.min_nodes, self.max_nodes
        if self.cores is not None:
            pass  # 1…cores, set by _check_cores
        elif cls is JobClass.RIGID:
            if nodes is None:
                if lo is not None and hi is not None and lo != hi:
                    raise ValueError(
                        f"job {self.name!r}: a rigid job has one node count, got the range "
                        f"{lo}-{hi}; give nodes=, or make it moldable/malleable"
                    )
                nodes = lo if lo is not None else hi
                if nodes is None:
                    raise ValueError(f"job {self.name!r}: a rigid job needs nodes=")
            elif (lo is not None and lo != nodes) or (hi is not None and hi != nodes):
                raise ValueError(
                    f"job {self.name!r}: a rigid job of {nodes} nodes cannot have the range "
                    f"{lo}-{hi}; make it moldable/malleable"
                )
            lo = hi = nodes
        else:
            if lo is None and hi is None and nodes is None:
                raise ValueError(
                    f"job {self.name!r}: a {cls.value} job needs min_nodes/max_nodes (or nodes)"
                )
            if lo is None:
                lo = 1 if hi is not None else nodes
            assert lo is not None
            if hi is None:
                hi = nodes if nodes is not None and nodes >= lo else lo
            if lo > hi:
                raise ValueError(
                    f"job {self.name!r}: min_nodes ({lo}) is larger than max_nodes ({hi})"
                )
            if nodes is not None and not lo <= nodes <= hi:
                raise ValueError(
                    f"job {self.name!r}: nodes={nodes} lies outside the range {lo}-{hi}"
                )
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "min_nodes", lo)
        object.__setattr__(self, "max_nodes", hi)
        t = self.required_time_s
        if isinstance(t, bool) or not isinstance(t, int | float):
            raise ValueError(f"job {self.name!r}: required_time_s must be a number, got {t!r}")
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"job {self.name!r}: required_time_s must be > 0 s, got {t}")
        object.__setattr__(self, "required_time_s", float(t))
        if isinstance(self.command, list):
            object.__setattr__(self, "command", tuple(str(c) for c in self.command))

    def _check_cores(self) -> None:
        """Validate ``cores``, ``cores_per_node`` and ``profile``; a ``cores`` job gets the
        node range 1…cores."""
        try:
            object.__setattr__(self, "profile", parse_profile(self.profile))
        except ValueError as exc:
            raise ValueError(f"job {self.name!r}: {exc}") from None
        for key in ("cores", "cores_per_node"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"job {self.name!r}: {key} must be a whole number >= 1, "
                                 f"got {value!r}")
        if self.cores is None:
            return
        if self.cores_per_node is not None:
            raise ValueError(f"job {self.name!r}: give cores (any nodes) or cores_per_node "
                             f"(with a node count), not both")
        if str(getattr(self.job_class, "value", self.job_class)).lower() != "rigid":
            raise ValueError(f"job {self.name!r}: cores asks for a fixed count (a rigid job); "
                             f"a moldable or malleable job gives cores_per_node and a range")
        if (self.nodes, self.min_nodes, self.max_nodes) != (None, None, None) and (
                self.min_nodes, self.max_nodes) != (1, self.cores):
            raise ValueError(f"job {self.name!r}: cores takes any nodes; give cores_per_node "
                             f"with a node count instead")
        object.__setattr__(self, "job_class", JobClass.RIGID)
        object.__setattr__(self, "min_nodes", 1)
        object.__setattr__(self, "max_nodes", self.cores)

    @property
    def asks_cores(self) -> bool:
        """The job asks for cores (``cores`` or ``cores_per_node``), not whole nodes."""
        return self.cores is not None or self.cores_per_node is not None

    # Narrowed accessors (after __post_init__ the range is always set).
    @property
    def lo(self) -> int:
        """Smallest node count the job can run on (nodes)."""
        assert self.min_nodes is not None
        return self.min_nodes

    @property
    def hi(self) -> int:
        """Largest node count the job can run on (nodes)."""
        assert self.max_nodes is not None
        return self.max_nodes

    @property
    def is_malleable(self) -> bool:
        """True for a malleable job (one the scheduler may resize while it runs)."""
        return self.job_class is JobClass.MALLEABLE

    def fits(self, total_nodes: int) -> str | None:
        """Why this job can never run on a cluster of ``total_nodes`` nodes, or ``None``.

        A scheduler refuses such a job at submission instead of queueing it for ever.
        """
        if self.lo > total_nodes:
            what = "nodes" if self.job_class is JobClass.RIGID else "nodes at least"
            return (
                f"job {self.name!r} needs {self.lo} {what}; the cluster has {total_nodes} "
                f"node{'s' if total_nodes != 1 else ''}"
            )
        return None

    def replace(self, **changes: Any) -> JobSpec:
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if "job_class" in changes and "declared_class" not in changes:
            values["declared_class"] = ""
        values.update(changes)
        return JobSpec(**values)


#: The values of ``#AUTH`` / ``JobSpec.auth``.
AUTH_MODES = ("key", "plain")

_HEADER_KEYS = (
    "JOB_CLASS",
    "JOB_TYPE",
    "NODES",
    "MIN_NODES",
    "MAX_NODES",
    "JOB_NAME",
    "REQUIRED_TIME",
    "PRIORITY",
    "AUTH",
    "CORES",
    "CORES_PER_NODE",
    "PROFILE",
    "COLOCATE",
)

#: Directive words of other batch systems, which a job script may carry for them: Slurm
#: (``SBATCH``, and its burst-buffer ``BB``/``DW``), PBS/Torque, LSF (``BSUB``), Cobalt, Moab
#: (``MSUB``), OAR.  Ignored.
FOREIGN_DIRECTIVES = ("SBATCH", "PBS", "BSUB", "COBALT", "MSUB", "OAR", "BB", "DW")
#: Comment tags that look like directives (``#TODO make it faster``).  Ignored.
COMMENT_TAGS = ("TODO", "FIXME", "XXX", "NOTE", "HACK")

_DIRECTIVE_RE = re.compile(r"#([A-Za-z][A-Za-z0-9_]*)(?:\s|$)")

#: A bare ``REQUIRED_TIME`` below this many milliseconds draws a warning (a second).
_SHORT_BARE_TIME_MS = 1000

_TIME_RE = re.compile(r"^([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)$")
_TIME_UNITS_S = {
    "": 1e-3,  # a bare number is milliseconds, the Java unit
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
}


def parse_required_time(text: str) -> float:
    """Read a ``REQUIRED_TIME`` value and return seconds.

    A bare number is milliseconds (``600000`` → 600.0 s, the Java scheduler's unit); a number
    with a suffix is read in that unit: ``ms``; ``s``/``sec``; ``m``/``min``; ``h``/``hr``
    (case-insensitive, optional space: ``90 s``).

    Raises:
        ValueError: not a positive finite number with a known unit.
    """
    match = _TIME_RE.match(text.strip())
    if match is None:
        raise ValueError(f"not a duration: {text!r} (write e.g. 600000, 600s, 10min, 1h)")
    number, unit = match.groups()
    scale = _TIME_UNITS_S.get(unit.lower())
    if scale is None:
        raise ValueError(f"unknown time unit {unit!r} in {text!r}: use ms, s, min or h")
    seconds = float(number) * scale
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a required time must be positive, got {text!r}")
    return seconds


def _parse_count(text: str) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"not a whole number of nodes: {text!r}")
    value = int(text)
    if value < 1:
        raise ValueError(f"a node count must be at least 1, got {value}")
    return value


def _unknown_directive(line: str) -> str | None:
    """Why ``line`` (stripped) is refused as an unknown directive, or ``None`` (module
    docstring: a known key, an ordinary comment, a foreign directive, a comment tag)."""
    match = _DIRECTIVE_RE.match(line)
    if match is None:
        return None
    word = match.group(1)
    if word in _HEADER_KEYS or word in FOREIGN_DIRECTIVES or word in COMMENT_TAGS:
        return None
    if word.upper() in _HEADER_KEYS:
        return f"unknown directive #{word}: keys are upper case, write #{word.upper()}"
    if word != word.upper():
        return None  # a lower-case word: an ordinary comment (#set -e, #include)
    close = difflib.get_close_matches(word, _HEADER_KEYS, n=2, cutoff=0.6)
    hint = (f"did you mean {' or '.join('#' + c for c in close)}?" if close
            else f"known: {', '.join('#' + k for k in _HEADER_KEYS)}")
    return f"unknown directive #{word} ({hint})"


def job_script_warnings(text: str) -> list[str]:
    """What in a job script parses but is most likely a slip, one line each.

    Today: a bare ``#REQUIRED_TIME`` below 1000 is read in milliseconds, the Java unit
    (``#REQUIRED_TIME 60``: 60 ms, and the job is ended that soon); the warning names the
    line and suggests the units.  The submit command prints these; the job is still accepted.

    Args:
        text: the whole script.

    Returns:
        The warnings, ``"line N: ..."`` each (empty when none; lines that do not parse are
        left to :func:`parse_job_script`).
    """
    out = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line.startswith("#"):
            continue
        parts = line[1:].split(None, 1)
        if len(parts) != 2 or parts[0] != "REQUIRED_TIME":
            continue
        value = parts[1].strip()
        match = _TIME_RE.match(value)
        if match is None or match.group(2):
            continue
        number = float(match.group(1))
        if 0 < number < _SHORT_BARE_TIME_MS:
            shown = f"{number:g}"
            out.append(f"line {lineno}: #REQUIRED_TIME {value} is {shown} ms (a bare number "
                       f"is milliseconds, as in Java): did you mean {shown}s or {shown}min?")
    return out


def parse_job_script(text: str, *, name: str | None = None) -> JobSpec:
    """Read a job script's ``#KEY value`` header lines into a :class:`JobSpec`.

    Args:
        text: the whole script (header lines may be anywhere; body lines are ignored).
        name: the job name when the script has no ``#JOB_NAME`` (default ``"job"``).

    Returns:
        The job's spec, with ``command=None`` (see :func:`load_job_script` for a file).

    Raises:
        JobScriptError: a known key with a missing or malformed value, or an unknown
            directive (``#JOBCLASS``; the message names the line number, the line and the
            nearest known keys), or headers that do not make a valid job.

    The format, units and defaults are described in this module's docstring; they follow the
    Java ElasticJobScheduler (``JobSh.setData``), with exact key matching instead of Java's
    substring matching.
    """
    values: dict[str, Any] = {}
    where: dict[str, tuple[int, str]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line.startswith("#"):
            continue
        parts = line[1:].split(None, 1)
        key = parts[0] if parts else ""
        rest = parts[1] if len(parts) > 1 else ""
        if key not in _HEADER_KEYS:
            why = _unknown_directive(line)
            if why is not None:
                raise JobScriptError(f"line {lineno}: {why}: {raw.strip()!r}")
            continue  # ordinary comment, shebang, foreign directive: ignored
        value = rest.strip()
        if not value:
            raise JobScriptError(f"line {lineno}: #{key} needs a value: {raw.strip()!r}")
        try:
            if key == "JOB_CLASS":
                values["declared_class"] = value.lower()
                values["job_class"] = JobClass.parse(value)
            elif key in ("NODES", "MIN_NODES", "MAX_NODES"):
                values[key] = _parse_count(value)
            elif key == "REQUIRED_TIME":
                values["required_time_s"] = parse_required_time(value)
            elif key == "JOB_NAME":
                values["name"] = value
            elif key == "JOB_TYPE":
                values["job_type"] = value
            elif key == "PRIORITY":
                values["priority"] = parse_priority(value)
            elif key == "AUTH":
                if value.lower() not in AUTH_MODES:
                    raise ValueError("#AUTH is 'key' or 'plain'")
                values["auth"] = value.lower()
            elif key in ("CORES", "CORES_PER_NODE"):
                if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
                    raise ValueError(f"#{key} is a whole number of cores >= 1")
                values[key.lower()] = int(value)
            elif key == "PROFILE":
                values["profile"] = parse_profile(value)
            elif key == "COLOCATE":
                if value.lower() not in ("yes", "no"):
                    raise ValueError("#COLOCATE is 'yes' or 'no'")
                values["colocate"] = value.lower() == "yes"
        except ValueError as exc:
            raise JobScriptError(f"line {lineno}: {exc}: {raw.strip()!r}") from None
        where[key] = (lineno, raw.strip())
    job_class = values.get("job_class", JobClass.RIGID)
    lo, hi, nodes = values.get("MIN_NODES"), values.get("MAX_NODES"), values.get("NODES")
    if "cores" in values:
        kwargs: dict[str, Any] = {"nodes": nodes, "min_nodes": lo, "max_nodes": hi}
    elif job_class is JobClass.RIGID:
        # Java: a rigid job's range collapses to one count; NODES wins, then MAX, then MIN.
        count = nodes if nodes is not None else (hi if hi is not None else lo)
        kwargs = {"nodes": count}
    else:
        if nodes is not None and lo is None and hi is None:
            lo = hi = nodes  # Java: NODES sets both ends
        kwargs = {"min_nodes": lo, "max_nodes": hi}
        if nodes is not None and (lo is None or lo <= nodes) and (hi is None or nodes <= hi):
            kwargs["nodes"] = nodes
    try:
        return JobSpec(
            name=values.get("name", name or "job"),
            job_class=job_class,
            required_time_s=values.get("required_time_s", DEFAULT_REQUIRED_TIME_S),
            job_type=values.get("job_type"),
            declared_class=values.get("declared_class", ""),
            priority=values.get("priority", DEFAULT_PRIORITY),
            auth=values.get("auth", "key"),
            cores=values.get("cores"),
            cores_per_node=values.get("cores_per_node"),
            profile=values.get("profile", "cpu"),
            colocate=values.get("colocate", False),
            profile_declared="profile" in values,
            **kwargs,
        )
    except ValueError as exc:
        lines = ", ".join(f"line {n}" for n, _ in sorted(where.values()))
        raise JobScriptError(
            f"headers ({lines or 'none'}) do not make a valid job: {exc}"
        ) from None


def load_job_script(path: str | Path) -> JobSpec:
    """Read a job script file: :func:`parse_job_script` with ``command`` set to its path.

    The job name defaults to the file name without suffix.  Raises ``OSError`` when the file
    cannot be read and :class:`JobScriptError` as :func:`parse_job_script` does (the message
    then also names the file).
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8", errors="replace")
    try:
        spec = parse_job_script(text, name=p.stem or "job")
    except JobScriptError as exc:
        raise JobScriptError(f"{p}: {exc}") from None
    return spec.replace(command=str(p))


@dataclass(frozen=True)
class BatchEntry:
    """One job of a batch: its spec and its submission time (seconds from batch start)."""

    spec: JobSpec
    submit_s: float = 0.0


_SPEC_FIELDS = {f.name for f in fields(JobSpec)}
_INT_FIELDS = ("nodes", "min_nodes", "max_nodes", "cores", "cores_per_node")
#: The fields of a batch entry, as the module docstring documents them.
BATCH_FIELDS = ("name", "job_class", "nodes", "min_nodes", "max_nodes", "required_time_s",
                "command", "program", "size", "job_type", "priority", "cores",
                "cores_per_node", "profile", "submit_s")


def _entry_from_mapping(raw: Mapping[str, Any], *, from_csv: bool) -> BatchEntry:
    unknown = set(raw) - _SPEC_FIELDS - {"submit_s"}
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}; "
                         f"known: {', '.join(BATCH_FIELDS)}")
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None or (from_csv and isinstance(value, str) and value.strip() == ""):
            continue
        if key == "submit_s":
            continue
        if from_csv:
            value = value.strip()
            if key in _INT_FIELDS:
                value = _parse_count(value)
            elif key == "required_time_s":
                value = float(value)
            elif key == "priority":
                value = parse_priority(value)
            elif key == "size":
                value = int(value) if re.fullmatch(r"-?[0-9]+", value) else value
        if key == "command" and isinstance(value, str):
            value = tuple(shlex.split(value))
        kwargs[key] = value
    kwargs.setdefault("profile_declared", "profile" in kwargs)
    submit = raw.get("submit_s", 0.0)
    if submit is None or (from_csv and str(submit).strip() == ""):
        submit = 0.0
    submit = float(submit)
    if not math.isfinite(submit) or submit < 0:
        raise ValueError(f"submit_s must be a finite number >= 0, got {submit}")
    return BatchEntry(JobSpec(**kwargs), submit)


def load_batch(path: str | Path) -> list[BatchEntry]:
    """Read a batch file (JSON or CSV, by suffix; see the module docstring for the format).

    Args:
        path: a ``.json`` or ``.csv`` file.

    Returns:
        The entries sorted by ``submit_s`` (stable: equal times keep file order).

    Raises:
        BatchFileError: unreadable syntax, an unknown field, or an entry that is not a valid
            job (the message names the entry).
        OSError: the file cannot be opened.
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    entries: list[BatchEntry] = []
    if p.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        for row_no, row in enumerate(reader, start=1):
            if None in row:
                raise BatchFileError(f"{p}: data row {row_no}: more cells than header columns")
            try:
                entries.append(_entry_from_mapping(row, from_csv=True))
            except (ValueError, TypeError) as exc:
                raise BatchFileError(f"{p}: data row {row_no}: {exc}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BatchFileError(f"{p}: not JSON: {exc}") from None
        if isinstance(data, Mapping) and "jobs" in data:
            data = data["jobs"]
        if not isinstance(data, Sequence) or isinstance(data, str):
            raise BatchFileError(f"{p}: expected a list of job objects")
        for index, raw in enumerate(data):
            if not isinstance(raw, Mapping):
                raise BatchFileError(f"{p}: entry {index}: expected an object, got {raw!r}")
            try:
                entries.append(_entry_from_mapping(raw, from_csv=False))
            except (ValueError, TypeError) as exc:
                raise BatchFileError(f"{p}: entry {index}: {exc}") from None
    entries.sort(key=lambda e: e.submit_s)
    return entries
