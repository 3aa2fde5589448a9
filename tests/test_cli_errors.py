"""What a user sees when a command line is given bad input, and what the commands print
while they wait: one line naming the value, a non-zero exit status, no traceback (unless
``--debug``); the subcommand's own usage for its usage errors; evolving activity and
refused jobs in the human-readable output."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from apgaspy import ConfigurationError
from scheduler import client_cli
from scheduler.__main__ import main
from scheduler.client_cli import format_status
from scheduler.jobs import BatchFileError, load_batch
from scheduler.serve_cli import format_event

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_SWF = ROOT / "scheduler" / "data" / "sample.swf"


def one_error_line(err: str, prefix: str) -> str:
    """The single line of ``err``, which must start with ``prefix`` and hold no traceback."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(prefix), err
    assert "Traceback" not in err
    return lines[0]


# ------------------------------------------------------------------ python -m scheduler


def test_simulate_missing_trace_is_one_line(capsys, tmp_path):
    missing = tmp_path / "nope.swf"
    assert main(["simulate", "--swf", str(missing), "--quiet"]) == 1
    line = one_error_line(capsys.readouterr().err, "python -m scheduler simulate: error: ")
    assert line.endswith(f"{missing}: No such file or directory")


def test_simulate_file_that_is_not_a_trace_is_one_line(capsys, tmp_path):
    script = tmp_path / "some.py"
    script.write_text("print('hello')\n")
    assert main(["simulate", "--swf", str(script), "--quiet"]) == 1
    line = one_error_line(capsys.readouterr().err, "python -m scheduler simulate: error: ")
    assert f"{script}: line 1: expected 18 SWF fields, got 1" in line


def test_debug_shows_the_traceback(tmp_path):
    missing = tmp_path / "nope.swf"
    with pytest.raises(FileNotFoundError):
        main(["simulate", "--swf", str(missing), "--quiet", "--debug"])
    with pytest.raises(FileNotFoundError):
        main(["--debug", "simulate", "--swf", str(missing), "--quiet"])


