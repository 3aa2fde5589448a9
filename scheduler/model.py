"""Run-time and resize-cost models for simulation.

Run time at any node count
--------------------------
The paper's evaluation (Finnerty et al. 2024, the job mix of its Table 2) gives the median
run times of its Java jobs at two or three node counts.
Between two known points ``(n1, t1)``, ``(n2, t2)`` (``n1 < n2``) the model is Amdahl's law
fitted through both points::

    t(n) = s + w / n          w = (t1 - t2) / (1/n1 - 1/n2)      s = t1 - w / n1

``w`` is the parallel work (node-seconds), ``s`` the part that does not shrink with more
nodes (seconds).  It is the work-conservation form with a parallel-efficiency correction,
``t(n) = t(n0) * n0/n * (1 + a*(n/n0 - 1))`` with ``a = s / t(n0)``: ``a = 0`` is perfect
work conservation.  With three points each interval uses its own pair; below the smallest
and above the largest known count the nearest pair is extended (so ``t(1)`` follows the
lowest pair, ``t(16)`` the highest).  If a pair would need ``s < 0`` (super-linear speed-up)
the pair is joined by a power law ``t = t1 * (n1/n)**b`` instead, ``b = ln(t1/t2)/ln(n2/n1)``.
A single known point uses Amdahl with a given serial fraction ``a`` (default 0.05).  Every
value is at least ``floor_s`` (default 1 s).

Examples (the paper's medians): UTS d=18 is known at 2 → 102.9 s, 4 → 56.2 s, so ``w = 186.8``
node-s, ``s = 9.5`` s, ``t(1) = 196.3`` s, ``t(8) = 32.85`` s.

Jacobi jobs (the priority study)
--------------------------------
The priority study (Bhosale et al. 2024, docs/guides/priorities.md) models a job's run time
as piecewise linear in its node count through known points (:class:`PiecewiseLinearCurve`)
plus a rescale cost.  :class:`JacobiModel` holds the four Jacobi sizes' curves and costs;
:func:`jacobi_placeholder` is a documented stand-in and :func:`load_jacobi_model` reads
measured numbers from JSON.

Resize costs
------------
A resize order stops the job's progress for its duration (seconds) and then the job goes on
at its new rate.  Defaults are apgaspy's measurements: grow 0.17 s for 1 node, 0.37 s for 2,
0.51 s for 4 (linear between, extended with the last slope); shrink 0.005 s for 1 node to
0.02 s for 4.  The Java APGAS figures (Finnerty et al. 2024) were 14.55 s per grow and
7.41 s per shrink: :meth:`ResizeCostModel.java`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "JACOBI_SIZES",
    "PAPER_MEDIANS",
    "JacobiModel",
    "PiecewiseLinearCurve",
    "ResizeCostModel",
    "RuntimeModel",
    "ScalingCurve",
    "jacobi_placeholder",
    "load_jacobi_model",
    "pause_costs",
]

#: Median run times (seconds) of the paper's Java jobs (Finnerty et al. 2024) at the given
#: node counts (48 workers a node).  Keys are ``(program, size)``.
PAPER_MEDIANS: dict[tuple[str, int], dict[int, float]] = {
    ("uts", 18): {2: 102.9, 4: 56.2},
    ("uts", 19): {2: 395.5, 4: 199.2},
    ("uts", 20): {8: 395.0, 16: 207.3},
    ("nqueens", 17): {2: 172.4, 4: 91.5},
    ("nqueens", 18): {8: 365.5, 16: 191.8},
    ("bc", 17): {2: 62.3, 4: 35.1},
    ("bc", 18): {2: 341.5, 4: 175.6, 8: 93.7},
    ("bc", 19): {8: 435.3, 16: 226.7},
    ("pi", 80_000_000_000): {2: 72.1, 4: 37.3},
    ("pi", 600_000_000_000): {4: 260.4, 8: 133.0, 16: 70.7},
    ("pi", 1_200_000_000_000): {8: 260.5, 16: 134.3},
}


@dataclass(frozen=True)
class _Piece:
    """One interval's law: Amdahl ``s + w/n`` or, when ``power``, ``t1 * (n1/n)**b``."""

    s: float
    w: float
    power: bool = False
    n1: float = 1.0
    t1: float = 0.0
    b: float = 1.0

    def __call__(self, n: float) -> float:
        if self.power:
            return self.t1 * (self.n1 / n) ** self.b
        return self.s + self.w / n


