"""Notifications from jobs: what each line of :mod:`communicators.protocol` does to a job.

``APGAS-Ready`` makes a running malleable job ready for orders (a job that is not malleable
under this algorithm is ignored, as the Java scheduler ignores rigid jobs); ``APGAS-Rigid``
marks it not reachable (it could not open its order port); ``APGAS-Disabled`` makes it not
ready; timing lines are logged split as the Java scheduler splits them; anything else is
logged as undefined.  The job is found by its address (the running one there; else the last
one that ran there, since a job's last notifications may come after its end was seen).
"""

from __future__ import annotations

import math

from communicators.protocol import (
    NotificationKind,
    classify_notification,
    parse_notification,
    split_timing,
)

from .state import ServerState

__all__ = ["on_notification"]


def on_notification(state: ServerState, line: str) -> None:
    """Act on one notification line (without its end), from a listener thread."""
    message, address = parse_notification(line)
    kind = classify_notification(message)
    with state.lock:
        matches = sorted((j for j in state.jobs.values() if j.address == address
                          and not math.isnan(j.start_s)),
                         key=lambda j: (j.state == "running", j.start_s))
        job = matches[-1] if matches else None
        job_id = job.job_id if job else None
        if kind is NotificationKind.READY:
            if job is None or job.state != "running":
                state.event("notify_unknown_job", None, line=line)
                return
            if not job.elastic:
                state.event("ready_ignored", job_id, line=line,
                            reason="the job is not malleable under this algorithm")
                return
            job.ready = True
            state.persist(job)
            state.event("ready", job_id, after_s=round(state.now() - job.start_s, 3))
            state.dirty = True
        elif kind is NotificationKind.RIGID:
            if job is not None and job.state == "running":
                job.ready = False
                job.reachable = False
                state.persist(job)
            state.event("rigid", job_id, line=line)
        elif kind is NotificationKind.DISABLED:
            if job is not None:
                job.ready = False
                state.persist(job)
            state.event("disabled", job_id, line=line)
        elif kind is NotificationKind.TIMING:
            state.event("timing", job_id, fields=split_timing(line))
            return
        else:
            state.event("notify_undefined", job_id, line=line)
            return
    state.wake.set()
