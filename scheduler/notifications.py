"""Notifications from jobs: what each line of :mod:`apgaspy.wire.protocol` does to a job.

``APGAS-Ready`` makes a running malleable job ready for orders (a job that is not malleable
under this algorithm is ignored, as the Java scheduler ignores rigid jobs), and
``APGAS-Ready;<port>`` also says where its orders go from then on (the job's
:attr:`~scheduler.state.ServerJob.order_port`, journaled); ``APGAS-Rigid``
marks it not reachable (it could not open its order port); ``APGAS-Disabled`` makes it not
ready; timing lines are logged split as the Java scheduler splits them; anything else is
logged as undefined.

An evolving job's own lines (docs/guides/evolving-scheduling.md): ``Evolving;Request;1``
puts a pending request for one node on the job (at most one at a time, as the Java
scheduler's set of pending requests), for the algorithm to serve (``RunningJob.requested``);
``Evolving;Release;<host>`` takes ``host`` from the job at once and puts it back in the free
pool (the job has already ended its places there) and drops its pending request.  A line
the scheduler cannot act on (no running evolving job at that address, a malformed line, a
request beyond the job's maximum, a release of a node the job does not hold, of its first
node, or of a node whose grow order is still in flight) is logged as ``evolving_refused``
with the reason; nothing changes.  A request and a release are the transitions every
scheduler calls (:meth:`scheduler.job_state.JobState.take_request`,
:meth:`~scheduler.job_state.JobState.release`), the simulated monitor's too
(:mod:`scheduler.evolving_simulation`).

The job is found by its address (the running one there; else the last
one that ran there, since a job's last notifications may come after its end was seen).
Jobs whose first node is the same (core jobs on one node, co-located jobs) send from the same
address: among the running ones there, the line is the one's whose key verifies it (its
MAC covers its job id), the latest started first.
A line for an address where no job has run is dropped before anything else: it is counted
(``status``: ``dropped_lines``), neither kept nor written to the event log; one
``lines_dropped`` event, at most every 10 s, says how many were (``dropped``: since the
last such event, ``total``: since the start) and the peer of the latest.

Before anything is done, the line must pass the job's check (docs/reference/security.md):
a job with a key (:mod:`apgaspy.wire.auth`) must send a valid MAC with a counter not seen
before; a job without one (``#AUTH plain``, ``serve --plain-lines``: Java APGAS jobs) must
send from its first node's address (for logical nodes: from an address of this machine).
A line that fails is dropped and changes nothing: it is counted (``status``:
``refused_lines``) and logged as ``line_refused`` with its peer address and the reason, at
most 10 every 10 s (the next logged one says how many were not).

A job's load (``APGAS-Load;<duty>;<bytes/s>;<gil>;<rss>``, every ``APGAS_LOAD_INTERVAL``
seconds of the job, docs/guides/scheduler.md) becomes the running job's
:attr:`~scheduler.job_state.JobState.load` (the last one only: ``status`` shows its duty
cycle and bytes/s) and gives its measured profile
(:func:`scheduler.resources.measured_profile`, over the cores it holds).  The event log gets
no line a report, only ``profile_measured`` when the measured profile changes.  A load line
of a job that is not running, a malformed one, or one with a duty cycle or GIL share outside
[0, 1] or negative bytes is refused: counted (``status``: ``refused_load_lines``), logged as
``load_refused`` (at most 10 every 10 s) and nothing changes.
"""

from __future__ import annotations

import ipaddress
import math
from functools import cache

import psutil

from apgaspy.wire.auth import (
    NOTIFICATION,
    LineAuthError,
    ReplayGuard,
    split_mac,
    verify_line,
)
from apgaspy.wire.protocol import (
    EVOLVING_RELEASE,
    EVOLVING_REQUEST,
    NotificationKind,
    classify_notification,
    parse_evolving,
    parse_load,
    parse_notification,
    ready_port,
    split_timing,
)

from .job_state import LoadSample
from .resources import measured_profile
from .state import ServerJob, ServerState

__all__ = ["on_notification"]


