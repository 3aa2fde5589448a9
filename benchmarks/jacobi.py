"""Jacobi 2D: the steady-state heat equation on an N x N grid, rows block-distributed, malleable.

    python -m benchmarks.jacobi [--grid N] [--iterations K] [--batch B] [--places P] [--json]

The data-parallel counterpart of the GLB benchmarks, and the workload of Bhosale et al.,
"Elastic scheduling of Charm++ jobs on Kubernetes" (2024).  The stencil, the boundary and the
reproducibility argument are in :mod:`benchmarks.kernels.jacobi`; the guide is
``docs/guides/jacobi.md``.

Distribution.  The interior rows ``[1, N-1)`` are cut into one contiguous block per place
(:func:`benchmarks.kernels.jacobi.partition`); each place's :class:`Block` (a
``PlaceLocalObject``) holds its rows plus ``depth`` halo rows on each side.  Place 0 drives the
computation in *steps*: one ``finish`` in which every place runs ``k <= depth`` iterations on
its block and then pushes its ``depth`` top and bottom rows (``async_at``) into the inboxes of
its neighbours, who apply them at the start of the next step.  ``depth = min(--batch, smallest
block)``, so a halo always comes from one neighbour.  The redundant halo iterations compute the
same values as the neighbour does, so the grid is the sequential one bit for bit.

Malleability.  The program defines a :class:`JacobiHandler`; orders are carried out between
steps (the handler waits at a :class:`Gate` for the step under way to end, and no step starts
until the order is done).  A shrink moves the rows of the leaving places, a grow spreads the
rows over all places: in both cases the blocks are re-cut over the new place list and each new
block (with its halo) is pushed to its place by the places that hold those rows now.  The
iterations go on from where they were; the final grid is the same whatever the orders.

Result: ``result`` is the SHA-256 of the final grid (little-endian float64, row-major), the
same for every number of places and every sequence of orders; ``--verify`` also solves the
grid sequentially at place 0 and compares.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from apgaspy import (
    MalleableHandler,
    PlaceLocalObject,
    async_at,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    finish,
    here,
    places,
    run,
)
from apgaspy.elastic import order_reports

from ._cli import positive_int
from .kernels._backend import backend as kernel_backend
from .kernels.jacobi import (
    advance,
    checksum,
    initial_grid,
    initial_rows,
    partition,
    solve,
    sweep,
)

__all__ = ["Block", "Gate", "JacobiHandler", "Solver", "check_params", "main"]

log = logging.getLogger("apgaspy.benchmarks.jacobi")

DEFAULT_BATCH = 8
"""Iterations per step (between two halo exchanges) unless ``--batch`` says otherwise."""


# ---------------------------------------------------------------------------------------------
# the place-local block and the tasks that run on it


class Block(PlaceLocalObject):
    """One place's rows of the grid.

    Attributes:
        n: the grid size; lo, hi: the global interior rows this place owns, ``[lo, hi)``
            (``lo == hi``: none, the place is idle).
        depth: halo rows on each side; base: the global index of local row 0.
        u, v: ``(rows held, n)`` float64 arrays, the current values and the scratch copy.
        up, down: the place ids of the neighbouring blocks, or ``None`` at the grid's edges.
        inbox: halo rows pushed by the neighbours, ``(step, global row, rows)``.
        pieces: rows pushed here during a redistribution, ``{global row: rows}``.
    """

    def __init__(self) -> None:
        self.n = 0
        self.lo = self.hi = self.base = self.depth = 0
        self.u = self.v = np.zeros((0, 0))
        self.up: int | None = None
        self.down: int | None = None
        self.inbox: list[tuple[int, int, np.ndarray]] = []
        self.pieces: dict[int, np.ndarray] = {}

    def rows(self, a: int, b: int) -> np.ndarray:
        """A copy of the global rows ``[a, b)``, which this block must hold."""
        if not self.base <= a <= b <= self.base + self.u.shape[0]:
            raise ValueError(f"place {here().id} holds rows [{self.base}, "
                             f"{self.base + self.u.shape[0]}), not [{a}, {b})")
        return self.u[a - self.base:b - self.base].copy()


def _step(block: Block, s: int, k: int, node_rate: float = 0.0) -> None:
    """At a place: apply the halos of step ``s - 1``, run ``k`` iterations, push the edge rows
    out tagged ``s`` (a fast neighbour's halos of step ``s`` may already be in the inbox: they
    wait for step ``s + 1``).

    ``node_rate`` > 0 (grid points a second): the emulated node speed.  The place computes
    its rows for real and then waits until the step has lasted at least
    ``k x rows owned x n / node_rate`` seconds (docs/guides/jacobi.md, "Emulated nodes");
    the halo rows go out after the wait, so the exchange stays real and comes on top.
    """
    t0 = time.perf_counter()
    keep = []
    for t, a, rows in block.inbox:
        if t == s - 1:
            block.u[a - block.base:a - block.base + rows.shape[0]] = rows
        else:
            keep.append((t, a, rows))
    block.inbox = keep
    block.u, block.v = advance(block.u, block.v, block.base, block.n, block.lo, block.hi, k)
    if node_rate > 0:
        left = k * (block.hi - block.lo) * block.n / node_rate - (time.perf_counter() - t0)
        if left > 0:
            time.sleep(left)
    d = block.depth
    if block.up is not None:
        async_at(block.up, _take_halo, block, s, block.lo, block.rows(block.lo, block.lo + d))
    if block.down is not None:
        async_at(block.down, _take_halo, block, s, block.hi - d,
                 block.rows(block.hi - d, block.hi))


def _take_halo(block: Block, s: int, a: int, rows: np.ndarray) -> None:
    block.inbox.append((s, a, rows))


def _send_rows(block: Block, moves: list[tuple[int, int, int]]) -> None:
    """At an old owner: push the rows ``[a, b)`` of each move ``(dest, a, b)`` to ``dest``."""
    me = here().id
    for dest, a, b in moves:
        if dest == me:
            block.pieces[a] = block.rows(a, b)
        else:
            async_at(dest, _take_piece, block, a, block.rows(a, b))


def _take_piece(block: Block, a: int, rows: np.ndarray) -> None:
    block.pieces[a] = rows


def _install(block: Block, n: int, lo: int, hi: int, depth: int, up: int | None,
             down: int | None, fresh: bool) -> None:
    """At a place: become the block of rows ``[lo, hi)`` with ``depth`` halo rows.

    ``fresh``: from the initial grid; else from the pieces pushed by :func:`_send_rows`, which
    must cover the interior rows of the block and its halo exactly.
    """
    _warm_kernel()
    pieces, block.pieces, block.inbox = block.pieces, {}, []
    block.n, block.lo, block.hi, block.depth, block.up, block.down = n, lo, hi, depth, up, down
    if lo == hi:
        block.base, block.u, block.v = lo, np.zeros((0, n)), np.zeros((0, n))
        return
    base, end = max(0, lo - depth), min(n, hi + depth)
    u = initial_rows(n, base, end)  # the fixed boundary rows and columns are right already
    if not fresh:
        want = (max(1, lo - depth), min(n - 1, hi + depth))
        got = 0
        for a, rows in pieces.items():
            u[a - base:a - base + rows.shape[0]] = rows
            got += rows.shape[0]
        if got != want[1] - want[0] or min(pieces, default=want[0]) != want[0]:
            raise RuntimeError(f"place {here().id}: redistribution gave {got} rows, "
                               f"expected rows [{want[0]}, {want[1]})")
    block.base, block.u, block.v = base, u, u.copy()


_warm = False


def _warm_kernel() -> None:
    """Load the kernel once per process (numba: import and cached code, ~0.1 to 1 s), so that
    this lands in the set-up or the order that installs a block, not in the first step."""
    global _warm
    if not _warm:
        g = initial_rows(3, 0, 3)
        sweep(g, g.copy(), 1, 2)
        _warm = True


def _own_rows(block: Block) -> tuple[int, np.ndarray]:
    return block.lo, block.rows(block.lo, block.hi)


def _clear(block: Block) -> None:
    block.__init__()  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------
# place 0: the gate between steps and orders, the solver, the handler


class Gate:
    """Lets steps and resize orders take turns at place 0: an order waits for the step under
    way to end, and no step starts while an order is pending or under way (orders first, so
    the iteration loop cannot starve them)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._wanted = 0
        self._busy = False

    @contextmanager
    def step(self) -> Iterator[None]:
        """Hold the gate for one step (waits while an order is pending or under way)."""
        with self._cond:
            self._cond.wait_for(lambda: self._wanted == 0)
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def hold(self) -> None:
        """For an order: wait until no step runs, and keep steps out until :meth:`release`."""
        with self._cond:
            self._wanted += 1
            self._cond.wait_for(lambda: not self._busy)

    def release(self) -> None:
        """End an order's hold."""
        with self._cond:
            self._wanted -= 1
            self._cond.notify_all()


