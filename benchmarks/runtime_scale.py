"""How the runtime's cost grows with the number of places (docs/design/scale.md).

    python -m benchmarks.runtime_scale [--places 64,128,256,512] [--repeats 1] [--plot]
                                       [--no-write] [--timeout 180] [--replot]
                                       [--per-host 16]

For each place count P this script starts ``benchmarks/_scale_job.py`` with
``APGAS_PLACES=P`` in the embedded default (place 0 spawns the others with
``MPI_Comm_spawn``) and ``APGAS_PLACES_PER_HOST=--per-host`` (the places of one machine in
host slots of that many, as on a cluster of hosts with that many cores: a finish's updates
are aggregated per host slot) and records:

* ``ready_s``: from just before ``subprocess.Popen`` until ``run()`` is inside main, every
  place started, connected and ready (CLOCK_MONOTONIC on both sides, one machine);
* ``finish_s``: one ``finish`` over an empty ``async_at`` to every place, right after (each
  place's first task); ``finish_warm_s``: the median of the same finish three times more;
* start-up traffic: ``startup_bytes_per_place`` (what place 0 sent and received over ZeroMQ
  until main ran, plus what it sent its launchers over MPI, divided by P), ``launches``, and
  ``finish_home_messages``/``finish_home_frames``: what reached place 0, the finish's home,
  during the first finish, and ``finish_warm_home_messages`` (the median of the three more);
* ``cpu_per_place_s``: user + system CPU seconds of every process of the job (place 0 and all
  its descendants, ``/proc/<pid>/stat`` fields 14-17, reaped children included), read just
  before main returns, divided by P, and split by role (place 0, Hydra's ``mpiexec`` and
  proxies, MPI anchors, spawned places);
* memory: RSS (``VmRSS``) of all the job's processes divided by P, the RSS per *spawned*
  place all in ((all − place 0) / (P − 1): place, anchor, Hydra proxy and a share of Hydra's
  ``mpiexec``), the RSS of one place process, one anchor, one proxy (medians over the job),
  and PSS (``smaps_rollup``), which counts pages shared between processes once;
* file descriptors held by place 0 and by place 1, by kind (TCP, unix socket, pipe, eventfd,
  ...), and each place's threads;
* ``messages_at_startup``: ZeroMQ messages place 0 received and sent until main ran.

After each run it checks ``/proc`` that no process of the job is left (the job's processes,
by pid and start time, and, as a child subreaper, any orphan below this process), ends any
that is (by pid) and reports it.  Runs of all P are interleaved when ``--repeats`` > 1;
figures are medians.  ``APGAS_START_TIMEOUT`` is raised to ``--timeout`` − 10 s for the job
(512 places took about 28 s to be ready on the loaded 2-core development machine).

Results: ``benchmarks/results/runtime_scale.json`` with the project's goals (met or not), and
with ``--plot`` ``benchmarks/results/runtime_scale.png`` (needs matplotlib).  On a 2-core
machine 64 places are heavily oversubscribed: what counts is the growth, not the level.
``--replot`` redraws the PNG from the JSON without measuring.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._cli import place_counts, positive_int
from ._procfs import descendants, ppid_map, read_cmdline
from ._results import RESULTS_DIR, write_result

ROOT = Path(__file__).resolve().parent.parent
MB = 1e6  # memory is reported in MB of 10^6 bytes
ROLES = ("place0", "process_manager", "proxy", "anchor", "place", "other")

#: The project's goals for the runtime's scale, with the tolerance this script applies.
GOALS: dict[str, dict[str, Any]] = {
    "cpu_per_place_constant": {
        "text": "CPU per place constant from 8 to 64 places",
        "cite": "apgaspy's goal",
        "max_ratio_64_to_8": 1.2,
        "tolerance": "within 20 % (this script's allowance for a shared, noisy machine)",
    },
    "memory_per_spawned_place": {
        "text": "≤ 35 MB RSS per spawned place, all in",
        "cite": "apgaspy's goal",
        "max_mb": 35.0,
    },
    "connections_on_demand": {
        "text": "connections opened when first needed, not all to all at start",
        "cite": "apgaspy's goal",
        "measure": "TCP sockets held by place 1 (which talks only to place 0 in the job) "
                   "must not grow with the number of places",
    },
    "ready_time_linear": {
        "text": "64 places ready within 2× of 64 × the 8-place time per place",
        "cite": "apgaspy's goal",
        "factor": 2.0,
    },
    "ready_per_place_flat": {
        "text": "ready time per place at 512 places within 1.5× of that at 64",
        "cite": "apgaspy's goal",
        "max_ratio": 1.5,
    },
    "startup_bytes_per_place_flat": {
        "text": "bytes place 0 sends and receives at start-up, per place, flat from 64 to 512",
        "cite": "apgaspy's goal",
        "max_ratio": 1.2,
        "tolerance": "within 20 %",
    },
    "empty_finish_linear": {
        "text": "an empty finish over all places at 512 within 8× of that at 64",
        "cite": "apgaspy's goal",
        "max_ratio": 8.0,
    },
    "finish_home_messages_per_host": {
        "text": "the messages reaching an empty finish's home grow with the hosts, not the "
                "places",
        "cite": "apgaspy's goal",
        "measure": "messages received by place 0 during the finish, at most hosts + 1",
    },
    "pss_per_place": {
        "text": "PSS per place flat from 64 to 512 places, at most 15 MB per place",
        "cite": "apgaspy's goal",
        "max_mb": 15.0,
        "max_ratio": 1.2,
    },
}

#: The figures measured before the runtime's scale work (same 2-core machine, an earlier
#: session): the reference.  Kept under the JSON key ``issue_figures``, which the report reads.
ISSUE_FIGURES: dict[str, Any] = {
    "cite": "measured on this project's machine in an earlier session",
    "finish_done_s": {"2": 0.31, "16": 2.5, "32": 9.4, "64": 31.0},
    "cpu_per_place_s": {"8": 0.21, "64": 0.77},
    "rss_per_spawned_place_mb": 65.0,
    "anchor_rss_mb": 40.0,
    "fds_place0": {"64": 344},
    "note": "finish_done_s: from the program's start until a finish over all places "
            "completes (our ready_s + finish_s)",
    "before_launchers": {
        "cite": "measured on this project's machine on 2026-11-26, one MPI_Comm_spawn per "
                "place",
        "ready_s": {"32": 13.4, "64": 27.0},
        "128": "did not start in two tries (65, then 126 places did not start)",
    },
}


# ---------------------------------------------------------------------- processes
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    """Make this process the child subreaper of its descendants (prctl(2)), so that processes
    a job leaves behind are re-parented here, not to init, and can be found; ``True`` when it
    worked (Linux only)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def leftovers(known: Mapping[int, int], wait_s: float = 15.0) -> list[dict[str, Any]]:
    """Wait up to ``wait_s`` seconds for a finished job's processes to end; end the ones that
    remain with SIGKILL, by pid, and return them.

    The job's processes are ``known`` (pid → start time in clock ticks after boot, so that a
    reused pid is never taken for one of them) and every process below this one (orphans
    come here when this process is a subreaper, see :func:`_become_subreaper`).  Zombie
    children of this process are reaped.

    Returns:
        ``[{"pid", "cmdline"}, ...]`` of the processes that had to be killed (empty: none
        was left).
    """
    me = os.getpid()
    deadline = time.monotonic() + wait_s
    while True:
        stats = ppid_map()
        mine = set(descendants({p: s["ppid"] for p, s in stats.items()}, me)) - {me}
        for pid in mine:
            if stats[pid]["state"] == "Z" and stats[pid]["ppid"] == me:
                _reap(pid)
        alive = {p for p in mine if stats[p]["state"] != "Z"}
        alive |= {p for p, start in known.items()
                  if p in stats and stats[p]["starttime"] == start and stats[p]["state"] != "Z"}
        if not alive:
            return []
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    killed = []
    for pid in sorted(alive, reverse=True):
        try:
            cmd = " ".join(read_cmdline(pid))
            os.kill(pid, signal.SIGKILL)
            killed.append({"pid": pid, "cmdline": cmd})
        except OSError:
            continue
    time.sleep(0.5)
    for pid in alive:
        _reap(pid)
    return killed


