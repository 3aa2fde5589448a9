"""apgaspy's elastic batch job scheduler: the pure core.

Policy apart from mechanism (as dask/distributed's ``adaptive_core.py`` keeps them):

* :mod:`scheduler.jobs`: job classes, specs, job-script headers, batch files.
* :mod:`scheduler.algorithms`: the scheduling policies of the paper's evaluation (FCFS,
  Backfilling, EASY, Malleable minAgree) behind one interface,
  ``decide(View) -> [Start | Shrink | Grow]``.
* :mod:`scheduler.job_state`, :mod:`scheduler.records`, :mod:`scheduler.metrics`: what both
  schedulers share around a policy: the job state (takes orders? what the policy sees, the
  check of a decision), the record of a job and the metrics of a run.
* :mod:`scheduler.model`, :mod:`scheduler.workload`, :mod:`scheduler.simulate`: run-time
  model, workloads (the paper's mix, SWF traces) and a discrete-event simulator that runs
  the same algorithm objects in simulated time.
* :mod:`scheduler.evolving_simulation`: evolving jobs (they ask for nodes and give them
  back) in simulation: the evotree demand model, the runtime monitor's delays, and the
  simulator's evolving mode (monitor events in the same engine;
  docs/guides/evolving-scheduling.md).
* :mod:`scheduler.studies`: the paper's evaluation, the priority study and the evolving
  study; ``python -m scheduler simulate`` runs them from the command line.
* The real mode around the same policies: :mod:`scheduler.nodes` (node backends),
  :mod:`scheduler.server` (the scheduler on real processes; its modules are listed in
  docs/design/scheduler-structure.md), ``serve``/``submit``/``status``/
  ``cancel``/``shutdown``/``demo`` on the command line.

The pure core starts no process and opens no socket; the clock is always given.  ``import
scheduler`` loads it alone: the simulator loads on first use.

This package's names are the core a user programs against: the errors, job specs and
batch files, the policy interface with its factory (:func:`make` and :data:`registry` name
every policy; their classes are in :mod:`scheduler.algorithms`), the simulator's entry with
the workloads it takes, and the records of a run.  Servers (:mod:`scheduler.server`), node
backends (:mod:`scheduler.nodes`, :mod:`scheduler.slurm_mode`), run-time models
(:mod:`scheduler.model`) and studies (:mod:`scheduler.studies`) are imported from their
modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._exceptions import (
    BatchFileError,
    InvalidDecisionError,
    JobScriptError,
    SchedulerError,
    SimulationError,
)
from .algorithms import (
    Algorithm,
    Decision,
    Grow,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    make,
    registry,
)
from .jobs import (
    BatchEntry,
    JobClass,
    JobSpec,
    load_batch,
    load_job_script,
    parse_job_script,
    parse_required_time,
)

#: The names loaded on first use (PEP 562), and their modules: ``import scheduler`` loads the
#: pure core above, not the simulator or the workloads.
_LAZY = {
    "JobRecord": "records", "SimResult": "records",
    "SimConfig": "simulate", "Simulator": "simulate", "simulate": "simulate",
    "Workload": "workload", "paper_batch": "workload", "swf_workload": "workload",
}

if TYPE_CHECKING:
    from .records import JobRecord, SimResult
    from .simulate import SimConfig, Simulator, simulate
    from .workload import Workload, paper_batch, swf_workload


def __getattr__(name: str) -> Any:
    """One of :data:`_LAZY`'s names, loaded from its module on first use (and kept);
    ``AttributeError`` for any other name."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


__all__ = [
    "Algorithm",
    "BatchEntry",
    "BatchFileError",
    "Decision",
    "Grow",
    "InvalidDecisionError",
    "JobClass",
    "JobRecord",
    "JobScriptError",
    "JobSpec",
    "RunningJob",
    "SchedulerError",
    "Shrink",
    "SimConfig",
    "SimResult",
    "SimulationError",
    "Simulator",
    "Start",
    "View",
    "WaitingJob",
    "Workload",
    "load_batch",
    "load_job_script",
    "make",
    "paper_batch",
    "parse_job_script",
    "parse_required_time",
    "registry",
    "simulate",
    "swf_workload",
]
