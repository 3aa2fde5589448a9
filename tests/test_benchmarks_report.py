"""The results tables (benchmarks.report) show the references and targets the results files
hold, each cited; the scripts fill those from benchmarks.references, where each is typed once.
The kernel rows give a ratio to Java only for a Java kernel run in the same run."""

from __future__ import annotations

import json

import pytest

from benchmarks import references, report
from benchmarks._results import RESULTS_DIR
from benchmarks.runtime import guard

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


def _row(text: str, start: str) -> str:
    return next(r for r in text.splitlines() if r.startswith(start))


def test_the_table_shows_the_references_and_targets_a_results_file_holds(results):
    """A results file written by a script holds its references and targets with their
    sources; the table shows exactly those, cited, and the at guard's verdict."""
    data = dict(RUNTIME, guard=guard(2.0),
                **references.pick("at_over_bare", "async_tasks_per_s", "peers_round_trip_us",
                                  "peers_tasks_per_s"))
    data["references"]["peers_round_trip_us"]["text"] = "Peer 123 µs"
    data["references"]["peers_round_trip_us"]["cite"] = "a cited source"
    data["targets"]["at_over_bare"]["text"] = "≤ 9× bare"
    (results / "runtime.json").write_text(json.dumps(data))
    text = report.table()
    at_row = _row(text, "| `at` round trip")
    assert "200 µs = 2.00× bare pyzmq" in at_row
    assert "Peer 123 µs [a cited source]" in at_row
    assert "≤ 9× bare (regression guard): PASS" in at_row
    tasks_row = _row(text, "| empty `async_at`")
    assert ("Ray actor 5.4 k/s, Ray task 2.0 k/s, Dask 0.6 k/s [measured on this project's "
            "2-core machine, Nov. 2026, peers in one run]") in tasks_row
    assert "≥ 60,000 /s (project goal)" in tasks_row


def test_the_at_guard_passes_within_two_and_a_half_times_bare_pyzmq():
    assert guard(2.5)["pass"] and guard(1.0)["pass"]
    failed = guard(2.51)
    assert not failed["pass"] and failed["limit"] == 2.5
    assert failed["text"].startswith("FAIL: at round trip 2.51× bare pyzmq (> 2.5×")


def test_a_file_written_before_it_held_cited_references_gets_them_from_the_module(results):
    """An older runtime.json (bare-number targets, an uncited reference, no guard) is shown
    with the module's cited references and targets, never with its own uncited ones."""
    old = dict(RUNTIME, targets={"at_over_bare_max": 1.5, "async_tasks_per_s_min": 60000},
               reference={"ray_dask_sync_task_us": 1000, "ray_dask_async_tasks_per_s": 8000})
    (results / "runtime.json").write_text(json.dumps(old))
    text = report.table()
    assert "Ray actor 799 µs, Ray task 1,614 µs, Dask 10,711 µs [measured on" in text
    assert "≤ 2.5× bare pyzmq (regression guard) |" in text
    assert "8,000" not in text and "≈ 1000" not in text


def _sentinel(entry: dict, name: str) -> dict:
    """``entry`` with its text, its citation and its figures replaced by sentinels."""
    out = dict(entry, text=f"<text {name}>", cite=f"<cite {name}>")
    if "glb_s" in out:
        out.update(glb_s=0.77, value=77.7, places=7.7)
    if "makespan_s" in out:
        out["makespan_s"] = {a: {s: 4321.0 for s in v} for a, v in out["makespan_s"].items()}
    return out


def test_every_reference_and_target_shown_comes_from_the_results_files(results):
    """Render the real results files with every reference and target replaced by sentinels:
    the tables show the sentinels, each cited, and none of the module's figures, texts or
    citations, so no figure or target is typed in the report."""
    shown: set[str] = set()
    for path in RESULTS_DIR.glob("*.json"):
        data = json.loads(path.read_text())
        for key in ("references", "targets", "goals"):  # goals: runtime_scale.json
            entries = data.get(key) or {}
            for name, entry in entries.items():
                if isinstance(entry, dict):
                    entries[name] = _sentinel(entry, name)
                    if key != "goals":  # runtime_scale's goals share a cell, one cite shown
                        shown.add(name)
        for name, case in (data.get("cases") or {}).items():  # kernels.json: its goals
            if case.get("target"):
                case["target"] = _sentinel(case["target"], name)
                shown.add(name)
        (results / path.name).write_text(json.dumps(data))
    text = report.table() + "\n" + report.scheduling_table()
    assert shown, "no results file holds references or targets"
    shown.discard("efficiency_16_places")  # shown on a 16-place row; the files have none
    for name in shown:
        assert f"<cite {name}>" in text, name
    for name, entry in {**references.REFERENCES, **references.TARGETS}.items():
        assert entry["text"] not in text, name
        assert entry["cite"] not in text, name
    assert "0.77 s in GLB of 77.70 s, 7.7 places [<cite java_apgas_grow>]" in text
    assert "| 4321 (" in text or "| 4321 |" in text
    for figure in ("6.04", "14.55", "7.41", "1157", "1022", "1168", "1006", "799", "1,614"):
        assert figure not in text, figure


