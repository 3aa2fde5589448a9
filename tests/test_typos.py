"""Typos are named, never ignored; a bad setting or a failing bag is told in a few lines.

* job scripts: an unknown ``#DIRECTIVE`` is refused with its line and the nearest keys (the
  real ``python -m scheduler submit`` against a real ``serve``); a bare ``#REQUIRED_TIME``
  under 1000 (milliseconds) draws a warning and the job is accepted;
* environment: an unknown ``APGAS_*``/``GLB_*``/``SCHEDULER_*`` variable draws a warning with
  a did-you-mean (a real program, a real scheduler); every such name the code reads is
  known; ``APGAS_PLACES`` against ``mpiexec -n``'s count;
* a bad setting ends a program with one ``ConfigurationError`` line; a failing bag with a
  short form naming the place and the bag (``APGAS_DEBUG=1``: every traceback);
* an order that arrives after the computation ended is reported at INFO, not as an error.
"""

from __future__ import annotations

import logging
import os
import re
import sys

import pytest
from conftest import MPIEXEC, ROOT, env_for, run_command, run_program, wait_until
from test_scheduler_real import Serve

from apgaspy import ApgasError, ConfigurationError, MalleabilityError, OrdersEndedError
from apgaspy._env_check import known_names, unknown_variables
from scheduler import JobScriptError
from scheduler.jobs import job_script_warnings, parse_job_script

HELLO = ROOT / "examples" / "hello.py"
PRIMES = ROOT / "examples" / "glb_primes.py"
#: The files that spell variable names wrong on purpose (examples of what is warned about).
MISSPELT = {"test_typos.py", "_env_check.py"}


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


# ------------------------------------------------------------------ job scripts


@pytest.mark.parametrize("line,message", [
    ("#JOBCLASS malleable", "unknown directive #JOBCLASS (did you mean #JOB_CLASS?)"),
    ("#NODE 2", "unknown directive #NODE (did you mean #NODES or #MIN_NODES?)"),
    ("#REQUIRED_TIM 10min", "unknown directive #REQUIRED_TIM (did you mean #REQUIRED_TIME?)"),
    ("#Job_Class malleable", "unknown directive #Job_Class: keys are upper case, write "
                             "#JOB_CLASS"),
    ("#WALLTIME 10", "unknown directive #WALLTIME (known: #JOB_CLASS, "),
])
def test_unknown_directive_names_its_line_and_the_nearest_key(line, message):
    with pytest.raises(JobScriptError) as exc:
        parse_job_script(f"#!/bin/bash\n#NODES 1\n{line}\nexec true\n")
    assert str(exc.value).startswith(f"line 3: {message}"), exc.value
    assert str(exc.value).endswith(f": {line!r}")


def test_shell_lines_are_no_directives():
    """The shebang, comments with a space, lower-case words, other batch systems'
    directives and comment tags pass; a known key after spaces still counts (as in Java)."""
    spec = parse_job_script(
        "#!/bin/bash\n# JOBCLASS is spelt JOB_CLASS\n#SBATCH --nodes=2\n#PBS -l walltime=1\n"
        "#BSUB -n 4\n#set -euo pipefail\n#TODO: faster\n#\n##JOBCLASS doubled\n"
        "#JOB_CLASS malleable\n#  MAX_NODES 3\nexec true  #NOTANODE\n")
    assert (spec.declared_class, spec.min_nodes, spec.max_nodes) == ("malleable", 1, 3)


def test_short_bare_required_time_is_warned_about():
    assert job_script_warnings("#NODES 1\n#REQUIRED_TIME 60\n") == [
        "line 2: #REQUIRED_TIME 60 is 60 ms (a bare number is milliseconds, as in Java): "
        "did you mean 60s or 60min?"]
    for fine in ("600000", "1000", "60s", "60 min", "500ms", "1.5h"):
        assert job_script_warnings(f"#REQUIRED_TIME {fine}\n") == [], fine


