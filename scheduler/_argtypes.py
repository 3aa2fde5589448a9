"""Argument types shared by the scheduler's command lines (argparse ``type=`` callables).

Every command line of ``python -m scheduler`` (``serve``, ``submit``, ``simulate``,
``demo`` …) validates its numbers with these, so one kind of value is read, and refused, the
same way everywhere.  Each turns the text of an option into its value or raises
``argparse.ArgumentTypeError`` with a message saying what was expected, which argparse
prints as a usage error (exit status 2, the subcommand's usage, no traceback).
"""

from __future__ import annotations

import argparse
import math

__all__ = ["fraction", "nonnegative_int", "percentages", "port", "positive_int",
           "positive_number", "positive_seconds", "seconds", "whole_number"]


def whole_number(text: str, low: int, high: int | None = None, *,
                 not_a_number: str = "expected a whole number",
                 out_of_range: str = "expected a number >= {low}") -> int:
    """``text`` as a whole number in ``[low, high]`` (``high`` None: no upper bound).

    Raises:
        argparse.ArgumentTypeError: ``text`` is no whole number (``not_a_number``, with the
            text), or it is out of range (``out_of_range``, formatted with ``low``, ``high``
            and the value).
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{not_a_number}, got {text!r}") from None
    if value < low or (high is not None and value > high):
        raise argparse.ArgumentTypeError(
            f"{out_of_range.format(low=low, high=high)}, got {value}")
    return value


def positive_int(text: str) -> int:
    """A whole number ≥ 1 (nodes, jobs, batches)."""
    return whole_number(text, 1)


def nonnegative_int(text: str) -> int:
    """A whole number ≥ 0 (nodes kept free, jobs submitted at time 0)."""
    return whole_number(text, 0, out_of_range="expected a whole number >= 0")


def port(text: str) -> int:
    """A TCP port, 0-65535 (0: any free port)."""
    return whole_number(text, 0, 65535, not_a_number="expected a port number",
                        out_of_range="a port is 0-65535 (0: any free)")


def seconds(text: str) -> float:
    """A duration in seconds, ≥ 0 (``inf`` allowed, ``nan`` refused)."""
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


def positive_number(text: str) -> float:
    """A finite number > 0 (a factor such as required time over run time)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number from 0 to 1 (a share of a whole, such as Amdahl's serial fraction)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}") \
            from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text!r}")
    return value


def percentages(text: str) -> list[float]:
    """Comma-separated percentages, each 0-100 (``0,20,40``), at least one."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise argparse.ArgumentTypeError(f"shares are percentages 0-100, got {text!r}")
    return values
