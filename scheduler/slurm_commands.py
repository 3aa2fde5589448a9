"""The Slurm client commands the scheduler's Slurm mode runs, wrapped (``scontrol``, ``sacct``).

Used by the node backend (:mod:`scheduler.slurm_mode`) and by its helper processes
(:mod:`scheduler.slurm_helpers_cli`)::

    run_slurm(argv)          one client command to its end (timeout, SlurmError on failure)
      ├─ client_env()        without the variables of an enclosing Slurm job or step
      └─ scontrol_fields()   ``Key=Value`` pairs of one ``scontrol show … -o`` line
    expand_hostlist("n[1-3]")        → ["n1", "n2", "n3"]      (scontrol show hostnames)
    slurm_job_status(id)             → (state, exit status)    (scontrol, else sacct)

The commands and their output formats are Slurm's (https://slurm.schedmd.com/scontrol.html,
https://slurm.schedmd.com/sacct.html).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence

from ._exceptions import SlurmError

__all__ = [
    "ENDED_STATES",
    "SlurmError",
    "client_env",
    "expand_hostlist",
    "run_slurm",
    "scontrol_fields",
    "slurm_job_status",
]

#: Slurm job states in which a job has ended and holds no node any more.
ENDED_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT",
})

_CLIENT_PREFIXES = ("SLURM_", "SALLOC_", "SBATCH_", "SRUN_", "SQUEUE_", "SCONTROL_")
_KEEP = ("SLURM_CONF",)


def client_env(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """An environment for Slurm client commands: ``base`` (default ``os.environ``) without
    the variables of an enclosing Slurm job or step (``SLURM_*``, ``SALLOC_*``, ``SBATCH_*``,
    ``SRUN_*`` … except ``SLURM_CONF``), plus ``extra``."""
    env = {k: v for k, v in (os.environ if base is None else base).items()
           if not k.startswith(_CLIENT_PREFIXES) or k in _KEEP}
    env.update(extra)
    return env


def expand_hostlist(hostlist: str, *, env: Mapping[str, str] | None = None,
                    timeout_s: float = 30.0) -> list[str]:
    """The node names of a Slurm host list (``n[1-3,5]`` → ``n1 n2 n3 n5``), in its order.

    ``""`` and ``(null)`` give ``[]``.

    Raises:
        SlurmError: ``scontrol show hostnames`` fails.
    """
    if not hostlist or hostlist == "(null)":
        return []
    if "[" not in hostlist:
        return [h for h in hostlist.split(",") if h]
    return run_slurm(["scontrol", "show", "hostnames", hostlist], env=env,
                     timeout_s=timeout_s).stdout.split()


def run_slurm(argv: Sequence[str], *, env: Mapping[str, str] | None = None,
              timeout_s: float = 30.0, cwd: str | None = None,
              check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client command to its end; output captured as text.

    Raises:
        SlurmError: it cannot be started, runs longer than ``timeout_s`` seconds (it is
            killed), or (with ``check``) exits non-zero.
    """
    try:
        res = subprocess.run(list(argv), env=dict(env) if env is not None else client_env(),
                             cwd=cwd, capture_output=True, text=True, timeout=timeout_s,
                             stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(f"{argv[0]}: not found (are the Slurm client commands on PATH?)") \
            from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{shlex.join(argv)}: no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise SlurmError(f"{shlex.join(argv)}: {exc}") from None
    if check and res.returncode != 0:
        why = (res.stderr.strip() or res.stdout.strip() or "no output").splitlines()[-1]
        raise SlurmError(f"{shlex.join(argv)}: exit {res.returncode}: {why}")
    return res


def scontrol_fields(line: str) -> dict[str, str]:
    """``Key=Value`` pairs of one ``scontrol show … -o`` line (values without spaces)."""
    out = {}
    for item in line.split():
        key, sep, value = item.partition("=")
        if sep:
            out[key] = value
    return out




def slurm_job_status(slurm_job: int, *, env: Mapping[str, str] | None = None,
                     timeout_s: float = 30.0) -> tuple[str, int | None]:
    """``(state, exit status)`` of a Slurm job: the state as ``scontrol`` (else ``sacct``)
    spells it (``PENDING``, ``RUNNING``, ``COMPLETING``, ``COMPLETED`` …, ``UNKNOWN`` when
    neither knows it) and, once it has ended, its exit status (the script's status, or
    128 + the signal that ended it).

    Raises:
        SlurmError: ``scontrol`` does not answer.
    """
    res = run_slurm(["scontrol", "show", "job", "-o", str(slurm_job)], env=env,
                    timeout_s=timeout_s, check=False)
    state, code = "UNKNOWN", ""
    if res.returncode == 0 and res.stdout.strip():
        info = scontrol_fields(res.stdout)
        state, code = info.get("JobState", "UNKNOWN"), info.get("ExitCode", "")
    else:
        with contextlib.suppress(SlurmError):
            acct = run_slurm(["sacct", "-n", "-X", "-P", "-j", str(slurm_job), "-o",
                              "State,ExitCode"], env=env, timeout_s=timeout_s, check=False)
            lines = [x for x in acct.stdout.splitlines() if x.strip()]
            if acct.returncode == 0 and lines:
                state, _, code = lines[-1].partition("|")
                state = state.split()[0] if state.split() else "UNKNOWN"
    if state not in ENDED_STATES and state != "UNKNOWN":
        return state, None
    status, _, sig = code.partition(":")
    try:
        status_n, sig_n = int(status or 0), int(sig or 0)
    except ValueError:
        status_n, sig_n = 1, 0
    if sig_n:
        return state, 128 + sig_n
    if status_n:
        return state, status_n
    return state, 0 if state == "COMPLETED" else 1

