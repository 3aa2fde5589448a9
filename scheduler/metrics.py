"""Metrics of a real run, with the simulator's definitions and types.

A real run is described by the same :class:`~scheduler.simulate.JobRecord` objects the
simulator makes (submission, start, end, the nodes held over time, shrinks and grows), so
:class:`~scheduler.simulate.SimResult`, its ``usage_curve`` and the charts of
:mod:`scheduler.plots` serve both.  :func:`result_from_records`, defined in
:mod:`scheduler.simulate` (whose runs use it too), computes the metrics: makespan (last end
minus first submission, s), utilisation (node-seconds held / (nodes × makespan), 0-1), mean
wait and turnaround (s), mean bounded slowdown, shrinks and grows per malleable job.
"""

from __future__ import annotations

from .simulate import result_from_records

__all__ = ["result_from_records"]
