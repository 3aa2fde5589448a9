"""Job specs, job-script headers and batch files (scheduler.jobs): pure, no processes."""

from __future__ import annotations

import json

import pytest

from scheduler import JobScriptError
from scheduler._exceptions import BatchFileError
from scheduler.jobs import (
    DEFAULT_REQUIRED_TIME_S,
    JobClass,
    JobSpec,
    load_batch,
    load_job_script,
    parse_job_script,
    parse_required_time,
)

JAVA_SCRIPT = """#!/bin/bash
#JOB_TYPE apgas
#JOB_CLASS malleable
#JOB_NAME x
#REQUIRED_TIME 600000
#MIN_NODES 1
#MAX_NODES 4

common_dir="${SCRIPT_DIR}/"
# the body below passes the problem size as -n (as the Java benchmarks take it), not a node count
malleable="malleable"
source ${common_dir}/common.sh "handist.glb.examples.nqueens.StartNQueens -n 17"
"""


def test_java_style_script():
    spec = parse_job_script(JAVA_SCRIPT)
    assert spec.name == "x"
    assert spec.job_class is JobClass.MALLEABLE
    assert (spec.min_nodes, spec.max_nodes) == (1, 4)
    assert spec.nodes is None
    assert spec.required_time_s == 600.0  # bare number: milliseconds
    assert spec.job_type == "apgas"
    assert spec.command is None
    assert spec.is_malleable


def test_rigid_script_and_defaults():
    spec = parse_job_script("#!/bin/bash\n#NODES 8\nexec prog -n 17\n", name="fallback")
    assert spec.job_class is JobClass.RIGID
    assert (spec.nodes, spec.min_nodes, spec.max_nodes) == (8, 8, 8)
    assert spec.name == "fallback"
    assert spec.required_time_s == DEFAULT_REQUIRED_TIME_S == 60.0


def test_rigid_range_collapses_like_java():
    # Java: a rigid job with MIN/MAX runs on MAX nodes.
    spec = parse_job_script("#JOB_CLASS rigid\n#MIN_NODES 2\n#MAX_NODES 4\n")
    assert (spec.nodes, spec.min_nodes, spec.max_nodes) == (4, 4, 4)


def test_flexible_defaults_like_java():
    spec = parse_job_script("#JOB_CLASS malleable\n#MAX_NODES 6\n")
    assert (spec.min_nodes, spec.max_nodes) == (1, 6)
    spec = parse_job_script("#JOB_CLASS moldable\n#MIN_NODES 3\n")
    assert (spec.min_nodes, spec.max_nodes) == (3, 3)
    spec = parse_job_script("#JOB_CLASS malleable\n#NODES 5\n")
    assert (spec.min_nodes, spec.max_nodes, spec.nodes) == (5, 5, 5)


def test_evolving_is_its_own_class():
    spec = parse_job_script("#JOB_CLASS evolving\n#MIN_NODES 2\n#MAX_NODES 8\n")
    assert spec.job_class is JobClass.EVOLVING
    assert spec.declared_class == "evolving"
    assert (spec.min_nodes, spec.max_nodes) == (2, 8)


def test_comments_and_foreign_directives_ignored():
    spec = parse_job_script(
        "#!/bin/bash\n# plain comment with NODES in it\n#SBATCH --exclusive\n#PBS -l x\n"
        "#TODO faster\n#set -e\n#   NODES   3  \n#JOB_NAME my job\n"
    )
    assert spec.nodes == 3
    assert spec.name == "my job"


def test_unknown_directive_refused_with_its_line():
    with pytest.raises(JobScriptError, match=r"^line 2: unknown directive #PARTITION \(known: "):
        parse_job_script("#NODES 1\n#PARTITION x\n")


def test_last_repeated_key_wins():
    assert parse_job_script("#NODES 2\n#NODES 4\n").nodes == 4


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("600000", 600.0),
        ("500ms", 0.5),
        ("90s", 90.0),
        ("90 sec", 90.0),
        ("1.5min", 90.0),
        ("1.5m", 90.0),
        ("2h", 7200.0),
        ("2hr", 7200.0),
        ("10MIN", 600.0),
        ("1e3", 1.0),
    ],
)
def test_required_time_units(text, seconds):
    assert parse_required_time(text) == pytest.approx(seconds)
    assert parse_job_script(f"#NODES 1\n#REQUIRED_TIME {text}\n").required_time_s == (
        pytest.approx(seconds)
    )


@pytest.mark.parametrize("bad", ["", "abc", "10 parsecs", "-5s", "0", "1..2s", "s"])
def test_required_time_rejects(bad):
    with pytest.raises(ValueError):
        parse_required_time(bad)


