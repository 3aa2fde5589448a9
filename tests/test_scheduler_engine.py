"""One engine, two clocks: the same batch, evolving job included, through the real scheduler
on logical nodes and through the simulator's evolving mode gives the same records, counter by
counter (docs/design/scheduler-structure.md: both apply a decision, an evolving job's request
and its release by the same transitions of :class:`scheduler.job_state.JobState`).

The batch, on 4 nodes under ``evolving-elastic`` (no rescale gap): a malleable job M (1-3
nodes) and an evolving job E (1-2 nodes).  In simulation (``evotree`` programs, the runtime's
monitor) it goes:

1. both start at their minimum; M announces ``APGAS-Ready`` and is grown onto two idle nodes;
2. E asks for a node: none is free, so M is shrunk by one, and the node is granted to E;
3. E's sequential branch leaves its second place idle: E releases the node, M grows onto it;
4. E's second tree: E asks again, M is shrunk again, E is granted the node;
5. E ends: M grows onto one of the two nodes (its maximum); M ends.

The real run plays the same script with stand-in jobs that speak the protocol (they answer
orders; the test sends E's request and release lines and ends each job when its turn
comes), each step once the previous one has been carried out.  The records of both runs must
then agree on ``shrinks``, ``grows``, ``requests``, ``requests_served``, ``releases`` and the
sizes of the allotment's steps (not on times): M 2 shrinks, 3 grows; E 2 requests, 2 served,
1 release and no grow (a grant is not a grow).
"""

from __future__ import annotations

import dataclasses
import socket

import pytest
from conftest import wait_until
from test_scheduler_real import FAKE_JOB, PY

from scheduler import JobSpec
from scheduler.algorithms import make
from scheduler.evolving_simulation import EvolvingJob, EvolvingSimulator, EvoTree, MonitorConfig
from scheduler.model import ResizeCostModel
from scheduler.nodes import LocalNodes
from scheduler.records import JobRecord
from scheduler.server import Server, job_of
from scheduler.simulate import SimConfig

M = JobSpec(name="m", job_class="malleable", min_nodes=1, max_nodes=3, required_time_s=300,
            auth="plain")
E = JobSpec(name="e", job_class="evolving", min_nodes=1, max_nodes=2, required_time_s=300,
            auth="plain")
#: The stand-in of test_scheduler_real, ended by a file named after its job id.
STAND_IN = FAKE_JOB.replace(
    'end_file = os.environ.get("FAKE_END_FILE")',
    'end_file = os.path.join(os.environ["FAKE_END_DIR"], os.environ["JOBNAME"])')
COUNTERS = ("shrinks", "grows", "requests", "requests_served", "releases")


def _algorithm():
    return make("evolving-elastic", rescale_gap_s=0.0)


def _counts(record: JobRecord) -> dict[str, object]:
    out: dict[str, object] = {k: getattr(record, k) for k in COUNTERS}
    out["sizes"] = [len(nodes) for _, nodes in record.allotment]
    return out


def _simulated() -> dict[str, dict[str, object]]:
    jobs = [EvolvingJob(1, M, EvoTree(3, 30.0), 0.0), EvolvingJob(2, E, EvoTree(2, 10.0), 0.0)]
    result = EvolvingSimulator(jobs, _algorithm(), SimConfig(total_nodes=4), MonitorConfig(),
                               ResizeCostModel()).run()
    return {r.name: _counts(r) for r in result.records}


def test_the_simulated_script_is_the_one_the_real_run_plays():
    """The simulated side of the batch, as the module docstring tells it."""
    assert _simulated() == {
        "m": {"shrinks": 2, "grows": 3, "requests": 0, "requests_served": 0, "releases": 0,
              "sizes": [1, 3, 2, 3, 2, 3, 0]},
        "e": {"shrinks": 0, "grows": 0, "requests": 2, "requests_served": 2, "releases": 1,
              "sizes": [1, 2, 1, 2, 0]},
    }


def _send(port: int, line: str) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(line.encode() + b"\n")


@pytest.mark.timeout(90)
def test_real_and_simulated_records_agree_counter_by_counter(tmp_path):
    fake = tmp_path / "stand_in.py"
    fake.write_text(STAND_IN)
    ends = tmp_path / "ends"
    ends.mkdir()
    server = Server(LocalNodes(4), _algorithm(), port=0, run_dir=tmp_path / "run",
                    log_path=tmp_path / "events.jsonl", interval_s=0.5, grace_s=1.0,
                    job_env={"FAKE_SECONDS": "80", "FAKE_END_DIR": str(ends)})
    server.start()
    try:
        m = server.submit(dataclasses.replace(M, command=(PY, str(fake))))
        e = server.submit(dataclasses.replace(E, command=(PY, str(fake))))

        def done(job: int, kind: str) -> int:
            return sum(1 for ev in list(server.events) if ev["event"] == kind
                       and ev["job"] == job)

        def status(job: int) -> dict:
            return job_of(server.status(), job)

        # 1. both run; M, ready, is grown onto the two idle nodes
        wait_until(lambda: done(m, "grow_done") == 1 and status(e)["state"] == "running",
                   20, "M's first grow and E's start")
        assert len(status(m)["nodes"]) == 3 and len(status(e)["nodes"]) == 1
        address = status(e)["nodes"][0]
        wait_until(lambda: done(e, "ready"), 10, "E's APGAS-Ready")
        # 2. E asks: M is shrunk by one and the node goes to E
        _send(server.port, f"Evolving;Request;1:{address}")
        wait_until(lambda: done(m, "shrink_done") == 1 and done(e, "grow_done") == 1, 20,
                   "the first shrink and grant")
        # 3. E gives its second node back: M grows onto it
        second = status(e)["nodes"][1]
        _send(server.port, f"Evolving;Release;{second}:{address}")
        wait_until(lambda: done(m, "grow_done") == 2, 20, "M's second grow")
        # 4. E asks again: M is shrunk again and the node goes to E
        _send(server.port, f"Evolving;Request;1:{address}")
        wait_until(lambda: done(m, "shrink_done") == 2 and done(e, "grow_done") == 2, 20,
                   "the second shrink and grant")
        # 5. E ends: M grows to its maximum; then M ends
        (ends / str(e)).touch()
        wait_until(lambda: done(m, "grow_done") == 3, 20, "M's third grow")
        (ends / str(m)).touch()
        wait_until(server.all_done, 20, "both ends")
        assert [status(j)["state"] for j in (m, e)] == ["done", "done"]
        real = {r.name: _counts(r) for r in server.records()}
    finally:
        server.shutdown()
    assert server.leftover_pids() == []
    assert real == _simulated()
