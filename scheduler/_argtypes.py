"""Argument types shared by the scheduler's command lines (argparse ``type=`` callables).

Each turns the text of an option into its value or raises ``argparse.ArgumentTypeError``
with a message saying what was expected, which argparse prints as a usage error.
"""

from __future__ import annotations

import argparse

__all__ = ["positive_int", "port", "seconds", "positive_seconds"]


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (nodes, jobs, batches)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def port(text: str) -> int:
    """A TCP port, 0-65535 (0: any free port)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value < 65536:
        raise argparse.ArgumentTypeError(f"a port is 0-65535 (0: any free), got {value}")
    return value


def seconds(text: str) -> float:
    """A duration in seconds, ≥ 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds, > 0."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0, got {text!r}")
    return value