def run_job(places: int, timeout: float, per_host: int = 16) -> dict[str, Any]:
    """Start ``benchmarks._scale_job`` with ``APGAS_PLACES=places``, wait for its JSON line
    and check that it left no process behind.

    Args:
        places: the number of places (≥ 2).
        timeout: seconds the whole run may take.
        per_host: ``APGAS_PLACES_PER_HOST`` for the job (places per host slot).

    Returns:
        The job's JSON data plus ``ready_s`` (seconds from just before ``Popen`` until main
        ran), ``wall_s`` (until the job's process exited), ``load_before``/``load_after``
        (1-minute load averages) and ``leftovers`` (see :func:`leftovers`).

    Raises:
        RuntimeError: the job failed, timed out (its processes are then killed, by pid) or
            printed no JSON.
    """
    env = {**os.environ, "APGAS_PLACES": str(places), "PYTHONUNBUFFERED": "1",
           "APGAS_PLACES_PER_HOST": str(per_host)}
    env.setdefault("APGAS_START_TIMEOUT", str(max(10.0, timeout - 10)))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks._scale_job"], cwd=ROOT,
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stats = ppid_map()
            tree = descendants({q: s["ppid"] for q, s in stats.items()}, proc.pid)
            proc.kill()
            proc.communicate()
            killed = leftovers({q: stats[q]["starttime"] for q in tree if q in stats},
                               wait_s=2.0)
            raise RuntimeError(f"{places} places: no result within {timeout:g} s; killed "
                               f"{len(killed) + 1} process(es)") from None
        wall = time.monotonic() - t0
        err.seek(0)
        errors = err.read()
    data = None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            data = json.loads(line)
            break
    left = leftovers({p["pid"]: p["starttime"] for p in data["processes"]} if data else {})
    if proc.returncode != 0 or data is None:
        raise RuntimeError(f"{places} places: exit status {proc.returncode}, "
                           f"{'no JSON line' if data is None else 'JSON printed'}; "
                           f"stderr: {errors[-2000:]}")
    data["ready_s"] = data["in_main_monotonic"] - t0
    data["wall_s"] = wall
    data["load_before"] = load_before
    data["load_after"] = os.getloadavg()[0]
    data["leftovers"] = left
    if errors.strip():
        data["stderr_tail"] = errors[-500:]
    return data