@cache
def _local_addresses() -> frozenset[str]:
    """The addresses of this machine's interfaces (psutil), read once."""
    return frozenset(a.address.split("%")[0] for addrs in psutil.net_if_addrs().values()
                     for a in addrs if a.family.name in ("AF_INET", "AF_INET6"))


def is_local_address(address: str) -> bool:
    """Whether ``address`` (an IP address) is a loopback address or one of this machine's."""
    try:
        if ipaddress.ip_address(address).is_loopback:
            return True
    except ValueError:
        return False
    return address in _local_addresses()


def peer_may_notify(job: ServerJob, peer: str) -> bool:
    """Whether a keyless job's notification may come from ``peer``: the address of the
    job's first node, or, when that is this machine (logical nodes), any address of it."""
    return peer == job.address or (is_local_address(job.address) and is_local_address(peer))


def _drop_line(state: ServerState, peer: str) -> None:
    """Count a line for an address where no job ever ran and log the count (one event
    ``lines_dropped`` every 10 s at most); the line itself is neither kept nor logged."""
    skipped = state.line_drops.refuse()
    if skipped is not None:
        state.event("lines_dropped", None, peer=peer, dropped=skipped + 1,
                    total=state.line_drops.total)


def _refuse_line(state: ServerState, job: ServerJob | None, line: str, peer: str,
                 reason: str) -> None:
    """Count a refused line and log it (rate-limited); nothing else changes."""
    skipped = state.line_refusals.refuse()
    if skipped is not None:
        state.event("line_refused", job.job_id if job else None, peer=peer, reason=reason,
                    line=split_mac(line)[0][:200], not_logged=skipped)


def _verified(jobs: list[ServerJob], line: str) -> ServerJob | None:
    """The first of ``jobs`` (running at one address) whose key verifies ``line`` without
    consuming it, or ``None``: more than one job, so the caller's check decides."""
    if len(jobs) < 2:
        return None
    for job in jobs:
        if job.key is None:
            continue
        try:  # the MAC only: a fresh guard; the job's own guard checks the counter after
            verify_line(job.key, NOTIFICATION, str(job.job_id), line, ReplayGuard())
        except LineAuthError:
            continue
        return job
    return None


def on_notification(state: ServerState, line: str, peer: str) -> None:
    """Act on one notification line (without its end) that came from the TCP address
    ``peer``, from a listener thread; refuse it when it fails the job's check (module
    docstring)."""
    body, _ = split_mac(line)
    message, address = parse_notification(body)
    kind = classify_notification(message)
    with state.lock:
        matches = sorted((j for j in state.jobs.values() if j.address == address
                          and not math.isnan(j.start_s)),
                         key=lambda j: (j.state == "running", j.start_s))
        job = matches[-1] if matches else None
        if job is None:
            _drop_line(state, peer)
            return
        if job.key is not None:
            sharing = [j for j in reversed(matches)
                       if j.state == "running" and j.key is not None]
            job = _verified(sharing, line) or job
        job_id = job.job_id
        if job.key is not None:
            try:
                job.check_notification(line)
            except LineAuthError as exc:
                _refuse_line(state, job, line, peer, f"authentication failed: {exc}")
                return
        elif not peer_may_notify(job, peer):
            _refuse_line(state, job, line, peer,
                         f"the job has no key and {peer} is not its first node's "
                         f"address {job.address}")
            return
        line = body
        evolving = parse_evolving(message)
        if evolving is not None:
            if not _on_evolving(state, job, evolving.type, evolving.argument, line):
                return
            state.dirty = True
        elif kind is NotificationKind.READY:
            if job.state != "running":
                state.event("notify_unknown_job", None, line=line)
                return
            if not job.elastic:
                state.event("ready_ignored", job_id, line=line,
                            reason="the job is not malleable under this algorithm")
                return
            job.ready = True
            port = ready_port(message)
            if port is not None:  # its orders go to a port of its own (APGAS_ORDER_PORT)
                job.order_port = port
            state.persist(job)
            state.event("ready", job_id, after_s=round(state.now() - job.start_s, 3),
                        **({"order_port": port} if port is not None else {}))
            state.dirty = True
        elif kind is NotificationKind.RIGID:
            if job.state == "running":
                job.ready = False
                job.reachable = False
                state.persist(job)
            state.event("rigid", job_id, line=line)
        elif kind is NotificationKind.DISABLED:
            job.ready = False
            state.persist(job)
            state.event("disabled", job_id, line=line)
        elif kind is NotificationKind.TIMING:
            state.event("timing", job_id, fields=split_timing(line))
            return
        elif kind is NotificationKind.LOAD:
            _on_load(state, job, message, line, peer)
            return
        else:
            state.event("notify_undefined", job_id, line=line)
            return
    state.wake.set()


