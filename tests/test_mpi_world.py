"""Run the pytest-mpi tests of tests/mpi inside real MPI worlds of 2 and 3 ranks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import MPIEXEC, ROOT, env_for, kill_tree


@pytest.mark.parametrize("ranks", [2, 3])
def test_pytest_mpi_suite(ranks):
    cmd = [MPIEXEC, "-n", str(ranks), sys.executable, "-m", "pytest", "--with-mpi", "-q",
           "-p", "no:cacheprovider", str(ROOT / "tests" / "mpi")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env_for(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, _ = proc.communicate()
        pytest.fail(f"pytest under mpiexec -n {ranks} hung:\n{out}")
    assert proc.returncode == 0, out
    assert out.count("3 passed") == ranks, out
