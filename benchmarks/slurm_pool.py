"""The Slurm pool on a shared partition: how fast it takes and gives back nodes, for real.

    python -m benchmarks.slurm_pool [--jobs 10] [--seed 43] [--pool 1:3] [--pool-wait 1]
                                    [--pool-idle 2] [--pool-poll 0.3] [--out DIR]

Needs root and the packages of the local Slurm test cluster (``slurm-wlm``, ``munge``; see
``tests/cluster/slurm.py``), which it starts and stops itself (4 nodes, no accounting):

* **Slurm alone**: three bare ``sbatch --wrap "sleep 1"`` on the idle cluster, each timed
  from the submission to ``RUNNING`` in ``squeue`` (polled every 0.05 s): Slurm's own start
  time, the yardstick of the pool's.
* **the pool**: ``python -m scheduler serve --slurm-pool MIN:MAX`` (docs/guides/scheduler.md,
  "Slurm pool on a shared site") runs a scaled-down batch of the paper's job mix (Finnerty,
  Posner et al. 2024, Table 2; :func:`scheduler.workload.paper_batch`, rigid form): the
  batch's first ``--jobs`` jobs in submission order, their node counts divided by 4 (at
  least 1, at most MAX), their sizes cut to seconds (:data:`SIZES`), their submission times
  multiplied by :data:`TIME_FACTOR`.  Every answer is checked exact (the benchmarks'
  ``--json`` report: ``correct``; BC with ``--verify``).
* **another user**: a user made here (``useradd``, removed at the end) submits
  ``sleep 3`` jobs of one node straight to Slurm every 4 s (``runuser -u <user> sbatch``)
  while the batch runs.
* **samples**: ``squeue`` every 0.2 s for the whole run (wall clock), and the scheduler's
  event log (its ``server_start`` event gives the wall time of its clock).

For each placeholder (``pool_request`` event): the queued need (the waiting head's
``queue`` event plus ``--pool-wait``; none for the MIN placeholders), the request,
``RUNNING`` in the samples, the node in the pool (``pool_node_joined``) and the first job
started there; for each node given back (``pool_give_back``): from its idle setting's
expiry (the event's idle start plus ``--pool-idle``) to its placeholder leaving ``squeue``.
The pool's own part of a placeholder's time is need → request plus ``RUNNING`` → node in
the pool (Slurm's part is request → ``RUNNING``).  Times of ``RUNNING`` and of leaving
``squeue`` are those of the samples (± 0.1 s).  The double-booking check: in every sample,
no node is both an ``apgaspy-pool`` placeholder's and the other user's.  Goals reported
beside the figures: need → node in the pool within 2 s plus Slurm's own start time (the
median above; the pool's own part within 2 s), idle past the setting → out of ``squeue``
within 1 s, no double booking, every answer exact (the command exits 1 when one of the last
two fails).  Results: ``benchmarks/results/slurm_pool.json``.  The whole command takes
about a minute on an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from ._results import RESULTS_DIR, write_result

TESTS = Path(__file__).resolve().parent.parent / "tests"
ROOT = TESTS.parent
#: The mix's sizes cut to seconds: (program, paper size) -> the benchmark's arguments.
SIZES: dict[tuple[str, int], list[str]] = {
    ("uts", 18): ["-d", "8"], ("uts", 19): ["-d", "9"], ("uts", 20): ["-d", "10"],
    ("nqueens", 17): ["-n", "10"], ("nqueens", 18): ["-n", "11"],
    ("bc", 17): ["-n", "7", "--verify"], ("bc", 18): ["-n", "8", "--verify"],
    ("bc", 19): ["-n", "9", "--verify"],
    ("pi", 80_000_000_000): ["-n", "1e6"], ("pi", 600_000_000_000): ["-n", "4e6"],
    ("pi", 1_200_000_000_000): ["-n", "8e6"],
}
#: Submission times of the batch (a 600 s window) times this.
TIME_FACTOR = 0.3


def scaled_jobs(seed: int, count: int, max_nodes: int) -> list[dict[str, Any]]:
    """The first ``count`` jobs of the paper's batch ``seed`` (rigid), scaled (module
    docstring): ``{"name", "argv", "nodes", "submit_s"}`` each, in submission order."""
    from scheduler.workload import paper_batch

    jobs = []
    for entry in paper_batch(seed, 0).entries[:count]:
        spec = entry.spec
        jobs.append({"name": spec.name, "program": spec.program,
                     "nodes": max(1, min(max_nodes, math.ceil((spec.nodes or 1) / 4))),
                     "argv": [sys.executable, "-m", f"benchmarks.{spec.program}",
                              *SIZES[(spec.program, int(spec.size))], "--json"],
                     "submit_s": round(entry.submit_s * TIME_FACTOR, 2)})
    return jobs


class Sampler:
    """``squeue`` of the whole cluster every ``period_s`` in a thread: ``samples`` is a list
    of ``(wall time, [(id, user, name, state, [nodes])])``; ``double`` lists the samples
    where a node was both a placeholder's and ``other``'s."""

    def __init__(self, cluster: Any, other: str, period_s: float = 0.2) -> None:
        self.cluster, self.other, self.period_s = cluster, other, period_s
        self.samples: list[tuple[float, list[tuple[int, str, str, str, list[str]]]]] = []
        self.double: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _hosts(self, text: str) -> list[str]:
        if not text:
            return []
        if "[" not in text and "," not in text:
            return [text]
        return self.cluster.run("scontrol", "show", "hostnames", text).stdout.split()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            t0 = time.time()
            res = self.cluster.run("squeue", "-h", "-o", "%i|%u|%j|%T|%N", check=False)
            t = (t0 + time.time()) / 2
            if res.returncode != 0:
                continue
            rows = []
            for line in res.stdout.splitlines():
                job, user, name, state, hosts = line.strip().split("|")
                if job.isdigit():
                    rows.append((int(job), user, name, state, self._hosts(hosts)))
            self.samples.append((t, rows))
            ours = {n for r in rows if r[2] == "apgaspy-pool" for n in r[4]}
            theirs = {n for r in rows if r[1] == self.other for n in r[4]}
            if ours & theirs:
                self.double.append({"wall": t, "nodes": sorted(ours & theirs), "rows": rows})

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def first(self, slurm_job: int, test: Any, after: float = 0.0) -> float | None:
        """The wall time of the first sample after ``after`` where ``test(row or None)``."""
        for t, rows in self.samples:
            if t < after:
                continue
            row = next((r for r in rows if r[0] == slurm_job), None)
            if test(row):
                return t
        return None

    def placeholders_at(self, wall: float) -> int:
        """Placeholders listed (any state) in the last sample at or before ``wall``."""
        before = [rows for t, rows in self.samples if t <= wall]
        return sum(1 for r in before[-1] if r[2] == "apgaspy-pool") if before else 0


def slurm_start_times(cluster: Any, repeats: int = 3) -> list[float]:
    """Seconds from a bare ``sbatch`` (root, one node) to ``RUNNING`` in ``squeue``."""
    out = []
    for _ in range(repeats):
        t0 = time.monotonic()
        job = cluster.run("sbatch", "--parsable", "-N", "1", "--exclusive", "--chdir=/tmp",
                          "-o", "/dev/null", "--wrap", "sleep 1").stdout.strip().split(";")[0]
        while cluster.run("squeue", "-h", "-j", job, "-o", "%T",
                          check=False).stdout.strip() != "RUNNING":
            if time.monotonic() - t0 > 30:
                raise RuntimeError(f"bare sbatch {job} not running after 30 s")
            time.sleep(0.05)
        out.append(round(time.monotonic() - t0, 3))
        cluster.run("scancel", job, check=False)
        cluster.settle()
    return out


def _other_user(cluster: Any, user: str, stop: threading.Event, submitted: list[str]) -> None:
    while not stop.is_set():
        res = subprocess.run(["runuser", "-u", user, "--", "sbatch", "--parsable", "-N", "1",
                              "--exclusive", "--chdir=/tmp", "-o", "/dev/null", "--wrap",
                              "sleep 3"], env=cluster.environ(), capture_output=True,
                             text=True, timeout=30, check=False)
        if res.returncode == 0:
            submitted.append(res.stdout.strip().split(";")[0])
        stop.wait(4.0)


def _ask(control: Path, **req: Any) -> dict[str, Any]:
    from scheduler.control_client import request

    return request(control, req)


def _answer(path: str) -> dict[str, Any] | None:
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith("{") and '"benchmark"' in line:
                return json.loads(line)
    return None


def run_pool(cluster: Any, args: argparse.Namespace, user: str, tmp: Path) -> dict[str, Any]:
    """The batch under the pool beside ``user``'s jobs; the figures (module docstring)."""
    from scheduler.slurm_pool import pool_range

    low, high = pool_range(args.pool)
    jobs = scaled_jobs(args.seed, args.jobs, high)
    env = cluster.named_environ(tmp / "shim", ROOT)
    control, log = tmp / "control.sock", tmp / "events.jsonl"
    argv = [sys.executable, "-m", "scheduler", "serve", "--slurm-pool", args.pool,
            "--pool-wait", str(args.pool_wait), "--pool-idle", str(args.pool_idle),
            "--pool-poll", str(args.pool_poll), "--port", "0", "--control", str(control),
            "--log", str(log), "--run-dir", str(tmp / "run"), "--interval", "0.5",
            "--grace", "1", "--quiet"]
    sampler = Sampler(cluster, user)
    stop_other, theirs = threading.Event(), []
    other = threading.Thread(target=_other_user, args=(cluster, user, stop_other, theirs),
                             daemon=True)
    with open(tmp / "serve.err", "wb") as err:
        serve = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=err,
                                 stderr=err, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not control.exists():
            if serve.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the scheduler did not start: "
                                   + (tmp / "serve.err").read_text()[-2000:])
            time.sleep(0.1)
        while _ask(control, op="status")["pool"]["slurm"]["held"] < low:
            time.sleep(0.1)
        other.start()
        ids: dict[int, dict[str, Any]] = {}
        t0 = time.monotonic()
        for job in jobs:
            time.sleep(max(0.0, t0 + job["submit_s"] - time.monotonic()))
            spec = {"name": job["name"], "command": job["argv"], "required_time_s": 120,
                    "job_class": "rigid", "nodes": job["nodes"]}
            ids[int(_ask(control, op="submit", job=spec)["jobs"][0])] = job
        while any(j["state"] in ("waiting", "running", "pending")
                  for j in _ask(control, op="status")["jobs"]):
            if time.monotonic() - t0 > 240:
                raise RuntimeError("the batch did not end within 240 s")
            time.sleep(0.3)
        batch_s = time.monotonic() - t0
        stop_other.set()
        # Idle nodes go back down to MIN: wait for their placeholders to leave squeue.
        deadline = time.monotonic() + args.pool_idle + 15
        while time.monotonic() < deadline and (not sampler.samples or sum(
                1 for r in sampler.samples[-1][1] if r[2] == "apgaspy-pool") > low):
            time.sleep(0.2)
        time.sleep(0.5)
        status = _ask(control, op="status")
    finally:
        stop_other.set()
        with contextlib.suppress(Exception):
            _ask(control, op="shutdown")
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(timeout=10)
        sampler.stop()
        other.join(timeout=30)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    return analyse(events, sampler, status, ids, args, batch_s, len(theirs))


