"""The one wire-protocol module (:mod:`apgaspy.wire.protocol`): both ends read each other's lines, and the reference page is
the table's (docs/reference/protocol.md)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from apgaspy.wire.framing import LineReader, LineTimeoutError, LineTooLongError
from apgaspy.wire.protocol import (
    JOB_ENVIRONMENT,
    MESSAGES,
    ORDER_PORT_ENV,
    EvolvingMessage,
    NotificationKind,
    Order,
    classify_notification,
    evolving_release,
    evolving_request,
    format_notification,
    format_order,
    format_reply,
    generated_part,
    glb_phase_time,
    is_refusal,
    java_classify_notification,
    job_environment,
    parse_evolving,
    parse_notification,
    parse_order,
    ready_message,
    ready_port,
    reference_markdown,
    refusal,
    rigid_message,
    split_timing,
    timing_message,
)

ROOT = Path(__file__).resolve().parents[1]


def test_reference_page_is_the_table():
    page = (ROOT / "docs" / "reference" / "protocol.md").read_text(encoding="utf-8")
    assert generated_part(page) == reference_markdown(), \
        "docs/reference/protocol.md is stale: python -m apgaspy.wire.protocol --write"
    for message in MESSAGES:
        assert f"`{message.line}`" in page
    for var in JOB_ENVIRONMENT:
        assert f"`{var.name}`" in page


def test_orders_go_out_as_the_java_scheduler_sends_them():
    assert format_order(Order("shrink", 2)) == "shrink 2\n"
    assert format_order(Order("grow", 2, ("127.0.1.3", "127.0.1.4"))) == \
        "grow 2 127.0.1.3 127.0.1.4 \n"
    assert parse_order("grow 2 127.0.1.3 127.0.1.4 \n") == \
        Order("grow", 2, ("127.0.1.3", "127.0.1.4"))


def test_the_jobs_refusal_is_what_the_scheduler_reads_as_one():
    line = format_reply([refusal("cannot release 5 of 4 hosts")])
    assert line == "ERROR cannot release 5 of 4 hosts\n"
    assert is_refusal(line.rstrip("\n"))
    assert is_refusal("ERROR")
    assert [is_refusal(h) for h in ("127.0.1.2", "ERRORS.example.org", "node-ERROR")] == \
        [False, False, False]
    assert refusal("two\nlines") == "ERROR two lines"


def test_notifications_both_ways():
    line = format_notification(timing_message("growTimeAPGAS", 2, 1234), "127.0.1.1")
    assert line == "growTimeAPGAS;2;1234:127.0.1.1\n"
    assert parse_notification(line) == ("growTimeAPGAS;2;1234", "127.0.1.1")
    assert split_timing(line) == ["growTimeAPGAS", "2", "1234", "127.0.1.1"]
    assert parse_notification("APGAS-Ready:::1") == ("APGAS-Ready", "::1")
    rigid = rigid_message("cannot listen on 127.0.1.1:8081: in use")
    assert rigid == "APGAS-Rigid;cannot listen on 127.0.1.1 8081  in use"
    assert format_notification(rigid, "127.0.1.1").count(":") == 1
    with pytest.raises(ValueError, match="may not contain"):
        format_notification("a:b", "127.0.1.1")


def test_glb_phase_timings_are_the_tables_lines():
    lines = {m.line for m in MESSAGES}
    for phase in ("preShrink", "postShrink", "preGrow", "postGrow"):
        kind = glb_phase_time(phase)
        assert f"{kind};<n>;<nanoseconds>" in lines
        assert timing_message(kind, 2, 5) == f"{phase}TimeGLB;2;5"
    with pytest.raises(ValueError, match="not a GLB phase"):
        glb_phase_time("midShrink")


@pytest.mark.parametrize(("message", "ours", "java"), [
    ("APGAS-Ready", NotificationKind.READY, NotificationKind.READY),
    ("APGAS-Disabled", NotificationKind.DISABLED, NotificationKind.UNDEFINED),
    ("APGAS-Rigid;no port", NotificationKind.RIGID, NotificationKind.UNDEFINED),
    ("shrinkTimeAPGAS;1;99", NotificationKind.TIMING, NotificationKind.TIMING),
    ("preGrowTimeGLB;2;5", NotificationKind.TIMING, NotificationKind.TIMING),
    ("Evolving;Request;1", NotificationKind.EVOLVING, NotificationKind.EVOLVING),
    ("Evolving;Release;node3", NotificationKind.EVOLVING, NotificationKind.EVOLVING),
    ("Evolving;Dance;1", NotificationKind.EVOLVING, NotificationKind.EVOLVING),
    ("XEvolving;Request;1", NotificationKind.UNDEFINED, NotificationKind.UNDEFINED),
])
def test_notification_kinds(message, ours, java):
    assert classify_notification(message) is ours
    assert java_classify_notification(f"{message}:127.0.1.1") is java


def test_evolving_lines():
    assert evolving_request() == "Evolving;Request;1"
    assert format_notification(evolving_request(), "10.0.0.5") == "Evolving;Request;1:10.0.0.5\n"
    assert format_notification(evolving_release("node07"), "10.0.0.5") == \
        "Evolving;Release;node07:10.0.0.5\n"
    assert parse_evolving("Evolving;Release;node07") == EvolvingMessage("Release", "node07")
    assert parse_evolving("Evolving;Request;1") == EvolvingMessage("Request", "1")
    assert parse_evolving("Evolving;Dance") == EvolvingMessage("Dance", "")
    assert parse_evolving("growTimeAPGAS;1;5") is None
    for bad in (0, -1, True, 1.0):
        with pytest.raises(ValueError, match="at least 1 node"):
            evolving_request(bad)
    for bad in ("a b", "h:1", "", "x;y"):
        with pytest.raises(ValueError, match="not a host name"):
            evolving_release(bad)
    lines = {m.line for m in MESSAGES}
    assert {"Evolving;Request;1", "Evolving;Release;<host>"} <= lines


def test_job_environment():
    assert job_environment(nodes=2, node_file="/tmp/job-7.nodes", scheduler_ip="127.0.0.1",
                           port=8081, job_id=7, malleable=True) == {
        "NODES": "2", "NODE_FILE": "/tmp/job-7.nodes", "SCHEDULER_IP": "127.0.0.1",
        "SCHEDULER_PORT": "8081", "JOBNAME": "7", "ELASTIC": "malleable"}
    # the Java scheduler's variables, then apgaspy's order port (set by launch, not here)
    assert [v.name for v in JOB_ENVIRONMENT] == \
        ["NODES", "NODE_FILE", "SCHEDULER_IP", "SCHEDULER_PORT", "JOBNAME", "ELASTIC",
         ORDER_PORT_ENV]


def test_ready_with_an_order_port():
    """``APGAS-Ready;<port>``: a job's own order port; both schedulers still read it as
    ready, and only a plain port number in 1-65535 is taken."""
    assert ready_message() == "APGAS-Ready"
    assert ready_message(40123) == "APGAS-Ready;40123"
    assert ready_port("APGAS-Ready;40123") == 40123
    for message in ("APGAS-Ready", "APGAS-Ready;", "APGAS-Ready;0", "APGAS-Ready;65536",
                    "APGAS-Ready;x1", "APGAS-Load;40123"):
        assert ready_port(message) is None, message
    assert classify_notification("APGAS-Ready;40123") is NotificationKind.READY
    assert java_classify_notification("APGAS-Ready;40123:127.0.1.1") is NotificationKind.READY
    for bad in (0, 65536, True, "1"):
        with pytest.raises(ValueError, match="not a TCP port"):
            ready_message(bad)


def test_the_scheduler_does_not_import_the_runtime():
    # the protocol's leaf package apgaspy.wire loads (the cores' format apgaspy.wire.cores
    # too), and nothing else of apgaspy
    code = ("import sys, scheduler.server, apgaspy.wire.protocol; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('apgaspy', 'glb', 'communicators', 'zmq', 'mpi4py', 'cloudpickle') "
            "and m not in ('apgaspy',) and not m.startswith('apgaspy.wire')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_line_reader_over_a_real_connection():
    a, b = socket.socketpair()
    with a, b:
        reader = LineReader(b, max_bytes=64)
        a.sendall(b"127.0.1.3\r\n127.0.")
        assert reader.line(5) == b"127.0.1.3"
        with pytest.raises(LineTimeoutError) as late:
            reader.line(0.2)
        assert late.value.partial == b"127.0."
        a.sendall(b"1.4")
        a.shutdown(socket.SHUT_WR)
        assert reader.line(5) == b"127.0.1.4"  # the last line needs no newline
        assert reader.line(5) is None


def test_line_reader_limits_the_line():
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b"x" * 65)
        with pytest.raises(LineTooLongError, match="longer than 64 bytes"):
            LineReader(b, max_bytes=64).line(5)