class Solver:
    """The distributed Jacobi computation, driven from place 0.

    Args:
        n: grid size, ``n >= 3``; iterations: ``>= 0``; batch: the most iterations per step,
            ``>= 1``; pause_s: a sleep between steps at place 0 (seconds, for demonstrations
            and tests of resizing, so that orders land mid-run; 0: none); node_rate: the
            emulated speed of a node in grid points a second (``> 0``), or 0 for none: each
            place's step then lasts at least its rows' points x iterations / ``node_rate``
            seconds (docs/guides/jacobi.md, "Emulated nodes").

    Raises:
        ValueError: more places than interior rows (``n - 2``).
    """

    def __init__(self, n: int, iterations: int, batch: int, pause_s: float = 0.0,
                 node_rate: float = 0.0) -> None:
        count = len(places())
        if count > n - 2:
            raise ValueError(f"{count} places for a grid of {n}: at most {n - 2} places "
                             f"(one per interior row)")
        self.n, self.iterations, self.batch, self.pause_s = n, iterations, batch, pause_s
        self.node_rate = node_rate
        self.done = self.steps = 0
        self.gate = Gate()
        self.orders: list[dict[str, Any]] = []
        self._resumed: list[dict[str, Any]] = []  # orders waiting for the next step
        self.layout: list[tuple[int, int, int]] = []
        self.depth = batch
        self.block = Block.make(places(), Block)
        self.relayout([p.id for p in places()], fresh=True)

    @property
    def active(self) -> list[tuple[int, int, int]]:
        """The blocks with rows: ``(place id, lo, hi)``, top to bottom."""
        return [b for b in self.layout if b[2] > b[1]]

    def relayout(self, ids: list[int], fresh: bool = False) -> None:
        """Re-cut the rows over the places ``ids`` (in that order, top to bottom) and move them.

        The places that hold rows now push, for each new block, the rows of it and of its halo
        that they own (``_send_rows``); then every place of ``ids`` installs its new block.
        Places not in ``ids`` are cleared.  Runs between steps (no inbox is pending).
        """
        blocks = partition(self.n, len(ids))
        new = [(pid, lo, hi) for pid, (lo, hi) in zip(ids, blocks, strict=True)]
        active = [b for b in new if b[2] > b[1]]
        depth = self.batch if len(active) == 1 else min(self.batch,
                                                        min(hi - lo for _, lo, hi in active))
        if not fresh:
            moves: dict[int, list[tuple[int, int, int]]] = {}
            for q, lo, hi in active:
                need = (max(1, lo - depth), min(self.n - 1, hi + depth))
                for o, olo, ohi in self.active:
                    a, b = max(olo, need[0]), min(ohi, need[1])
                    if a < b:
                        moves.setdefault(o, []).append((q, a, b))
            with finish():
                for o, lst in moves.items():
                    async_at(o, _send_rows, self.block, lst)
        neighbours: dict[int, tuple[int | None, int | None]] = {}
        for i, (pid, _, _) in enumerate(active):
            neighbours[pid] = (active[i - 1][0] if i > 0 else None,
                               active[i + 1][0] if i + 1 < len(active) else None)
        gone = {pid for pid, _, _ in self.layout} - set(ids)
        with finish():
            for pid, lo, hi in new:
                up, down = neighbours.get(pid, (None, None))
                async_at(pid, _install, self.block, self.n, lo, hi, depth, up, down, fresh)
            for pid in gone:
                async_at(pid, _clear, self.block)
        self.layout, self.depth = new, depth

    def compute(self) -> None:
        """Run the remaining iterations, step by step, letting orders in between steps."""
        while True:
            with self.gate.step():
                if self.done >= self.iterations:
                    return
                for rec in self._resumed:
                    rec["resume_s"] = time.perf_counter() - rec["t0"]
                self._resumed = []
                k = min(self.depth, self.iterations - self.done)
                with finish():
                    for pid, _, _ in self.active:
                        async_at(pid, _step, self.block, self.steps, k, self.node_rate)
                self.done += k
                self.steps += 1
            if self.pause_s > 0:
                time.sleep(self.pause_s)

    def gather(self) -> np.ndarray:
        """The whole grid at place 0 (the owned rows of every block, plus the boundary)."""
        grid = initial_grid(self.n)
        for pid, _, _ in self.active:
            a, rows = at(pid, _own_rows, self.block)
            grid[a:a + rows.shape[0]] = rows
        return grid

    def begin_order(self, kind: str) -> dict[str, Any]:
        """Called by the handler's ``pre_*``: wait for the step under way, open a record."""
        t0 = time.perf_counter()
        self.gate.hold()
        rec = {"kind": kind, "at_iteration": self.done, "t0": t0,
               "wait_s": time.perf_counter() - t0}
        return rec

    def end_order(self, rec: dict[str, Any], places_moved: list[int]) -> None:
        """Called by the handler's ``post_*``: close the record and let the steps go on."""
        rec["places"] = places_moved
        rec["order_s"] = time.perf_counter() - rec["t0"]
        rec["places_after"] = len(self.active)
        self.orders.append(rec)
        if self.done < self.iterations:
            self._resumed.append(rec)
        self.gate.release()


