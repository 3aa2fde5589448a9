"""Tables line up whatever the size of a figure: ``scheduler status`` and the simulator's
tables pad every column to its widest cell (:mod:`scheduler._table`), so that no two
figures touch (a 10,000-job trace on 256 nodes gives a mean wait of millions of seconds)."""

from __future__ import annotations

import pytest

from scheduler._table import format_table
from scheduler.client_cli import format_history, format_status
from scheduler.simulate_cli import _study_table, _table

BIG = {"algorithm": "malleable", "malleable_share": 100, "makespan_s": 123456789.0,
       "makespan_std_s": 0.0, "utilisation": 0.6552388, "mean_wait_s": 2393306.5,
       "mean_turnaround_s": 66502.48, "mean_bounded_slowdown": 443.8,
       "shrinks_per_malleable_job": 0.5, "grows_per_malleable_job": 1.25, "refused": 0}


def test_simulator_table_keeps_huge_adjacent_figures_apart():
    lines = _table([BIG, dict(BIG, algorithm="fcfs", mean_wait_s=3.0)]).splitlines()
    row = lines[1].split()
    head = lines[0].split()
    assert row[head.index("wait_s")] == "2393306.5"
    assert row[head.index("turnaround_s")] == "66502.5"
    assert row[head.index("util%")] == "65.5"
    assert row[head.index("makespan_s")] == "123456789.0"
    # every row has the heading's length up to its last right-aligned column
    assert len({len(line) for line in lines}) == 1
    assert "2393306.5 " in lines[1] and " 66502.5" in lines[1]


def test_study_tables_line_up():
    rows = [{"sweep": "gap", "submission_gap_s": 1e6, "rescale_gap_s": 180.0,
             "policy": "fcfs", "total_time_s": 2393306.5, "utilisation": 0.655,
             "weighted_mean_response_s": 66502.48, "weighted_mean_completion_s": 7e7,
             "max_wait_priority1_s": 1.0}]
    lines = _study_table(rows).splitlines()
    assert len(lines[1].split()) == len(lines[0].split())
    assert len(lines[0]) == len(lines[1])


def test_status_keeps_the_asked_column_apart_from_the_node_list():
    job = {"id": 1234567, "name": "evo", "class": "evolving", "min_nodes": 1, "max_nodes": 3,
           "state": "running", "nodes": ["127.0.1.3"], "submit_s": 2393306.5,
           "start_s": 66502.48, "run_s": 4.0, "shrinks": 0, "grows": 0,
           "order_in_flight": False, "requests": 0, "requests_served": 0, "releases": 0}
    text = format_status({"algorithm": "evolving-smallest",
                          "nodes": [{"name": "a-very-long-node-name.example.org", "job": 1234567}],
                          "free": 0, "now_s": 5.0, "listen": "127.0.0.1", "port": 8081,
                          "jobs": [job]})
    lines = text.splitlines()
    node_row = next(line for line in lines if line.startswith("a-very-long"))
    # NODE, STATE (a node without one, from an older server, shows "-"), JOB
    assert node_row.split() == ["a-very-long-node-name.example.org", "-", "1234567", "evo"]
    i = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ID"))
    head, row = lines[i], lines[i + 1]
    assert row.split() == ["1234567", "evo", "evolving", "1-3", "running", "1", "2393306.5",
                           "66502.5", "4.0", "-0/+0", "+0(0)/-0", "-", "-", "-", "127.0.1.3"]
    # the right-aligned figures end under their headings
    for name, cell in (("SUBMIT_S", "2393306.5"), ("START_S", "66502.5"), ("ID", "1234567")):
        end = head.index(name) + len(name)
        assert row[:end].endswith(cell), (name, head, row)
    assert row.index("127.0.1.3") == head.index("NODE LIST")


def test_history_lines_up():
    rows = [{"id": 1, "name": "job", "state": "done", "user": 1000, "submit": 0.0,
             "wait_s": 2393306.5, "run_s": 66502.48, "turnaround_s": 1e8, "max_nodes_held": 256,
             "returncode": 0, "reason": None}]
    lines = format_history(rows).splitlines()
    assert lines[1].split()[6:9] == ["2393306.5", "66502.5", "100000000.0"]
    assert lines[1].index("66502.5") + len("66502.5") == lines[0].index("RUN_S") + len("RUN_S")


def test_format_table_checks_its_shape():
    assert format_table(("A", "B"), [(1, None)], "><") == ["A  B", "1  -"]
    with pytest.raises(ValueError):
        format_table(("A", "B"), [(1,)], "<<")
    with pytest.raises(ValueError):
        format_table(("A", "B"), [(1, 2)], "<=")
