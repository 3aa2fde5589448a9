"""Malleability on several hosts and under Slurm: start-up, grow and shrink times.

    python -m benchmarks.cluster [--repeats 3] [--no-slurm] [--no-hosts]
    python -m benchmarks.cluster --host-grow [--per-host 16,1] [--depth D] [--repeats 2]

Needs root and the packages of the test clusters (``openssh-server``, ``slurm-wlm``,
``munge``; see ``tests/cluster/``), which it starts and stops itself:

* **hosts**: 4 network-namespace hosts with their own address, hostname and sshd, reached
  by real ssh.  The malleable job (``benchmarks/_malleable_job.py``) starts on h1, the
  scheduler runs on h4 (orders and notifications over TCP between the hosts); grows add
  remote hosts h2 (1) and h2, h3 (2); shrinks release them.  Also timed: start-up of a job
  whose places span h1-h3, embedded (``NODE_FILE``) and under ``mpiexec``.
* **slurm**: a local Slurm 22.05 with 4 nodes (no accounting); the job runs inside
  ``salloc -w n1,n2,n3`` with one place; grows add nodes n2 (1) and n2, n3 (2) by
  ``srun`` steps, shrinks release them.

Each figure is the median of ``--repeats`` runs, as in ``benchmarks/malleability.py``, whose
one-host figures are the comparison (same job, same handler, same orders).  Results:
``benchmarks/results/cluster.json``.

``--host-grow`` measures instead a host's grow during a computation, on ``--hosts`` (default 4)
network-namespace hosts h1-h4 with ``--per-host`` places each (``APGAS_PLACES_PER_HOST``; 16:
64 places) and
a scheduler on a fifth host: the GLB UTS job of :mod:`benchmarks.grow_latency` (seed 19,
``--depth``, kernels warmed up at every place) starts embedded on h1, is shrunk by one host
and then grown by that host again, and must count the tree exactly.  From the grow order
(wall clock; the hosts share the machine's clock) it reports ``grown_s`` (the job's
``growTimeAPGAS`` arrived), ``first_work_s`` and ``all_working_s`` (the first and the last of
the new host's places has finished its first piece of work), and the grow's phases from the
job's debug log (``APGAS_LOG_LEVEL=DEBUG``): the pre-grow check of the host, Hydra's launch
of the host's launcher (its ssh connection and proxy), the interpreter's start, the imports,
the handshake, the table, GLB's join.  The host grown is the one just released, so the
pre-grow check is skipped (``APGAS_CHECK_TTL``) unless the variant ``check_every_grow`` runs.
``--variants`` alternates settings run by run (for a before/after in one run).  Results:
``benchmarks/results/cluster-host-grow.json`` (``cluster-host-grow-<n>hosts.json`` for
``--hosts`` n other than 4).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from communicators.testing import SchedulerEndpoint

from ._results import write_result
from .malleability import measure_orders, summarize
from .references import pick

TESTS = Path(__file__).resolve().parent.parent / "tests"
SIZES = (1, 2)
PORT = 8081


def _cluster_modules() -> tuple[Any, Any]:
    sys.path.insert(0, str(TESTS))
    from cluster import netns, slurm

    return netns, slurm


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("APGAS_PLACES", "UCX_", "SLURM_", "HYDRA_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def _job(argv_env: tuple[list[str], dict[str, str]], popen: Any) -> subprocess.Popen[str]:
    argv, env = argv_env
    return popen(argv, env=env, cwd=str(TESTS.parent), stdin=subprocess.PIPE,
                 stdout=subprocess.PIPE, text=True)


def _hosts(netns: Any, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with netns.start_cluster(4, prefix="apgb") as cluster:
        out["setup_s"] = cluster.setup_seconds
        h1, h4 = cluster.host("h1"), cluster.host("h4")
        tmp = Path(cluster.tmpdir)
        (tmp / "n1").write_text("h1\n")
        (tmp / "n3").write_text("h1\nh2\nh3\n")
        job = [sys.executable, "-m", "benchmarks._malleable_job"]
        runs, starts, mpi_starts = [], [], []
        for _ in range(repeats):
            sched = h4.call(SchedulerEndpoint, PORT, h4.address)
            try:
                base = _env(**sched.env(), HYDRA_LAUNCHER_EXEC=cluster.ssh)
                fresh = iter(["h2", "h2", "h3"])
                runs.append(measure_orders(
                    lambda b=base: _job((job, {**b, "NODE_FILE": str(tmp / "n1")}), h1.popen),
                    sched, (h1.address, PORT), lambda n, f=fresh: [next(f) for _ in range(n)],
                    SIZES, send=lambda j, line, s=sched: h4.call(s.order, j, line, 60)))
                starts.append(measure_orders(
                    lambda b=base: _job((job, {**b, "NODE_FILE": str(tmp / "n3")}), h1.popen),
                    sched, (h1.address, PORT), lambda n: [], ())["ready_s"])
                mpi = [str(Path(sys.executable).parent / "mpiexec"), "-launcher-exec",
                       cluster.ssh, "-hosts", "h1,h2,h3", "-n", "3", *job]
                mpi_starts.append(measure_orders(
                    lambda b=base, m=mpi: _job((m, {**{k: v for k, v in b.items()
                                                       if k != "HYDRA_LAUNCHER_EXEC"},
                                                    "NODE_FILE": str(tmp / "n3")}), h1.popen),
                    sched, (h1.address, PORT), lambda n: [], ())["ready_s"])
            finally:
                sched.close()
        print("hosts (job on h1, scheduler on h4, grow onto h2, h3):")
        out["median"] = summarize(runs, SIZES)
        out["median"]["ready_3_hosts_embedded_s"] = statistics.median(starts)
        out["median"]["ready_3_hosts_mpiexec_s"] = statistics.median(mpi_starts)
        print(f"ready, 3 hosts: embedded {statistics.median(starts):.3f} s, "
              f"mpiexec {statistics.median(mpi_starts):.3f} s")
        out["runs"] = runs
    return out


VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "launcher_imports_main": {"APGAS_LAUNCH_IMPORTS_MAIN": "1"},
    "check_every_grow": {"APGAS_CHECK_TTL": "0"},
}
"""Settings alternated run by run with ``--variants`` (name: environment overlay)."""

_STAMPS = re.compile(r"place\((\d+)\): wall clock (.*)$")
_SPAWN = re.compile(r"launcher of \d+ place\(s\) on (\S+): .*\(wall clock: (.*)\)$")
_CHECK = re.compile(r"host (\S+) checked in .*\(wall clock: (.*)\)$")


def _pairs(text: str) -> dict[str, float]:
    return {k: float(v) for k, v in (kv.split("=") for kv in text.replace(",", " ").split())}


def grow_phases(log: str, host: str, new: list[int], t_order: float) -> dict[str, float]:
    """The phases of a grow onto ``host`` (seconds, each from the end of the one before),
    from the job's DEBUG log ``log``: the new places ``new`` log their wall-clock stamps,
    place 0 those of its check of the host and of the launch (the last ones of ``host``)."""
    check = spawn = None
    places: dict[int, dict[str, float]] = {}
    for line in log.splitlines():  # the check and launch of the grow: after the order
        if m := _CHECK.search(line):
            if m.group(1) == host and _pairs(m.group(2))["check"] >= t_order:
                check = _pairs(m.group(2))
        elif m := _SPAWN.search(line):
            if m.group(1) == host and _pairs(m.group(2))["spawn"] >= t_order:
                spawn = _pairs(m.group(2))
        elif (m := _STAMPS.search(line)) and int(m.group(1)) in new:
            places[int(m.group(1))] = _pairs(m.group(2))
    if check is None or spawn is None or not places:
        return {}
    first = {k: min(p[k] for p in places.values()) for k in next(iter(places.values()))}
    last = {k: max(p[k] for p in places.values()) for k in next(iter(places.values()))}
    marks = [("order_to_check", check["check"]), ("check", check["checked"]),
             ("check_to_spawn", spawn["spawn"]),
             ("spawn_to_launcher_process", first["launcher"]),
             ("interpreter_start", first["script"]),
             ("forker_imports_to_first_fork", first["forked"]),
             ("mpi_init_and_start_data", first["data"]),
             ("runtime_and_answer", last["answered"]),
             ("spawn_returns_answers_relayed", spawn["answered"]),
             ("table_at_last_place", last["table"]),
             ("last_place_ready", last["ready"])]
    out, before = {}, t_order
    for name, at in marks:
        out[name] = at - before
        before = at
    out["main_module_import_max"] = max(p["main"] - p["answered"] for p in places.values())
    out["ready_s"] = before - t_order
    return out


def _read_until(stream: Any, word: str, timeout: float = 300.0) -> None:
    import selectors

    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(stream, selectors.EVENT_READ)
        while sel.select(max(0.0, deadline - time.monotonic())):
            line = stream.readline()
            if not line:
                raise RuntimeError(f"the job ended before saying {word!r}")
            if line.strip() == word:
                return
    raise RuntimeError(f"the job did not say {word!r} within {timeout:g} s")


def _host_grow_run(cluster: Any, per_host: int, depth: int, extra: dict[str, str],
                   delay_s: float = 0.5, hosts: int = 4) -> dict[str, Any]:
    """One job of ``hosts`` × ``per_host`` places on h1..h<hosts>: shrink by a host (the
    last), grow by it again; timings (s)."""
    h1, h5 = cluster.host("h1"), cluster.host("h5")
    tmp = Path(tempfile.mkdtemp(prefix="apgaspy-host-grow-"))  # kept when the run fails
    nodes, probe, log = tmp / "nodes", tmp / "probe", tmp / "stderr"
    nodes.write_text("".join(f"h{i}\n" for i in range(1, hosts + 1)))
    probe.mkdir()
    sched = h5.call(SchedulerEndpoint, PORT, h5.address)
    address = (h1.address, PORT)
    skip = ("preGrowTimeGLB", "postGrowTimeGLB", "preShrinkTimeGLB", "postShrinkTimeGLB")
    try:
        env = _env(**sched.env(), HYDRA_LAUNCHER_EXEC=cluster.ssh, NODE_FILE=str(nodes),
                   NODES=str(hosts), APGAS_PLACES_PER_HOST=str(per_host), APGAS_LOG_LEVEL="DEBUG",
                   APGAS_START_TIMEOUT="300", APGAS_GROW_PROBE_DIR=str(probe), **extra)
        with open(log, "w") as err:
            t0 = time.time()
            proc = h1.popen([sys.executable, "-m", "benchmarks.grow_latency", "--job",
                             str(depth)], env=env, cwd=str(TESTS.parent), text=True,
                            stdout=subprocess.PIPE, stderr=err)
            try:
                sched.wait_for("APGAS-Ready", timeout=600)
                ready_s = time.time() - t0
                _read_until(proc.stdout, "computing")
                time.sleep(delay_s)
                t_shrink = time.time()
                released = h5.call(sched.order, address, "shrink 1\n", 120)
                sched.wait_for("shrinkTimeAPGAS", timeout=120, skip=skip)
                shrunk_s = time.time() - t_shrink
                if len(released) != 1 or released[0].startswith("ERROR"):
                    raise RuntimeError(f"shrink 1 answered {released}")
                time.sleep(delay_s)
                t_order = time.time()
                reply = h5.call(sched.order, address, f"grow 1 {released[0]}\n", 120)
                if reply:
                    raise RuntimeError(f"grow refused: {reply}; see {log}")
                sched.wait_for("growTimeAPGAS", timeout=300, skip=skip)
                grown_s = time.time() - t_order
                out, _ = proc.communicate(timeout=900)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
    finally:
        sched.close()
    try:
        report = json.loads(out.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise RuntimeError(f"the job printed no report (exit {proc.returncode}): see "
                           f"{log}") from None
    new = [p for order in report["orders"] if order[0] == "grow" for p in order[1]]
    firsts = {}
    for f in probe.iterdir():
        place, stamp, *_ = f.read_text().split()
        firsts[int(place)] = float(stamp)
    worked = [firsts[p] - t_order for p in new if p in firsts]
    text = log.read_text()
    shutil.rmtree(tmp, ignore_errors=True)
    return {"per_host": per_host, "hosts": hosts, "places": hosts * per_host, "depth": depth,
            "correct": report["correct"], "result": report["result"],
            "kernels": report["kernels"], "ready_s": ready_s, "shrink_s": shrunk_s,
            "released": released[0], "new_places": new, "grown_s": grown_s,
            "new_places_worked": len(worked),
            "first_work_s": min(worked) if worked else None,
            "all_working_s": max(worked) if len(worked) == len(new) else None,
            "computation_s": report["seconds"],
            "phases": grow_phases(text, released[0], new, t_order)}


def _ssh_reference(cluster: Any, repeats: int = 5) -> dict[str, float]:
    """Medians of ``ssh h4 true`` and ``ssh h4 python -c pass`` from h1 (seconds)."""
    h1 = cluster.host("h1")
    out = {}
    for name, argv in (("ssh_true_s", ["true"]),
                       ("ssh_python_s", [sys.executable, "-I", "-S", "-c", "pass"]),
                       ("ssh_import_apgaspy_s", [f"cd {TESTS.parent} && {sys.executable} "
                                                 "-c 'import apgaspy'"])):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            h1.run([cluster.ssh, "-x", "h4", *argv], timeout=60, check=True,
                   cwd=str(TESTS.parent))
            times.append(time.perf_counter() - t)
        out[name] = statistics.median(times)
    return out


def _host_grows(netns: Any, per_hosts: list[int], depth: int | None, repeats: int,
                variants: list[str], hosts: int = 4) -> dict[str, Any]:
    out: dict[str, Any] = {"variants": {v: VARIANTS[v] for v in variants}}
    netns.remove_stale("apgg")  # a run that was killed leaves its namespaces
    with netns.start_cluster(5, prefix="apgg") as cluster:
        out["setup_s"] = cluster.setup_seconds
        out["reference"] = _ssh_reference(cluster)
        print("ssh from h1 to h4: " + ", ".join(f"{k} {v:.3f}"
                                                 for k, v in out["reference"].items()))
        runs = []
        for per_host in per_hosts:
            d = depth or (14 if per_host == 1 else 13)
            for _ in range(repeats):
                for variant in variants:  # interleaved: the load changes alike for each
                    try:
                        r = _host_grow_run(cluster, per_host, d, VARIANTS[variant], hosts=hosts)
                    except (RuntimeError, subprocess.SubprocessError) as exc:
                        print(f"[{variant}] {hosts} x {per_host} places: failed: {exc}", flush=True)
                        runs.append({"variant": variant, "per_host": per_host,
                                     "error": str(exc), "correct": None})
                        continue
                    r["variant"] = variant
                    runs.append(r)
                    print(f"[{variant}] {hosts} x {per_host} places, d={d}: ready "
                          f"{r['ready_s']:.1f} s; shrink {r['shrink_s']:.3f} s; grow by "
                          f"{r['released']}: grown {r['grown_s']:.3f} s, first work "
                          f"{r['first_work_s']} s, all working {r['all_working_s']} s "
                          f"({r['new_places_worked']} of {len(r['new_places'])} worked); "
                          f"correct {r['correct']}", flush=True)
                    print("   phases: " + ", ".join(f"{k} {v:.3f}"
                                                    for k, v in r["phases"].items()),
                          flush=True)
        out["runs"] = runs
        out["median"] = {}
        for per_host in per_hosts:
            for variant in variants:
                mine = [r for r in runs if r["per_host"] == per_host
                        and r["variant"] == variant and "error" not in r]
                if not mine:
                    continue
                med = {k: statistics.median(r[k] for r in mine)
                       for k in ("ready_s", "shrink_s", "grown_s", "first_work_s",
                                 "all_working_s") if all(r[k] is not None for r in mine)}
                names = mine[0]["phases"].keys() if all(r["phases"] for r in mine) else ()
                med["phases"] = {k: statistics.median(r["phases"][k] for r in mine)
                                 for k in names}
                out["median"][f"{variant}/{per_host}"] = med
                print(f"median [{variant}] {per_host} place(s) a host: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in med.items() if k != "phases"))
    return out


def _slurm(slurm: Any, repeats: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp, slurm.start_slurm(accounting=False) as cluster:
        out["setup_s"] = cluster.setup_seconds
        node_file = Path(tmp) / "nodes"
        node_file.write_text("127.0.1.1\n")
        runs = []
        for _ in range(repeats):
            sched = SchedulerEndpoint()
            try:
                env = cluster.environ(**_env(**sched.env(), NODE_FILE=str(node_file),
                                             APGAS_PLACES="1"))
                argv = ["salloc", "-w", "n1,n2,n3", sys.executable, "-m",
                        "benchmarks._malleable_job"]
                fresh = iter(["n2", "n2", "n3"])
                runs.append(measure_orders(
                    lambda e=env, a=argv: _job((a, e), subprocess.Popen), sched,
                    ("127.0.1.1", sched.port), lambda n, f=fresh: [next(f) for _ in range(n)],
                    SIZES))
            finally:
                sched.close()
            time.sleep(1.0)  # Slurm frees the nodes of the ended allocation
        print("slurm (salloc -w n1,n2,n3, one place, grow onto n2, n3):")
        out["median"] = summarize(runs, SIZES)
        out["runs"] = runs
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the measurements, print tables, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.cluster",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs to take the median of")
    parser.add_argument("--no-hosts", action="store_true", help="skip the multi-host cluster")
    parser.add_argument("--no-slurm", action="store_true", help="skip Slurm")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    parser.add_argument("--host-grow", action="store_true",
                        help="only the grow of a host of --per-host places during UTS")
    parser.add_argument("--per-host", default="16,1",
                        help="places a host for --host-grow, comma-separated (default 16,1)")
    parser.add_argument("--depth", type=int, default=None,
                        help="UTS depth for --host-grow (default 14 for one place a host, "
                             "else 13: 64 places on 2 cores are slow)")
    parser.add_argument("--hosts", type=int, default=4, choices=range(2, 5),
                        metavar="{2,3,4}",
                        help="hosts of the --host-grow job (default 4; 2: on a 2-core machine "
                             "the grown place has a core of its own, as on a new node)")
    parser.add_argument("--variants", default="default",
                        help=f"settings alternated run by run, of {', '.join(VARIANTS)}")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    netns, slurm = _cluster_modules()
    if args.host_grow:
        reason = netns.unavailable()
        if reason:
            parser.error(f"no multi-host cluster here: {reason}")
        try:
            per_hosts = [int(k) for k in args.per_host.split(",")]
        except ValueError:
            parser.error(f"--per-host takes numbers, not {args.per_host!r}")
        variants = args.variants.split(",")
        unknown = [v for v in variants if v not in VARIANTS]
        if unknown or any(k < 1 for k in per_hosts):
            parser.error(f"unknown variant {unknown} (known: {', '.join(VARIANTS)}) or a "
                         "--per-host below 1")
        result = {"params": vars(args),
                  "host_grow": _host_grows(netns, per_hosts, args.depth, args.repeats,
                                           variants, args.hosts)}
        bad = [r for r in result["host_grow"]["runs"] if r["correct"] is not True]
        if not args.no_write:
            name = "cluster-host-grow" + ("" if args.hosts == 4 else f"-{args.hosts}hosts")
            print(f"wrote {write_result(name, result)}")
        return 1 if bad else 0
    result: dict[str, Any] = {"params": vars(args),
                              **pick("java_apgas_ready", "java_apgas_grow", "java_apgas_shrink")}
    if not args.no_hosts:
        reason = netns.unavailable()
        if reason:
            parser.error(f"no multi-host cluster here: {reason} (use --no-hosts)")
        result["hosts"] = _hosts(netns, args.repeats)
    if not args.no_slurm:
        reason = slurm.unavailable()
        if reason:
            parser.error(f"no Slurm here: {reason} (use --no-slurm)")
        result["slurm"] = _slurm(slurm, args.repeats)
    if not args.no_write:
        print(f"wrote {write_result('cluster', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
