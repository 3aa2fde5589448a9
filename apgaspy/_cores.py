"""The cores of a job's hosts as text: Linux CPU lists and the ``APGAS_CORES`` variable.

The scheduler tells a job which CPUs it holds on each host through ``APGAS_CORES``
(docs/guides/scheduler.md, "Cores and shapes"); the runtime reads it to pin its places and
workers.  Both ends use this module, which imports the standard library alone.

::

    CPU list (Linux "list format", cpuset(7)):   0-1,4        <->  [0, 1, 4]
    APGAS_CORES:               127.0.1.1=0-1;127.0.1.2=4-5    <->  {"127.0.1.1": [0, 1],
                                                                     "127.0.1.2": [4, 5]}

A CPU list is comma-separated CPU numbers and inclusive ranges ``a-b`` (``a <= b``), as the
kernel writes ``/sys/devices/system/cpu/online`` and ``taskset -c`` reads them (the stride
form ``a-b:s`` is not used).  ``APGAS_CORES`` is ``host=cpulist`` entries joined by ``;``,
in the job's host order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

__all__ = ["format_cores_env", "format_cpulist", "parse_cores_env", "parse_cpulist"]

_ITEM = re.compile(r"\s*([0-9]+)(?:\s*-\s*([0-9]+))?\s*")


def parse_cpulist(text: str) -> list[int]:
    """The CPUs of a Linux CPU list, sorted, each once.

    Args:
        text: e.g. ``"0-1,4"``; the empty string (or blanks) is the empty list.

    Returns:
        The CPU numbers, ascending (``[0, 1, 4]``).

    Raises:
        ValueError: an item that is not a number or a range ``a-b`` with ``a <= b``; the
            message names the item.
    """
    if not text.strip():
        return []
    cpus: set[int] = set()
    for item in text.split(","):
        match = _ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"not a CPU list item: {item!r} in {text!r} (write e.g. 0-1,4)")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise ValueError(f"a CPU range runs upwards, got {item.strip()!r} in {text!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_cpulist(cpus: Iterable[int]) -> str:
    """The Linux CPU list of ``cpus``: runs of consecutive CPUs as ranges (``[0, 1, 4]`` ->
    ``"0-1,4"``; duplicates and order do not matter; no CPU: ``""``).

    Raises:
        ValueError: a negative CPU number.
    """
    values = sorted(set(int(c) for c in cpus))
    if values and values[0] < 0:
        raise ValueError(f"CPU numbers are >= 0, got {values[0]}")
    parts: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        parts.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cores_env(text: str) -> dict[str, list[int]]:
    """Read ``APGAS_CORES``: ``host=cpulist`` entries joined by ``;``.

    Args:
        text: e.g. ``"127.0.1.1=0-1;127.0.1.2=4"``; empty entries are skipped.

    Returns:
        host -> its CPUs ascending, in the text's host order.

    Raises:
        ValueError: an entry without ``=`` or with an empty host, a host named twice, or a
            bad CPU list (:func:`parse_cpulist`).
    """
    out: dict[str, list[int]] = {}
    for entry in text.split(";"):
        if not entry.strip():
            continue
        host, sep, cpus = entry.partition("=")
        host = host.strip()
        if not sep or not host:
            raise ValueError(f"APGAS_CORES entries are host=cpulist, got {entry!r}")
        if host in out:
            raise ValueError(f"APGAS_CORES names host {host!r} twice")
        out[host] = parse_cpulist(cpus)
    return out


def format_cores_env(cores: Mapping[str, Iterable[int]]) -> str:
    """Write ``APGAS_CORES`` from host -> CPUs, in the mapping's order
    (``{"a": [0, 1], "b": [4]}`` -> ``"a=0-1;b=4"``).

    Raises:
        ValueError: a host that is empty or contains ``=``, ``;`` or blanks.
    """
    entries = []
    for host, cpus in cores.items():
        if not host or any(c in host for c in "=; \t\n"):
            raise ValueError(f"not a host name for APGAS_CORES: {host!r}")
        entries.append(f"{host}={format_cpulist(cpus)}")
    return ";".join(entries)