def test_unknown_option_of_a_subcommand_prints_its_usage(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["submit", "--nodes", "2", "x.sh"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m scheduler submit ")
    assert err.rstrip().endswith("python -m scheduler submit: error: unrecognized arguments: "
                                 "--nodes (a job's node counts are its script's #NODES, or "
                                 "#MIN_NODES and #MAX_NODES, lines)")


@pytest.mark.parametrize(("argv", "message"), [
    (["demo", "--nodes", "0"], "argument --nodes: expected a number >= 1, got 0"),
    (["demo", "--port", "70000"], "argument --port: a port is 0-65535 (0: any free), got 70000"),
    (["demo", "--interval", "0"], "argument --interval: expected seconds > 0, got '0'"),
    (["demo", "--cooldown", "-1"], "argument --cooldown: expected seconds >= 0, got '-1'"),
    (["demo", "--timeout", "soon"], "argument --timeout: expected seconds, got 'soon'"),
    (["simulate", "--interval-s", "0"], "argument --interval-s: expected seconds > 0, got '0'"),
    (["simulate", "--ready-s", "nan"], "argument --ready-s: expected seconds >= 0, got 'nan'"),
    (["simulate", "--first-at-zero", "-2"],
     "argument --first-at-zero: expected a whole number >= 0, got -2"),
    (["simulate", "--serial-fraction", "2"],
     "argument --serial-fraction: expected a number from 0 to 1, got '2'"),
    (["simulate", "--required-factor", "inf"],
     "argument --required-factor: expected a finite number > 0, got 'inf'"),
    (["simulate", "--keep-free", "x"], "argument --keep-free: expected a whole number, got 'x'"),
    (["simulate", "--shares", "120"], "argument --shares: shares are percentages 0-100, got '120'"),
    (["serve", "--interval", "0"], "argument --interval: expected seconds > 0, got '0'"),
])
def test_the_command_lines_share_their_validators(capsys, argv, message):
    """demo, simulate and serve refuse a bad number the same way, before doing anything:
    exit status 2 and the subcommand's usage, ending in the one message of the shared
    validator (scheduler/_argtypes.py)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: python -m scheduler {argv[0]} ")
    assert err.rstrip().endswith(f"python -m scheduler {argv[0]}: error: {message}"), err


def test_batch_file_error_lists_the_documented_fields(tmp_path):
    batch = tmp_path / "jobs.json"
    batch.write_text(json.dumps([{"name": "a", "nodes": 1, "command": "true", "node": 2}]))
    with pytest.raises(BatchFileError) as exc:
        load_batch(batch)
    message = str(exc.value)
    assert "unknown field(s) node; known: name, job_class, nodes" in message
    assert message.endswith("priority, cores, cores_per_node, profile, submit_s")
    assert "declared_class" not in message


def test_simulate_table_shows_refused_jobs_and_no_paper_figure_off_its_batches(capsys):
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["simulate", "--swf", str(SAMPLE_SWF), "--nodes", "4", "--quiet",
                     "--algorithms", "fcfs,malleable", "--shares", "0,100"]) == 0
    text = out.getvalue()
    header = text.splitlines()[0].split()
    assert header[-1] == "refused"
    out_json = io.StringIO()
    with redirect_stdout(out_json):
        main(["simulate", "--swf", str(SAMPLE_SWF), "--nodes", "4", "--quiet", "--json",
              "--algorithms", "fcfs,malleable", "--shares", "0,100"])
    rows = json.loads(out_json.getvalue())["rows"]
    refused = [r["refused"] for r in rows]
    assert max(refused) > 0  # the trace has jobs wider than 4 nodes
    table_rows = [line.split() for line in text.splitlines()[1:1 + len(rows)]]
    assert [int(r[-1]) for r in table_rows] == refused
    assert f"refused: up to {max(refused)} jobs" in text
    assert "malleable at 100 % vs fcfs at 0 %" in text
    assert "the paper" not in text


def test_simulate_paper_figure_only_on_the_papers_batches():
    out = io.StringIO()
    with redirect_stdout(out):
        main(["simulate", "--quiet", "--batches", "1", "--shares", "0,100",
              "--algorithms", "fcfs,malleable"])
    assert "the paper, same batches: 13.1 %" in out.getvalue()
    out = io.StringIO()
    with redirect_stdout(out):
        main(["simulate", "--quiet", "--batches", "1", "--shares", "0,60",
              "--algorithms", "fcfs,malleable"])
    assert "malleable at 60 % vs fcfs at 0 %" in out.getvalue()
    assert "the paper" not in out.getvalue()


# ------------------------------------------------------------------ the client commands


def test_client_says_that_it_waits_for_a_slow_scheduler(tmp_path, monkeypatch, capsys):
    """A real Unix socket that answers a status request after 1 s: the command says that it
    waits (after NOTICE_AFTER_S), then prints the status."""
    monkeypatch.setattr(client_cli, "NOTICE_AFTER_S", 0.2)
    path = tmp_path / "control.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    status = {"ok": True, "algorithm": "fcfs", "nodes": [], "free": 0, "now_s": 1.0,
              "listen": "127.0.0.1", "port": 8081, "jobs": []}

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            time.sleep(1.0)  # paces on purpose: a slow server, past NOTICE_AFTER_S
            conn.sendall((json.dumps(status) + "\n").encode())

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        assert main(["status", "--control", str(path)]) == 0
    finally:
        thread.join(timeout=10)
        server.close()
    captured = capsys.readouterr()
    assert captured.err.count("waiting for the scheduler to answer") == 1
    assert "fcfs scheduler, 0 nodes" in captured.out


def test_client_without_scheduler_is_one_line(tmp_path, capsys):
    assert main(["status", "--control", str(tmp_path / "none.sock")]) == 1
    one_error_line(capsys.readouterr().err, "error: no scheduler listens on")


# ------------------------------------------------------------------ evolving activity


def test_serve_prints_an_evolving_jobs_requests_grants_and_releases():
    lines = [format_event(ev) for ev in [
        {"t": 1.0, "job": 3, "event": "evolving_request", "nodes": 1},
        {"t": 2.0, "job": 3, "event": "evolving_grant", "nodes": ["127.0.1.2"]},
        {"t": 9.0, "job": 3, "event": "evolving_release", "node": "127.0.1.2",
         "nodes": ["127.0.1.1"]},
        {"t": 12.0, "job": 3, "event": "end", "state": "done", "returncode": 0,
         "run_s": 11.0, "shrinks": 0, "grows": 1, "requests": 1, "requests_served": 1,
         "releases": 1},
    ]]
    assert lines == [
        "[    1.00s] job 3 asks for one more node (holds 1)",
        "[    2.00s] job 3 request granted: 127.0.1.2",
        "[    9.00s] job 3 gave back 127.0.1.2 (holds 1: 127.0.1.1)",
        "[   12.00s] job 3 ended: done (exit 0) after 11.0 s, 0 shrinks, 1 grows, "
        "1 requests (1 granted), 1 releases",
    ]


def test_status_shows_an_evolving_jobs_requests_and_releases():
    job = {"id": 1, "name": "evo", "class": "evolving", "min_nodes": 1, "max_nodes": 3,
           "state": "running", "nodes": ["127.0.1.1"], "submit_s": 0.0, "start_s": 0.5,
           "run_s": 4.0, "shrinks": 0, "grows": 1, "order_in_flight": False,
           "requests": 2, "requests_served": 1, "releases": 1}
    text = format_status({"algorithm": "evolving-smallest", "nodes": [], "free": 2,
                          "now_s": 5.0, "listen": "127.0.0.1", "port": 8081, "jobs": [job]})
    row = next(line for line in text.splitlines() if line.lstrip().startswith("1  evo"))
    assert "-0/+1" in row and "+2(1)/-1" in row
    assert "ASKED" in text
    assert "notification port" not in text  # nothing turned away: no line


def test_status_shows_what_the_notification_port_turned_away():
    text = format_status({"algorithm": "fcfs", "nodes": [], "free": 0, "now_s": 1.0,
                          "listen": "127.0.0.1", "port": 8081, "jobs": [],
                          "refused_connections": 3, "cut_connections": 0,
                          "refused_lines": 0, "dropped_lines": 7})
    assert text.splitlines()[-1] == (
        "notification port: 3 connections refused over a cap, 0 cut (idle, long or chatty), "
        "0 lines refused (a job's check), 0 load lines refused (not running, malformed, "
        "range), 7 lines dropped (no job at the address)")


# ------------------------------------------------------------------ settings of a program


def test_bad_schedule_fails_before_any_place_starts():
    env = dict(os.environ, APGAS_PLACES="2", APGAS_COMMUNICATOR="schedule",
               APGAS_SCHEDULE="after 1 s grow two")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.uts", "-d", "3"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc.stderr, "python -m benchmarks.uts: error: ")
    assert "APGAS_SCHEDULE entry 'after 1 s grow two'" in line
    assert proc.stdout == ""


def test_check_communicator_reads_the_schedule(monkeypatch):
    from apgaspy.elastic._registry import check_communicator

    monkeypatch.setenv("APGAS_COMMUNICATOR", "schedule")
    monkeypatch.setenv("APGAS_SCHEDULE", "after 1 s shrink 1")
    check_communicator()
    monkeypatch.setenv("APGAS_SCHEDULE", "later shrink 1")
    with pytest.raises(ConfigurationError, match="expected 'after <seconds> s <order>'"):
        check_communicator()
    monkeypatch.delenv("APGAS_SCHEDULE")
    with pytest.raises(ConfigurationError, match="needs APGAS_SCHEDULE"):
        check_communicator()
    monkeypatch.setenv("ELASTIC", "rigid")  # a job run as rigid gets no communicator
    check_communicator()


# ------------------------------------------------------------------ compiling kernels


def test_a_slow_warm_up_is_announced_once(monkeypatch, capsys):
    """numba compiling into its cache is the one long silent wait of a first run: a warm-up
    longer than ANNOUNCE_AFTER_S says what it does, then how long it took, once."""
    from benchmarks.kernels import _backend

    monkeypatch.setattr(_backend, "ANNOUNCE_AFTER_S", 0.05)
    monkeypatch.setattr(_backend, "_announced", threading.Event())
    with _backend._announced_if_slow():
        time.sleep(0.5)  # paces on purpose: a warm-up slower than ANNOUNCE_AFTER_S
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2, err
    assert err[0].startswith("compiling the numba kernels into ") and "once" in err[0]
    assert err[1].startswith("kernels ready in ")
    with _backend._announced_if_slow():  # a second slow warm-up in the process: silent
        time.sleep(0.3)  # paces on purpose: slow again
    with _backend._announced_if_slow():
        pass
    assert capsys.readouterr().err == ""


def test_a_quick_warm_up_is_silent(monkeypatch, capsys):
    from benchmarks.kernels import _backend

    monkeypatch.setattr(_backend, "_announced", threading.Event())
    with _backend._announced_if_slow():  # loading from the cache: well under a second
        pass
    assert capsys.readouterr().err == ""
