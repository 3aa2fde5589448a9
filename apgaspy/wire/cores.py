"""Core lists: Linux's cpulist text and the ``APGAS_CORES`` value (pure, no I/O); part of
the wire protocol between a scheduler and its jobs.

A *cpulist* is the format of ``/sys/devices/system/cpu/online``, of ``taskset -c`` and of
``Cpus_allowed_list`` in ``/proc/<pid>/status`` (the kernel's ``Documentation/admin-guide/
cputopology.rst`` and ``cpuset(7)``, "List format"): comma-separated CPU numbers and
inclusive ranges, e.g. ``0-1,4,6-7``.  ``APGAS_CORES`` holds one cpulist a host::

    APGAS_CORES = "node1=0-3;node2=0-1,4"      host=cpulist, ';' between hosts
                   │      │
                   │      └ the cores the job holds there (parse_cpulist)
                   └ the host as the job's node file names it

A scheduler writes it for each job (:func:`format_cores_env`); a place reads its host's
cores from it (:func:`parse_cores_env`, then :mod:`apgaspy._pinning`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["parse_cpulist", "format_cpulist", "parse_cores_env", "format_cores_env"]


def parse_cpulist(text: str) -> list[int]:
    """The CPU numbers of a cpulist, in the order given, each once.

    Args:
        text: ``"0-3,8,10-11"``: CPU numbers (≥ 0) and inclusive ranges ``a-b`` (a ≤ b),
            comma-separated; blanks around items are ignored; an empty text is no CPU.
            The kernel's stride form ``a-b:step`` (``0-7:2`` = 0,2,4,6) is read too.

    Returns:
        The CPU numbers, first occurrence kept (``"1,0-1"`` gives ``[1, 0]``).

    Raises:
        ValueError: an item is not a number, a range runs backwards, a number is negative
            or a stride is not positive; the message quotes the item.
    """
    out: dict[int, None] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        try:
            span, _, step_text = item.partition(":")
            step = int(step_text) if step_text else 1
            first_text, dash, last_text = span.partition("-")
            first = int(first_text)
            last = int(last_text) if dash else first
        except ValueError:
            raise ValueError(f"cpulist item {item!r}: expected a CPU number or a range "
                             "a-b, e.g. '0-3,8'") from None
        if first < 0 or last < 0:
            raise ValueError(f"cpulist item {item!r}: CPU numbers are not negative")
        if last < first:
            raise ValueError(f"cpulist item {item!r}: the range runs backwards")
        if step < 1:
            raise ValueError(f"cpulist item {item!r}: the stride must be positive")
        for cpu in range(first, last + 1, step):
            out.setdefault(cpu, None)
    return list(out)


def format_cpulist(cpus: Iterable[int]) -> str:
    """The shortest cpulist of ``cpus`` (sorted, runs of 2 or more as ranges).

    Args:
        cpus: CPU numbers (≥ 0), in any order, duplicates allowed.

    Returns:
        ``"0-3,8"`` for ``[3, 0, 1, 2, 8]``; ``""`` for no CPU.  :func:`parse_cpulist` gives
        back the sorted numbers.

    Raises:
        ValueError: a negative number.
    """
    ordered = sorted(set(cpus))
    if ordered and ordered[0] < 0:
        raise ValueError(f"CPU numbers are not negative: {ordered[0]}")
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def parse_cores_env(text: str) -> dict[str, list[int]]:
    """The cores of each host of an ``APGAS_CORES`` value.

    Args:
        text: ``"host=cpulist;host=cpulist"`` (module docstring); blanks around items and
            empty items are ignored; an empty text is no host.

    Returns:
        host name → its cores (:func:`parse_cpulist`), hosts in the order given.

    Raises:
        ValueError: an item has no ``=`` or no host name, a host is named twice, or its
            cpulist does not parse or is empty; the message quotes the item.
    """
    out: dict[str, list[int]] = {}
    for raw in text.split(";"):
        item = raw.strip()
        if not item:
            continue
        host, eq, cpus_text = item.partition("=")
        host = host.strip()
        if not eq or not host:
            raise ValueError(f"entry {item!r}: expected 'host=cpulist', e.g. 'node1=0-3'")
        if host in out:
            raise ValueError(f"entry {item!r}: host {host} is named twice")
        try:
            cpus = parse_cpulist(cpus_text)
        except ValueError as exc:
            raise ValueError(f"entry {item!r}: {exc}") from None
        if not cpus:
            raise ValueError(f"entry {item!r}: no cores for host {host}")
        out[host] = cpus
    return out


def format_cores_env(cores: Mapping[str, Iterable[int]]) -> str:
    """The ``APGAS_CORES`` value of ``cores`` (host → its cores), hosts in the given order.

    Args:
        cores: host name (no ``=``, ``;``, blank) → CPU numbers; a host with none is left
            out.

    Returns:
        ``"node1=0-3;node2=0-1,4"``; :func:`parse_cores_env` gives back the same hosts with
        sorted cores.

    Raises:
        ValueError: a host name is empty or holds ``=``, ``;`` or blanks; a negative CPU.
    """
    items = []
    for host, cpus in cores.items():
        if not host or any(c in host for c in "=; \t\n"):
            raise ValueError(f"host name {host!r} cannot be written in APGAS_CORES")
        text = format_cpulist(cpus)
        if text:
            items.append(f"{host}={text}")
    return ";".join(items)
