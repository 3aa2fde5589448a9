"""Co-location measured: N Jacobi jobs pinned to the same cores, their throughput, and beta.

    python -m benchmarks.colocation [--quick] [--counts 1,2,3,5] [--duties 1,0.5,0.2]
                                    [--checkpoint-every 1] [--checkpoint-dir DIR]
                                    [--grid 1024] [--batch 64] [--compute 1.5] [--places 2]
                                    [--table]

The reference is Xie (2026), "sparse-domain multiplexing of MPI-CFD on Kubernetes": ranks
that spend most of their time waiting (duty cycles of 5 % and 19 %) leave their cores idle,
so N simulations can share the cores one would hold.  Its throughput against one simulation
alone on the same cores: 1.77x at N = 2, 2.59x at N = 3, 3.74x at N = 5.  Its model::

    T_N = T_1 (1 + beta (rho_N - rho_1)),    rho_N = N R / (M C)

``T_N``: a job's time with N jobs on the cores; ``rho``: the load, ``R`` one job's CPU demand
(its cores x its duty cycle), ``M`` nodes of ``C`` cores.  Xie fits beta = 0.773 from N = 2
alone, 0.524 +- 0.021 from all points, and predicts within +-4 %.

What runs (one machine, ``M = 1``, ``C`` = the cores named below)::

    calibration      one job alone, unpaced: its step's CPU and wall time, the kernel's rate
      │              → K iterations (about --compute seconds of computing alone)
    known answer     the grid after K iterations solved sequentially here, its SHA-256
      │
    for each kind of job: the control (duty 1 of --duties: no waiting), a pause for each
      │  other duty d (after every step, step CPU x (1/d - 1); the step's own idle time,
      │  its finish and halos, comes on top: the duty measured is lower), a checkpoint
      │  every --checkpoint-every steps (real writes and fsync)
      └─ for each N (--counts): N copies of benchmarks._colocation_job started together,
             every copy's places pinned (APGAS_CORES) to the SAME cores, a start barrier,
             then K iterations each; every copy's SHA-256 checked against the known one
    fit              beta by least squares over the points of the kinds that wait (N > 1),
                     from their N = 2 points, and per kind

Every copy has ``--places`` places (2: one per core of this 2-core machine); all copies get
``APGAS_CORES=<host>=<all this process's cores>``, so copy i's place p runs on the same core
as every other copy's place p.  Where the jobs wait, the stand-in for Xie's sparse ranks
idling at barriers (said in the results, ``waiting``): ``pause``, a sleep at place 0 after
every step, an *emulated* I/O phase (a remote file system, an instrument's next frame) during
which every place of the job idles; ``checkpoint``, real I/O: after every
``--checkpoint-every`` steps each place writes its rows to a file of its own (in a temporary
directory under ``--checkpoint-dir``; its file system is recorded, as on ``tmpfs`` an fsync
waits for nothing) and waits for ``os.fsync``, the next step waiting for every place.  The
copies share the disk as they share the cores.  The control (no waiting) must show no gain.

Not measured: the evotree benchmark (:mod:`benchmarks.evotree`).  Its tasks burn *wall-clock*
time in a busy loop (:mod:`benchmarks.kernels.synthetic`, so that its phases keep their
lengths on a loaded machine): a copy sharing its cores with four others would take the same
wall time as alone, and co-location would show a gain of N whatever the duty cycle.  Its
branch phase is real waiting, but its work is not CPU work, so it cannot measure this.

On a machine other jobs share, co-located copies take a larger share of the cores from those
jobs (the kernel shares a core between runnable threads), which shows as a gain even in the
control: the figures mean something only on an otherwise quiet machine.

Measured per group: the window from the first copy's start (after the barrier) to the last
copy's end; throughput ``N x K x (grid-2)^2 / window`` (point updates a second) and the gain
``throughput / throughput(N = 1)``, i.e. ``N T_1 / T_N``.  Per copy: its duty cycle, CPU
seconds of all its places in its window (psutil, at each place) / (window x cores its places
are pinned to).  The model's load uses the duty measured alone (``N = 1``), what a scheduler
knows before it co-locates: ``rho_N = N x cores x duty_1 / C``.

Results: ``benchmarks/results/colocation.json`` (``beta``, ``beta_n2``, ``beta_stderr``,
``beta_source``, ``beta_by_kind``, ``points`` with each point's prediction and error,
``levels`` with every group and every copy's report, ``machine``, the load averages before
and after, and ``quiet``: whether the control gained at most 1.25x, the sign of a machine
nobody else was using) and ``colocation.png``.  See docs/benchmarks.md, "Co-location".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._cli import positive_int
from ._results import RESULTS_DIR, write_result
from .references import REFERENCES, pick

ROOT = Path(__file__).resolve().parent.parent

XIE = REFERENCES["xie_colocation"]
"""Xie (2026)'s co-location figures: gains against one simulation alone, its fitted betas."""