class JacobiHandler(MalleableHandler):
    """Moves the rows when places leave or arrive; the iterations go on between steps.

    ``pre_shrink`` releases the newest places after moving their rows to the others;
    ``post_grow`` creates the block at the new places and spreads the rows over all places.
    The gate is held from ``pre_*`` to ``post_*``.
    """

    def __init__(self, solver: Solver) -> None:
        self.solver = solver
        self._rec: dict[str, Any] | None = None

    def pre_shrink(self, n: int) -> list[Any]:  # noqa: D102
        self._rec = self.solver.begin_order("shrink")
        try:
            leaving = places()[-n:]
            stay = [p.id for p in places() if p not in leaving]
            t = time.perf_counter()
            self.solver.relayout(stay)
            self._rec["redistribute_s"] = time.perf_counter() - t
        except BaseException:
            self._finish([])
            raise
        return leaving

    def post_shrink(self, n: int, removed: list[Any]) -> None:  # noqa: D102
        self._finish([p.id for p in removed])

    def pre_grow(self, n: int) -> None:  # noqa: D102
        self._rec = self.solver.begin_order("grow")

    def post_grow(self, n: int, continued: list[Any], added: list[Any]) -> None:  # noqa: D102
        try:
            if added and self._rec is not None:
                self._rec["spawn_s"] = time.perf_counter() - self._rec["t0"]
                t = time.perf_counter()
                self.solver.block.add_places(added, Block)
                self.solver.relayout([p.id for p in places()])
                self._rec["redistribute_s"] = time.perf_counter() - t
        finally:
            self._finish([p.id for p in added])

    def _finish(self, moved: list[int]) -> None:
        rec, self._rec = self._rec, None
        if rec is not None:
            self.solver.end_order(rec, moved)