@pytest.mark.timeout(90)
def test_submit_refuses_a_typo_and_warns_about_milliseconds(tmp_path, monkeypatch):
    """The real CLI against a real scheduler (started with a misspelt SCHEDULER_ variable,
    which it names): a script with ``#JOBCLASS`` is refused in one line naming the line
    and the key, exit 1, nothing queued; a script with ``#REQUIRED_TIME 60`` is accepted
    with a warning."""
    monkeypatch.setenv("SCHEDULER_PROT", "8081")
    serve = Serve(tmp_path, "--nodes", "2", "--port", "0")
    try:
        typo = tmp_path / "typo.sh"
        typo.write_text("#!/bin/bash\n#JOBCLASS malleable\n#MIN_NODES 1\n#MAX_NODES 2\n"
                        "exec true\n")
        r = serve.cli("submit", str(typo))
        assert r.returncode == 1, r.stderr
        err = lines_of(r.stderr)
        assert len(err) == 1 and err[0].startswith("error: "), r.stderr
        assert "line 2: unknown directive #JOBCLASS (did you mean #JOB_CLASS?)" in err[0]
        assert r.stdout == ""
        r = serve.cli("submit", "-", stdin=typo.read_text())
        assert r.returncode == 1 and "line 2: unknown directive #JOBCLASS" in r.stderr
        assert serve.ask(op="status")["jobs"] == []

        short = tmp_path / "short.sh"
        short.write_text("#!/bin/bash\n#NODES 1\n#REQUIRED_TIME 60\nexec true\n")
        r = serve.cli("submit", str(short))
        assert r.returncode == 0, r.stderr
        assert lines_of(r.stderr) == [
            f"warning: {short}: line 3: #REQUIRED_TIME 60 is 60 ms (a bare number is "
            "milliseconds, as in Java): did you mean 60s or 60min?"]
        assert re.fullmatch(r"submitted job \d+ \(.*short\.sh\)\n", r.stdout), r.stdout
        jobs = serve.ask(op="status")["jobs"]
        assert [j["name"] for j in jobs] == ["short"]
    finally:
        serve.close()
    warned = [line for line in serve.err_path.read_text().splitlines()
              if line.startswith("warning: SCHEDULER_PROT")]
    assert warned == ["warning: SCHEDULER_PROT is not a setting apgaspy reads and is ignored "
                      "(did you mean SCHEDULER_PORT?)"]


# ------------------------------------------------------------------ environment variables


