"""The scheduler package's errors, in one place.

Each error says who raises it and when.  All of them are ``ValueError`` or ``RuntimeError``
subclasses so that callers which do not know this package still catch them sensibly.
"""

from __future__ import annotations

__all__ = ["BatchFileError", "InvalidDecisionError", "JobScriptError", "SimulationError",
           "SubmissionError"]


class JobScriptError(ValueError):
    """A job script header line is malformed.

    Raised by :func:`scheduler.jobs.parse_job_script` (and ``load_job_script``) when a header
    line with a known key (``#NODES``, ``#REQUIRED_TIME`` …) has a value that cannot be read,
    or when the headers together do not describe a valid job.  The message names the line
    number (1-based) and repeats the line.
    """


class BatchFileError(ValueError):
    """A batch file (JSON or CSV list of jobs) cannot be read.

    Raised by :func:`scheduler.jobs.load_batch`; the message names the file and the entry
    (0-based index for JSON, 1-based data row for CSV) at fault.
    """


class InvalidDecisionError(RuntimeError):
    """An algorithm returned a decision that the cluster state does not allow.

    Raised by the simulator (and meant to be raised by any mechanism applying decisions) when
    a decision starts a job on busy nodes, shrinks a job below its minimum, grows a job that
    is not ready, and so on.  It always means a bug in the algorithm, never in the workload.
    """


class SimulationError(RuntimeError):
    """The simulator cannot make progress.

    Raised by :class:`scheduler.simulate.Simulator` when jobs are waiting, nothing runs,
    nothing is due, and the algorithm starts nothing: the run would never end.
    """


class SubmissionError(ValueError):
    """A job cannot be accepted, or a request about a job cannot be carried out.

    Raised by :meth:`scheduler.server.Server.submit` (and the other ``submit_*`` methods)
    when the job can never fit the cluster (``JobSpec.fits``), has no command, or its script
    does not parse; and by :meth:`~scheduler.server.Server.cancel` for an unknown or ended
    job.  The message says why.
    """
