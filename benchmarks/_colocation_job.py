"""One Jacobi job of the co-location study, started together with its co-located copies.

    python -m benchmarks._colocation_job --grid N --iterations K --batch B --places P
                                         [--pause S] [--checkpoint-every C --checkpoint-dir D]

The real distributed Jacobi solver of :mod:`benchmarks.jacobi` (its :class:`Solver`, the same
steps, halos and SHA-256), run by :mod:`benchmarks.colocation` with a start barrier and its
own CPU accounting::

    harness                          this job (place 0)              places 1 .. P-1
      │ start N copies ─────────────▶ start places, set up blocks
      │ ◀──────────────── "ready" ──  (stdout line)
      │ all N ready: "go" ──────────▶ (stdin line)
      │                               CPU seconds of every place ──▶ psutil, at each place
      │                               the K iterations, step by step: after every step
      │                               --pause S at place 0, and every C steps each place
      │                               writes its rows to D and fsyncs them
      │                               CPU seconds of every place ──▶ psutil, at each place
      │                               gather the grid, SHA-256
      │ ◀──────────── one JSON line ──

The barrier keeps start-up (interpreter, places, the kernel's loading: all CPU-bound) out of
the measured window, so that N copies compute over the same interval.  The report gives the
window in wall-clock seconds (``time.time()``, comparable across the copies of one machine),
each place's CPU seconds in the window (user + system of all its threads,
``psutil.Process().cpu_times()``) and the cores each place is pinned to
(``os.sched_getaffinity``, set by ``APGAS_CORES``: docs/guides/pinning.md).  The job's *duty
cycle* is its CPU seconds over (window × the cores its places are pinned to, counted once).

Where the job waits.  ``--pause S``: a sleep at place 0 after every step, an *emulated* I/O
phase (a remote file system, an instrument the job waits for), during which every place
idles.  ``--checkpoint-every C``: real I/O, a checkpoint every ``C`` steps; each place writes
its own rows (``(rows, N)`` float64, as they are in memory) to a file of its own in
``--checkpoint-dir`` and waits for ``os.fsync`` (the disk, shared by the copies, is real), and
the next step starts when every place is done; the files are removed at the end.  The steps
are :class:`Solver`'s (:meth:`Solver.compute` less its gate: no resize orders come here).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any

import psutil

from apgaspy import async_at, at, finish, here, places, run

from ._cli import positive_int
from .jacobi import Block, Solver, _step
from .kernels.jacobi import checksum

__all__ = ["main"]


def _place_facts() -> tuple[float, list[int]]:
    """At a place: its CPU seconds so far (user + system, every thread) and its cores."""
    cpu = psutil.Process().cpu_times()
    return cpu.user + cpu.system, sorted(os.sched_getaffinity(0))


def _checkpoint_path(directory: str) -> str:
    return os.path.join(directory, f"jacobi-{os.getpid()}-place{here().id}.bin")


def _checkpoint(block: Block, directory: str) -> None:
    """At a place: write its own rows to its file (replaced each time) and wait for fsync."""
    rows = block.u[block.lo - block.base:block.hi - block.base]
    with open(_checkpoint_path(directory), "wb") as fh:
        fh.write(rows.tobytes())
        fh.flush()
        os.fsync(fh.fileno())


def _remove_checkpoint(directory: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(_checkpoint_path(directory))


def _compute(solver: Solver, pause: float, every: int, directory: str | None) -> None:
    """Solver.compute's steps (without its gate), a checkpoint every ``every`` steps
    (0: none) and ``pause`` seconds of sleep at place 0 after every step."""
    while solver.done < solver.iterations:
        k = min(solver.depth, solver.iterations - solver.done)
        with finish():
            for pid, _, _ in solver.active:
                async_at(pid, _step, solver.block, solver.steps, k, 0.0)
        solver.done += k
        solver.steps += 1
        if every and directory and solver.steps % every == 0:
            with finish():
                for pid, _, _ in solver.active:
                    async_at(pid, _checkpoint, solver.block, directory)
        if pause > 0:
            time.sleep(pause)


def _job(p: dict[str, Any]) -> dict[str, Any]:
    solver = Solver(p["grid"], p["iterations"], p["batch"])
    ids = [pl.id for pl in places()]
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return {"error": "the harness did not say go"}
    t0 = time.time()
    before = [at(i, _place_facts) for i in ids]
    _compute(solver, p["pause"], p["checkpoint_every"], p["checkpoint_dir"])
    after = [at(i, _place_facts) for i in ids]
    t1 = time.time()
    if p["checkpoint_dir"]:
        with finish():
            for i in ids:
                async_at(i, _remove_checkpoint, p["checkpoint_dir"])
    digest = checksum(solver.gather())
    cpu = [b[0] - a[0] for a, b in zip(before, after, strict=True)]
    cores = sorted({c for _, cs in after for c in cs})
    wall = t1 - t0
    return {"result": digest, "start": t0, "end": t1, "wall_s": wall, "steps": solver.steps,
            "checkpoints": solver.steps // p["checkpoint_every"] if p["checkpoint_every"] else 0,
            "cpu_s": sum(cpu), "place_cpu_s": cpu, "place_cores": [cs for _, cs in after],
            "cores": cores,
            "duty": sum(cpu) / (wall * len(cores)) if wall > 0 else None}


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv``, run one job (barrier on stdin), print its JSON report; 2: bad input."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks._colocation_job",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=positive_int, required=True)
    parser.add_argument("--iterations", type=positive_int, required=True)
    parser.add_argument("--batch", type=positive_int, required=True)
    parser.add_argument("--pause", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--places", type=positive_int, required=True)
    parser.add_argument("--checkpoint-every", type=int, default=0, metavar="STEPS")
    parser.add_argument("--checkpoint-dir", default=None, metavar="DIR")
    args = parser.parse_args(argv)
    if args.pause < 0 or args.grid < args.places + 2 or args.checkpoint_every < 0:
        parser.error("--pause and --checkpoint-every must be >= 0 and --grid at least "
                     "--places + 2")
    if args.checkpoint_every and not args.checkpoint_dir:
        parser.error("--checkpoint-every needs --checkpoint-dir")
    report = run(_job, vars(args), places=args.places)
    print(json.dumps(report), flush=True)
    return 1 if "error" in report else 0


if __name__ == "__main__":
    from benchmarks._colocation_job import main as _main

    raise SystemExit(_main())