def test_every_variable_the_code_reads_is_known():
    """Grep the project's code (tests too: their hooks) for ``APGAS_*``, ``GLB_*`` and
    ``SCHEDULER_*`` names: each is a known variable, or one of the few Python names that
    share the prefixes.  A new setting read anywhere must be added to a settings table or
    to ``apgaspy._env_check.OTHER_NAMES``, or this test fails."""
    not_variables = {"GLB_SETTINGS", "GLB_PHASES", "GLB_TIME_SUFFIX"}  # Python constants
    pattern = re.compile(r"\b((?:APGAS|GLB|SCHEDULER)_[A-Z0-9_]*[A-Z0-9])\b")
    found: dict[str, str] = {}
    for folder in ("apgaspy", "glb", "communicators", "scheduler", "benchmarks", "examples",
                   "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name in MISSPELT:
                continue
            for name in pattern.findall(path.read_text(encoding="utf-8")):
                found.setdefault(name, str(path.relative_to(ROOT)))
    known = known_names()
    assert len(found) > 40 and "APGAS_PLACES" in found and "GLB_WORKERS" in found
    unknown = {n: where for n, where in found.items() if n not in known | not_variables}
    assert unknown == {}, f"read but not known to apgaspy._env_check: {unknown}"
    assert unknown_variables(["APGAS_PLACE", "APGAS_PLACES", "GLB_WORKER", "HOME"]) == [
        ("APGAS_PLACE", ["APGAS_PLACES"]), ("GLB_WORKER", ["GLB_WORKERS"])]


@pytest.mark.timeout(90)
def test_unknown_variable_warned_about_once_at_place_0():
    r = run_program(HELLO, 2, env=env_for(2, APGAS_PLACE="4", GLB_WORKRES="2"), timeout=80)
    assert r.returncode == 0, r.stderr
    assert sorted(r.lines) == ["Bye", "Hello from place(0)", "Hello from place(1)"]
    err = lines_of(r.stderr)
    assert err == [
        "apgaspy place(0) WARNING: APGAS_PLACE is not a setting apgaspy reads and is ignored "
        "(did you mean APGAS_PLACES?)",
        "apgaspy place(0) WARNING: GLB_WORKRES is not a setting apgaspy reads and is ignored "
        "(did you mean GLB_WORKERS?)"], r.stderr


@pytest.mark.timeout(90)
def test_places_against_mpiexec_count_is_warned_about():
    cmd = [MPIEXEC, "-n", "2", sys.executable, str(HELLO)]
    rc, out, err = run_command(cmd, env_for(4), 80)
    assert rc == 0, err
    assert sorted(lines_of(out)) == ["Bye", "Hello from place(0)", "Hello from place(1)"]
    assert lines_of(err) == [
        "apgaspy place(0) WARNING: APGAS_PLACES=4 is ignored under mpiexec: its 2 ranks are "
        "the places, so 2 places run (mpiexec -n 4 gives 4)"], err
    rc, out, err = run_command(cmd, env_for(2), 80)  # agreeing: nothing said
    assert rc == 0 and err == "", err


# ------------------------------------------------------------------ what a failure prints


def test_configuration_error_is_a_value_error_and_an_apgas_error():
    assert issubclass(ConfigurationError, ValueError)
    assert issubclass(ConfigurationError, ApgasError)
    assert issubclass(OrdersEndedError, MalleabilityError)


@pytest.mark.timeout(60)
def test_bad_communicator_is_one_line():
    r = run_program(HELLO, 2, env=env_for(2, APGAS_COMMUNICATOR="schedul"))
    assert r.returncode == 1 and r.stdout == ""
    assert lines_of(r.stderr) == [
        "ConfigurationError: APGAS_COMMUNICATOR='schedul': no communicator of that name "
        "(did you mean 'schedule'? known: schedule, socket; or give module:Class) "
        "(APGAS_DEBUG=1 shows the traceback)"], r.stderr


@pytest.mark.timeout(90)
def test_bad_glb_setting_is_one_configuration_error_not_a_group():
    """``GLB_WORKERS`` is read inside main (in the root finish): the program still ends with
    the ConfigurationError alone, in a line; ``APGAS_DEBUG=1`` shows its traceback, with no
    exception group around it."""
    r = run_program(PRIMES, 2, "spawn", "1000", env=env_for(2, GLB_WORKERS="abc"),
                    timeout=80)
    assert r.returncode == 1 and r.stdout == ""
    err = lines_of(r.stderr)
    assert len(err) <= 8 and err[-1].startswith("ConfigurationError: GLB_WORKERS='abc' "), \
        r.stderr
    assert "Traceback" not in r.stderr and "ExceptionGroup" not in r.stderr
    r = run_program(PRIMES, 2, "spawn", "1000",
                    env=env_for(2, GLB_WORKERS="abc", APGAS_DEBUG="1"), timeout=80)
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "ExceptionGroup" not in r.stderr and "MultipleException" not in r.stderr
    assert lines_of(r.stderr)[-1].startswith(
        "apgaspy._exceptions.ConfigurationError: GLB_WORKERS='abc'"), r.stderr


@pytest.mark.timeout(120)
def test_failing_bag_prints_a_short_form_and_everything_with_debug():
    r = run_program("failing_bag.py", 2, env=env_for(2), timeout=100)
    assert r.returncode == 1, r.stderr
    err = lines_of(r.stderr)
    start = next(i for i, line in enumerate(err) if line.startswith("error: "))
    assert err[start] == ("error: place 1, bag FailingBag: ZeroDivisionError: division by "
                          "zero (APGAS_DEBUG=1 shows every remote traceback)"), r.stderr
    assert "glb/" in err[start + 1] and "failing_bag.py" in err[-3]  # GLB calls the bag
    assert err[-2].strip() == "print(1 / 0)"
    assert err[-1].startswith("MultipleException: ") and err[-1].endswith("(1 failure in all)")
    assert len(err) <= 8 and "Traceback" not in r.stderr, r.stderr

    full = run_program("failing_bag.py", 2, env=env_for(2, APGAS_DEBUG="1"), timeout=100)
    assert full.returncode == 1
    assert "Exception Group Traceback" in full.stderr
    assert "Traceback at place(1)" in full.stderr
    assert "raised by bag FailingBag" in full.stderr
    assert len(lines_of(full.stderr)) > 30


# ------------------------------------------------------------------ late orders


@pytest.mark.timeout(30)
class Keep(logging.Handler):
    """Keeps the ``(level, message)`` of every record of the ``apgaspy`` loggers."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelname, record.getMessage()))


def test_order_after_the_end_is_reported_at_info(monkeypatch):
    """A scheduled grow falls due after the program disabled its handler (as GLB does when
    its computation ends): place 0's real malleability state refuses it with
    OrdersEndedError and the schedule communicator reports it at INFO, no ERROR."""
    from apgaspy._runtime import Runtime
    from apgaspy.elastic._malleability import HandlerState, Malleability
    from communicators.schedule import ScheduleMalleableCommunicator

    monkeypatch.setenv("APGAS_SCHEDULE", "after 0 s grow 1 on localhost")
    rt = Runtime(0, os.urandom(32), "127.0.0.1")  # place 0's runtime, not started
    try:
        m = Malleability(rt)
        m.state = HandlerState.DISABLED  # the computation ended
        comm = ScheduleMalleableCommunicator()
        comm.malleability = m
        logger = logging.getLogger("apgaspy")
        keep, level = Keep(), logger.level
        logger.addHandler(keep)
        logger.setLevel(logging.INFO)
        try:
            comm.start()
            wait_until(lambda: comm.results, 10, "the scheduled order")
            comm.stop()
        finally:
            logger.removeHandler(keep)
            logger.setLevel(level)
    finally:
        rt.close()
    (entry, result), = comm.results
    assert isinstance(result, OrdersEndedError) and entry.order.kind == "grow"
    records = keep.records
    assert records == [("INFO", "scheduled grow 1 not carried out (the computation had ended: "
                                "the program disabled its malleable handler)")], records
