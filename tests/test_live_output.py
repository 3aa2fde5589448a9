"""A benchmark run shows what it does while it runs (:mod:`benchmarks._live`): each order as
it happens, with its time since the start, and past two seconds its progress, on stderr;
``--quiet`` shows neither; the answer lines on stdout stay as they were.

The runs are real: ``python -m benchmarks.pi`` on two places with the numpy kernel (about
0.3 G samples a second a place, so 2e9 samples last several seconds even on a fast machine)
and orders played by the schedule communicator."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from conftest import ROOT, env_for, kill_tree, wait_gone

from apgaspy import MalleabilityError, Place
from apgaspy.elastic import OrderReport
from benchmarks._live import order_line

SCHEDULE = "after 0.3 s grow 1 on localhost; after 0.6 s grow 1 on nosuchhost.invalid"


def _pi(*args: str) -> subprocess.Popen[str]:
    env = env_for(None, APGAS_KERNELS="numpy", APGAS_COMMUNICATOR="schedule",
                  APGAS_SCHEDULE=SCHEDULE)
    return subprocess.Popen([sys.executable, "-m", "benchmarks.pi", "--places", "2", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def _finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.wait()
    return out, err


@pytest.mark.timeout(120)
def test_orders_show_as_they_happen_and_progress_as_plain_lines():
    proc = _pi("-n", "2e9")
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # read live: the grow line comes while the run goes on
            seen.append(line.rstrip("\n"))
            if " grow: added place 2 on localhost" in line:
                assert proc.poll() is None, "the grow line came only after the run ended"
                break
        else:
            pytest.fail(f"no grow line: {seen}")
        out, rest = _finish(proc)
    finally:
        if proc.poll() is None:
            kill_tree(proc.pid)
            proc.wait()
    err = seen + rest.splitlines()
    assert proc.returncode == 0, (out, err)
    grow = next(line for line in err if "grow: added" in line)
    assert grow.startswith("[") and " s] grow: added place 2 on localhost" in grow
    refused = [line for line in err if " s] grow refused: " in line]
    assert refused and "nosuchhost.invalid" in refused[0], err
    progress = [line for line in err if line.startswith("progress: ")]
    assert progress, err
    assert "work units" in progress[0] and "× 1 worker" in progress[0]
    # off a terminal: plain lines, not a redrawn bar
    assert not any("\r" in line for line in err)
    # stdout: the answer lines as before, the orders in the summary
    lines = out.splitlines()
    assert lines[0] == "pi samples=2000000000 seed=0 static=False"
    assert lines[2].startswith("expected: 3.14159") and lines[2].endswith("(correct)")
    assert "grow: added place 2" in lines
    assert not any(line.startswith(("progress", "[")) for line in lines)
    assert wait_gone([proc.pid], 10) == []


@pytest.mark.timeout(120)
def test_quiet_shows_no_progress_and_no_order_lines():
    """A run long enough for progress to show (the size is doubled until it is, at most
    twice: a faster machine ends 1.2e9 samples sooner) prints neither progress nor order
    lines with --quiet."""
    for samples in ("1.2e9", "2.4e9", "4.8e9"):
        started = time.monotonic()
        proc = _pi("-n", samples, "--quiet")
        out, err = _finish(proc)
        assert proc.returncode == 0, (out, err)
        if time.monotonic() - started > 2.5:  # long enough for progress to have shown
            break
    else:
        pytest.fail("even 4.8e9 samples took under 2.5 s: the test cannot conclude")
    assert "progress" not in err and " s] grow" not in err, err
    assert "grow: added place 2" in out.splitlines() and "(correct)" in out


@pytest.mark.timeout(60)
def test_a_short_run_names_the_orders_it_never_reached():
    """A schedule whose order comes after the computation's end is named in a warning
    (a host typo in it would otherwise pass unnoticed)."""
    env = env_for(None, APGAS_KERNELS="numpy", APGAS_COMMUNICATOR="schedule",
                  APGAS_SCHEDULE="after 30 s grow 1 on nosuchhost.invalid")
    done = subprocess.run([sys.executable, "-m", "benchmarks.pi", "-n", "1e6", "--places",
                           "1"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=50, start_new_session=True)
    assert done.returncode == 0, done.stderr
    assert "1 scheduled order not carried out: the computation ended first " \
           "(after 30 s grow 1 on nosuchhost.invalid)" in done.stderr


def test_order_lines():
    grow = OrderReport("grow", 1, [Place(2), Place(3)], ["localhost", "localhost"])
    assert order_line(grow, None, 2.314) == "[   2.31 s] grow: added places 2, 3 on localhost"
    shrink = OrderReport("shrink", 1, [Place(3)], ["127.0.1.3"], died=[Place(4)])
    assert order_line(shrink, None, 15.0) == \
        "[  15.00 s] shrink: released place 3 (host 127.0.1.3); died meanwhile: 4"
    refused = OrderReport("grow", 1, host_names=["typo"])
    assert order_line(refused, MalleabilityError("cannot start a place on host 'typo':\n x"),
                      1.0) == "[   1.00 s] grow refused: cannot start a place on host 'typo': x"
