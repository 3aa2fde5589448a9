"""The evolving counters survive a scheduler's crash (docs/guides/durable-scheduler.md).

A stand-in job that speaks the protocol (tests/test_scheduler_real.py's ``FAKE_JOB``) runs as
an evolving job under ``serve --algorithm evolving-easy``; twice it gives a node back and
asks for one, granted by a real ``grow`` order.  The scheduler is killed
(SIGKILL) and restarted on the same state directory: ``status`` shows the same
``requested``, ``requests``, ``requests_served`` and ``releases``, read from the journal, and
so does ``history`` after the job has ended.  A journal written before the counters existed
opens with them at 0.
"""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from conftest import ROOT, old_journal, wait_until
from test_scheduler_durable import PY, Serve, stop_all
from test_scheduler_real import FAKE_JOB

from scheduler.journal import Journal


def _send(port: int, line: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line.encode() + b"\n")


def _counters(job: dict) -> tuple:
    return (job["requested"], job["requests"], job["requests_served"], job["releases"],
            job["nodes"])


@pytest.mark.timeout(120)
def test_the_evolving_counters_survive_a_restart(tmp_path):
    fake = tmp_path / "fake_job.py"
    fake.write_text(FAKE_JOB)
    env_args = ("--nodes", "3", "--algorithm", "evolving-easy", "--cooldown", "0")
    serve = Serve(tmp_path, *env_args)
    second = None
    try:
        job_id = serve.ask(op="submit", job={
            "name": "evo", "job_class": "evolving", "min_nodes": 1, "max_nodes": 3,
            "command": ["env", "FAKE_SECONDS=60", f"FAKE_END_FILE={tmp_path / 'end'}", PY,
                        str(fake)],
            "required_time_s": 120, "auth": "plain"})["jobs"][0]
        wait_until(lambda: serve.events("ready", job_id), 30, "APGAS-Ready")
        st = serve.ask(op="status")
        port = st["port"]
        job = st["jobs"][0]
        assert job["nodes"] == ["127.0.1.1", "127.0.1.2", "127.0.1.3"]
        _send(port, "Evolving;Release;127.0.1.3:127.0.1.1")
        wait_until(lambda: serve.events("evolving_release", job_id), 20, "the release")
        _send(port, "Evolving;Request;1:127.0.1.1")
        wait_until(lambda: serve.events("grow_done", job_id), 30, "the grant")
        assert [e["nodes"] for e in serve.events("evolving_grant", job_id)] == [["127.0.1.3"]]
        _send(port, "Evolving;Release;127.0.1.2:127.0.1.1")
        wait_until(lambda: len(serve.events("evolving_release", job_id)) == 2, 20,
                   "the second release")
        _send(port, "Evolving;Request;1:127.0.1.1")
        wait_until(lambda: len(serve.events("grow_done", job_id)) == 2, 30, "the second grant")
        before = _counters(serve.ask(op="status")["jobs"][0])
        assert before == (0, 2, 2, 2, ["127.0.1.1", "127.0.1.3", "127.0.1.2"])
        serve.crash()
        second = Serve(tmp_path, *env_args)
        wait_until(lambda: second.ask(op="status")["jobs"][0]["state"] == "running", 20,
                   "the job adopted")
        assert _counters(second.ask(op="status")["jobs"][0]) == before
        (tmp_path / "end").touch()  # the job ends now
        wait_until(lambda: second.ask(op="status")["jobs"][0]["state"] == "done", 60,
                   "the job's end")
        second.stop()
        out = subprocess.run([PY, "-m", "scheduler", "history", "--state-dir",
                              str(second.state_dir), "--json"], cwd=ROOT, capture_output=True,
                             text=True, timeout=30, check=True)
        (row,) = json.loads(out.stdout)
        assert (row["requests"], row["requests_served"], row["releases"]) == (2, 2, 2)
    finally:
        stop_all(serve, second)


def test_a_journal_without_the_counters_gets_them(tmp_path):
    """A journal file of the schema before the evolving counters: opened by a scheduler, the
    columns are added (0); opened read only, the rows read with 0."""
    state = tmp_path / "state"
    old_journal(state, ("requested", "requests", "requests_served", "releases"), "done")
    ro = Journal(state, readonly=True)
    try:
        (row,) = ro.rows()
        assert (row.id, row.requests, row.requests_served, row.releases) == (1, 0, 0, 0)
    finally:
        ro.close()
    rw = Journal(state)
    try:
        (row,) = rw.rows()
        assert (row.requested, row.requests, row.requests_served, row.releases) == (0, 0, 0, 0)
        row.requests, row.releases = 3, 1
        rw.put(row)
        (row,) = rw.rows()
        assert (row.requests, row.releases) == (3, 1)
    finally:
        rw.close()
