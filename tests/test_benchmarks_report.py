"""The README table (benchmarks.report) takes its references and targets from the results files,
which the scripts fill from benchmarks.references: one place where each figure is typed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import references, report

MACHINE = {"host": "h", "date": "2026-11-24T00:00:00+00:00", "label": "test machine"}
RUNTIME = {
    "machine": MACHINE,
    "apgaspy": {"at_rtt_us": 200.0, "async_tasks_per_s": 100000.0, "at_over_bare": 2.0},
    "mpi4py_futures": {"at_rtt_us": 400.0, "async_tasks_per_s": 2000.0},
    "bare_pyzmq": {"rtt_us": 100.0},
}


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "RESULTS_DIR", tmp_path)
    return tmp_path


def test_the_table_shows_the_references_and_targets_a_results_file_holds(results):
    """A results file written by a script holds its references and targets with their
    sources; the table shows exactly those, cited."""
    data = dict(RUNTIME, **references.pick("at_over_bare", "async_tasks_per_s",
                                           "peers_round_trip_us", "peers_tasks_per_s"))
    data["references"]["peers_round_trip_us"]["text"] = "Peer 123 µs"
    data["references"]["peers_round_trip_us"]["cite"] = "a cited source"
    data["targets"]["at_over_bare"]["text"] = "≤ 9× bare"
    (results / "runtime.json").write_text(json.dumps(data))
    rows = report.table().splitlines()
    at_row = next(r for r in rows if r.startswith("| `at` round trip"))
    assert "Peer 123 µs [a cited source]" in at_row
    assert "≤ 9× bare (issue 11)" in at_row
    tasks_row = next(r for r in rows if r.startswith("| empty `async_at`"))
    assert "Ray actor 5.4 k/s, Ray task 2.0 k/s, Dask 0.6 k/s [SPEC.md §4, peers in one run]" \
        in tasks_row
    assert "≥ 60,000 /s (issue 11)" in tasks_row


def test_a_file_written_before_it_held_cited_references_gets_them_from_the_module(results):
    """An older runtime.json (bare-number targets, an uncited reference) is shown with the
    module's cited references and targets, never with its own uncited ones."""
    old = dict(RUNTIME, targets={"at_over_bare_max": 1.5, "async_tasks_per_s_min": 60000},
               reference={"ray_dask_sync_task_us": 1000, "ray_dask_async_tasks_per_s": 8000})
    (results / "runtime.json").write_text(json.dumps(old))
    text = report.table()
    assert "Ray actor 799 µs, Ray task 1,614 µs, Dask 10,711 µs [SPEC.md §4, peers in one run]" \
        in text
    assert "≤ 1.5× bare pyzmq (issue 11)" in text
    assert "8,000" not in text and "≈ 1000" not in text


def test_the_report_types_no_reference_figure_or_target():
    """The figures of SPEC.md §4 and the issues' targets appear in benchmarks/references.py,
    not in the report's source."""
    source = Path(report.__file__).read_text(encoding="utf-8")
    for figure in ("6.04", "14.55", "7.41", "0.46", "1.10", "1157", "1022", "1168", "1006",
                   "799", "1,614", "10,711", "5.4 k", "8,000", "≈ 1000"):
        assert figure not in source, figure
    assert not re.search(r"[≤≥] ?\+?\d", source), "a target typed in the report"
    module = Path(references.__file__).read_text(encoding="utf-8")
    for figure in ("6.04", "14.55", "7.41", "1157", "1006", "799", "1614", "10711"):
        assert figure in module, figure


def test_pick_copies_the_entries_it_names_and_rejects_unknown_names():
    picked = references.pick("java_apgas_grow", "grow_4_s")
    assert picked["references"]["java_apgas_grow"]["value"] == 14.55
    assert picked["references"]["java_apgas_grow"]["places"] == 3.8
    assert picked["targets"] == {"grow_4_s": references.TARGETS["grow_4_s"]}
    picked["targets"]["grow_4_s"]["value"] = 99
    assert references.TARGETS["grow_4_s"]["value"] == 1.0
    with pytest.raises(KeyError, match="no reference or target named 'nope'"):
        references.pick("nope")
    for entry in [*references.REFERENCES.values(), *references.TARGETS.values()]:
        assert entry["text"] and entry["cite"]
