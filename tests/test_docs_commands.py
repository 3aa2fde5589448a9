"""The commands of README.md and docs/getting-started.md, run as a newcomer would run them.

Every fenced ``bash`` block of the two pages runs as one bash script in a scratch directory
(with ``examples/`` at hand), with a watchdog; it fails the test when it exits non-zero or
prints a traceback.  Sizes are made smaller only where the page itself says that the
smaller size works (UTS ``-d 12`` for the first malleable run), the fixed port of the
orders-by-hand block becomes a free one (the page says any free port does) and its tree
``-d 13`` (long enough with numpy, the page says), and blocks that
install packages or run the whole test suite are skipped, saying why.  The tests run with
the numpy kernels (``APGAS_KERNELS``, set in conftest.py), so a machine whose numba cache is
cold does not spend a minute compiling.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from pathlib import Path

import pytest
from conftest import run_command

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/getting-started.md")
TIMEOUT_S = 120  # per block; a block's normal run takes 2-20 s on 2 cores

#: Blocks not run here, and why (matched on the block's text).
SKIPS = {
    "pip install": "it installs packages into the environment",
    "python -m pytest": "it runs the whole test suite",
}


def bash_blocks(page: str) -> list[str]:
    """The fenced ``bash`` blocks of ``page``, in order."""
    text = (ROOT / page).read_text(encoding="utf-8")
    return re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)


def free_port(host: str = "127.0.1.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def adapted(block: str) -> str:
    """The block with the changes its page allows: a smaller tree for the first malleable
    run (too small for its orders to come, which the page says) and for the orders by hand
    (``-d 13`` with numpy), a free port instead of 5000."""
    if "APGAS_COMMUNICATOR=schedule" in block:
        block = block.replace("benchmarks.uts -d 14", "benchmarks.uts -d 12")
    if "SCHEDULER_PORT=5000" in block:
        # the tests run the numpy kernels, for which the page says -d 13 is long enough
        block = block.replace("benchmarks.uts -d 14", "benchmarks.uts -d 13")
        port = free_port()
        block = block.replace("SCHEDULER_PORT=5000", f"SCHEDULER_PORT={port}")
        block = block.replace(":5000", f":{port}")
    return block


def cases() -> list:
    seen: set[str] = set()
    out = []
    for page in PAGES:
        for i, block in enumerate(bash_blocks(page)):
            # each command of README's hello block is also in getting-started: run it once
            key = block.strip()
            if key in seen:
                continue
            seen.add(key)
            reason = next((why for what, why in SKIPS.items() if what in block), None)
            if reason is None and "mpiexec" in block and not shutil.which(
                    "mpiexec", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}"):
                reason = "no mpiexec on this machine (pip install -e '.[mpich]')"
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            out.append(pytest.param(page, block, id=f"{page}#{i}", marks=marks))
    return out


def test_the_pages_have_blocks():
    assert len(bash_blocks("README.md")) >= 3
    assert len(bash_blocks("docs/getting-started.md")) >= 6


@pytest.mark.parametrize(("page", "block"), cases())
def test_command_runs_as_written(page, block, tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # python, mpiexec: this venv's
    env["PYTHONPATH"] = f"{ROOT}:{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(ROOT)
    script = adapted(block)
    rc, out, err = run_command(["bash", "-c", script], env, TIMEOUT_S, cwd=tmp_path)
    report = f"{page}:\n{script}\n--- stdout\n{out}\n--- stderr\n{err}"
    assert rc == 0, report
    assert "Traceback" not in out + err, report
    if "python examples/hello.py" in block:
        assert "Hello from place(3)" in out and "Bye" in out, report
    if "benchmarks.uts" in block:
        assert "(correct)" in out, report
    if "communicators.order_cli shrink" in block:  # the orders really reached the job
        assert re.search(r"^127\.0\.1\.[23]$", out, re.M), report
        assert "cannot reach the job" not in err, report
        assert "places: 2 (ended on 3)" in out, report
    if "malleable_store.py" in block:
        assert re.search(r"(\d+) increments made, \1 found on 3 places", out), report