# ---------------------------------------------------------------------------------------------
# the model and its fit (pure)


def load(n: int, cores: float, duty: float, nodes: int, cores_per_node: int) -> float:
    """Xie's load ``rho = N R / (M C)`` with ``R = cores x duty``.

    Args:
        n: jobs sharing the nodes (>= 1); cores: cores one job's places are pinned to;
        duty: one job's duty cycle, CPU seconds / (wall seconds x cores), in [0, 1];
        nodes, cores_per_node: ``M`` and ``C`` (>= 1).

    Raises:
        ValueError: ``nodes`` or ``cores_per_node`` < 1.
    """
    if nodes < 1 or cores_per_node < 1:
        raise ValueError(f"{nodes} nodes of {cores_per_node} cores: both must be >= 1")
    return n * cores * duty / (nodes * cores_per_node)


def predicted_gain(n: int, beta: float, rho_n: float, rho_1: float) -> float:
    """The model's throughput of ``n`` co-located jobs against one alone, ``N T_1 / T_N`` with
    ``T_N = T_1 (1 + beta (rho_N - rho_1))`` (Xie 2026)."""
    return n / (1.0 + beta * (rho_n - rho_1))


def fit_beta(rise: Sequence[float], slowdown: Sequence[float]) -> tuple[float, float | None]:
    """Least-squares beta of ``T_N / T_1 - 1 = beta (rho_N - rho_1)`` (a line through the
    origin, as Xie's model has no intercept), and its standard error.

    Args:
        rise: each point's ``rho_N - rho_1``; slowdown: each point's ``T_N / T_1 - 1``
            (same length).

    Returns:
        ``(beta, stderr)``: ``beta = sum(x y) / sum(x^2)``; ``stderr = sqrt(s^2 / sum(x^2))``
        with ``s^2 = sum((y - beta x)^2) / (n - 1)``, the residual variance of a one-parameter
        fit; ``None`` for one point (no degree of freedom left).

    Raises:
        ValueError: no points, lengths that differ, or every ``rise`` zero.
    """
    if len(rise) != len(slowdown):
        raise ValueError(f"{len(rise)} rises but {len(slowdown)} slowdowns")
    if not rise:
        raise ValueError("no points to fit beta to")
    sxx = sum(x * x for x in rise)
    if sxx == 0:
        raise ValueError("every point has rho_N = rho_1: beta is not determined")
    beta = sum(x * y for x, y in zip(rise, slowdown, strict=True)) / sxx
    if len(rise) < 2:
        return beta, None
    s2 = sum((y - beta * x) ** 2 for x, y in zip(rise, slowdown, strict=True)) / (len(rise) - 1)
    return beta, math.sqrt(s2 / sxx)


# ---------------------------------------------------------------------------------------------
# running co-located copies


def _start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], Any]:
    err = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks._colocation_job", *args],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=err, text=True, start_new_session=True)
    return proc, err