def _cores_held(state: ServerState, job: ServerJob) -> int:
    """The cores ``job`` holds now: one a node where each node is one slot, else the CPUs
    of its cores on its nodes (all of a node it holds whole); at least 1."""
    if state.graph.slots:
        return max(1, len(job.nodes))
    return max(1, sum(len(c) for c in state.ledger.cpus_of(job.job_id, job.nodes).values()))


def _on_load(state: ServerState, job: ServerJob, message: str, line: str, peer: str) -> None:
    """Keep an ``APGAS-Load`` line of ``job`` as its :class:`~scheduler.job_state.LoadSample`
    (under ``state.lock``), or refuse it (module docstring); the event log gets an event only
    when the job's measured profile changes, not one a report."""
    if job.state != "running":
        reason = f"the job is {job.state}, not running"
    else:
        try:
            report = parse_load(message)
        except ValueError as exc:
            reason = str(exc)
        else:
            job.load = LoadSample(report.duty, report.bytes_per_s, report.gil,
                                  report.rss_bytes, state.now())
            profile = measured_profile(job.load, _cores_held(state, job),
                                       state.profile_thresholds)
            if profile != job.measured_profile:
                state.event("profile_measured", job.job_id, profile=profile,
                            before=job.measured_profile, duty=round(report.duty, 3),
                            bytes_per_s=round(report.bytes_per_s),
                            rss_bytes=report.rss_bytes,
                            declared=job.spec.profile if job.spec.profile_declared else None)
                job.measured_profile = profile
            return
    skipped = state.load_refusals.refuse()
    if skipped is not None:
        state.event("load_refused", job.job_id, peer=peer, reason=reason, line=line[:200],
                    not_logged=skipped)


def _on_evolving(state: ServerState, job: ServerJob | None, kind: str, argument: str,
                 line: str) -> bool:
    """Act on an ``Evolving;<kind>;<argument>`` line of ``job`` (under ``state.lock``).

    Returns whether something the algorithm sees changed (a request taken, a node freed).
    """
    job_id = job.job_id if job is not None else None

    def refuse(reason: str) -> bool:
        state.event("evolving_refused", job_id, line=line, reason=reason)
        return False

    if job is None or job.state != "running":
        return refuse("no running job at that address")
    if not job.evolving:
        return refuse(f"the job is {job.spec.job_class.value}, not evolving")
    if kind == EVOLVING_REQUEST:
        if argument.strip() != "1":
            return refuse(f"a request asks for one node ('1'), got {argument!r}")
        problem = job.take_request()
        if problem is not None:
            return refuse(problem)
        state.persist(job)
        state.event("evolving_request", job_id, nodes=len(job.nodes))
        return True
    if kind == EVOLVING_RELEASE:
        host = argument.strip()
        problem = job.release_refusal(host)
        if problem is not None:
            return refuse(problem)
        if state.rm is not None:
            try:
                state.rm.release(job.job_id, [host])
            except OSError as exc:
                return refuse(f"the resource manager kept the node: {exc}")
        job.release(state.now(), host)
        state.ledger.release(job.job_id, [host])
        state.persist(job)
        state.event("evolving_release", job_id, node=host, nodes=list(job.nodes))
        return True
    return refuse(f"undefined evolving message type {kind!r}")
