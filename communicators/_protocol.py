"""The scheduler wire protocol (SPEC.md §2) as plain data: parsing and formatting, no sockets.

Orders (scheduler → job, one line a connection)::

    shrink <n>                       reply: n lines, one released host name each
    grow <n> <host_1> ... <host_n>   reply: none (a trailing space may follow)

Notifications (job → scheduler, one line a connection): ``<message>:<job address>``.

Refusals are an apgaspy extension: a refused order is answered with one line
``ERROR <reason>`` (host names never contain spaces, so it cannot be taken for one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Order", "OrderError", "parse_order", "format_order", "notification",
           "MAX_LINE_BYTES", "ERROR_PREFIX"]

MAX_LINE_BYTES = 65536
ERROR_PREFIX = "ERROR "
_HOST = re.compile(r"^[A-Za-z0-9._:\-\[\]]{1,253}$")


class OrderError(ValueError):
    """An order line that does not follow the protocol (raised by :func:`parse_order`)."""


@dataclass(frozen=True)
class Order:
    """One scheduler order.

    Attributes:
        kind: ``"shrink"`` or ``"grow"``.
        n: the number of hosts (≥ 1).
        hosts: for a grow, the ``n`` host names in the order given; empty for a shrink.
    """

    kind: str
    n: int
    hosts: tuple[str, ...] = ()


def _count(text: str, line: str) -> int:
    if not text.isdigit():
        raise OrderError(f"the host count must be a positive integer, got {text!r} in {line!r}")
    n = int(text)
    if n < 1:
        raise OrderError(f"the host count must be at least 1 in {line!r}")
    return n


def parse_order(line: str) -> Order:
    """Parse one order line (without or with its trailing newline).

    Raises:
        OrderError: anything but ``shrink <n>`` or ``grow <n> <n hosts>``.
    """
    text = line.rstrip("\r\n")
    if not text.isascii() or not text.isprintable():
        raise OrderError(f"an order is printable ASCII, got {text[:80]!r}")
    words = text.split()
    if not words:
        raise OrderError("empty order")
    kind = words[0]
    if kind == "shrink":
        if len(words) != 2:
            raise OrderError(f"expected 'shrink <n>', got {text!r}")
        return Order("shrink", _count(words[1], text))
    if kind == "grow":
        if len(words) < 2:
            raise OrderError(f"expected 'grow <n> <host_1> ... <host_n>', got {text!r}")
        n = _count(words[1], text)
        hosts = tuple(words[2:])
        if len(hosts) != n:
            raise OrderError(f"'grow {n}' needs {n} host names, got {len(hosts)} in {text!r}")
        bad = [h for h in hosts if not _HOST.match(h)]
        if bad:
            raise OrderError(f"not a host name: {bad[0]!r}")
        return Order("grow", n, hosts)
    raise OrderError(f"unknown order {kind!r}: expected 'shrink' or 'grow'")


def format_order(order: Order) -> str:
    """The order as a protocol line, with its newline."""
    if order.kind == "shrink":
        return f"shrink {order.n}\n"
    return f"grow {order.n} {' '.join(order.hosts)}\n"


def notification(message: str, address: str) -> str:
    """A notification line ``<message>:<address>`` with its newline.

    Raises:
        ValueError: ``message`` contains ``:`` or a newline (the scheduler splits on ``:``).
    """
    if ":" in message or "\n" in message:
        raise ValueError(f"a notification message may not contain ':' or a newline: {message!r}")
    return f"{message}:{address}\n"
