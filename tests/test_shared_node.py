"""Jobs that share a first node are full citizens (docs/guides/scheduler.md, "Cores and
shapes"; docs/guides/colocation.md):

* on one logical node of 3 cores, two malleable UTS jobs (``#CORES_PER_NODE 1``, 1-2 nodes)
  and a rigid ``#CORES 1`` UTS job run side by side, all with place 0 on the same address.
  Each malleable job listens on an order port of its own (``APGAS_ORDER_PORT=0``,
  announced as ``APGAS-Ready;<port>``): both are ready and reachable, none says
  ``APGAS-Rigid``; once a second node is added, the second job is grown onto it through its
  own port; the rigid job, which takes no orders, still reports its load (its duty cycle is
  in ``status``); every count is exact;
* the order port is journaled, and a journal of the schema before it opens (no port).

Every test ends the processes it started (by pid) and leaves none behind.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import old_journal, wait_until

from scheduler import JobClass, JobSpec, make
from scheduler.journal import Journal
from scheduler.nodes import LocalNodes
from scheduler.server import Server, job_of

PY = sys.executable
N1, N2 = "127.0.1.1", "127.0.1.2"
UTS_D12 = 66_106_929
UTS = (PY, "-m", "benchmarks.uts", "-d", "12", "--json")


def uts_result(path: str) -> dict[str, Any]:
    return next(json.loads(x) for x in Path(path).read_text().splitlines()
                if x.startswith("{"))


@pytest.mark.timeout(150)
def test_jobs_on_one_node_each_take_orders_and_report(tmp_path, monkeypatch):
    monkeypatch.delenv("APGAS_PLACES", raising=False)  # each job's shape decides
    server = Server(LocalNodes(1, cores_per_node=3), make("malleable", cooldown_s=0.0),
                    port=0, run_dir=tmp_path / "run", log_path=tmp_path / "events.jsonl",
                    interval_s=0.5, grace_s=1.0, job_env={"APGAS_LOAD_INTERVAL": "0.5"})
    server.start()

    def seen(kind: str, job: int) -> list[dict[str, Any]]:
        return [e for e in list(server.events) if e["event"] == kind and e["job"] == job]

    try:
        a, b = (server.submit(JobSpec(name=name, job_class=JobClass.MALLEABLE, min_nodes=1,
                                      max_nodes=2, cores_per_node=1, required_time_s=120,
                                      command=UTS)) for name in ("a", "b"))
        r = server.submit(JobSpec(name="r", cores=1, required_time_s=120, command=UTS))
        wait_until(lambda: seen("ready", a) and seen("ready", b), 60, "both malleable jobs")
        st = server.status()
        ports = [seen("ready", j)[0]["order_port"] for j in (a, b)]
        assert len(set(ports)) == 2 and server.port not in ports  # a port each, not 8081's
        for job, port in zip((a, b), ports, strict=True):
            info = job_of(st, job)
            assert info["nodes"] == [N1] and info["order_port"] == port
            assert info["ready"] and info["reachable"]
        assert job_of(st, r)["nodes"] == [N1] and job_of(st, r)["elastic"] is False
        server.node_add([N2])
        wait_until(lambda: seen("grow_done", b), 60, "the second job's grow")
        wait_until(lambda: job_of(server.status(), r)["duty_cycle"] is not None, 30,
                   "the rigid job's load")
        wait_until(server.all_done, 90, "the three jobs")
        st = server.status()
        assert seen("grow_done", b)[0]["added"] == [N2]
        for job in (a, b, r):
            info = job_of(st, job)
            res = uts_result(info["stdout"])
            assert info["state"] == "done" and res["result"] == UTS_D12 and res["correct"]
        assert ["grow", [1]] in uts_result(job_of(st, b)["stdout"])["orders"]
        assert not [e for e in list(server.events) if e["event"] in ("rigid", "line_refused")]
        assert not seen("ready", r)  # run as rigid: no order port, no APGAS-Ready
    finally:
        server.shutdown()
    assert server.leftover_pids() == []


def test_the_order_port_is_journaled_and_old_journals_open(tmp_path):
    """A row keeps its order port; a journal without the column gets it (None) when a
    scheduler opens it, and reads None read only."""
    state = tmp_path / "state"
    old_journal(state, ("order_port",), "running")
    ro = Journal(state, readonly=True)
    try:
        assert [row.order_port for row in ro.rows()] == [None]
    finally:
        ro.close()
    rw = Journal(state)
    try:
        (row,) = rw.rows()
        assert row.order_port is None
        row.order_port = 40123
        rw.put(row)
        assert [row.order_port for row in rw.rows()] == [40123]
    finally:
        rw.close()