# ---------------------------------------------------------------------------------------------
# the command line


def check_params(grid: int, iterations: int, batch: int, node_rate: float = 0.0) -> str | None:
    """An error text for bad parameters, or ``None``: ``grid >= 3``, ``iterations >= 0``,
    ``batch >= 1``, ``node_rate`` 0 (no emulation) or a finite number of points a second
    ``> 0``.  (More places than the ``grid - 2`` interior rows is checked at start; a grid
    whose rows do not divide by the places is fine: blocks differ by at most one row.)"""
    if grid < 3:
        return f"--grid {grid}: the grid needs at least 3 x 3 points (one interior point)"
    if iterations < 0:
        return f"--iterations {iterations}: must be 0 or more"
    if batch < 1:
        return f"--batch {batch}: must be 1 or more"
    if not (node_rate == 0 or (node_rate > 0 and math.isfinite(node_rate))):
        return (f"--node-rate {node_rate}: must be a finite number of grid points a second "
                f"> 0 (or 0: no emulated node speed)")
    return None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.jacobi",
        description="Jacobi 2D heat equation (5-point stencil), rows block-distributed over "
                    "the places; malleable")
    parser.add_argument("-n", "--grid", type=int, default=512,
                        help="grid size N: N x N points, boundary included (512)")
    parser.add_argument("-i", "--iterations", type=int, default=100,
                        help="Jacobi iterations (100)")
    parser.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                        help=f"most iterations between two halo exchanges ({DEFAULT_BATCH}; "
                             "capped by the smallest block)")
    parser.add_argument("--places", type=positive_int, default=None,
                        help="places to start without mpiexec (default APGAS_PLACES, else cores)")
    parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                        help="sleep between steps at place 0 (demonstrations and tests of "
                             "resizing; 0)")
    parser.add_argument("--node-rate", type=float, default=0.0, metavar="POINTS_PER_S",
                        help="emulated node speed: each place's step lasts at least its "
                             "rows' points x iterations / POINTS_PER_S seconds (it computes "
                             "for real, then waits out the rest); 0: none (0)")
    parser.add_argument("--verify", action="store_true",
                        help="also solve sequentially at place 0 and compare the checksums")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _job(params: dict[str, Any]) -> dict[str, Any]:
    n, iterations = params["grid"], params["iterations"]
    start = len(places())
    t0 = time.perf_counter()
    try:
        solver = Solver(n, iterations, params["batch"], params["pause"],
                        params.get("node_rate", 0.0))
    except ValueError as exc:
        return {"error": str(exc)}
    handler = JacobiHandler(solver)
    define_malleable_handler(handler)
    t1 = time.perf_counter()
    try:
        solver.compute()
    finally:
        disable_malleable_handler()  # an order under way finishes first; no more orders
    t2 = time.perf_counter()
    grid = solver.gather()
    digest = checksum(grid)
    t3 = time.perf_counter()
    expected = checksum(solve(n, iterations)) if params["verify"] else None
    reports = order_reports()
    orders = []
    for i, rec in enumerate(solver.orders):
        rec = {k: v for k, v in rec.items() if k != "t0"}
        if len(reports) == len(solver.orders):
            rec["runtime_total_s"] = reports[i].total_ns / 1e9
        orders.append(rec)
    seconds = t3 - t0
    updates = (n - 2) ** 2 * iterations
    return {
        "benchmark": "jacobi",
        "params": {k: params.get(k, 0.0) for k in ("grid", "iterations", "batch",
                                                     "node_rate")},
        "result": digest,
        "expected": expected,
        "correct": None if expected is None else digest == expected,
        "summary": f"{n} x {n} grid after {iterations} iterations, sha256 {digest[:16]}..., "
                   f"mean {float(grid.mean()):.9g}",
        "places": start,
        "places_at_end": len(places()),
        "seconds": seconds,
        "throughput": updates / seconds if seconds > 0 else None,
        "unit": "point updates/s",
        "depth": solver.depth,
        "kernels": kernel_backend(),
        "orders": orders,
        "phases": {"setup_s": t1 - t0, "compute_s": t2 - t1, "gather_s": t3 - t2},
    }


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run the solver, print, and return the exit status (1: ``--verify``
    found a different grid; 2: bad input)."""
    parser = _parser()
    args = parser.parse_args(argv)
    problem = check_params(args.grid, args.iterations, args.batch, args.node_rate)
    if problem is None and args.places is not None and args.places > args.grid - 2:
        problem = (f"--places {args.places} for a grid of {args.grid}: at most "
                   f"{args.grid - 2} places (one per interior row)")
    if problem is None and args.pause < 0:
        problem = f"--pause {args.pause}: must be 0 or more"
    if problem:
        parser.error(problem)
    params = {"grid": args.grid, "iterations": args.iterations, "batch": args.batch,
              "pause": args.pause, "verify": args.verify, "node_rate": args.node_rate}
    report = run(_job, params, places=args.places)
    if "error" in report:
        parser.error(report["error"])
    if args.json:
        print(json.dumps(report))
    else:
        p = report["params"]
        print(f"jacobi grid={p['grid']} iterations={p['iterations']} batch={p['batch']}")
        print(f"result: {report['summary']}")
        if report["correct"] is not None:
            print(f"check: {'correct' if report['correct'] else 'WRONG'} (sequential solve)")
        for o in report["orders"]:
            print(f"order: {o['kind']} {o['places']} at iteration {o['at_iteration']}, "
                  f"{o['order_s']:.3f} s")
        ended = "" if report["places"] == report["places_at_end"] else \
            f" (ended on {report['places_at_end']})"
        print(f"places: {report['places']}{ended}, time: {report['seconds']:.3f} s, "
              f"throughput: {report['throughput']:.4g} {report['unit']}")
    sys.stdout.flush()
    return 1 if report["correct"] is False else 0


if __name__ == "__main__":
    # run the importable module's main, so that the tasks pickle by reference to
    # benchmarks.jacobi rather than by value from __main__
    from benchmarks.jacobi import main as _main

    raise SystemExit(_main())
