"""Nodes that come and go (``scheduler/pool.py``, ``scheduler/pool_book.py``): node add,
drain and remove while jobs run, the named shrink that moves a job off a node, the pool in
``status`` and in the journal.

* the pure state machine (:class:`scheduler.pool_book.PoolBook`) and the named shrink's
  text (:mod:`apgaspy.wire.protocol`);
* on real processes (logical nodes): a node added while a job waits takes the job; a
  removal of an unknown node is one line and exit status 1 (the command line), nothing
  changed; a removal of a node a rigid job holds waits for the job, survives a restart of
  the scheduler (the journal) with the added node, and ends once the job has;
* a malleable GLB job (UTS) on a node being removed is shrunk off it by a named shrink,
  its processes there are gone, the node leaves, the answer is exact;
* a child scheduler (``serve --parent``) asks its parent for the node a job of its own
  needs, runs the job there (exact answer) and gives the node back; a request of the
  child's that comes after its job ended is refused (``evolving_refused``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, alive, descendants, wait_gone, wait_until

from apgaspy.wire.protocol import Order, OrderError, format_order, parse_order
from communicators.socket import SocketMalleableCommunicator
from scheduler import JobSpec, make
from scheduler.control_client import request
from scheduler.nodes import LocalNodes
from scheduler.pool_book import PoolBook
from scheduler.server import PoolError, Server, free_nodes_of, job_of

PY = sys.executable
UTS_D12 = 66_106_929
NODES3 = ("127.0.1.1", "127.0.1.2", "127.0.1.3")


# ------------------------------------------------------------------------- pure


def test_book_drain_then_remove_then_back():
    """drain: draining while held, then drained (held out); add brings it back; remove:
    draining, then gone; states as status shows them."""
    book = PoolBook()
    assert book.refusal("drain", ["127.0.1.2"], NODES3) is None
    book.mark("drain", ["127.0.1.2"])
    assert book.state_of("127.0.1.2", 7) == "draining" and book.held_out("127.0.1.2")
    assert book.settle({"127.0.1.2"}) == []  # a job still holds it
    assert book.settle(set()) == [("127.0.1.2", "drained")]
    assert book.state_of("127.0.1.2", None) == "drained"
    assert book.back("127.0.1.2") and book.state_of("127.0.1.2", None) == "free"
    book.mark("remove", ["127.0.1.3"], force=True)
    assert "127.0.1.3" in book.force
    assert book.settle(set()) == [("127.0.1.3", "gone")]
    assert book.state_of("127.0.1.3", None) == "gone" and not book.force
    assert book.state_of("127.0.1.1", 3) == "busy"


def test_book_refusals_are_one_line_and_change_nothing():
    book = PoolBook()
    book.mark("remove", ["127.0.1.3"])
    before = book.to_json()
    assert book.refusal("remove", ["127.0.1.9"], NODES3).startswith("unknown node '127.0.1.9'")
    assert book.refusal("remove", [], NODES3) == "name the node(s) to remove"
    assert book.refusal("remove", ["127.0.1.3"], NODES3) == "127.0.1.3 is being removed already"
    assert book.refusal("drain", ["127.0.1.3"], NODES3) == "127.0.1.3 is draining already"
    assert "would leave no node" in book.refusal("remove", ["127.0.1.1", "127.0.1.2"], NODES3)
    # A pool that grows by itself (a Slurm pool) may be emptied, and a removal under way
    # may be forced (a node lost).
    assert book.refusal("remove", ["127.0.1.1", "127.0.1.2"], NODES3, may_empty=True) is None
    assert book.refusal("remove", ["127.0.1.3"], NODES3, force=True) is None
    assert book.refusal("drain", ["127.0.1.1"], NODES3, {"job 4 'big'": 2}) == \
        "drain 127.0.1.1 would leave 1 node; job 4 'big' needs 2"
    assert book.refusal("remove", ["127.0.1.1"], NODES3, {"job 4 'one'": 1}) is None
    assert book.refusal("shrink", ["127.0.1.1"], NODES3).startswith("unknown node action")
    book.settle(set())
    assert book.refusal("remove", ["127.0.1.3"], NODES3) == "127.0.1.3 has left the pool already"
    assert before != book.to_json()  # the settle changed it, the refusals did not
    assert all("\n" not in (book.refusal("remove", [n], NODES3) or "") for n in NODES3)


def test_book_round_trips_through_json_and_old_journals():
    book = PoolBook()
    book.added_node("127.0.1.4", [6, 7])
    book.mark("drain", ["127.0.1.2"], force=True)
    book.record(1.5, "drain", ["127.0.1.2"], wall=1e9)
    again = PoolBook.from_json(book.to_json())
    assert again == book
    assert PoolBook.from_json("{}") == PoolBook()  # a journal of an older pool format
    with pytest.raises(ValueError):
        PoolBook.from_json("[1]")


def test_named_shrink_text():
    """``shrink <n> <host...>``: parsed and formatted; plain ``shrink <n>`` unchanged."""
    assert parse_order("shrink 2 h1 h2\n") == Order("shrink", 2, ("h1", "h2"))
    assert format_order(Order("shrink", 1, ("127.0.1.2",))) == "shrink 1 127.0.1.2\n"
    assert format_order(Order("shrink", 3)) == "shrink 3\n"
    with pytest.raises(OrderError, match="named twice"):
        parse_order("shrink 2 h1 h1")
    with pytest.raises(OrderError, match="needs 2 host names"):
        parse_order("shrink 2 h1")


def test_a_named_shrink_picks_the_places_of_exactly_those_hosts():
    """The runtime's side: every place of each named host (two places a host here); a host
    the job holds no place on, place 0's host, or a count that does not match refuse."""
    from apgaspy import MalleabilityError, Place
    from apgaspy._membership import PlaceInfo
    from apgaspy.elastic._malleability import Malleability

    slots: dict[int, list[PlaceInfo]] = {}
    for pid, (host, slot) in enumerate([("a", 0), ("a", 0), ("b", 1), ("b", 1), ("c", 2),
                                        ("c", 2)]):
        slots.setdefault(slot, []).append(PlaceInfo(pid, "tcp://x:1", host, 100 + pid,
                                                    "world", slot))
    assert Malleability._named(("c",), 1, slots, 0) == [Place(4), Place(5)]
    assert Malleability._named(("c", "b"), 2, slots, 0) == [Place(4), Place(5), Place(2),
                                                            Place(3)]
    assert Malleability._named((), 1, slots, 0) is None  # a plain shrink: the handler chooses
    for hosts, n, why in ((("d",), 1, "holds no place on 'd'"), (("a",), 1, "place 0's host"),
                          (("b",), 2, "names 1")):
        with pytest.raises(MalleabilityError, match=why):
            Malleability._named(hosts, n, slots, 0)