def _end(procs: Sequence[subprocess.Popen[str]]) -> None:
    """End the process groups of copies still running (each copy's own session)."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def group(n: int, job: list[str], env: dict[str, str], timeout: float = 300) -> dict[str, Any]:
    """Start ``n`` copies of the job, wait until every one says ``ready``, say ``go`` to all,
    collect their reports.

    Args:
        n: copies; job: the arguments of ``benchmarks._colocation_job``; env: their
            environment (``APGAS_CORES`` pins them); timeout: seconds for the whole group.

    Returns:
        ``{"copies": [each copy's report], "window_s": last end - first start,
        "process_wall_s": from the first start to the last exit, start-up included}``.

    Raises:
        RuntimeError: a copy failed or the group ran past ``timeout`` (the copies still
            running are ended first).
    """
    t0 = time.perf_counter()
    started = [_start(job, env) for _ in range(n)]
    procs = [p for p, _ in started]
    watchdog = threading.Timer(timeout, _end, [procs])  # a copy that hangs before "ready"
    watchdog.start()
    try:
        for p, err in started:
            while True:
                line = p.stdout.readline() if p.stdout else ""
                if line.strip() == "ready":
                    break
                if not line:
                    err.seek(0)
                    raise RuntimeError(f"a copy ended before it was ready: {err.read()[-2000:]}")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        copies = []
        for p, err in started:
            out, _ = p.communicate(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
            if p.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"a copy failed ({p.returncode}): {err.read()[-2000:]}")
            copies.append(json.loads(out.strip().splitlines()[-1]))
    except BaseException as exc:  # Ctrl-C too: the copies run in sessions of their own
        _end(procs)
        if isinstance(exc, (subprocess.TimeoutExpired, RuntimeError, ValueError)):
            raise RuntimeError(f"a group of {n} copies failed: {exc}") from exc
        raise
    finally:
        watchdog.cancel()
        for _, err in started:
            err.close()
    return {"copies": copies,
            "window_s": max(c["end"] for c in copies) - min(c["start"] for c in copies),
            "process_wall_s": time.perf_counter() - t0}


def _job_args(grid: int, iterations: int, batch: int, places: int, pause: float = 0.0,
              every: int = 0, directory: str | None = None) -> list[str]:
    extra = ["--checkpoint-every", str(every), "--checkpoint-dir", directory] if every and \
        directory else []
    return ["--grid", str(grid), "--iterations", str(iterations), "--batch", str(batch),
            "--pause", f"{pause:.6f}", "--places", str(places), *extra]


def filesystem(path: str) -> str | None:
    """The type of the file system ``path`` is on (``ext4``, ``tmpfs`` ...: on ``tmpfs``
    an fsync waits for nothing), from the mount with the longest matching mount point."""
    import psutil

    path = os.path.realpath(path)
    best: tuple[int, str | None] = (-1, None)
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint.rstrip("/") + "/"
        if (path + "/").startswith(mp) and len(mp) > best[0]:
            best = (len(mp), part.fstype)
    return best[1]


# ---------------------------------------------------------------------------------------------
# the study


def levels_for(duties: Sequence[float], checkpoint_every: int) -> list[dict[str, Any]]:
    """The kinds of job measured: per duty aimed at, ``control`` (1: no waiting) or
    ``pause`` (an emulated I/O pause after every step); then, with ``checkpoint_every`` > 0,
    ``checkpoint`` (real writes and fsync every that many steps).  Each is ``{"label",
    "kind", "target_duty" (None for checkpoint), "checkpoint_every"}``."""
    out = [{"label": "control" if d >= 1 else f"pause {d:.0%}",
            "kind": "control" if d >= 1 else "pause", "target_duty": d, "checkpoint_every": 0}
           for d in duties]
    if checkpoint_every > 0:
        every = "step" if checkpoint_every == 1 else f"{checkpoint_every} steps"
        out.append({"label": f"checkpoint every {every}", "kind": "checkpoint",
                    "target_duty": None, "checkpoint_every": checkpoint_every})
    return out


def measure(grid: int, batch: int, places: int, compute_s: float,
            levels: Sequence[dict[str, Any]], counts: Sequence[int], cores: Sequence[int],
            directory: str) -> dict[str, Any]:
    """Calibrate, solve the known answer, run every level (:func:`levels_for`) at every count.

    Args:
        directory: where checkpoints are written (a fresh directory; emptied by the copies).

    Returns:
        ``{"calibration", "iterations", "expected", "levels": [each level plus "pause_s",
        "groups": [{"n", "window_s", "process_wall_s", "gain", "throughput", "duty",
        "correct", "copies"}]]}`` (seconds; throughput in point updates a second).

    Raises:
        RuntimeError: a copy failed (:func:`group`).
    """
    from .kernels.jacobi import checksum, solve

    env = dict(os.environ, APGAS_CORES=f"{socket.gethostname()}={','.join(map(str, cores))}")
    for key in ("APGAS_CORES_FILE", "APGAS_PLACES", "APGAS_PLACES_PER_HOST"):
        env.pop(key, None)
    k_cal = batch * 16
    cal = group(1, _job_args(grid, k_cal, batch, places), env)["copies"][0]
    step_wall = cal["wall_s"] / cal["steps"]
    step_cpu = cal["cpu_s"] / (places * cal["steps"])
    steps = max(4, round(compute_s / step_wall))
    iterations = steps * batch
    t = time.perf_counter()
    expected = checksum(solve(grid, iterations))
    solve_s = time.perf_counter() - t
    print(f"calibration: step {step_wall * 1e3:.1f} ms wall, {step_cpu * 1e3:.1f} ms CPU a "
          f"place; {iterations} iterations; known answer {expected[:16]}... ({solve_s:.1f} s)",
          flush=True)
    updates = iterations * (grid - 2) ** 2
    done = []
    for spec in levels:
        d = spec["target_duty"]
        pause = step_cpu * (1 / d - 1) if spec["kind"] == "pause" else 0.0
        job = _job_args(grid, iterations, batch, places, pause, spec["checkpoint_every"],
                        directory)
        groups: list[dict[str, Any]] = []
        for n in counts:
            g = group(n, job, env)
            g["n"] = n
            g["throughput"] = n * updates / g["window_s"]
            g["duty"] = sum(c["duty"] for c in g["copies"]) / n
            g["correct"] = all(c["result"] == expected for c in g["copies"])
            base = next((x for x in groups if x["n"] == 1), g if n == 1 else None)
            g["gain"] = g["throughput"] / base["throughput"] if base else None
            groups.append(g)
            print(f"{spec['label']} (pause {pause * 1e3:.0f} ms): N={n} window "
                  f"{g['window_s']:.2f} s, gain {g['gain'] or float('nan'):.2f}x, duty "
                  f"{g['duty']:.2f}, {'correct' if g['correct'] else 'WRONG'}", flush=True)
        done.append({**spec, "pause_s": pause, "groups": groups})
    return {"calibration": {"iterations": k_cal, "step_wall_s": step_wall,
                            "step_cpu_s": step_cpu, "report": cal},
            "iterations": iterations, "updates_per_job": updates, "expected": expected,
            "solve_s": solve_s, "levels": done}


def points(levels: Sequence[dict[str, Any]], cores_per_job: int,
           cores: int) -> list[dict[str, Any]]:
    """One model point per group with ``N > 1`` (and a ``N = 1`` baseline in its level):
    its level's ``label`` and ``kind``, ``waits`` (any kind but the control), ``rho_1``,
    ``rho_n`` (from the duty measured alone), ``slowdown = T_N / T_1 - 1`` with ``T`` the
    group's window, and the measured ``gain``.

    Args:
        levels: :func:`measure`'s ``levels`` (``label``, ``kind``; each group needs ``n``,
            ``window_s``, ``duty``, ``gain``, ``correct``); cores_per_job: the cores one
            job's places are pinned to; cores: ``C``, the cores of the machine the copies
            share (``M = 1``).
    """
    out = []
    for lv in levels:
        base = next((g for g in lv["groups"] if g["n"] == 1), None)
        if base is None:
            continue
        duty_1 = base["duty"]
        for g in lv["groups"]:
            if g["n"] == 1:
                continue
            out.append({"label": lv["label"], "kind": lv["kind"],
                        "waits": lv["kind"] != "control", "n": g["n"], "duty_1": duty_1,
                        "duty_n": g["duty"],
                        "rho_1": load(1, cores_per_job, duty_1, 1, cores),
                        "rho_n": load(g["n"], cores_per_job, duty_1, 1, cores),
                        "slowdown": g["window_s"] / base["window_s"] - 1,
                        "gain": g["gain"], "correct": g["correct"] and base["correct"]})
    return out


def _beta(pts: Sequence[dict[str, Any]]) -> tuple[float, float | None]:
    return fit_beta([p["rho_n"] - p["rho_1"] for p in pts], [p["slowdown"] for p in pts])


def fit(pts: list[dict[str, Any]]) -> dict[str, Any]:
    """beta over the points of the jobs that wait (every kind but the control), from their
    N = 2 points alone, and per kind; each point's predicted gain and its error in %
    (``(predicted - measured) / measured``) with the all-points beta (the control too,
    outside the fit), and the gain Xie's beta 0.524 predicts.

    Args:
        pts: :func:`points`' list, completed in place.

    Returns:
        ``{"beta", "beta_stderr", "beta_n2", "beta_by_kind": {kind: [beta, stderr]},
        "within_10pct", "max_abs_error_pct"}`` (``None`` without a point that waits;
        a ``stderr`` is ``None`` from one point).
    """
    waits = [p for p in pts if p["waits"]]
    if not waits:
        return {"beta": None, "beta_stderr": None, "beta_n2": None, "beta_by_kind": {},
                "within_10pct": None, "max_abs_error_pct": None}
    beta, se = _beta(waits)
    two = [p for p in waits if p["n"] == 2]
    by_kind = {k: list(_beta([p for p in waits if p["kind"] == k]))
               for k in dict.fromkeys(p["kind"] for p in waits)}
    for p in pts:
        p["predicted_gain"] = predicted_gain(p["n"], beta, p["rho_n"], p["rho_1"])
        p["error_pct"] = 100 * (p["predicted_gain"] - p["gain"]) / p["gain"]
        p["xie_predicted_gain"] = predicted_gain(p["n"], XIE["beta"], p["rho_n"], p["rho_1"])
    return {"beta": beta, "beta_stderr": se, "beta_n2": _beta(two)[0] if two else None,
            "beta_by_kind": by_kind,
            "within_10pct": all(abs(p["error_pct"]) <= 10 for p in waits),
            "max_abs_error_pct": max(abs(p["error_pct"]) for p in waits)}


def plot(levels: Sequence[dict[str, Any]], pts: Sequence[dict[str, Any]],
         beta: float | None, path: Path) -> None:
    """Gain against N per level (measured: points; the model with the fitted beta: dashed),
    Xie's three gains, the ideal ``N``; written as a PNG to ``path`` (needs matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top = max(g["n"] for lv in levels for g in lv["groups"])
    ax.plot([1, top], [1, top], color="0.8", lw=1, label="ideal (N)")
    for lv in levels:
        gs = [g for g in lv["groups"] if g["gain"] is not None]
        d1 = next((g["duty"] for g in gs if g["n"] == 1), None)
        name = f"Jacobi, {lv['label']}" + (f", duty {d1:.0%}" if d1 is not None else "")
        line = ax.plot([g["n"] for g in gs], [g["gain"] for g in gs], "o-", label=name)
        mine = [p for p in pts if p["label"] == lv["label"] and "predicted_gain" in p]
        if beta is not None and mine and lv["kind"] != "control":
            ax.plot([1] + [p["n"] for p in mine], [1] + [p["predicted_gain"] for p in mine],
                    "--", color=line[0].get_color(), lw=1)
    ax.plot([1, *XIE["counts"]], [1, *XIE["gain"]], "k^:", label="Xie 2026 (duty 5-19 %)")
    ax.set_xlabel("jobs on the same cores (N)")
    ax.set_ylabel("throughput / one job alone")
    ax.set_title("Co-location" + (f": beta = {beta:.3f} (dashed: model)" if beta else ""))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def table(data: dict[str, Any]) -> str:
    """The Markdown table of docs/benchmarks.md ("Co-location") from a results file's
    content: per N, Xie's gain and each level's measured gain with the model's."""
    ref = data["reference"]
    xie = dict(zip(ref["counts"], ref["gain"], strict=True))
    levels = data["levels"]
    head = "| N | Xie 2026 (duty 5-19 %) |"
    for lv in levels:
        alone = next(g for g in lv["groups"] if g["n"] == 1)
        head += f" Jacobi, {lv['label']}: duty {alone['duty']:.0%} alone |"
    rows = [head, "|---" * (2 + len(levels)) + "|"]
    for n in sorted({g["n"] for lv in levels for g in lv["groups"]}):
        row = f"| {n} | {f'{xie[n]:.2f}x' if n in xie else ('1' if n == 1 else '')} |"
        for lv in levels:
            g = next((g for g in lv["groups"] if g["n"] == n), None)
            p = next((p for p in data["points"]
                      if p["n"] == n and p["label"] == lv["label"]), None)
            if g is None:
                row += " |"
            elif n == 1:
                row += f" 1 ({g['window_s']:.2f} s) |"
            else:
                model = (f" (model {p['predicted_gain']:.2f}x, {p['error_pct']:+.0f} %)"
                         if p is not None and "predicted_gain" in p else "")
                row += f" {g['gain']:.2f}x{model} |"
        rows.append(row)
    return "\n".join(rows)