@pytest.mark.parametrize(
    ("script", "line", "words"),
    [
        ("#!/bin/bash\n#JOB_CLASS rigid\n#NODES four\n", 3, "whole number"),
        ("#NODES 0\n", 1, "at least 1"),
        ("#NODES 2.5\n", 1, "whole number"),
        ("#REQUIRED_TIME 10 parsecs\n#NODES 1\n", 1, "unit"),
        ("#JOB_CLASS elastic\n", 1, "unknown job class"),
        ("#NODES 1\n#MIN_NODES\n", 2, "needs a value"),
    ],
)
def test_malformed_lines_name_the_line(script, line, words):
    with pytest.raises(JobScriptError, match=rf"line {line}\b.*{words}|{words}.*line {line}\b"):
        parse_job_script(script)


def test_inconsistent_headers():
    with pytest.raises(JobScriptError, match="larger than max_nodes"):
        parse_job_script("#JOB_CLASS malleable\n#MIN_NODES 4\n#MAX_NODES 2\n")
    with pytest.raises(JobScriptError, match="needs nodes"):
        parse_job_script("#JOB_NAME nothing\n")
    assert issubclass(JobScriptError, ValueError)


def test_load_job_script(tmp_path):
    path = tmp_path / "NQueens_17_malleable_1-4.sh"
    path.write_text(JAVA_SCRIPT.replace("#JOB_NAME x\n", ""))
    spec = load_job_script(path)
    assert spec.name == "NQueens_17_malleable_1-4"
    assert spec.command == str(path)
    path.write_text("#NODES x\n")
    with pytest.raises(JobScriptError, match=r"NQueens.*line 1"):
        load_job_script(path)


def test_jobspec_validation():
    with pytest.raises(ValueError, match="larger than max_nodes"):
        JobSpec("a", JobClass.MALLEABLE, min_nodes=4, max_nodes=2)
    with pytest.raises(ValueError, match="at least 1"):
        JobSpec("a", JobClass.RIGID, nodes=0)
    with pytest.raises(ValueError, match="needs nodes"):
        JobSpec("a", JobClass.RIGID)
    with pytest.raises(ValueError, match="range"):
        JobSpec("a", JobClass.RIGID, nodes=2, min_nodes=1, max_nodes=4)
    with pytest.raises(ValueError, match="required_time_s"):
        JobSpec("a", nodes=1, required_time_s=0)
    with pytest.raises(ValueError, match="outside the range"):
        JobSpec("a", "malleable", nodes=8, min_nodes=1, max_nodes=4)
    with pytest.raises(ValueError, match="unknown job class"):
        JobSpec("a", "elastic", nodes=1)
    with pytest.raises(ValueError, match="integer"):
        JobSpec("a", nodes=2.0)  # type: ignore[arg-type]
    spec = JobSpec("a", "malleable", min_nodes=1, max_nodes=4, command=["prog", "-n", "17"])
    assert spec.job_class is JobClass.MALLEABLE
    assert spec.command == ("prog", "-n", "17")
    assert spec.replace(job_class="rigid", nodes=4, min_nodes=None, max_nodes=None).lo == 4


def test_fits():
    assert JobSpec("a", nodes=32).fits(32) is None
    reason = JobSpec("big", nodes=33).fits(32)
    assert reason is not None and "33" in reason and "32" in reason
    assert JobSpec("m", "malleable", min_nodes=8, max_nodes=64).fits(32) is None
    assert JobSpec("m", "malleable", min_nodes=40, max_nodes=64).fits(32) is not None


def test_load_batch_json(tmp_path):
    path = tmp_path / "batch.json"
    path.write_text(json.dumps([
        {"name": "late", "job_class": "rigid", "nodes": 2, "required_time_s": 100,
         "program": "uts", "size": 18, "submit_s": 30},
        {"name": "early", "job_class": "malleable", "min_nodes": 1, "max_nodes": 4,
         "command": "prog -n 17", "submit_s": 0},
    ]))
    entries = load_batch(path)
    assert [e.spec.name for e in entries] == ["early", "late"]
    assert entries[0].spec.command == ("prog", "-n", "17")
    assert entries[1].submit_s == 30.0 and entries[1].spec.size == 18
    path.write_text(json.dumps([{"name": "x", "nodes": 2, "colour": "red"}]))
    with pytest.raises(BatchFileError, match=r"entry 0: unknown field"):
        load_batch(path)
    path.write_text(json.dumps([{"name": "x", "nodes": 0}]))
    with pytest.raises(BatchFileError, match="entry 0"):
        load_batch(path)


def test_load_batch_csv(tmp_path):
    path = tmp_path / "batch.csv"
    path.write_text(
        "name,job_class,nodes,min_nodes,max_nodes,required_time_s,program,size,submit_s\n"
        "a,rigid,2,,,100,uts,18,5\n"
        "b,malleable,,1,8,250.5,pi,80000000000,0\n"
    )
    a, b = sorted(load_batch(path), key=lambda e: e.spec.name)
    assert (a.spec.nodes, a.spec.size, a.submit_s) == (2, 18, 5.0)
    assert (b.spec.min_nodes, b.spec.max_nodes, b.spec.required_time_s) == (1, 8, 250.5)
    assert b.spec.size == 80_000_000_000
    path.write_text("name,nodes\nx,two\n")
    with pytest.raises(BatchFileError, match="data row 1"):
        load_batch(path)
