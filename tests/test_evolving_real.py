"""Evolving jobs for real: an apgaspy evotree job under the real scheduler, and the awkward
cases of a release (docs/guides/evolving.md, docs/guides/evolving-scheduling.md).

* An evolving evotree job (GLB, the evolving monitor in ``task`` mode) submitted to
  ``python -m scheduler serve --algorithm evolving-easy`` on logical nodes, real TCP: busy
  in tree 1 it asks for a node and is grown by a real ``grow`` order once a rigid job frees
  one; in the sequential branch its idle place is released, and it does not ask again
  before tree 2; it ends with the exact task count.  The scheduler's counters, the times of
  the job's requests and the job's place lists are checked.
* A request made while a release is under way, and a release of a place already leaving,
  are refused with a clear error; the release goes on and completes, nothing is lost.
* ``demo --evolving``'s batch and the real evaluation's batch are well formed.
"""

from __future__ import annotations

import ast
import json
import os
import re

import psutil
import pytest
from conftest import wait_until
from test_evolving import _Events, _job_env, java  # noqa: F401 - java is a fixture
from test_scheduler_durable import PY, Serve, job_pids, kill_jobs

from benchmarks import evolving_real
from scheduler.demo import EVOLVING_DEMO_BATCH, demo_entries, evotree_command
from scheduler.jobs import JobClass

#: tree 1 and tree 2: 2 × 200 tasks of 7.5 ms each way (3 s on 2 places, 6 s on one);
#: branch 40 tasks, 6 s
EVOTREE = [PY, *evotree_command(2, 3.0, tasks=200, branch=40).split()[1:]]
EVOTREE_TASKS = 2 * 200 * 2 + 40


@pytest.mark.timeout(150)
def test_an_evolving_evotree_job_grows_releases_and_counts_exactly(tmp_path):
    # the monitor's first decision 1 s after its start (not 3 s): the job asks about 2 s
    # after its APGAS-Ready, before the blocker's end (4 s after the blocker's start), and
    # the grant and the grow that follow the end are done seconds before tree 1 (6 s on one
    # place) would end; the branch (6 s) is longer than the 5 s the request window below
    # needs: the same checks as with trees of 4 s, a branch of 8 s and a blocker of 6 s
    serve = Serve(tmp_path, "--nodes", "2", "--algorithm", "evolving-easy", "--cooldown", "60",
                  "--env", "APGAS_EVOLVING_MODE=task", "--env", "APGAS_EVOLVING_IDLE_GRACE=1",
                  "--env", "APGAS_EVOLVING_STANDBY=1", "--env", "APGAS_LOG_LEVEL=INFO")
    try:
        # a rigid job holds one node for 4 s: the evolving job starts on the other one
        blocker = serve.ask(op="submit", job={"name": "blocker", "nodes": 1,
                                              "command": ["sleep", "4"],
                                              "required_time_s": 30})["jobs"][0]
        wait_until(lambda: serve.events("start", blocker), 20, "the rigid job's start")
        evo = serve.ask(op="submit", job={
            "name": "evotree", "job_class": "evolving", "min_nodes": 1, "max_nodes": 2,
            "command": [*EVOTREE, "--json"], "required_time_s": 120})["jobs"][0]
        wait_until(lambda: serve.ask(op="status")["jobs"][1]["state"] in
                   ("done", "failed", "killed"), 120, "the evotree job's end")
        st = serve.ask(op="status")
        job = st["jobs"][1]
        assert job["state"] == "done", job
        # one request served when the rigid job ended (a request sent at two places, at the
        # maximum, is refused and not counted); one place given back at the start of the
        # branch; the request sent in tree 2 (place 0 alone, busy) stays pending: the Java
        # rule's cool-down (60 s) follows the grant.  None in the branch: a chain of tasks
        # that no other place could take keeps place 0 busy, but its task load low
        assert (job["requests"], job["requests_served"], job["releases"]) == (2, 1, 1)
        assert [e["nodes"] for e in serve.events("start", evo)] == [["127.0.1.2"]]
        assert [e["nodes"] for e in serve.events("evolving_grant", evo)] == [["127.0.1.1"]]
        assert [e["node"] for e in serve.events("evolving_release", evo)] == ["127.0.1.1"]
        end = serve.events("end", blocker)[0]["t"]
        assert serve.events("evolving_grant", evo)[0]["t"] >= end
        printed = [json.loads(line) for line in
                   (serve.run_dir / f"job-{evo}.out").read_text().splitlines()
                   if line.startswith('{"benchmark"')]
        assert len(printed) == 1
        report = printed[0]
        assert (report["result"], report["expected"], report["correct"]) == (
            EVOTREE_TASKS, EVOTREE_TASKS, True)
        assert (report["places"], report["places_at_end"]) == (1, 1)
        assert report["orders"] == [["grow", [1]], ["shrink", [1]]]
        # the job's request lines (counted or refused) against its phases, counted from its
        # APGAS-Ready (sent when GLB defines its handler, just after the evotree's clock
        # starts): none inside the branch, 0.5 s left at both ends for that offset
        (ready,) = [e["t"] for e in serve.events("ready", evo)]
        asked = [e["t"] - ready for e in serve.events("evolving_request", evo)] + [
            e["t"] - ready for e in serve.events("evolving_refused", evo)
            if e["line"].startswith("Evolving;Request;")]
        phases = report["evotree"]["phases"]
        lo, hi = phases["tree1_end_s"] + 0.5, phases["branch_end_s"] - 0.5
        assert hi - lo > 4.0 and [t for t in asked if lo < t < hi] == [], (asked, phases)
        assert [e["nodes"] for e in serve.events("evolving_request", evo)] == [1, 1]
        err = (serve.run_dir / f"job-{evo}.err").read_text()
        # in the branch neither place holds work another could take: both read below
        # APGAS_EVOLVING_LOW (place 0 busy on the chain, place 1 idle), place 1 is released
        (line,) = re.findall(r"evolving monitor: release place\(1\) .*; loads (\{.*\})\)", err)
        loads = ast.literal_eval(line)
        assert sorted(loads) == [0, 1] and max(loads.values()) < 10.0, loads
        sessions = job_pids(serve.state_dir)
        assert len(sessions) == 2
        # no process of either job is left (every process of their sessions has ended; a
        # zombie not reaped yet by its parent has ended)
        wait_until(lambda: _alive(sessions) == [], 10, "no process left")
    finally:
        sessions = job_pids(serve.state_dir)
        serve.stop()
        kill_jobs(sessions)