def test_no_results_file_cites_an_internal_document():
    for path in RESULTS_DIR.glob("*.json"):
        text = path.read_text()
        assert "SPEC" not in text and "issue " not in text, path.name


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


def _side(warm: float, per_s: dict[str, float], **extra) -> dict:
    return {"cold_s": 2 * warm, "cold_first_s": 2 * warm, "warm_median_s": warm,
            "warm_best_s": warm, "runs_s": [[2 * warm, warm]], "per_s": per_s, **extra}


def _kernels(java_available: bool) -> dict:
    java = _side(1.0, {"nodes/s": 10e6}, kernel="benchmarks/java/Uts.java", same_run=True)
    ours = _side(0.25, {"nodes/s": 40e6}, backend="numba", ran=["numba"], setup_s=0.1)
    fast = _side(0.01, {}, backend="numba", ran=["numba"], setup_s=0.1)
    uts = {"label": "UTS row", "kernel": "uts", "same_work": True, "note": "",
           "work": {"nodes": {"count": 10_000_000, "counts": "tree nodes"}},
           "java": java, "ours": {"numba": ours}, "ratio_unit": "nodes",
           "ratio": {"numba": 4.0},
           "target": {"op": ">=", "value": 4.0, "unit": "× Java", "text": "≥ 4× Java",
                      "cite": "a goal", "met": {"numba": True}}}
    fast_row = {"label": "N-Queens fast row", "kernel": "nqueens", "same_work": False,
                "note": "", "work": {}, "java": java, "ours": {"numba": fast},
                "ratio_unit": None}
    if not java_available:
        for row in (uts, fast_row):
            row["java"] = None
            row["cited_java"] = {"text": "Java earlier 1.5 s", "machine": "machine X",
                                 "date": "2026-01-01"}
        del uts["ratio"]
        uts["target"]["met"] = None
    return {"machine": MACHINE, "about": "about.", "kernels": "numba",
            "java": {"available": java_available, "version": "openjdk 17",
                     "why_not": "no javac on PATH"},
            "kernel_notes": {"uts": "same tree."}, "cases": {"uts": uts, "fast": fast_row}}


def test_a_kernel_row_gives_a_ratio_only_against_java_run_in_the_same_run(results):
    (results / "kernels.json").write_text(json.dumps(_kernels(java_available=True)))
    text = report.table()
    uts = _row(text, "| UTS row")
    assert "numba: 0.250 s warm (cold 0.500 s, after 0.100 s of imports and setup); " \
           "40 M nodes/s" in uts
    assert "Java 1.000 s warm (cold 2.000 s); 10 M nodes/s [same run, " in uts
    assert "ours over Java, same work: numba: 4.00×" in uts
    assert "≥ 4× Java (a goal): numba met" in uts
    fast = _row(text, "| N-Queens fast row")
    assert "not the same work, no ratio" in fast and "×" not in fast
    assert "openjdk 17" in report.kernel_note()


def test_a_kernel_row_says_when_the_backend_asked_for_is_not_the_one_that_ran(results):
    """numba asked for a kernel without a compiled path runs numpy: the row says both."""
    data = _kernels(java_available=True)
    data["cases"]["uts"]["ours"]["numba"]["ran"] = ["numpy"]
    (results / "kernels.json").write_text(json.dumps(data))
    uts = _row(report.table(), "| UTS row")
    assert "numba asked, numpy ran: 0.250 s warm" in uts
    assert "same work: numba asked, numpy ran: 4.00×" in uts


def test_without_a_jdk_the_kernel_rows_cite_earlier_java_figures_and_give_no_ratio(results):
    (results / "kernels.json").write_text(json.dumps(_kernels(java_available=False)))
    uts = _row(report.table(), "| UTS row")
    assert "Java not run here (no JDK); earlier: Java earlier 1.5 s [measured on machine X, " \
           "2026-01-01], another run: no ratio" in uts
    assert "ours over Java" not in uts
    assert "≥ 4× Java (a goal): not measured" in uts
    assert "no JDK (no javac on PATH)" in report.kernel_note()


def test_render_rewrites_only_between_the_markers():
    page = ("# Benchmarks\n\nintro\n\n<!-- results:start -->\nOLD 1\n<!-- results:end -->\n\n"
            "tail\n<!-- scheduling:start -->\nOLD 2\n<!-- scheduling:end -->\nend\n")
    out = report.render(page)
    assert out.startswith("# Benchmarks\n\nintro\n\n<!-- results:start -->\n| measure |")
    assert "OLD" not in out and out.endswith("<!-- scheduling:end -->\nend\n")
    assert "\ntail\n" in out
    with pytest.raises(ValueError, match="no <!-- results:start -->"):
        report.render("# no markers\n")


def test_the_docs_page_has_the_markers_the_report_writes_between():
    page = report.PAGE.read_text(encoding="utf-8")
    assert report.START in page and report.END in page