def _fit(n1: int, t1: float, n2: int, t2: float) -> _Piece:
    w = (t1 - t2) / (1.0 / n1 - 1.0 / n2)
    s = t1 - w / n1
    if s >= 0 and w > 0:
        return _Piece(s=s, w=w)
    if w <= 0:  # no speed-up at all: flat
        return _Piece(s=max(t1, t2), w=0.0)
    return _Piece(0.0, 0.0, True, n1, t1, math.log(t1 / t2) / math.log(n2 / n1))


def _check_points(points: Mapping[int, float]) -> None:
    """Refuse known ``{nodes: seconds}`` points that no curve can go through: none at all,
    a count that is not a whole number >= 1, or a time that is not a finite number > 0
    (``ValueError`` naming the point)."""
    if not points:
        raise ValueError("a scaling curve needs at least one known (nodes, seconds) point")
    for n, t in points.items():
        if int(n) != n or n < 1 or not (t > 0 and math.isfinite(t)):
            raise ValueError(f"bad known point {n} nodes -> {t} s")


@dataclass(frozen=True)
class ScalingCurve:
    """Run time of one job (seconds) as a function of its node count.

    Args:
        points: known ``{nodes: seconds}`` (at least one; all > 0).
        serial_fraction: ``a`` of the one-point law ``t(n) = t0*n0/n*(1 + a*(n/n0 - 1))``,
            used only when one point is known (0 ≤ a ≤ 1).
        floor_s: lower bound of every value (seconds).

    Raises ``ValueError`` for no point, a count below 1, or a non-positive time.
    """

    points: Mapping[int, float]
    serial_fraction: float = 0.05
    floor_s: float = 1.0
    _counts: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _pieces: tuple[_Piece, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_points(self.points)
        if not 0 <= self.serial_fraction <= 1:
            raise ValueError(f"serial_fraction must be in [0, 1], got {self.serial_fraction}")
        counts = tuple(sorted(int(n) for n in self.points))
        times = [float(self.points[n]) for n in counts]
        if len(counts) == 1:
            t0, n0, a = times[0], counts[0], self.serial_fraction
            pieces: tuple[_Piece, ...] = (_Piece(s=a * t0, w=(1 - a) * t0 * n0),)
        else:
            pieces = tuple(
                _fit(counts[i], times[i], counts[i + 1], times[i + 1])
                for i in range(len(counts) - 1)
            )
        object.__setattr__(self, "_counts", counts)
        object.__setattr__(self, "_pieces", pieces)

    def __call__(self, nodes: int) -> float:
        """Run time on ``nodes`` nodes (seconds, ≥ ``floor_s``).  ``nodes`` must be ≥ 1."""
        if nodes < 1:
            raise ValueError(f"a job runs on at least 1 node, got {nodes}")
        if len(self._pieces) == 1:
            piece = self._pieces[0]
        else:
            # interval i covers counts[i] .. counts[i+1]; outside, the nearest one.
            i = bisect.bisect_right(self._counts, nodes) - 1
            piece = self._pieces[min(max(i, 0), len(self._pieces) - 1)]
        return max(self.floor_s, piece(nodes))

    def work_node_s(self, nodes: int) -> float:
        """Node-seconds the job uses on ``nodes`` nodes: ``nodes * t(nodes)``."""
        return nodes * self(nodes)


class RuntimeModel:
    """Run times of labelled jobs: ``(program, size)`` → :class:`ScalingCurve`.

    Args:
        curves: the known curves; :meth:`paper` gives the paper's.

    Lookups of an unknown label raise ``KeyError`` naming the label and the known ones.
    """

    def __init__(self, curves: Mapping[tuple[str, int | str], ScalingCurve] | None = None):
        self._curves: dict[tuple[str, int | str], ScalingCurve] = dict(curves or {})

    @classmethod
    def paper(cls, *, floor_s: float = 1.0) -> RuntimeModel:
        """The model of the paper's medians (:data:`PAPER_MEDIANS`)."""
        return cls(
            {key: ScalingCurve(points, floor_s=floor_s) for key, points in PAPER_MEDIANS.items()}
        )

    def add(self, program: str, size: int | str, curve: ScalingCurve) -> None:
        """Register (or replace) the curve of ``(program, size)``."""
        self._curves[(program, size)] = curve

    def curve(self, program: str | None, size: int | str | None) -> ScalingCurve:
        """The curve of ``(program, size)``; ``KeyError`` when unknown."""
        try:
            return self._curves[(program, size)]  # type: ignore[index]
        except KeyError:
            known = ", ".join(f"{p}/{s}" for p, s in sorted(self._curves, key=str)[:12])
            raise KeyError(
                f"no run-time model for program={program!r} size={size!r} (known: {known}…)"
            ) from None

    def run_time_s(self, program: str | None, size: int | str | None, nodes: int) -> float:
        """Run time (seconds) of ``(program, size)`` on ``nodes`` nodes."""
        return self.curve(program, size)(nodes)

    def __contains__(self, key: object) -> bool:
        return key in self._curves


def _interp(points: tuple[tuple[int, float], ...], k: int) -> float:
    counts = [n for n, _ in points]
    if k <= counts[0]:
        return points[0][1] * k / counts[0] if counts[0] > 0 else points[0][1]
    for (n1, t1), (n2, t2) in zip(points, points[1:], strict=False):
        if k <= n2:
            return t1 + (t2 - t1) * (k - n1) / (n2 - n1)
    if len(points) == 1:
        return points[0][1] * k / counts[0]
    (n1, t1), (n2, t2) = points[-2], points[-1]
    return t2 + (t2 - t1) / (n2 - n1) * (k - n2)


@dataclass(frozen=True)
class ResizeCostModel:
    """Duration of a resize order (seconds) as a function of the nodes added or removed.

    Args:
        grow_points: ``((nodes, seconds), …)`` measured grow durations, increasing nodes;
            linear between them, extended with the last slope above, proportional below.
        shrink_points: the same for shrinks.

    The defaults are apgaspy's measurements (module docstring).
    """

    grow_points: tuple[tuple[int, float], ...] = ((1, 0.17), (2, 0.37), (4, 0.51))
    shrink_points: tuple[tuple[int, float], ...] = ((1, 0.005), (4, 0.02))

    def __post_init__(self) -> None:
        for name in ("grow_points", "shrink_points"):
            pts = tuple((int(n), float(t)) for n, t in getattr(self, name))
            if not pts or any(n < 1 or t < 0 for n, t in pts):
                raise ValueError(f"{name} needs (nodes >= 1, seconds >= 0) pairs, got {pts}")
            if [n for n, _ in pts] != sorted({n for n, _ in pts}):
                raise ValueError(f"{name} must have increasing node counts, got {pts}")
            object.__setattr__(self, name, pts)

    @classmethod
    def java(cls) -> ResizeCostModel:
        """The Java APGAS figures (Finnerty et al. 2024): 14.55 s a grow, 7.41 s a shrink (any
        size)."""
        return cls.constant(14.55, 7.41)

    @classmethod
    def constant(cls, grow_s: float, shrink_s: float) -> ResizeCostModel:
        """A grow costs ``grow_s`` and a shrink ``shrink_s`` seconds, whatever the number of
        nodes (``ValueError`` for a negative cost)."""
        return cls(grow_points=((1, grow_s), (2, grow_s)),
                   shrink_points=((1, shrink_s), (2, shrink_s)))

    @classmethod
    def free(cls) -> ResizeCostModel:
        """Resizes that take no time (for hand-computed tests)."""
        return cls(grow_points=((1, 0.0),), shrink_points=((1, 0.0),))

    def grow_s(self, nodes: int) -> float:
        """Seconds a grow by ``nodes`` nodes stops the job."""
        return max(0.0, _interp(self.grow_points, nodes))

    def shrink_s(self, nodes: int) -> float:
        """Seconds a shrink by ``nodes`` nodes stops the job (until the nodes are free)."""
        return max(0.0, _interp(self.shrink_points, nodes))


# ------------------------------------------------------------------------------------------
# Jacobi 2D jobs (the workload of Bhosale et al. 2024, docs/guides/priorities.md)


@dataclass(frozen=True)
class PiecewiseLinearCurve:
    """Run time (seconds) piecewise linear in the node count, through known points.

    Strong scaling of one job as Bhosale et al. (2024) model it: between two known counts
    the time is interpolated linearly; below the smallest and above the largest known count
    the nearest segment is extended.  Every value is at least ``floor_s``.

    Args:
        points: known ``{nodes: seconds}`` (at least one; all > 0).  With one point the time
            is that value at every count.
        floor_s: lower bound of every value (seconds, > 0).

    Raises ``ValueError`` for no point, a count below 1 or a non-positive time.
    """

    points: Mapping[int, float]
    floor_s: float = 1.0

    def __post_init__(self) -> None:
        _check_points(self.points)
        if not self.floor_s > 0:
            raise ValueError(f"floor_s must be > 0 s, got {self.floor_s}")
        object.__setattr__(
            self, "points", {int(n): float(self.points[n]) for n in sorted(self.points)}
        )

    def __call__(self, nodes: int) -> float:
        """Run time on ``nodes`` nodes (seconds, >= ``floor_s``); ``ValueError`` below 1."""
        if nodes < 1:
            raise ValueError(f"a job runs on at least 1 node, got {nodes}")
        counts = list(self.points)
        times = list(self.points.values())
        if len(counts) == 1:
            return max(self.floor_s, times[0])
        i = min(max(bisect.bisect_right(counts, nodes) - 1, 0), len(counts) - 2)
        n1, n2, t1, t2 = counts[i], counts[i + 1], times[i], times[i + 1]
        return max(self.floor_s, t1 + (t2 - t1) * (nodes - n1) / (n2 - n1))

    def work_node_s(self, nodes: int) -> float:
        """Node-seconds the job uses on ``nodes`` nodes: ``nodes * t(nodes)``."""
        return nodes * self(nodes)


#: The four Jacobi 2D jobs of Bhosale et al. (2024): label -> (grid side, steps, min, max).
JACOBI_SIZES: dict[str, tuple[int, int, int, int]] = {
    "small": (512, 40_000, 2, 8),
    "medium": (2048, 40_000, 4, 16),
    "large": (8192, 40_000, 8, 32),
    "xlarge": (16384, 10_000, 16, 64),
}


@dataclass(frozen=True)
class JacobiModel:
    """Run times and rescale costs of the Jacobi jobs: what the priority study simulates.

    Attributes:
        curves: size label (``"small"`` …) -> run time in seconds at any node count.
        costs: resize durations (seconds) of a grow or shrink, for every size not in
            ``size_costs``.
        source: where the numbers come from (a sentence, shown in reports).
        size_costs: size label -> resize durations of that size (measured per grid: moving
            a large grid costs more than moving a small one); empty by default.
    """

    curves: Mapping[str, PiecewiseLinearCurve]
    costs: ResizeCostModel
    source: str
    size_costs: Mapping[str, ResizeCostModel] = field(default_factory=dict)

    def runtime_model(self) -> RuntimeModel:
        """The curves as a :class:`RuntimeModel` keyed ``("jacobi", label)``."""
        return RuntimeModel({("jacobi", k): v for k, v in self.curves.items()})  # type: ignore[misc]

    def sim_costs(self) -> dict[tuple[str | None, int | str | None], ResizeCostModel]:
        """``size_costs`` keyed ``("jacobi", label)``, as
        :attr:`scheduler.simulate.SimConfig.job_costs` takes them."""
        return {("jacobi", k): v for k, v in self.size_costs.items()}

    def to_json(self) -> dict[str, object]:
        """The JSON form :func:`load_jacobi_model` reads."""
        jobs: dict[str, dict[str, object]] = {
            k: {"points": {str(n): t for n, t in c.points.items()}}
            for k, c in self.curves.items()}
        for k, costs in self.size_costs.items():
            jobs[k]["rescale"] = _costs_json(costs)
        return {"source": self.source, "jobs": jobs, "rescale": _costs_json(self.costs)}


def _costs_json(costs: ResizeCostModel) -> dict[str, list[list[float]]]:
    return {"grow_points": [list(p) for p in costs.grow_points],
            "shrink_points": [list(p) for p in costs.shrink_points]}


def _costs_from_json(path: str, where: str, r: Any, default: ResizeCostModel) -> ResizeCostModel:
    """A ``{"grow_points", "shrink_points"}`` object (either may be missing: ``default``'s)."""
    try:
        return _flat(ResizeCostModel(
            grow_points=tuple(tuple(p) for p in r.get("grow_points", default.grow_points)),
            shrink_points=tuple(tuple(p) for p in r.get("shrink_points",
                                                           default.shrink_points))))
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: {where}: {exc}") from None


#: Placeholder constants (module doc of :func:`jacobi_placeholder`).
_SECONDS_PER_POINT = 4.0e-9
_HALO_LATENCY_S = 50e-6
_BYTES_PER_S = 1.0e9
_RESCALE_S = 3.0


def jacobi_placeholder(*, seconds_per_point: float = _SECONDS_PER_POINT,
                       serial_fraction: float = 0.0, halo_latency_s: float = _HALO_LATENCY_S,
                       rescale_s: float = _RESCALE_S) -> JacobiModel:
    """A documented stand-in for measured Jacobi 2D strong scaling, until measurements exist.

    One step of the 5-point Jacobi update of an ``N x N`` grid on ``n`` nodes costs::

        N^2 * c * (a + (1 - a) / n)  +  (n > 1) * (L + 2 * N * 8 B / B_w)

    with ``c = 4 ns`` per grid point (``seconds_per_point``: a numpy step on the development
    machine, one core, under load: 3.6-6.3 ns/point for 512^2 to 8192^2), ``a`` an Amdahl
    serial fraction (``serial_fraction``, default 0: the parallel efficiency is then set by
    the halo term alone), ``L = 50 us`` halo latency per step (``halo_latency_s``) and
    ``B_w = 1 GB/s`` for the two halo rows of 8-byte values.  The run time is
    ``steps`` times that; it is sampled at the job's minimum, the doublings in between and
    its maximum, and joined piecewise linearly (:class:`PiecewiseLinearCurve`), as Bhosale
    et al. (2024) do with their measured points.  A rescale (grow or shrink) costs
    ``rescale_s`` = 3 s, of the order of the "few seconds" they measured (dominated by
    restarting processes).  Arguments are seconds (``serial_fraction`` a share, 0-1).

    Replace it with measurements through a JSON file (:func:`load_jacobi_model`).
    """
    curves = {}
    for label, (side, steps, lo, hi) in JACOBI_SIZES.items():
        counts, n = [], lo
        while n < hi:
            counts.append(n)
            n *= 2
        counts.append(hi)

        def seconds(n: int, side: int = side, steps: int = steps) -> float:
            halo = (halo_latency_s + 2 * side * 8 / _BYTES_PER_S) if n > 1 else 0.0
            share = serial_fraction + (1 - serial_fraction) / n  # Amdahl
            compute = side * side * seconds_per_point * share
            return steps * (compute + halo)

        curves[label] = PiecewiseLinearCurve({n: round(seconds(n), 3) for n in counts})
    costs = ResizeCostModel.constant(rescale_s, rescale_s)
    return JacobiModel(curves, costs,
                       "placeholder: numpy step 4 ns/point, 50 us + 1 GB/s halo, 3 s rescale")


def _flat(costs: ResizeCostModel) -> ResizeCostModel:
    """One-point cost tables mean the same cost at any count (not proportional to it)."""
    grow = costs.grow_points if len(costs.grow_points) > 1 else (
        costs.grow_points[0], (costs.grow_points[0][0] + 1, costs.grow_points[0][1]))
    shrink = costs.shrink_points if len(costs.shrink_points) > 1 else (
        costs.shrink_points[0], (costs.shrink_points[0][0] + 1, costs.shrink_points[0][1]))
    return ResizeCostModel(grow_points=grow, shrink_points=shrink)


def load_jacobi_model(path: str) -> JacobiModel:
    """Read a Jacobi model from JSON (the integrator's measured numbers)::

        {"source": "measured on ...",
         "jobs": {"small": {"points": {"2": 41.0, "4": 22.5, "8": 13.1}}, "medium": ...},
         "rescale": {"grow_points": [[1, 2.5], [8, 4.0]], "shrink_points": [[1, 2.0]]}}

    ``jobs`` needs the four labels of :data:`JACOBI_SIZES` (node counts as keys, seconds as
    values, joined piecewise linearly); ``rescale`` is optional (default: the placeholder's
    3 s) and gives seconds by nodes added/removed (one point: the same at every count); a
    job may have a ``rescale`` of its own (``jobs.large.rescale``), which replaces the
    common one for that size.

    The file of our Jacobi benchmark's measurements (``{"benchmark": "jacobi_model",
    "models": [{"grid", "steps", "nodes", "seconds", "grow_s", "shrink_s"}, ...]}``) is read
    too: measured on a machine too small to show strong scaling up to 64 nodes, it gives
    the cost of one grid point a step on one place (the median over its grids) and the grow
    and shrink times (means of :func:`pause_costs`), and :func:`jacobi_placeholder`'s halo
    term gives the scaling.
    Entries measured on emulated nodes (a ``node_rate`` > 0, docs/guides/jacobi.md) give no
    cost per point (their speed was chosen, not measured) and are skipped for it.

    Raises:
        OSError: the file cannot be read.
        ValueError: not JSON, a label missing, or a bad point (the message names it).
    """
    import json

    try:
        data = json.loads(open(path, encoding="utf-8").read())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("models"), list):
        return _from_measurements(path, data)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), dict):
        raise ValueError(f"{path}: expected an object with a \"jobs\" object")
    curves = {}
    for label in JACOBI_SIZES:
        raw = data["jobs"].get(label)
        if not isinstance(raw, dict) or not isinstance(raw.get("points"), dict):
            raise ValueError(f"{path}: jobs.{label}.points (nodes -> seconds) is missing")
        try:
            curves[label] = PiecewiseLinearCurve(
                {int(n): float(t) for n, t in raw["points"].items()})
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{path}: jobs.{label}: {exc}") from None
    costs = jacobi_placeholder().costs
    if "rescale" in data:
        costs = _costs_from_json(path, "rescale", data["rescale"], costs)
    size_costs = {label: _costs_from_json(path, f"jobs.{label}.rescale",
                                          data["jobs"][label]["rescale"], costs)
                  for label in JACOBI_SIZES if "rescale" in data["jobs"][label]}
    return JacobiModel(curves, costs, str(data.get("source", path)), size_costs)