def _alive(sessions: set[int]) -> list[int]:
    """Pids of the live (not zombie) processes of ``sessions``."""
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sessions and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return out


@pytest.mark.timeout(120)
def test_a_request_during_a_release_and_a_second_release_of_a_leaving_place(
        java, tmp_path, program_factory):  # noqa: F811 - the fixture
    """The handler's ``pre_release`` takes 3 s (``SLOW_RELEASE``): while place 1 leaves, a
    request is refused ("a shrink is under way") and so is a second release of place 1
    ("already leaving"); the release completes, the scheduler hears one release line, and a
    request after it is sent and served: the job ends on places 0 and 2."""
    java.free_nodes.clear()  # the node comes once the request is in
    env = _job_env(java, tmp_path, ["127.0.1.1"], ELASTIC="evolving",
                   APGAS_EVOLVING_STANDBY="3600", APGAS_MAX_HOSTS="2", SLOW_RELEASE="3")
    prog = program_factory("evolving.py", 1, "spawn", env=env)
    event = _Events(prog)
    event("ready")
    assert java.wait_for("APGAS-Ready") == "APGAS-Ready:127.0.1.1"
    prog.send("request\n")
    event("requested")
    assert java.wait_for("Evolving;Request;1") == "Evolving;Request;1:127.0.1.1"
    java.free_nodes.append("127.0.1.2")
    assert java.serve_requests() == [("127.0.1.1", "127.0.1.2")]
    assert list(event("post_grow")["added"]) == ["1"]
    prog.send("release_async 1\n")
    event("pre_release")  # the release is under way (its handler sleeps)
    prog.send("request\n")
    assert "a shrink is under way" in event("error")["error"]
    prog.send("release 1\n")
    assert "places [1] are already leaving" in event("error")["error"]
    released = event("released")
    assert (released["hosts"], released["places"]) == (["127.0.1.2"], [1])
    assert java.wait_for("Evolving;Release;", skip=("growTimeAPGAS",)) == \
        "Evolving;Release;127.0.1.2:127.0.1.1"
    assert java.released == [("127.0.1.1", "127.0.1.2")]
    prog.send("release 1\n")
    assert "were already released" in event("error")["error"]
    prog.send("request\n")  # after the release: sent, and served with the node given back
    event("requested")
    assert java.wait_for("Evolving;Request;1", skip=("shrinkTimeAPGAS",)) == \
        "Evolving;Request;1:127.0.1.1"
    assert list(event("post_grow")["added"]) == ["2"]
    prog.send("stop\n")
    report = event("report")
    result = prog.finish()
    assert result.returncode == 0, result.stderr
    assert report["places"] == [0, 2]
    assert report["calls"] == [["pre_grow", 1], ["post_grow", 2, [0], [1]],
                               ["pre_release", [1]], ["post_shrink", 1, [1]],
                               ["pre_grow", 1], ["post_grow", 2, [0], [2]]]


