"""The scheduler package's errors, in one place.

Every error is a :class:`SchedulerError`, and each says who raises it and when.  Each also
derives from the built-in error a caller that does not know this package would catch
(``ValueError``, ``RuntimeError``, ``OSError``), so that the node backends' failures stay
``OSError`` to the server, and a bad job script stays a ``ValueError``::

    SchedulerError
    ├── JobScriptError, BatchFileError, SubmissionError ......... ValueError
    ├── PoolError ............................................... ValueError
    ├── InvalidDecisionError, SimulationError, OrderFailedError . RuntimeError
    ├── ControlError ─── UntrustedServerError ................... RuntimeError
    └── SlurmError, JournalLockedError, UnsafePathError ......... OSError

The modules that raise them re-export them (``scheduler.control_client.ControlError`` and
the like are these classes).
"""

from __future__ import annotations

__all__ = ["BatchFileError", "ControlError", "InvalidDecisionError", "JobScriptError",
           "JournalLockedError", "OrderFailedError", "PoolError", "SchedulerError", "SimulationError",
           "SlurmError", "SubmissionError", "UnsafePathError", "UntrustedServerError"]


class SchedulerError(Exception):
    """The base of every error of the scheduler package (never raised itself): ``except
    SchedulerError`` catches what the scheduler's own checks, transports and backends raise,
    and nothing of Python's or of a job's."""


class JobScriptError(SchedulerError, ValueError):
    """A job script header line is malformed.

    Raised by :func:`scheduler.jobs.parse_job_script` (and ``load_job_script``) when a header
    line with a known key (``#NODES``, ``#REQUIRED_TIME`` …) has a value that cannot be read,
    or when the headers together do not describe a valid job.  The message names the line
    number (1-based) and repeats the line.
    """


class BatchFileError(SchedulerError, ValueError):
    """A batch file (JSON or CSV list of jobs) cannot be read.

    Raised by :func:`scheduler.jobs.load_batch`; the message names the file and the entry
    (0-based index for JSON, 1-based data row for CSV) at fault.
    """


class InvalidDecisionError(SchedulerError, RuntimeError):
    """An algorithm returned a decision that the cluster state does not allow.

    Raised by the simulator (and meant to be raised by any mechanism applying decisions) when
    a decision starts a job on busy nodes, shrinks a job below its minimum, grows a job that
    is not ready, and so on.  It always means a bug in the algorithm, never in the workload.
    """


class SimulationError(SchedulerError, RuntimeError):
    """The simulator cannot make progress.

    Raised by :class:`scheduler.simulate.Simulator` when jobs are waiting, nothing runs,
    nothing is due, and the algorithm starts nothing: the run would never end.
    """


class SubmissionError(SchedulerError, ValueError):
    """A job cannot be accepted, or a request about a job cannot be carried out.

    Raised by :meth:`scheduler.server.Server.submit` (and the other ``submit_*`` methods)
    when the job can never fit the cluster (``JobSpec.fits``), has no command, or its script
    does not parse; and by :meth:`~scheduler.server.Server.cancel` for an unknown or ended
    job.  The message says why.
    """


class PoolError(SchedulerError, ValueError):
    """A change of the node pool is refused (``node add|remove|drain``).

    Raised by :func:`scheduler.pool.change_nodes` (and ``Server.node_add`` and friends) for
    an unknown node, one named twice over, a node that is gone already, a removal that
    would leave no node or too few for a queued job, a node backend that cannot add nodes,
    or a host that cannot be reached.  Nothing has changed then; the message is one line.
    """


class OrderFailedError(SchedulerError, RuntimeError):
    """An order to a job failed.

    Raised by :func:`scheduler.order_transport.send_shrink` and
    :func:`~scheduler.order_transport.send_grow` when the job cannot be reached, a reply line
    does not come in time, the connection ends early, or the job refuses the order
    (``ERROR …``).  ``refused`` is True in the last case (the job is reachable).

    Args:
        message: what failed, in words.
        refused: the job answered ``ERROR <reason>`` (keyword only).
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class ControlError(SchedulerError, RuntimeError):
    """The scheduler cannot be reached, or answered a request with an error.

    Raised by :func:`scheduler.control_client.request` (the ``submit``, ``status``,
    ``cancel`` and ``shutdown`` command lines); the message is the scheduler's own (``no job
    42``, ``… does not parse``) or says that nothing listens on the control socket.
    """


class UntrustedServerError(ControlError):
    """The process listening on the control socket runs as a uid the caller does not trust
    (not its own, not root, not the ``server_uid`` it named); nothing was sent to it.

    Raised by :func:`scheduler.control_client.request` after it asked the peer's uid
    (``SO_PEERCRED``) and before it sends anything.
    """


class SlurmError(SchedulerError, OSError):
    """A Slurm command failed, timed out, or Slurm did not do what was asked.

    The message names the command and carries Slurm's own error text.  Raised by
    :class:`scheduler.slurm_mode.SlurmNodes` (its construction, ``launch``, ``acquire``,
    ``release``); the server treats it as any ``OSError`` of a node backend: the start fails,
    the grow is given back, the shrink's nodes stay with the job.
    """


class JournalLockedError(SchedulerError, OSError):
    """Another live scheduler holds the state directory's lock.

    Raised by :class:`scheduler.journal.Journal` when it opens a state directory whose lock
    file another live process holds (its pid is in the message): two schedulers never share
    one journal.
    """


class UnsafePathError(SchedulerError, OSError):
    """A path the scheduler would use is not safely its own (a link, another user's, open to
    others); the message names the path, says why, and what to do.

    Raised by :mod:`scheduler.private` (``owner_only_dir``, ``private_dir``,
    ``open_private``) for the state directory, the control socket's directory and the files
    in them (docs/reference/security.md).
    """