def _summary(data: dict[str, Any], f: dict[str, Any]) -> None:
    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    for p in data["points"]:
        print(f"{p['label']}, duty {p['duty_1']:.2f} alone, N={p['n']}: gain {p['gain']:.2f}x"
              f", model {p.get('predicted_gain', float('nan')):.2f}x "
              f"({p.get('error_pct', 0):+.1f} %)")
    print(f"beta {num(f['beta'])} +- {num(f['beta_stderr'])}, from N = 2: "
          f"{num(f['beta_n2'])}; by kind: " + ", ".join(
              f"{k} {num(b)} +- {num(e)}" for k, (b, e) in f["beta_by_kind"].items()))
    control = data["goals"]["control_gains"]
    if control and max(control) > 1.25:
        print(f"the control gained {max(control):.2f}x: other jobs share these cores (load "
              f"average {data['loadavg_before'][0]:.1f} before, "
              f"{data['loadavg_after'][0]:.1f} after), and the copies took CPU from them; "
              f"rerun on a quiet machine", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Measure, fit, write ``colocation.json`` and ``colocation.png``, print a summary;
    1 when a copy's grid was wrong, 2 on bad options."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.colocation",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 0.3 s of computing a job alone (about 2 minutes "
                             "on 2 cores)")
    parser.add_argument("--counts", default="1,2,3,5", help="copies at once (1,2,3,5)")
    parser.add_argument("--duties", default="1,0.5,0.2",
                        help="duty cycles aimed at by a pause; 1: no waiting, the control "
                             "(1,0.5,0.2)")
    parser.add_argument("--checkpoint-every", type=int, default=1, metavar="STEPS",
                        help="one kind more: a checkpoint (each place writes its rows and "
                             "fsyncs) every STEPS steps; 0: none (1)")
    parser.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                        help="where the checkpoints' temporary directory is made (the system's "
                             "temporary directory; on tmpfs an fsync waits for nothing)")
    parser.add_argument("--grid", type=positive_int, default=1024, help="grid size (1024)")
    parser.add_argument("--batch", type=positive_int, default=64,
                        help="iterations a step (64)")
    parser.add_argument("--places", type=positive_int, default=2,
                        help="places a copy (2: one per core here)")
    parser.add_argument("--compute", type=float, default=1.5, metavar="SECONDS",
                        help="computing of one job alone, unpaced (1.5)")
    parser.add_argument("--no-plot", action="store_true", help="no PNG")
    parser.add_argument("--table", action="store_true",
                        help="print the docs' table from colocation.json, measure nothing")
    args = parser.parse_args(argv)
    if args.table:
        print(table(json.loads((RESULTS_DIR / "colocation.json").read_text(encoding="utf-8"))))
        return 0
    try:
        counts = sorted({int(x) for x in args.counts.split(",")})
        duties = [float(x) for x in args.duties.split(",")]
    except ValueError:
        parser.error(f"--counts takes integers and --duties numbers, got {args.counts!r} "
                     f"and {args.duties!r}")
    if counts[0] != 1:
        parser.error(f"--counts {args.counts}: must include 1 (the job alone), and no less")
    if not all(0 < d <= 1 for d in duties) or args.checkpoint_every < 0:
        parser.error(f"--duties {args.duties}: each in (0, 1]; --checkpoint-every >= 0")
    compute = 0.3 if args.quick else args.compute
    cores = sorted(os.sched_getaffinity(0))
    if args.places > len(cores) or args.grid < args.places + 2:
        parser.error(f"--places {args.places}: at most {len(cores)} (the cores here) and "
                     f"--grid at least places + 2")
    levels = levels_for(duties, args.checkpoint_every)
    load_before, began = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="apgaspy-colocation-",
                                     dir=args.checkpoint_dir) as directory:
        fs = filesystem(directory)
        m = measure(args.grid, args.batch, args.places, compute, levels, counts, cores,
                    directory)
    load_after = os.getloadavg()
    pts = points(m["levels"], len(m["calibration"]["report"]["cores"]), len(cores))
    f = fit(pts)
    lowest = min((p for p in pts if p["waits"] and p["n"] == 3), key=lambda p: p["duty_1"],
                 default=None)
    control = [p["gain"] for p in pts if not p["waits"]]
    kinds = ", ".join(lv["label"] for lv in levels if lv["kind"] != "control")
    source = (f"benchmarks/colocation.py: Jacobi {args.grid}x{args.grid}, {args.places} places "
              f"a copy, N = {','.join(map(str, counts))} copies pinned to the same cores "
              f"{','.join(map(str, cores))} of one {len(cores)}-core machine; least squares "
              f"over the jobs that wait ({kinds}); the control (no waiting) left out")
    data = {
        "quick": args.quick, "elapsed_s": time.perf_counter() - began,
        "loadavg_before": load_before, "loadavg_after": load_after,
        "quiet": (max(control) <= 1.25) if control else None,
        "cores": cores, "nodes": 1, "cores_per_node": len(cores),
        "places_per_copy": args.places, "grid": args.grid, "batch": args.batch,
        "waiting": {"pause": "a sleep at place 0 after every step: an emulated I/O phase "
                             "during which every place of the job idles",
                    "checkpoint": "real I/O: each place writes its rows to a file and waits "
                                  "for fsync, every checkpoint_every steps",
                    "checkpoint_fs": fs},
        "model": "T_N = T_1 (1 + beta (rho_N - rho_1)), rho_N = N x cores x duty_1 / "
                 "(M x C) (Xie 2026); gain = N T_1 / T_N",
        "beta": f["beta"], "beta_n2": f["beta_n2"], "beta_stderr": f["beta_stderr"],
        "beta_by_kind": f["beta_by_kind"], "beta_source": source,
        "goals": {"gain_n3_low_duty": lowest["gain"] if lowest else None,
                  "gain_n3_low_duty_level": lowest["label"] if lowest else None,
                  "gain_n3_at_least_2x": (lowest["gain"] >= 2) if lowest else None,
                  "model_within_10pct": f["within_10pct"],
                  "max_abs_error_pct": f["max_abs_error_pct"],
                  "control_gains": control},
        # "reference", not "references": this figure has no row in the results table that
        # benchmarks.report writes; the Co-location section of docs/benchmarks.md shows it
        "reference": dict(XIE),
        "goal_targets": pick("colocation_gain_n3", "colocation_model_error_pct")["targets"],
        "points": pts, **m,
    }
    path = write_result("colocation", data)
    print(path)
    if not args.no_plot:
        png = RESULTS_DIR / "colocation.png"
        plot(m["levels"], pts, f["beta"], png)
        print(png)
    _summary(data, f)
    return 0 if all(p["correct"] for p in pts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
