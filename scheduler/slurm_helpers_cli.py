"""The helper processes of the scheduler's Slurm mode: ``python -m scheduler.slurm_helpers_cli``.

:class:`~scheduler.slurm_mode.SlurmNodes` starts them; they are not meant to be run by hand::

    watch ID      one per job, beside the scheduler: polls the Slurm job (slurm_job_status)
                  until it has ended and exits with its status; SIGTERM → scancel --full
    launch HOST…  the ssh-like launcher of a fallback job (HYDRA_LAUNCHER_EXEC): the command
                  runs as ``srun --jobid=<job holding HOST> -w HOST --overlap``, or here when
                  HOST is this machine and held by none

Both are described with the Slurm mode in :mod:`scheduler.slurm_mode`.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .private import write_private
from .slurm_commands import SlurmError, client_env, run_slurm, slurm_job_status

__all__ = ["NODE_MAP_ENV", "launch", "main", "step_argv", "watch", "write_launcher"]

#: Environment variable of a fallback job: the JSON file mapping node → Slurm job id.
NODE_MAP_ENV = "SCHEDULER_SLURM_NODES"


# ---------------------------------------------------------------------------- watcher


def watch(slurm_job: int, *, period_s: float = 0.5, env: Mapping[str, str] | None = None) -> int:
    """Wait until Slurm job ``slurm_job`` has ended; return its exit status (255: Slurm
    knows nothing of it).  SIGTERM or SIGINT is passed on to the whole job once
    (``scancel --signal=TERM --full``); waiting goes on until it has ended."""
    env = client_env(env)
    asked = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        asked.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    passed_on = False
    unknown = 0
    while True:
        if asked.is_set() and not passed_on:
            passed_on = True
            with contextlib.suppress(SlurmError):
                run_slurm(["scancel", "--signal=TERM", "--full", str(slurm_job)], env=env,
                          check=False)
        try:
            state, code = slurm_job_status(slurm_job, env=env)
        except SlurmError as exc:
            print(f"watch {slurm_job}: {exc}", file=sys.stderr, flush=True)
            state, code = "RUNNING", None
        if state == "UNKNOWN":
            unknown += 1
            if unknown >= 3:
                print(f"watch {slurm_job}: Slurm does not know the job", file=sys.stderr,
                      flush=True)
                return 255
        elif code is not None:
            print(f"watch {slurm_job}: {state}, exit status {code}", file=sys.stderr,
                  flush=True)
            return code
        asked.wait(period_s)


# ---------------------------------------------------------------------------- launcher


def step_argv(slurm_job: int, host: str, words: Sequence[str]) -> list[str]:
    """``srun`` running ``words`` as one task on ``host``, a step of ``slurm_job`` that
    shares the CPUs with the job's other steps (``--overlap``), with this environment."""
    return ["srun", f"--jobid={slurm_job}", "--nodes=1", "--ntasks=1", f"--nodelist={host}",
            "--overlap", "--export=ALL", *words]



_SSH_VALUE_OPTIONS = set("bcDEeFIiJLlmOopQRSWw")


def _is_this_machine(host: str) -> bool:
    try:
        ip = socket.gethostbyname(host)
    except OSError:
        return False
    if ipaddress.ip_address(ip).is_loopback:
        return True
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.bind((ip, 0))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def launch(argv: Sequence[str]) -> int:
    """The fallback jobs' launcher, called as ssh would be: ``[options] HOST COMMAND…``.

    The command (its words joined by spaces, run by ``sh -c`` as ssh's remote shell would)
    runs on ``HOST`` as a step of the Slurm job holding that node for the job
    (``$SCHEDULER_SLURM_NODES``): ``srun --jobid=<id> -N 1 -n 1 -w HOST --overlap``; a host
    that is this machine and held by no Slurm job of the job runs it here.  Returns the
    exit status (255 when the host is neither, as ssh for an unreachable host).
    """
    args = list(argv)
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        opt = args[i]
        i += 2 if len(opt) == 2 and opt[1] in _SSH_VALUE_OPTIONS else 1
    if i < len(args) and args[i] == "--":
        i += 1
    if i >= len(args):
        print("slurm-launch: usage: slurm-launch [ssh options] HOST COMMAND...",
              file=sys.stderr)
        return 255
    host, command = args[i], " ".join(args[i + 1:])
    nodes: dict[str, int] = {}
    path = os.environ.get(NODE_MAP_ENV)
    if path:
        with contextlib.suppress(OSError, ValueError):
            nodes = {str(k): int(v) for k, v in json.loads(Path(path).read_text()).items()}
    words = ["sh", "-c", command] if command else ["sh"]
    if host in nodes:
        env = client_env()
        env["SLURM_OVERLAP"] = "1"
        srun = step_argv(nodes[host], host, words)
        try:
            return subprocess.call(srun, env=env)
        except OSError as exc:
            print(f"slurm-launch: {exc}", file=sys.stderr)
            return 255
    if _is_this_machine(host):
        os.execvp(words[0], words)
    print(f"slurm-launch: {host!r} is neither a node of this job's Slurm jobs "
          f"({', '.join(sorted(nodes)) or 'none known'}) nor this machine", file=sys.stderr)
    return 255


def write_launcher(run_dir: Path) -> Path:
    """The fallback launcher as a file a job can name (``HYDRA_LAUNCHER_EXEC``):
    ``run_dir/slurm-launch``, a shell script that runs :func:`launch` with this interpreter,
    written once (0700: the job's own user alone runs it; :func:`scheduler.private.write_private`).

    Args:
        run_dir: the scheduler's run directory (it exists and is the scheduler's own).

    Returns:
        The script's path.

    Raises:
        UnsafePathError: a path planted there is not a regular file of this user.
        OSError: it cannot be written.
    """
    path = run_dir / "slurm-launch"
    if not path.exists():
        write_private(path, f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m "
                      "scheduler.slurm_helpers_cli launch \"$@\"\n", mode=0o700)
    return path


# ---------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scheduler.slurm_helpers_cli watch ID [--period S]`` (the watcher of one Slurm
    job) or ``… launch [ssh options] HOST COMMAND…`` (the fallback launcher).  Returns the
    exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "launch":
        return launch(args[1:])
    parser = argparse.ArgumentParser(prog="python -m scheduler.slurm_helpers_cli",
                                     description="helpers of the scheduler's Slurm mode")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("watch", help="wait for a Slurm job's end; exit with its status")
    w.add_argument("job", type=int)
    w.add_argument("--period", type=float, default=0.5, help="seconds between polls")
    sub.add_parser("launch", help="start a command on a node held by the job (ssh-like)")
    ns = parser.parse_args(args)
    return watch(ns.job, period_s=ns.period)


if __name__ == "__main__":
    sys.exit(main())