def pause_costs(entry: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The grow and shrink cost (seconds) of one entry of the Jacobi benchmark's model file.

    A resize costs a job the time its iterations stand still: ``grow_pause_s`` and
    ``shrink_pause_s`` (the order's time less the wait for the step under way, during which
    the job still computes; docs/guides/jacobi.md).  Files written before those fields
    existed give only ``grow_s`` and ``shrink_s`` (the wait included), used then.

    Returns:
        ``(grow, shrink)``, each ``None`` where the entry has no such figure.

    Raises:
        ValueError: a figure that is not a number (``float`` fails on it).
    """
    def pick(kind: str) -> float | None:
        for key in (f"{kind}_pause_s", f"{kind}_s"):
            if entry.get(key) is not None:
                return float(entry[key])
        return None

    return pick("grow"), pick("shrink")


def _from_measurements(path: str, data: Mapping[str, Any]) -> JacobiModel:
    """A Jacobi model from the benchmark's measurement file (:func:`load_jacobi_model`)."""
    import statistics

    rates, grows, shrinks = [], [], []
    try:
        for entry in data["models"]:
            nodes, seconds = list(entry["nodes"]), list(entry["seconds"])
            if 1 in nodes and not entry.get("node_rate"):  # emulated nodes: not a cost
                points = float(entry["grid"]) ** 2 * float(entry["steps"])
                rates.append(float(seconds[nodes.index(1)]) / points)
            grow, shrink = pause_costs(entry)
            if grow is not None:
                grows.append(grow)
            if shrink is not None:
                shrinks.append(shrink)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: a measurement entry lacks or mangles {exc}") from None
    if not rates:
        raise ValueError(f"{path}: no measurement on 1 place without emulated nodes "
                         f"(node_rate): cannot derive a cost per point")
    rate = statistics.median(rates)
    grow = statistics.fmean(grows) if grows else _RESCALE_S
    shrink = statistics.fmean(shrinks) if shrinks else _RESCALE_S
    base = jacobi_placeholder(seconds_per_point=rate)
    costs = ResizeCostModel.constant(grow, shrink)
    return JacobiModel(base.curves, costs,
                       f"{path}: {rate * 1e9:.2f} ns/point a step on one place (median of "
                       f"{len(rates)} grids), grow {grow:.2f} s, shrink {shrink:.2f} s, "
                       f"halo model for the scaling")