def test_the_evolving_demo_batch_and_the_evaluation_batch():
    entries = demo_entries(EVOLVING_DEMO_BATCH)
    classes = {e.spec.job_class for e in entries}
    assert classes == {JobClass.RIGID, JobClass.MOLDABLE, JobClass.MALLEABLE, JobClass.EVOLVING}
    assert all(e.spec.command[:3] == ("python", "-m", "benchmarks.evotree")
               and "--sleep" in e.spec.command and e.spec.command[-1] == "--json"
               for e in entries)
    jobs = evolving_real.batch(42, 50, jobs=16, g_s=8, window_s=96, first_at_zero=4)
    rigid = evolving_real.batch(42, 0, jobs=16, g_s=8, window_s=96, first_at_zero=4)
    assert [(j.submit_s, j.tree.size) for j in jobs] == [(j.submit_s, j.tree.size)
                                                          for j in rigid]
    counts = {c: sum(j.spec.job_class is c for j in jobs) for c in JobClass}
    assert counts[JobClass.EVOLVING] == 8 and all(counts[c] >= 2 for c in (
        JobClass.RIGID, JobClass.MOLDABLE, JobClass.MALLEABLE))
    assert all(j.spec.job_class is JobClass.RIGID for j in rigid)
    entries = evolving_real.to_entries(jobs)
    assert [e.submit_s for e in entries] == [j.submit_s for j in jobs]
    assert all(e.spec.command[e.spec.command.index("-s") + 1] == str(j.tree.size)
               for e, j in zip(entries, jobs, strict=True))
    with pytest.raises(ValueError, match="size, g, tasks and branch"):
        evotree_command(0, 8)


def test_real_and_simulated_are_compared_per_metric():
    real = {"makespan_s": 110.0, "mean_turnaround_s": 40.0, "mean_wait_s": 5.0,
            "utilisation": 0.8}
    sim = {"makespan_s": 100.0, "mean_turnaround_s": 50.0, "mean_wait_s": 5.0,
           "utilisation": 0.5}
    assert evolving_real.compare(real, sim) == {"makespan_s": 0.1, "mean_turnaround_s": 0.2,
                                                "mean_wait_s": 0.0, "utilisation": 0.6}


def test_a_start_up_phase_in_the_simulator():
    """A rigid evotree job with a 2 s start-up runs 2 s longer in the simulator (4 g + 2),
    holding its nodes throughout."""
    from scheduler.evolving_simulation import MonitorConfig, simulate_evolving

    plain = evolving_real.batch(1, 0, jobs=1, g_s=4, window_s=10, first_at_zero=1)
    size = plain[0].tree.size
    base = simulate_evolving(plain, "easy", total_nodes=8, monitor=MonitorConfig())
    started = evolving_real.with_startup(
        evolving_real.batch(1, 0, jobs=1, g_s=4, window_s=10, first_at_zero=1), 2.0)
    assert started[0].tree.phases()[0] == ("start-up", 2.0)
    late = simulate_evolving(started, "easy", total_nodes=8, monitor=MonitorConfig())
    assert (base["makespan_s"], late["makespan_s"]) == (16.0, 18.0)
    assert late["utilisation"] == pytest.approx(size / 8)
    with pytest.raises(ValueError, match="startup_s"):
        evolving_real.StartedTree(1, 4.0, -1.0)


