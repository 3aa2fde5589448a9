"""The evolving monitor's decision as a pure function: load samples in, an action out.

Follows the ``EvolvingMonitor`` of APGAS for Java (v0.0.4): place 0 decides every second,
after a standby, on the average load of all places (itself included) and the lowest load
among the others.  An average above the high threshold asks the scheduler for one more node
(one request open at a time); otherwise, when some other place is idle (load 0) or the
average is below the low threshold, and there is more than one place, the least loaded place
(never place 0) is released.  apgaspy adds two things.  A request the scheduler has not
served within ``request_timeout`` seconds is given up (Java waits forever), so a scheduler
that never answers does not stop the job from asking again later.  And place 0 idle counts
like another place idle: the least loaded other place is released even when it is busy, and
its work moves to a continuing place as in every release (Java looks at the other places
only, so a job whose one busy place is not place 0, say GLB's sequential branch of the
evotree on place 1, keeps an idle place 0 and the busy one for as long as that phase
lasts).  The monitor that samples the loads
and carries the actions out is :mod:`apgaspy.elastic._evolving_monitor`; the guide is
docs/guides/evolving.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["EvolvingParams", "EvolvingState", "Decision", "decide"]


@dataclass(frozen=True)
class EvolvingParams:
    """The monitor's thresholds and intervals (Java's defaults).

    Attributes:
        interval: seconds between two samples and two decisions (1).
        standby: seconds after the monitor starts before the first decision (3).
        high: average load in % above which one node is requested (90).
        low: average load in % below which the least loaded place is released (10).
        request_timeout: seconds an unanswered request stays open before it is given up
            (apgaspy's addition; Java has none).
        release_block: seconds a release under way blocks new decisions at most (10).

    Raises:
        ValueError: a negative interval, ``low > high``, or a non-positive timeout.
    """

    interval: float = 1.0
    standby: float = 3.0
    high: float = 90.0
    low: float = 10.0
    request_timeout: float = 60.0
    release_block: float = 10.0

    def __post_init__(self) -> None:
        if self.interval <= 0 or self.standby < 0:
            raise ValueError(f"the interval must be positive and the standby not negative, "
                             f"got {self.interval}, {self.standby}")
        if not 0 <= self.low <= self.high:
            raise ValueError(f"the thresholds need 0 <= low <= high, got low={self.low}, "
                             f"high={self.high}")
        if self.request_timeout <= 0 or self.release_block <= 0:
            raise ValueError("the request timeout and the release block must be positive")


@dataclass(frozen=True)
class EvolvingState:
    """What the decision needs besides the samples (all times in the same clock, seconds).

    Attributes:
        started: when the monitor started.
        request_since: when the open request was sent, or ``None`` (no request open).
        release_since: when a release under way began, or ``None``.
    """

    started: float
    request_since: float | None = None
    release_since: float | None = None


@dataclass(frozen=True)
class Decision:
    """The verdict of :func:`decide`.

    Attributes:
        action: ``"wait"``, ``"request"`` (ask for one node) or ``"release"`` (release
            ``place``).
        place: the place id to release (``"release"`` only).
        reason: one line for the log.
        expired: the open request was given up (over ``request_timeout``); the caller clears
            it, whatever the action.
    """

    action: str
    place: int | None = None
    reason: str = ""
    expired: bool = False


def decide(samples: Mapping[int, float], state: EvolvingState, now: float,
           params: EvolvingParams = EvolvingParams()) -> Decision:
    """Decide what the evolving monitor does now.

    Args:
        samples: place id → its latest load in % (0-100); place 0 included.  Places that
            could not be sampled are left out.
        state: the monitor's state.
        now: the current time (same clock as ``state``), seconds.
        params: thresholds and intervals.

    Returns:
        A :class:`Decision`.  A request is at most one open at a time; a release never names
        place 0 and needs more than one place; the least loaded place other than place 0 is
        released, the highest id among equals (the newest), when some place is idle (load 0,
        place 0 included) or the average is below ``low``.

    Raises:
        ValueError: a sample that is not a number in [0, 100].
    """
    for p, load in samples.items():
        if isinstance(load, bool) or not isinstance(load, (int, float)) \
                or math.isnan(load) or not 0 <= load <= 100:
            raise ValueError(f"the load of place({p}) must be a number in [0, 100], "
                             f"got {load!r}")
    expired = (state.request_since is not None
               and now - state.request_since >= params.request_timeout)
    request_open = state.request_since is not None and not expired
    if now - state.started < params.standby:
        return Decision("wait", reason="standby", expired=expired)
    if state.release_since is not None and now - state.release_since < params.release_block:
        return Decision("wait", reason="a release is under way", expired=expired)
    if not samples:
        return Decision("wait", reason="no samples", expired=expired)
    average = sum(samples.values()) / len(samples)
    others = {p: load for p, load in samples.items() if p != 0}
    if average > params.high:
        if request_open:
            return Decision("wait", reason=f"average load {average:.1f} % > {params.high:g} %,"
                            " a request is open", expired=expired)
        return Decision("request", reason=f"average load {average:.1f} % > {params.high:g} %"
                        + (" (the previous request was given up)" if expired else ""),
                        expired=expired)
    if len(samples) > 1 and others:
        lowest = min(others.values())
        if lowest == 0 or samples.get(0) == 0 or average < params.low:
            place = max(p for p, load in others.items() if load == lowest)
            why = (f"place({place}) is idle" if lowest == 0 else
                   "place(0) is idle" if samples.get(0) == 0 else
                   f"average load {average:.1f} % < {params.low:g} %")
            return Decision("release", place=place, reason=why, expired=expired)
    return Decision("wait", reason=f"average load {average:.1f} %", expired=expired)
