"""The scheduler on the test Slurm cluster (``tests/cluster/slurm.py``), for the tests of its
Slurm mode (``serve --slurm``, tests/test_scheduler_slurm.py) and its Slurm pool
(``serve --slurm-pool``, tests/test_slurm_pool.py)::

    slurm_env(cluster, tmp, mark)      the cluster's client environment + this tree first on
      │                                PYTHONPATH + a sitecustomize naming n1..n4 + the marker
      ▼
    SlurmServe(cluster, tmp, *options) ``python -m scheduler serve`` in the background
      │  a thread samples the processes below it (``seen``) every 0.2 s
      ▼
    ask / status / submit / events     over its control socket and its event log
      ▼
    close (shut down) · kill (a crash) · kill_left (by pid: ``seen`` and the marked ones)

The test cluster's node names do not resolve (a real cluster's do): the scheduler and the
jobs get a name service for them, n<k> → 127.0.1.<k>, through a ``sitecustomize`` on
``PYTHONPATH`` (``SCHEDULER_TEST_HOSTS``), so that each job listens for orders on its first
node's own loopback address, as logical nodes do.  Every process of the run carries the
marker ``SCHEDULER_TEST_MARK`` in its environment (:func:`marked_pids` finds them in
``/proc``), so that a test kills (by pid) only what it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

from cluster.slurm import env_pids
from conftest import ROOT, alive, descendants, kill_tree, shut_down_server, wait_until

from scheduler.control_client import request

PY = sys.executable



def marked_pids(mark: str) -> list[int]:
    """Pids of live processes whose environment holds ``SCHEDULER_TEST_MARK=<mark>``."""
    return env_pids("SCHEDULER_TEST_MARK", mark)


def slurm_env(cluster: Any, tmp: Path, mark: str) -> dict[str, str]:
    """The environment of a scheduler on the test cluster: ``cluster``'s Slurm client
    environment, the name service (written to ``tmp/shim/sitecustomize.py``) and this tree's
    packages first on ``PYTHONPATH`` (the watchers and the jobs run in other directories),
    the marker ``mark``; no ``APGAS_PLACES``."""
    return cluster.named_environ(tmp / "shim", ROOT, SCHEDULER_TEST_MARK=mark)


class SlurmServe:
    """``python -m scheduler serve`` in the background on the test cluster (control socket
    ``tmp/control.sock``, event log ``tmp/events.jsonl``, run directory ``tmp/run``, decisions
    every 1 s, 1 s grace), with :func:`slurm_env`'s environment.

    Args:
        cluster: the ``slurm_cluster`` fixture.
        tmp: the test's directory (two servers in turn may share it: a restart).
        options: ``serve``'s options after those above (the mode, ``--slurm`` or
            ``--slurm-pool MIN:MAX``, and any that override them: the last one counts).
        mark: the processes' marker; a new one when ``None`` (a restart passes the first's).
        env: variables to set over that environment (e.g. another ``SLURM_CONF``).

    Raises:
        AssertionError: the server ended before its control socket appeared (its stderr).
        pytest's ``Failed``: no control socket within 30 s.
    """

    def __init__(self, cluster: Any, tmp: Path, *options: str, mark: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.cluster = cluster
        self.mark = mark or uuid.uuid4().hex
        self.control = tmp / "control.sock"
        self.log = tmp / "events.jsonl"
        self.run_dir = tmp / "run"
        self.err_path = tmp / f"serve-{uuid.uuid4().hex[:6]}.err"
        self.env = slurm_env(cluster, tmp, self.mark)
        self.env.update(env or {})
        argv = [PY, "-m", "scheduler", "serve", "--port", "0", "--control", str(self.control),
                "--log", str(self.log), "--run-dir", str(self.run_dir), "--interval", "1",
                "--grace", "1", *options]
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=err, stderr=err, start_new_session=True)
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._sample, daemon=True)
        self._watch.start()
        wait_until(lambda: self.control.exists() or self.proc.poll() is not None, 30,
                   "the control socket")
        assert self.proc.poll() is None, self.err_path.read_text()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.seen.update(descendants(self.proc.pid))
            self._stop.wait(0.2)

    def ask(self, **message: Any) -> dict[str, Any]:
        return request(self.control, message)

    def status(self) -> dict[str, Any]:
        return self.ask(op="status")

    def events(self, kind: str, job: int | None = None) -> list[dict[str, Any]]:
        """The event log's events of ``kind`` (of job ``job`` only, when given)."""
        if not self.log.exists():
            return []
        out = []
        for line in self.log.read_text().splitlines():
            if not line.strip():
                continue
            ev = json.loads(line)
            if ev["event"] == kind and (job is None or ev["job"] == job):
                out.append(ev)
        return out

    def submit(self, name: str, argv: list[str], **spec: Any) -> int:
        """Submit one job (120 s required time unless ``spec`` says otherwise); its id."""
        job = {"name": name, "command": argv, "required_time_s": 120, **spec}
        return int(self.ask(op="submit", job=job)["jobs"][0])

    def kill(self) -> None:
        """SIGKILL the scheduler alone (a crash): its Slurm jobs stay."""
        self.proc.kill()
        self.proc.wait(timeout=10)
        self._stop.set()
        with contextlib.suppress(OSError):
            self.control.unlink()

    def close(self) -> None:
        """Shut down (kill its process tree if it does not end)."""
        shut_down_server(self.proc, self.control)
        self._stop.set()
        self._watch.join(timeout=5)
        if self.proc.poll() is None:
            kill_tree(self.proc.pid)
            self.proc.wait(timeout=10)

    def kill_left(self) -> None:
        """Kill (by pid) every live process that was seen below the server or carries its
        marker."""
        for pid in sorted(self.seen | set(marked_pids(self.mark))):
            if alive(pid):
                kill_tree(pid)
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


class PoolServe(SlurmServe):
    """``serve --slurm-pool MIN:MAX *options`` (:class:`SlurmServe`), polling Slurm every
    0.3 s, quiet; :meth:`close` also kills what is left."""

    def __init__(self, cluster: Any, tmp: Path, *options: str, mark: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        super().__init__(cluster, tmp, "--pool-poll", "0.3", "--quiet", "--slurm-pool",
                         *options, mark=mark, env=env)

    def slurm(self) -> dict[str, Any]:
        """The pool's part of ``status``."""
        return self.status()["pool"]["slurm"]

    def close(self) -> None:
        super().close()
        self.kill_left()