# ------------------------------------------------------------------------- real processes


def _server(tmp: Path, n: int, algorithm: str = "easy", **kw) -> Server:
    server = Server(LocalNodes(n), make(algorithm, **kw), port=0, run_dir=tmp / "run",
                    interval_s=0.5, grace_s=1.0, state_dir=tmp / "state")
    server.start()
    return server


def _cli(control: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PY, "-m", "scheduler", *args, "--control", str(control)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(90)
def test_add_while_waiting_remove_unknown_and_a_drain_across_a_restart(tmp_path):
    """1 logical node held by a rigid job; a second job waits.  ``node add`` makes
    127.0.1.2 and the waiting job starts there; ``node remove 127.0.1.9`` is refused (one
    line, exit 1, nothing changed); ``node remove 127.0.1.1`` drains the node (its rigid
    job runs on).  The scheduler stops without ending the jobs and a new one resumes from
    the journal: 127.0.1.2 is still a node, 127.0.1.1 still draining; once its job ends it
    is gone."""
    first = _server(tmp_path, 1)
    second = None
    pids: list[int] = []
    try:
        control = first.serve_control(tmp_path / "control.sock")
        hold = first.submit(JobSpec(name="hold", command=("sleep", "60"), nodes=1,
                                    required_time_s=120))
        wait = first.submit(JobSpec(name="wait", command=("sleep", "60"), nodes=1,
                                    required_time_s=120))
        wait_until(lambda: job_of(first.status(), hold)["state"] == "running", 20, "hold")
        assert job_of(first.status(), wait)["state"] == "waiting"

        added = _cli(control, "node", "add")
        assert added.returncode == 0 and added.stdout.strip() == "added 127.0.1.2", added
        wait_until(lambda: job_of(first.status(), wait)["state"] == "running", 20, "wait")
        assert job_of(first.status(), wait)["nodes"] == ["127.0.1.2"]

        before = first.status()
        bad = _cli(control, "node", "remove", "127.0.1.9")
        assert bad.returncode == 1 and bad.stdout == ""
        assert bad.stderr.strip().splitlines() == [
            "error: unknown node '127.0.1.9' (the nodes: 127.0.1.1, 127.0.1.2)"]
        after = first.status()
        assert after["nodes"] == before["nodes"] and after["pool"] == before["pool"]

        gone = _cli(control, "node", "remove", "127.0.1.1")
        assert gone.returncode == 0 and gone.stdout.startswith("removing 127.0.1.1"), gone
        states = {n["name"]: n["state"] for n in first.status()["nodes"]}
        assert states == {"127.0.1.1": "draining", "127.0.1.2": "busy"}
        table = _cli(control, "status").stdout
        assert "draining" in table and "pool:" in table and "remove 127.0.1.1" in table
        pids = [job_of(first.status(), j)["pid"] for j in (hold, wait)]
        first.detach()  # as a crash: the jobs run on

        second = _server(tmp_path, 1)
        st = second.status()
        assert {n["name"]: n["state"] for n in st["nodes"]} == states
        assert job_of(st, hold)["adopted"] and job_of(st, hold)["state"] == "running"
        with pytest.raises(PoolError, match="being removed already"):
            second.node_remove(["127.0.1.1"])
        second.cancel(hold)
        wait_until(lambda: any(n["state"] == "gone" for n in second.status()["nodes"]), 20,
                   "127.0.1.1 gone")
        st = second.status()
        assert [(n["name"], n["state"]) for n in st["nodes"]] == [
            ("127.0.1.2", "busy"), ("127.0.1.1", "gone")]
        assert [c["change"] for c in st["pool"]["changes"]] == ["add", "remove", "gone"]
        assert free_nodes_of(st) == []
    finally:
        for server in (second, first):
            if server is not None:
                server.shutdown()
    assert wait_gone(pids, 10) == []


@pytest.mark.timeout(120)
def test_a_malleable_glb_job_is_shrunk_off_a_removed_node(tmp_path):
    """2 logical nodes, a malleable UTS d=12 (GLB) grown onto both; ``node remove
    127.0.1.2``: the job gets ``shrink 1 127.0.1.2``, gives that node back (its processes
    there end), the node is gone, and the job finishes on 127.0.1.1 with the exact count."""
    server = _server(tmp_path, 2, "malleable", cooldown_s=0)
    pid = None
    try:
        uts = server.submit(JobSpec(
            name="uts12", command=(PY, "-m", "benchmarks.uts", "-d", "12", "--json"),
            job_class="malleable", min_nodes=1, max_nodes=2, required_time_s=120))

        def events(kind: str) -> list[dict]:
            return [e for e in server.events if e["event"] == kind and e["job"] in (uts, None)]

        wait_until(lambda: events("grow_done"), 60, "the grow onto 127.0.1.2")
        pid = job_of(server.status(), uts)["pid"]
        grown = set(descendants(pid))
        server.node_remove(["127.0.1.2"])
        wait_until(lambda: events("node_gone"), 30, "127.0.1.2 gone")
        order = events("shrink_order")[-1]
        assert order["wanted"] == ["127.0.1.2"]
        assert events("shrink_done")[-1]["released"] == ["127.0.1.2"]
        left = grown - set(descendants(pid))
        assert left and not [p for p in left if alive(p)]  # its places on 127.0.1.2 ended
        assert job_of(server.status(), uts)["nodes"] == ["127.0.1.1"]
        wait_until(lambda: job_of(server.status(), uts)["state"] != "running", 60, "the end")
        job = job_of(server.status(), uts)
        assert job["state"] == "done", job
        out = next(json.loads(line) for line in Path(job["stdout"]).read_text().splitlines()
                   if line.startswith("{") and '"benchmark"' in line)
        assert out["result"] == UTS_D12 and out["correct"] is True
        assert ["shrink", [1]] in out["orders"]  # GLB released exactly place 1, on 127.0.1.2
        assert [n["state"] for n in server.status()["nodes"]] == ["free", "gone"]
    finally:
        server.shutdown()
    if pid is not None:
        assert wait_gone([pid, *descendants(pid)], 10) == []


@pytest.mark.timeout(120)
def test_a_child_scheduler_asks_its_parent_for_a_node_and_gives_it_back(tmp_path,
                                                                         monkeypatch):
    """A parent on 3 logical nodes (``evolving-elastic``: an evolving job starts at its
    minimum) runs a child scheduler (``serve --parent``, an evolving job started on 1 node).  A rigid N-Queens job of 2 nodes
    submitted to the child makes the child ask the parent (``Evolving;Request;1``); the
    parent's grant becomes the child's second node, the job runs there with the exact count,
    and the idle node goes back (``Evolving;Release``).  A request the child would send
    after its job ended (signed with its key, from its address, as its communicator sends
    it) is refused by the parent (one ``evolving_refused``), which changes nothing."""
    parent = Server(LocalNodes(3), make("evolving-elastic", cooldown_s=0), port=0,
                    run_dir=tmp_path / "run", interval_s=0.5, grace_s=1.0, cwd=str(ROOT))
    parent.start()
    control = tmp_path / "child.sock"
    try:
        child = parent.submit(JobSpec(
            name="child", job_class="evolving", min_nodes=1, max_nodes=3, required_time_s=120,
            command=(PY, "-m", "scheduler", "serve", "--parent", "--control", str(control),
                     "--run-dir", str(tmp_path / "child-run"), "--interval", "0.5",
                     "--grace", "1", "--algorithm", "easy", "--quiet")))

        def events(kind: str) -> list[dict]:
            return [e for e in parent.events if e["event"] == kind and e["job"] == child]

        wait_until(lambda: events("ready") and control.exists(), 30, "the child scheduler")
        assert job_of(parent.status(), child)["nodes"] == ["127.0.1.1"]
        key = (tmp_path / "run" / f"job-{child}.key").read_text().strip()  # gone at its end
        reply = request(control, {"op": "submit", "job": {
            "name": "nq10", "command": [PY, "-m", "benchmarks.nqueens", "-n", "10", "--json"],
            "nodes": 2, "required_time_s": 60}})
        nq = reply["jobs"][0]
        wait_until(lambda: job_of(request(control, {"op": "status"}), nq)["state"]
                   not in ("waiting", "running"), 60, "the child's job")
        job = job_of(request(control, {"op": "status"}), nq)
        assert job["state"] == "done" and job["nodes"] == [], job
        out = next(json.loads(line) for line in Path(job["stdout"]).read_text().splitlines()
                   if line.startswith("{") and '"benchmark"' in line)
        assert out["result"] == 724 and out["correct"] is True
        assert events("evolving_request") and events("evolving_grant")[0]["nodes"] == \
            ["127.0.1.2"]
        wait_until(lambda: events("evolving_release"), 20, "the node given back")
        assert events("evolving_release")[0]["node"] == "127.0.1.2"
        assert job_of(parent.status(), child)["nodes"] == ["127.0.1.1"]
        request(control, {"op": "shutdown"})
        wait_until(lambda: job_of(parent.status(), child)["state"] != "running", 30,
                   "the child's end")
        assert job_of(parent.status(), child)["state"] == "done"
        # A late Evolving;Request of the child: refused, counted once, nothing changes.
        asked = job_of(parent.status(), child)["requests"]
        (tmp_path / "late.nodes").write_text("127.0.1.1\n")
        for name, value in (("SCHEDULER_IP", parent.status()["listen"]),
                            ("SCHEDULER_PORT", str(parent.port)), ("SCHEDULER_KEY", key),
                            ("JOBNAME", str(child)),
                            ("NODE_FILE", str(tmp_path / "late.nodes"))):
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("SCHEDULER_KEY_FILE", raising=False)
        SocketMalleableCommunicator().request(1)
        refused = wait_until(lambda: events("evolving_refused"), 10, "the refusal")
        time.sleep(0.5)  # nothing else comes of it
        assert [e["reason"] for e in events("evolving_refused")] == [
            "no running job at that address"], refused
        st = parent.status()
        assert job_of(st, child)["requests"] == asked and job_of(st, child)["requested"] == 0
        assert len(free_nodes_of(st)) == 3 and len(events("evolving_grant")) == 1
    finally:
        parent.shutdown()
    assert parent.leftover_pids() == []