def analyse(events: list[dict[str, Any]], sampler: Sampler, status: dict[str, Any],
            ids: dict[int, dict[str, Any]], args: argparse.Namespace, batch_s: float,
            theirs: int) -> dict[str, Any]:
    """Per placeholder and per give-back figures, answers, double booking (module
    docstring); times in seconds."""
    head = next(e for e in events if e["event"] == "server_start")
    offset = head["wall"] - head["t"]  # wall = t + offset

    def wall(ev: dict[str, Any]) -> float:
        return ev["t"] + offset

    queued = {e["job"]: wall(e) for e in events if e["event"] == "queue"}
    joined = [e for e in events if e["event"] == "pool_node_joined"]
    starts = [e for e in events if e["event"] == "start"]
    rows = []
    for ev in (e for e in events if e["event"] == "pool_request"):
        sj, t_req = ev["slurm_job"], wall(ev)
        head_job = (ev.get("waiting") or [None])[0]
        t_need = queued[head_job] + args.pool_wait if head_job in queued else None
        t_run = sampler.first(sj, lambda r: r is not None and r[3] == "RUNNING", t_req - 0.5)
        join = next((e for e in joined if e["slurm_job"] == sj), None)
        t_join = wall(join) if join else None
        first = next((wall(s) for s in starts if join and join["node"] in s.get("nodes", [])
                      and wall(s) >= t_join), None)

        def span(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round(b - a, 3)

        rows.append({
            "slurm_job": sj, "kind": "queue" if head_job is not None else "min",
            "job": head_job, "node": join["node"] if join else None,
            "pool_full_at_need": (t_need is not None
                                  and sampler.placeholders_at(t_need) >= args.max_nodes),
            "need_to_request_s": span(t_need, t_req), "request_to_running_s": span(t_req, t_run),
            "running_to_in_pool_s": span(t_run, t_join), "in_pool_to_job_start_s":
                span(t_join, first), "need_to_in_pool_s": span(t_need, t_join),
            "request_to_in_pool_s": span(t_req, t_join),
            # the pool's own part: before the request and after Slurm ran the placeholder
            "pool_overhead_s": None if None in (t_need, t_run, t_join) else round(
                (t_req - t_need) + (t_join - t_run), 3)})
    backs = []
    for ev in (e for e in events if e["event"] == "pool_give_back"):
        t_back = wall(ev)
        sj = next((j["slurm_job"] for j in reversed(joined)
                   if j["node"] == ev["node"] and wall(j) <= t_back), None)
        due = t_back - ev["idle_s"] + args.pool_idle
        t_cancel = sampler.first(sj, lambda r: r is None or r[3] not in (
            "RUNNING", "PENDING", "CONFIGURING"), t_back) if sj else None
        t_gone = sampler.first(sj, lambda r: r is None, t_back) if sj else None
        backs.append({"node": ev["node"], "slurm_job": sj, "idle_s": ev["idle_s"],
                      "due_to_give_back_s": round(t_back - due, 3),
                      "due_to_cancelled_s": None if t_cancel is None else round(
                          t_cancel - due, 3),
                      "due_to_out_of_squeue_s": None if t_gone is None else round(
                          t_gone - due, 3)})
    answers = []
    ends = {e["job"]: e for e in events if e["event"] == "end"}
    waits = {e["job"]: e.get("wait_s") for e in starts}
    for job in status["jobs"]:
        if job["id"] in ids:
            out = _answer(job["stdout"]) or {}
            result = out.get("result")
            answers.append({"job": job["id"], "name": ids[job["id"]]["name"],
                            "nodes": ids[job["id"]]["nodes"], "state": job["state"],
                            "wait_s": waits.get(job["id"]),
                            "run_s": ends.get(job["id"], {}).get("run_s"),
                            # BC's result is a vector: its length here
                            "result": len(result) if isinstance(result, list) else result,
                            "correct": out.get("correct")})
    return {"placeholders": rows, "give_backs": backs, "answers": answers,
            "batch_s": round(batch_s, 2), "other_user_jobs": theirs,
            "squeue_samples": len(sampler.samples), "double_booked_samples": len(sampler.double),
            "double_booked": sampler.double[:5],
            "slurm_errors": [e for e in events if e["event"] == "pool_slurm_error"][:5]}


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return round(statistics.median(got), 3) if got else None


def summarize(res: dict[str, Any], slurm_start: list[float], idle_s: float) -> dict[str, Any]:
    """Medians and maxima of the figures and the goals met (module docstring)."""
    base = statistics.median(slurm_start)
    grown = [r for r in res["placeholders"] if r["kind"] == "queue"
             and not r["pool_full_at_need"]]
    out: dict[str, Any] = {"slurm_start_median_s": round(base, 3)}
    for key in ("need_to_request_s", "request_to_running_s", "running_to_in_pool_s",
                "in_pool_to_job_start_s", "need_to_in_pool_s"):
        vals = [r[key] for r in res["placeholders"] if r["kind"] == "queue"]
        out[key] = {"median": _median(vals),
                    "max": max((v for v in vals if v is not None), default=None)}
    outs = [b["due_to_out_of_squeue_s"] for b in res["give_backs"]]
    out["due_to_out_of_squeue_s"] = {"median": _median(outs),
                                     "max": max((v for v in outs if v is not None),
                                                default=None)}
    need = [r["need_to_in_pool_s"] for r in grown]
    own = [r["pool_overhead_s"] for r in grown]
    out["pool_overhead_s"] = {"median": _median(own),
                              "max": max((v for v in own if v is not None), default=None)}
    out["placeholders_for_a_need"] = len(need)
    out["need_to_in_pool_met"] = sum(1 for v in need if v is not None and v <= 2 + base)
    out["goals"] = {
        "need_to_in_pool_within_2s_plus_slurm": bool(need) and all(
            v is not None and v <= 2 + base for v in need),
        "pool_overhead_within_2s": bool(own) and all(v is not None and v <= 2 for v in own),
        "back_in_slurm_within_1s": bool(outs) and all(v is not None and v <= 1 for v in outs),
        "no_double_booking": res["double_booked_samples"] == 0,
        "every_answer_exact": bool(res["answers"]) and all(
            a["state"] == "done" and a["correct"] is True for a in res["answers"]),
    }
    out["idle_setting_s"] = idle_s
    return out


def main(argv: list[str] | None = None) -> int:
    """Start the cluster, run both parts, write the JSON; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.slurm_pool",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10, help="jobs of the batch (10)")
    parser.add_argument("--seed", type=int, default=43, help="the batch's seed (43)")
    parser.add_argument("--pool", default="1:3", help="--slurm-pool MIN:MAX (1:3)")
    parser.add_argument("--pool-wait", type=float, default=1.0, help="--pool-wait (1 s)")
    parser.add_argument("--pool-idle", type=float, default=2.0, help="--pool-idle (2 s)")
    parser.add_argument("--pool-poll", type=float, default=0.3, help="--pool-poll (0.3 s)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="results directory")
    args = parser.parse_args(argv)
    args.max_nodes = int(args.pool.partition(":")[2])
    sys.path.insert(0, str(TESTS))
    from cluster import slurm

    user = f"appool{uuid.uuid4().hex[:6]}"
    with slurm.start_slurm(nodes=4, accounting=False) as cluster, \
            tempfile.TemporaryDirectory(prefix="apgaspy-slurm-pool-") as tmp:
        base = slurm_start_times(cluster)
        print(f"bare sbatch to RUNNING: {base} s")
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", user], check=True,
                       timeout=30)
        try:
            res = run_pool(cluster, args, user, Path(tmp))
        finally:
            cluster.run("scancel", "-u", user, check=False)
            deadline = time.monotonic() + 30  # its jobs' processes take a moment to end
            while subprocess.run(["userdel", user], capture_output=True, check=False,
                                 timeout=30).returncode == 8 and time.monotonic() < deadline:
                time.sleep(0.5)
    summary = summarize(res, base, args.pool_idle)
    print(json.dumps(summary, indent=1))
    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    path = write_result("slurm_pool", {"params": params, "slurm_start_s": base,
                                       "summary": summary, **res}, args.out)
    print(f"wrote {path}")
    return 0 if all(summary["goals"][k] for k in ("no_double_booking",
                                                  "every_answer_exact")) else 1


if __name__ == "__main__":
    raise SystemExit(main())