# ---------------------------------------------------------------------- figures
def figures(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one run from the job's data (:func:`run_job`'s result).

    Args:
        raw: needs ``places``, ``ready_s``, ``finish_s``, ``processes`` (as
            :func:`benchmarks._procfs.job_processes` returns them), ``fds_place0`` and
            ``fds_place1`` (:func:`benchmarks._procfs.fd_info`, ``None`` with one place).

    Returns:
        Seconds (``ready_s``, ``ready_per_place_s``, ``finish_s``, ``cpu_total_s``,
        ``cpu_per_place_s``, and per role ``cpu_s``: the role's processes together), MB of
        10^6 bytes (``rss_total_mb``, ``rss_per_place_mb``,
        ``pss_per_place_mb``, ``rss_per_spawned_place_mb``, and per role ``rss_mb``: median
        RSS of one process of each role), process counts per role (``processes``), file
        descriptors (``fds_place0``, ``fds_place1``, ``fds_place0_kinds``,
        ``fds_place1_kinds``), ``tcp_place1`` and ``threads`` (median per role), and
        ``messages_at_startup`` (``None``: the runtime counts none).
    """
    p = int(raw["places"])
    procs = raw["processes"]
    by_role: dict[str, list[Mapping[str, Any]]] = {r: [] for r in ROLES}
    for q in procs:
        by_role.setdefault(q["role"], []).append(q)
    cpu = sum(q["cpu_s"] + q["children_cpu_s"] for q in procs)
    rss = sum(q["rss_bytes"] for q in procs)
    pss = sum(q["pss_bytes"] or 0 for q in procs)
    rss0 = sum(q["rss_bytes"] for q in by_role["place0"])
    fd0, fd1 = raw["fds_place0"], raw.get("fds_place1")
    return {
        "places": p,
        "ready_s": raw["ready_s"],
        "ready_per_place_s": raw["ready_s"] / p,
        "finish_s": raw["finish_s"],
        "finish_warm_s": (statistics.median(raw["finish_again_s"])
                          if raw.get("finish_again_s") else None),
        "cpu_total_s": cpu,
        "cpu_per_place_s": cpu / p,
        "rss_total_mb": rss / MB,
        "rss_per_place_mb": rss / MB / p,
        "pss_per_place_mb": pss / MB / p,
        "rss_per_spawned_place_mb": (rss - rss0) / MB / (p - 1) if p > 1 else None,
        "cpu_s": {r: sum(q["cpu_s"] + q["children_cpu_s"] for q in qs)
                  for r, qs in by_role.items() if qs},
        "rss_mb": {r: statistics.median(q["rss_bytes"] for q in qs) / MB
                   for r, qs in by_role.items() if qs},
        "processes": {r: len(qs) for r, qs in by_role.items() if qs},
        "threads": {r: statistics.median(q["threads"] for q in qs)
                    for r, qs in by_role.items() if qs},
        "fds_place0": fd0["count"],
        "fds_place0_kinds": fd0["kinds"],
        "fds_place1": fd1["count"] if fd1 else None,
        "fds_place1_kinds": fd1["kinds"] if fd1 else None,
        "tcp_place1": fd1["kinds"].get("tcp", 0) + fd1["kinds"].get("tcp6", 0) if fd1 else None,
        "messages_at_startup": (raw["traffic_place0_at_start"]["messages_in"]
                                + raw["traffic_place0_at_start"]["messages_out"]
                                if "traffic_place0_at_start" in raw else None),
        **_traffic_figures(raw, p),
    }


def _traffic_figures(raw: Mapping[str, Any], p: int) -> dict[str, Any]:
    """Start-up bytes and the empty finish's traffic at its home, from the job's counters
    (absent in data of runs before the runtime counted traffic: ``None``)."""
    start, launch = raw.get("traffic_place0_at_start"), raw.get("launch_traffic")
    home = raw.get("finish_home_traffic")
    if start is None or launch is None or home is None:
        return {"startup_bytes_per_place": None, "launches": None,
                "finish_home_messages": None, "finish_home_frames": None}
    zmq_bytes = start["bytes_in"] + start["bytes_out"]
    return {
        "startup_bytes_per_place": (zmq_bytes + launch["bytes"]) / p,
        "startup_zmq_bytes_place0": zmq_bytes,
        "startup_mpi_bytes_place0": launch["bytes"],
        "launches": launch["launches"],
        "finish_home_messages": home["messages_in"],
        "finish_home_frames": home["frames_in"],
        "finish_warm_home_messages": (statistics.median(raw["finish_again_home_messages"])
                                      if raw.get("finish_again_home_messages") else None),
    }


def _median_of(values: Sequence[Any]) -> Any:
    """The median of numbers, key by key for dicts; the first value for anything else."""
    first = values[0]
    if isinstance(first, dict):
        keys = {k for v in values for k in v}
        return {k: _median_of([v[k] for v in values if k in v]) for k in sorted(keys)}
    if isinstance(first, (int, float)) and not isinstance(first, bool) and \
            all(isinstance(v, (int, float)) for v in values):
        return statistics.median(values)
    return first


def median_figures(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Figure by figure median of :func:`figures` over the runs of one place count."""
    return {k: _median_of([r[k] for r in runs]) for k in runs[0]}


def derive(per_p: Mapping[int, Mapping[str, Any]], per_host: int = 1) -> dict[str, Any]:
    """The goals judged from the median figures per place count.

    Args:
        per_p: :func:`median_figures` by place count.
        per_host: the places per host slot of the runs (``--per-host``): the messages that
            reach a finish's home are judged against the hosts, P / ``per_host`` rounded up.

    Returns:
        ``ready_per_place_s`` by place count and one entry per goal of :data:`GOALS`, each
        with its figures and ``met`` (``True``/``False``, ``None`` where the place counts it
        needs, 8 and 64, or 2 and the largest, were not measured).
    """
    counts = sorted(per_p)
    out: dict[str, Any] = {
        "ready_per_place_s": {str(p): per_p[p]["ready_per_place_s"] for p in counts},
        "cpu_per_place_s": {str(p): per_p[p]["cpu_per_place_s"] for p in counts},
    }
    g = GOALS["cpu_per_place_constant"]
    if 8 in per_p and 64 in per_p:
        ratio = per_p[64]["cpu_per_place_s"] / per_p[8]["cpu_per_place_s"]
        out["cpu_per_place_growth_8_to_64"] = {
            "cpu_per_place_8_s": per_p[8]["cpu_per_place_s"],
            "cpu_per_place_64_s": per_p[64]["cpu_per_place_s"], "ratio": ratio,
            "met": ratio <= g["max_ratio_64_to_8"]}
    else:
        out["cpu_per_place_growth_8_to_64"] = {"met": None}
    top = counts[-1]
    spawned = per_p[top]["rss_per_spawned_place_mb"]
    out["memory_per_spawned_place"] = {
        "places": top, "rss_mb": spawned,
        "place_mb": per_p[top]["rss_mb"].get("place"),
        "anchor_mb": per_p[top]["rss_mb"].get("anchor"),
        "proxy_mb": per_p[top]["rss_mb"].get("proxy"),
        "met": None if spawned is None else spawned <= GOALS["memory_per_spawned_place"]["max_mb"],
    }
    out.update(_derive_large(per_p, per_host))
    low = counts[0]
    t_low, t_top = per_p[low]["tcp_place1"], per_p[top]["tcp_place1"]
    out["connections_on_demand"] = {
        "tcp_place1": {str(p): per_p[p]["tcp_place1"] for p in counts},
        "met": None if t_low is None or t_top is None or low == top else t_top <= t_low + 2,
    }
    if 8 in per_p and 64 in per_p:
        bound = GOALS["ready_time_linear"]["factor"] * 64 * per_p[8]["ready_per_place_s"]
        out["ready_64_vs_linear_from_8"] = {
            "ready_64_s": per_p[64]["ready_s"], "bound_s": bound,
            "ratio_to_linear": per_p[64]["ready_s"] / (64 * per_p[8]["ready_per_place_s"]),
            "met": per_p[64]["ready_s"] <= bound}
    else:
        out["ready_64_vs_linear_from_8"] = {"met": None}
    return out


def _ratio(per_p: Mapping[int, Mapping[str, Any]], key: str, low: int, top: int) -> Any:
    a, b = per_p[low].get(key), per_p[top].get(key)
    return None if a in (None, 0) or b is None else b / a


def _derive_large(per_p: Mapping[int, Mapping[str, Any]], per_host: int = 1) -> dict[str, Any]:
    """The goals from 64 places to the largest count measured (512 for the goals proper;
    ``met`` is ``None`` where 64 or 512 was not measured, and ``ratio`` is given for the
    largest count anyway)."""
    counts = sorted(per_p)
    out: dict[str, Any] = {}
    low = 64 if 64 in per_p else counts[0]
    top = counts[-1]
    judged = low == 64 and top == 512
    for key, figure, goal in (
            ("ready_per_place_flat", "ready_per_place_s", "ready_per_place_flat"),
            ("startup_bytes_per_place_flat", "startup_bytes_per_place",
             "startup_bytes_per_place_flat"),
            ("empty_finish_linear", "finish_s", "empty_finish_linear"),
            ("empty_finish_warm_linear", "finish_warm_s", "empty_finish_linear"),
            ("pss_per_place_flat", "pss_per_place_mb", "pss_per_place")):
        ratio = _ratio(per_p, figure, low, top)
        out[key] = {"from": low, "to": top, figure: {str(p): per_p[p].get(figure)
                                                     for p in counts},
                    "ratio": ratio,
                    "met": None if not judged or ratio is None
                    else ratio <= GOALS[goal]["max_ratio"]}
    pss = [per_p[p]["pss_per_place_mb"] for p in counts]
    out["pss_per_place_flat"]["max_mb_met"] = max(pss) <= GOALS["pss_per_place"]["max_mb"]
    msgs = {str(p): per_p[p].get("finish_home_messages") for p in counts}
    hosts = {str(p): -(-p // per_host) for p in counts}
    warm = {str(p): per_p[p].get("finish_warm_home_messages") for p in counts}
    out["finish_home_messages"] = {
        "messages": msgs, "warm_messages": warm, "hosts": hosts, "places_per_host": per_host,
        "met": None if any(v is None for v in msgs.values())
        else all(v <= hosts[p] + 1 for p, v in msgs.items()),
        "warm_met": None if any(v is None for v in warm.values())
        else all(v <= hosts[p] + 1 for p, v in warm.items())}
    return out


# ---------------------------------------------------------------------- output
def print_table(per_p: Mapping[int, Mapping[str, Any]]) -> None:
    """Print one line per place count (seconds, MB of 10^6 bytes, descriptors)."""
    print(f"{'P':>3}{'ready s':>9}{'finish s':>10}{'CPU/pl s':>10}{'RSS/pl':>8}"
          f"{'spawned':>9}{'place':>7}{'anchor':>8}{'proxy':>7}{'fds p0':>8}{'fds p1':>8}"
          f"{'tcp p1':>8}{'PSS/pl':>8}{'B/pl':>8}{'home msgs':>10}", flush=True)
    for p in sorted(per_p):
        f = per_p[p]
        r = f["rss_mb"]
        spawned = f["rss_per_spawned_place_mb"]
        print(f"{p:3d}{f['ready_s']:9.2f}{f['finish_s']:10.3f}{f['cpu_per_place_s']:10.3f}"
              f"{f['rss_per_place_mb']:8.1f}{spawned if spawned is not None else 0:9.1f}"
              f"{r.get('place', 0):7.1f}{r.get('anchor', 0):8.1f}{r.get('proxy', 0):7.1f}"
              f"{f['fds_place0']:8.0f}{f['fds_place1'] or 0:8.0f}{f['tcp_place1'] or 0:8.0f}"
              f"{f['pss_per_place_mb']:8.1f}{f.get('startup_bytes_per_place') or 0:8.0f}"
              f"{f.get('finish_home_messages') or 0:10.0f}", flush=True)


def plot(per_p: Mapping[int, Mapping[str, Any]], path: Path, title: str) -> None:
    """Two panels against places (log x axis): time to ready and of one finish, with the
    goal's bound (2× the 8-place time per place times P) where 8 places were measured; CPU
    seconds per place, split by role (anchors, place 0, spawned places), with the 8-place
    level.  Written as a PNG to ``path`` (needs matplotlib).

    Args:
        per_p: :func:`median_figures` by place count.
        path: the PNG file to write.
        title: the figure's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = sorted(per_p)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    left.plot(counts, [per_p[p]["ready_s"] for p in counts], "o-", label="start until ready")
    left.plot(counts, [per_p[p]["finish_s"] for p in counts], "s-",
              label="one finish over all places")
    if 8 in per_p:
        per = per_p[8]["ready_per_place_s"]
        left.plot(counts, [p * per for p in counts], "k--", linewidth=1,
                  label="linear from 8 places")
        left.plot(counts, [2 * p * per for p in counts], "k:", linewidth=1,
                  label="goal: 2× linear")
    left.set_yscale("log")
    left.set_ylabel("seconds")
    right.plot(counts, [per_p[p]["cpu_per_place_s"] for p in counts], "o-",
               label="CPU per place (all processes / P)")
    for role, style, label in (("anchor", "v--", "of which MPI anchors"),
                               ("place0", "^--", "of which place 0"),
                               ("place", "d--", "of which spawned places")):
        right.plot(counts, [per_p[p]["cpu_s"].get(role, 0.0) / p for p in counts], style,
                   linewidth=1, markersize=4, label=label)
    if 8 in per_p:
        right.axhline(per_p[8]["cpu_per_place_s"], color="k", linestyle="--", linewidth=1,
                      label="goal: constant from 8 places")
    right.set_ylabel("CPU seconds per place")
    right.set_ylim(bottom=0)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts)
        ax.set_xticklabels([str(p) for p in counts])
        ax.set_xlabel("places")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _title(cores: int | None) -> str:
    return f"apgaspy runtime against places ({cores} cores, embedded start)"


def main(argv: list[str] | None = None) -> int:
    """Measure every place count, print a table, write the JSON (and the plot); returns the
    exit status (1 when a run left processes behind)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.runtime_scale",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--places", default="64,128,256,512",
                        help="comma-separated place counts, each ≥ 2 (64,128,256,512)")
    parser.add_argument("--repeats", type=positive_int, default=1, help="runs per count (1)")
    parser.add_argument("--timeout", type=positive_int, default=180,
                        help="seconds one run may take (180)")
    parser.add_argument("--plot", action="store_true", help="also write a PNG plot")
    parser.add_argument("--no-write", action="store_true", help="do not write files")
    parser.add_argument("--replot", action="store_true",
                        help="measure nothing: redraw the PNG from runtime_scale.json")
    parser.add_argument("--per-host", type=positive_int, default=16,
                        help="APGAS_PLACES_PER_HOST: places per host slot (16)")
    args = parser.parse_args(argv)
    if args.replot:
        data = json.loads((RESULTS_DIR / "runtime_scale.json").read_text())
        png = RESULTS_DIR / "runtime_scale.png"
        plot({int(p): f for p, f in data["places"].items()}, png,
             _title(data["machine"].get("cores")))
        print(f"wrote {png}")
        return 0
    counts = place_counts(parser, args.places, 2, " (place 1 is asked for its descriptors)")
    subreaper = _become_subreaper()
    runs: dict[int, list[dict[str, Any]]] = {p: [] for p in counts}
    raws: dict[int, list[dict[str, Any]]] = {p: [] for p in counts}
    left_behind = []
    for _ in range(args.repeats):
        for p in counts:
            raw = run_job(p, args.timeout, args.per_host)
            if raw["leftovers"]:
                left_behind.append({"places": p, "killed": raw["leftovers"]})
                print(f"{p} places: {len(raw['leftovers'])} process(es) left behind, killed",
                      file=sys.stderr)
            raws[p].append(raw)
            runs[p].append(figures(raw))
            f = runs[p][-1]
            print(f"{p} places: ready {f['ready_s']:.2f} s, finish {f['finish_s']:.3f} s, "
                  f"CPU/place {f['cpu_per_place_s']:.3f} s (by role: "
                  + ", ".join(f"{r} {c:.2f}" for r, c in f["cpu_s"].items())
                  + f"; load {raw['load_before']:.1f})",
                  flush=True)
    per_p = {p: median_figures(runs[p]) for p in counts}
    print_table(per_p)
    derived = derive(per_p, args.per_host)
    for key in ("cpu_per_place_growth_8_to_64", "memory_per_spawned_place",
                "connections_on_demand", "ready_64_vs_linear_from_8", "ready_per_place_flat",
                "startup_bytes_per_place_flat", "empty_finish_linear",
                "empty_finish_warm_linear", "pss_per_place_flat",
                "finish_home_messages"):
        print(f"{key}: {json.dumps(derived[key])}")
    if left_behind:
        print(f"processes left behind: {left_behind}", file=sys.stderr)
    if args.no_write:
        return 1 if left_behind else 0
    top = counts[-1]
    path = write_result("runtime_scale", {
        "params": {**vars(args), "subreaper": subreaper},
        "about": "Embedded start (APGAS_PLACES=P, place 0 spawns the others) of "
                 "benchmarks/_scale_job.py on this machine; ready_s from Popen until main "
                 "runs, CPU and memory of every process of the job read from /proc just "
                 "before main returns. Memory in MB of 10^6 bytes; RSS counts pages shared "
                 "between processes (libraries, the interpreter) in each process, PSS "
                 "divides them. Oversubscribed on few cores: the growth is the measure.",
        "messages_at_startup_note": "ZeroMQ messages place 0 received and sent from its "
                                    "start until main ran (Transport.traffic); "
                                    "startup_bytes_per_place adds what place 0 sent its "
                                    "launchers over MPI (start data and the table, "
                                    "pickled) and divides by P",
        "issue_figures": ISSUE_FIGURES,
        "goals": GOALS,
        "places": {str(p): {**per_p[p], "runs": runs[p],
                            "load_1min": [r["load_before"] for r in raws[p]],
                            "leftovers": [r["leftovers"] for r in raws[p]]}
                   for p in counts},
        "top_mappings_mb": {role: [(name, b / MB) for name, b in (maps or [])]
                            for role, maps in raws[top][0]["top_mappings"].items()},
        "top_mappings_places": top,
        "derived": derived,
        "left_behind": left_behind,
    })
    print(f"wrote {path}")
    if args.plot:
        png = RESULTS_DIR / "runtime_scale.png"
        plot(per_p, png, _title(os.cpu_count()))
        print(f"wrote {png}")
    return 1 if left_behind else 0


if __name__ == "__main__":
    raise SystemExit(main())