def test_an_evolving_job_neither_asks_nor_gives_back_during_its_start_up():
    """The simulated monitor's demand per phase of a started-up evotree: what the job
    holds while it starts up (no monitor yet), its maximum in a tree, one node in the
    branch (below its minimum of 2)."""
    from scheduler.evolving_simulation import EvolvingJob
    from scheduler.jobs import JobSpec

    spec = JobSpec(name="e", job_class="evolving", min_nodes=2, max_nodes=8,
                   required_time_s=100)
    job = EvolvingJob(0, spec, evolving_real.StartedTree(4, 4.0, 5.0), 0.0,
                      nodes=["n1", "n2", "n3"])
    demands = []
    for phase in range(4):
        job.phase = phase
        demands.append(job.demand())
    assert demands == [3, 8, 1, 8]


def test_the_gantt_chart_marks_every_grant_and_release(tmp_path):
    """An evolving job's record: started on n1, granted n2 then n3, gave n2 back, ended; a
    rigid job beside it: two marks up, one down, none for the rigid job."""
    from scheduler.metrics import result_from_records
    from scheduler.plots import gantt, resize_marks
    from scheduler.records import JobRecord

    evo = JobRecord(job_id=1, name="evo", job_class="evolving", program="evotree", size=2,
                    min_nodes=1, max_nodes=3, submit_s=0.0, start_s=0.0, end_s=10.0,
                    allotment=((0.0, ("n1",)), (2.0, ("n1", "n2")), (3.0, ("n1", "n2", "n3")),
                               (6.0, ("n1", "n3")), (10.0, ())), shrinks=0, grows=2)
    rigid = JobRecord(job_id=2, name="r", job_class="rigid", program="evotree", size=1,
                      min_nodes=1, max_nodes=1, submit_s=0.0, start_s=6.0, end_s=9.0,
                      allotment=((6.0, ("n2",)), (9.0, ())), shrinks=0, grows=0)
    result = result_from_records([evo, rigid], algorithm="evolving-smallest", total_nodes=3)
    assert resize_marks(result) == ([(2.0, "n2"), (3.0, "n3")], [(6.0, "n2")])
    path = gantt(result, tmp_path / "gantt.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_summary_averages_over_the_seeds():
    def row(seed, real_ms, sim_ms):
        real = {"makespan_s": real_ms, "mean_turnaround_s": 10.0, "mean_wait_s": 2.0,
                "utilisation": 0.5, "requests": 1, "requests_served": 1, "releases": 0}
        sim = dict(real, makespan_s=sim_ms)
        return {"seed": seed, "algorithm": "evolving-easy", "real": real, "simulated": sim,
                "relative_difference": evolving_real.compare(real, sim)}

    (s,) = evolving_real.summarise([row(1, 120.0, 100.0), row(2, 80.0, 100.0)],
                                   ["evolving-easy"])
    assert s["seeds"] == [1, 2] and s["real"]["makespan_s"] == 100.0
    assert s["relative_difference"]["makespan_s"] == 0.0 and s["within_20pct"] is True
    assert s["largest_seed_difference"]["makespan_s"] == 0.2


@pytest.mark.timeout(120)
def test_run_batch_reports_each_job_and_the_counters(tmp_path):
    """``demo``'s runner on 2 logical nodes: an evolving evotree job and a rigid one, under
    evolving-smallest; the report has every job done with its exact count, the evolving
    counters per job and in sum, the metrics, and no process left."""
    import dataclasses
    import sys

    from scheduler.demo import DemoJob, run_batch

    # trees of 1.5 s (6 s a job; 2 s trees checked the same): the makespan bound below
    # still holds by construction
    batch = (DemoJob(0, "evo", evotree_command(1, 1.5, tasks=50, branch=10), "evolving", 1, 2),
             DemoJob(0, "rigid", evotree_command(1, 1.5, tasks=50, branch=10), "rigid", 1, 1))
    entries = [dataclasses.replace(e, spec=dataclasses.replace(
        e.spec, command=(sys.executable, *e.spec.command[1:]))) for e in demo_entries(batch)]
    report, result = run_batch(entries, "evolving-smallest", nodes=2, out=tmp_path,
                               interval_s=1.0, timeout_s=90)
    assert report["ok"] is True and report["processes_left"] == []
    assert [(j["name"], j["state"], j["result"], j["correct"]) for j in report["jobs"]] == [
        ("evo", "done", 2 * 50 + 10, True), ("rigid", "done", 2 * 50 + 10, True)]
    for key in ("requests", "requests_served", "releases"):
        assert report[key] == sum(j[key] for j in report["jobs"])
    assert report["jobs"][1]["requests"] == 0
    assert report["makespan_s"] == round(result.makespan_s, 3) > 4.0
