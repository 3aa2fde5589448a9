"""``python -m scheduler serve``: run the real scheduler in the foreground.

::

    python -m scheduler serve [--nodes 4 | --hosts h1,h2 [--ssh PATH]
                               | --slurm [--partition P] [--nodes N] [--slurm-grow MODE]
                               | --slurm-pool MIN:MAX [--partition P] [--pool-wait S]
                                 [--pool-idle S] [--pool-poll S] [--pool-walltime S]
                                 [--pool-renew S]]
                              [--algorithm malleable] [--port 8081] [--listen ADDR]
                              [--control PATH] [--control-group NAME] [--log FILE]
                              [--run-dir DIR] [--state-dir DIR]
                              [--interval 5] [--cooldown 60] [--grace 5] [--env KEY=VALUE]…
                              [--max-connections 256] [--max-connections-per-peer 32]
                              [--connection-idle 10] [--max-lines-per-connection 16]
                              [--max-line-bytes 4096]

Logical nodes (``--nodes N``, the default with 4) are 127.0.1.1 … 127.0.1.N on this machine
and the scheduler listens on 127.0.0.1; hosts (``--hosts``) are reached by ssh and the
scheduler listens on ``--listen`` (default: the address that routes to the first host).
With ``--slurm`` the nodes are those of a Slurm partition (``--nodes N``: its first N in
Slurm's order; default all), every job is a Slurm job on the nodes the scheduler chose, and
a malleable job's allocation is resized with it (:mod:`scheduler.slurm_mode`).  With
``--slurm-pool MIN:MAX`` the scheduler shares the partition with other users: it holds
MIN to MAX nodes, each through a placeholder Slurm job of its own, and runs its jobs there
as job steps (:mod:`scheduler.slurm_pool`, :mod:`scheduler.slurm_pool_keeper`).  With
``--parent`` it runs as an evolving job of another scheduler, on the nodes of the
``NODE_FILE`` that one gave it, and asks it for more (:mod:`scheduler.child`).
Events are printed to stderr as they happen (``--quiet``: not) and written as JSON lines to
``--log``.  It runs until ``python -m scheduler shutdown``, SIGINT or SIGTERM, then ends every
running job and exits 0.  Exit status 1 when it cannot start (port or control socket taken,
the control socket's path not safely the user's, or another scheduler uses the state
directory).  At the start, an ``APGAS_*``, ``GLB_*`` or
``SCHEDULER_*`` variable of its environment (or of ``--env``) that nothing reads draws a
``warning:`` line with the nearest known names (:func:`apgaspy.config.unknown_variables`).

Its jobs are journaled in ``--state-dir`` (default ``<run-dir>/state``): a scheduler started
again on the same state directory after a crash queues the waiting jobs again and adopts the
running ones (docs/guides/durable-scheduler.md).  The control socket is owner-only unless
``--control-group`` names a group that may use it too; its default path is
``$XDG_RUNTIME_DIR/apgaspy-scheduler.sock``, else ``<tmp>/apgaspy-<uid>/scheduler.sock``
(:mod:`scheduler.control_client`).  The run directory is made owner-only (mode 0700) and
every file the scheduler writes there is 0600 (:mod:`scheduler.private`).

The notification port's bounds (:class:`~scheduler.notification_listener.ListenerLimits`) come from
the ``--max-…`` and ``--connection-idle`` options, else from their ``APGAS_SCHEDULER_*``
variables (:data:`~scheduler.notification_listener.LIMIT_ENV`), else the defaults above; a
variable that is not a positive number is a usage error (exit status 2).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from apgaspy.config import describe, unknown_variables

from ._argtypes import port, positive_int, positive_seconds, seconds
from .algorithms import make, registry
from .child import ParentLink, scrub_parent_env
from .control_client import control_path
from .control_server import prepare_control_path
from .notification_listener import ListenerLimits
from .nodes import LocalNodes, NodeBackend, SshHosts, cores_option
from .resources import SHAPES, ProfileThresholds
from .server import DEFAULT_PORT, Server
from .simulate_cli import add_priority_arguments, priority_options
from .slurm_mode import GROW_MODES, SlurmNodes
from .slurm_pool import PoolSettings, SlurmPool, pool_range
from .slurm_pool_keeper import PoolKeeper

__all__ = ["HELP", "add_arguments", "format_event", "listener_limits", "make_nodes", "run"]

HELP = "run the scheduler on logical nodes, ssh hosts or a Slurm partition (real jobs)"


def _hosts(text: str) -> list[str]:
    hosts = [h.strip() for h in text.split(",") if h.strip()]
    if not hosts:
        raise argparse.ArgumentTypeError(f"expected comma-separated host names, got {text!r}")
    if len(set(hosts)) != len(hosts):
        raise argparse.ArgumentTypeError(f"a host is named twice in {text!r}")
    return hosts


def _cores(text: str) -> int | str:
    try:
        return cores_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _bound(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (value > 0 and value != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not key.replace("_", "").isalnum():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``serve``'s options to ``p``."""
    where = p.add_mutually_exclusive_group()
    p.add_argument("--nodes", type=positive_int, default=None,
                   help="logical nodes 127.0.1.1 ... 127.0.1.N on this machine (default 4); "
                        "with --slurm: how many of the partition's nodes to use (default all)")
    where.add_argument("--hosts", type=_hosts, default=None,
                       help="comma-separated hosts reached by ssh (h1,h2,...)")
    where.add_argument("--parent", action="store_true",
                       help="run as an evolving job of a parent scheduler: the nodes are "
                            "NODE_FILE's; jobs it cannot place make it ask the parent for "
                            "nodes, and idle granted nodes go back (scheduler.child); the "
                            "default --port is then a free one")
    where.add_argument("--slurm", action="store_true",
                       help="use the nodes of a Slurm partition: each job is a Slurm job, "
                            "resized with the job")
    where.add_argument("--slurm-pool", default=None, metavar="MIN:MAX",
                       help="share a Slurm partition with other users: hold MIN to MAX of "
                            "its nodes, each through a placeholder Slurm job, and run jobs "
                            "there as job steps (scheduler.slurm_pool)")
    p.add_argument("--partition", default=None,
                   help="the Slurm partition for --slurm or --slurm-pool (default: Slurm's "
                        "default one)")
    pool = p.add_argument_group("Slurm pool (--slurm-pool), in seconds")
    pool.add_argument("--pool-wait", default=None, metavar="S",
                      help="ask for another placeholder when the queue's head has waited "
                           "this long (default 3)")
    pool.add_argument("--pool-idle", default=None, metavar="S",
                      help="give a node back after it was idle this long (default 30)")
    pool.add_argument("--pool-poll", default=None, metavar="S",
                      help="seconds between two looks at Slurm (squeue; default 1)")
    pool.add_argument("--pool-walltime", default=None, metavar="S",
                      help="each placeholder's walltime (sbatch --time; default: the "
                           "partition's)")
    pool.add_argument("--pool-renew", default=None, metavar="S",
                      help="replace a busy node's placeholder when it has less walltime "
                           "left (default 120)")
    p.add_argument("--slurm-grow", choices=GROW_MODES, default="auto",
                   help="how a Slurm job grows: expand (--dependency=expand), fallback "
                        "(helper allocations beside it), auto (expand where the controller "
                        "permits it; default)")
    p.add_argument("--ssh", default="ssh",
                   help="ssh command for --hosts (default ssh; jobs start with -t -t)")
    p.add_argument("--no-tty", action="store_true", help="start ssh jobs without -t -t")
    p.add_argument("--cores-per-node", type=_cores, default=None, metavar="C|auto",
                   help="cores of each node: jobs may then ask for #CORES and are given a "
                        "shape (APGAS_CORES, APGAS_PLACES_PER_HOST, GLB_WORKERS); auto: "
                        "this machine's CPUs (logical nodes), nproc over ssh (--hosts), "
                        "CPUTot (--slurm); default: each node one slot")
    p.add_argument("--shape", choices=SHAPES, default="scale",
                   help="places and workers of a job on its cores: scale (a place a node, "
                        "a worker a core; default), granularity (a place a core; a network "
                        "job a place a node) or core (a place a core, every profile)")
    p.add_argument("--no-pin", action="store_true",
                   help="do not give jobs APGAS_CORES: their places are not bound to the "
                        "cores they hold (with --cores-per-node)")
    p.add_argument("--colocate-bound", type=_bound, default=None, metavar="B",
                   help="co-location: #COLOCATE yes jobs may share cores while the duty "
                        "cycles of the jobs on each core sum to at most B (1.0: a core's "
                        "capacity, the model's knee); default: no job shares a core")
    p.add_argument("--algorithm", choices=sorted(registry), default="malleable",
                   help="scheduling algorithm (default malleable)")
    p.add_argument("--port", type=port, default=DEFAULT_PORT,
                   help=f"SCHEDULER_PORT: notifications here, orders to jobs "
                        f"(default {DEFAULT_PORT}; 0: a free one)")
    p.add_argument("--listen", default=None,
                   help="address to listen on and give jobs as SCHEDULER_IP (default "
                        "127.0.0.1 for logical nodes, else the address routing to the "
                        "first host)")
    p.add_argument("--control", default=None,
                   help="control socket (default $APGAS_SCHEDULER_CONTROL, else "
                        "$XDG_RUNTIME_DIR/apgaspy-scheduler.sock, else "
                        "<tmp>/apgaspy-<uid>/scheduler.sock)")
    p.add_argument("--control-group", default=None, metavar="NAME",
                   help="a group whose members may use the control socket too (default: "
                        "the owner only)")
    p.add_argument("--log", type=Path, default=None, help="JSON-lines event log (appended)")
    p.add_argument("--state-dir", type=Path, default=None,
                   help="where the job journal and its lock live (default <run-dir>/state); "
                        "a restart on the same one resumes the jobs")
    p.add_argument("--run-dir", type=Path, default=None,
                   help="node files and job output (default: a new temporary directory)")
    p.add_argument("--interval", type=positive_seconds, default=5.0,
                   help="seconds between algorithm runs (default 5; also on every event)")
    p.add_argument("--cooldown", type=seconds, default=60.0,
                   help="seconds between two orders to one job (default 60, as Java)")
    add_priority_arguments(p)  # --rescale-gap-s, --keep-free, --aging-s (priority policies)
    p.add_argument("--grace", type=seconds, default=5.0,
                   help="seconds from SIGTERM to SIGKILL when ending a job (default 5)")
    p.add_argument("--env", type=_env, action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment variable for every job (repeatable)")
    p.add_argument("--plain-lines", action="append", default=[], metavar="NAME",
                   help="jobs named NAME (a shell pattern; repeatable) get no line key and "
                        "speak the plain Java lines, e.g. Java APGAS jobs; their "
                        "notifications are checked by peer address only (default: every "
                        "job gets a key; a script may say #AUTH plain)")
    limits = p.add_argument_group(
        "notification port bounds (default: the APGAS_SCHEDULER_* variable, else as shown)")
    limits.add_argument("--max-connections", type=positive_int, default=None, metavar="N",
                        help="notification connections open at once; past it a new one is "
                             "closed at once (default 256)")
    limits.add_argument("--max-connections-per-peer", type=positive_int, default=None,
                        metavar="N", help="the same, from one peer address (default 32)")
    limits.add_argument("--connection-idle", type=positive_seconds, default=None,
                        metavar="S", help="close a notification connection that completes "
                                          "no line for S seconds (default 10)")
    limits.add_argument("--max-lines-per-connection", type=positive_int, default=None,
                        metavar="N", help="close a connection after N lines (default 16; "
                                          "jobs send one)")
    limits.add_argument("--max-line-bytes", type=positive_int, default=None, metavar="N",
                        help="close a connection that sends a longer line (default 4096)")
    p.add_argument("--quiet", action="store_true", help="print no events to stderr")


_LIMIT_OPTIONS = {"max_connections": "max_connections",
                  "max_connections_per_peer": "max_connections_per_peer",
                  "idle_s": "connection_idle", "max_lines": "max_lines_per_connection",
                  "max_line_bytes": "max_line_bytes"}


def listener_limits(args: argparse.Namespace) -> ListenerLimits:
    """The notification port's bounds: each option given, else its variable of
    :data:`~scheduler.notification_listener.LIMIT_ENV`, else the default.

    Raises:
        ValueError: a variable that is not a positive number (the message names it).
    """
    base = ListenerLimits.from_env()
    given = {field: getattr(args, option) for field, option in _LIMIT_OPTIONS.items()
             if getattr(args, option, None) is not None}
    return dataclasses.replace(base, **given)


def make_nodes(args: argparse.Namespace) -> NodeBackend:
    """The node backend the options describe (``--slurm-pool``: a
    :class:`~scheduler.slurm_pool.SlurmPool`, with no node until its keeper runs).

    Raises:
        ValueError: contradictory options (``--nodes`` with ``--hosts``, ``--partition``
            without ``--slurm`` or ``--slurm-pool``, a ``--pool-…`` option without
            ``--slurm-pool``), a bad count, or a bad pool setting (:func:`pool_settings`).
        OSError: ``--slurm`` or ``--slurm-pool`` and Slurm does not answer, or has no such
            partition (:class:`~scheduler.slurm_commands.SlurmError`).
    """
    if args.nodes is not None and args.hosts:
        raise ValueError("--nodes and --hosts exclude each other")
    pool = getattr(args, "slurm_pool", None)
    if args.partition is not None and not (args.slurm or pool):
        raise ValueError("--partition needs --slurm or --slurm-pool")
    if args.slurm_grow != "auto" and not args.slurm:
        raise ValueError("--slurm-grow needs --slurm")
    given = [o for o in _POOL_OPTIONS if getattr(args, o.replace("-", "_"), None) is not None]
    if given and not pool:
        raise ValueError(f"--{given[0]} needs --slurm-pool")
    if pool:
        if args.nodes is not None or args.cores_per_node is not None:
            raise ValueError("--slurm-pool takes its nodes from its placeholders, not "
                             "--nodes or --cores-per-node")
        return SlurmPool(pool_settings(args), args.partition, listen=args.listen)
    if args.slurm:
        return SlurmNodes(args.partition, args.nodes, listen=args.listen, grow=args.slurm_grow,
                          cores_per_node=args.cores_per_node)
    if args.hosts:
        return SshHosts(args.hosts, ssh=args.ssh, listen=args.listen, tty=not args.no_tty,
                        cores_per_node=args.cores_per_node)
    if getattr(args, "parent", False):
        if args.nodes is not None:
            raise ValueError("--parent takes its nodes from NODE_FILE, not --nodes")
        hosts = parent_hosts()
        if all(h.startswith("127.0.1.") for h in hosts):
            return LocalNodes.named(hosts, cores_per_node=args.cores_per_node)
        return SshHosts(hosts, ssh=args.ssh, listen=args.listen, tty=not args.no_tty,
                        cores_per_node=args.cores_per_node)
    return LocalNodes(args.nodes or 4, cores_per_node=args.cores_per_node)


_POOL_OPTIONS = ("pool-wait", "pool-idle", "pool-poll", "pool-walltime", "pool-renew")


def _pool_seconds(args: argparse.Namespace, option: str) -> float | None:
    text = getattr(args, option.replace("-", "_"))
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--{option} is seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise ValueError(f"--{option} must be > 0 s, got {text!r}")
    return value


def pool_settings(args: argparse.Namespace) -> PoolSettings:
    """The Slurm pool's settings from ``--slurm-pool MIN:MAX`` and ``--pool-…``.

    Raises:
        ValueError: MIN > MAX, MAX < 1, or a value that is not what it should be (one line).
    """
    low, high = pool_range(args.slurm_pool)
    return PoolSettings(low, high, wait_s=_pool_seconds(args, "pool-wait") or 3.0,
                        idle_s=_pool_seconds(args, "pool-idle") or 30.0,
                        poll_s=_pool_seconds(args, "pool-poll") or 1.0,
                        walltime_s=_pool_seconds(args, "pool-walltime"),
                        renew_s=_pool_seconds(args, "pool-renew") or 120.0)


def parent_hosts() -> list[str]:
    """The hosts of the ``NODE_FILE`` a parent scheduler gave this process, first first.

    Raises:
        ValueError: no ``NODE_FILE``, or no host in it.
        OSError: it cannot be read.
    """
    path = os.environ.get("NODE_FILE", "").strip()
    if not path:
        raise ValueError("--parent needs NODE_FILE (run it as a job of a parent scheduler)")
    hosts = [h.strip() for h in Path(path).read_text(encoding="ascii").splitlines()
             if h.strip()]
    if not hosts:
        raise ValueError(f"--parent: NODE_FILE {path} names no host")
    return list(dict.fromkeys(hosts))


def format_event(ev: dict[str, Any]) -> str | None:
    """One readable line for an event of the log, or None for events not worth a line."""
    line = _format_event(ev)
    if line and ev.get("slurm_job") and ev.get("event") in ("start", "grow_done",
                                                             "shrink_done"):
        count = ev.get("slurm_nodes")
        line += f" [Slurm job {ev['slurm_job']}" + (
            f": {count} nodes in squeue]" if count is not None else "]")
    return line


def _format_event(ev: dict[str, Any]) -> str | None:
    t, job, kind = ev.get("t", 0.0), ev.get("job"), ev.get("event")
    head = f"[{t:8.2f}s]" + (f" job {job}" if job is not None else "")
    if kind == "server_start":
        return (f"{head} {ev['algorithm']} scheduler on {len(ev['nodes'])} nodes, "
                f"notifications on {ev['listen']}:{ev['port']}, run dir {ev['run_dir']}")
    if kind == "queue":
        return f"{head} queued: {ev['name']} ({ev['class']} {ev['min_nodes']}-{ev['max_nodes']})"
    if kind == "submit":
        return f"{head} submitted: {ev['name']}, queued at {ev['due_s']:.1f} s"
    if kind == "refuse":
        return f"{head} refused {ev['name']}: {ev['reason']}"
    if kind == "start":
        return f"{head} started on {','.join(ev['nodes'])} (pid {ev['pid']}): {ev['command']}"
    if kind == "start_failed":
        return f"{head} could not start: {ev['error']}"
    if kind == "ready":
        return f"{head} ready for orders ({ev['after_s']:.2f} s after start)"
    if kind == "shrink_order":
        return f"{head} shrink {ev['count']} (holds {len(ev['nodes'])})"
    if kind == "shrink_done":
        return f"{head} shrunk: released {','.join(ev['released'])} in {ev['seconds']:.2f} s"
    if kind == "grow_order":
        return f"{head} grow onto {','.join(ev['added'])}"
    if kind == "grow_done":
        return f"{head} grown to {len(ev['nodes'])} nodes in {ev['seconds']:.2f} s"
    if kind in ("shrink_failed", "grow_failed", "algorithm_error", "invalid_decision",
                "shrink_unknown_node"):
        return f"{head} {kind.replace('_', ' ')}: {ev.get('error')}"
    if kind == "evolving_request":
        return f"{head} asks for one more node (holds {ev['nodes']})"
    if kind == "evolving_grant":
        return f"{head} request granted: {','.join(ev['nodes'])}"
    if kind == "evolving_release":
        return (f"{head} gave back {ev['node']} (holds {len(ev['nodes'])}: "
                f"{','.join(ev['nodes'])})")
    if kind == "evolving_refused":
        return f"{head} evolving message refused ({ev['reason']}): {ev['line']}"
    if kind == "rigid":
        return f"{head} runs on as rigid: {ev['line']}"
    if kind == "lines_dropped":
        return (f"{head} dropped {ev['dropped']} lines for addresses where no job ran "
                f"({ev['total']} in all; latest from {ev['peer']})")
    if kind == "line_refused":
        more = f" ({ev['not_logged']} more not logged)" if ev.get("not_logged") else ""
        return f"{head} refused a line from {ev['peer']}: {ev['reason']}{more}"
    if kind == "overrun":
        return f"{head} overran its required time ({ev['required_time_s']:g} s): ending it"
    if kind == "cancel":
        return f"{head} cancelled ({ev['state']})"
    if kind == "end":
        evolving = ""
        if ev.get("requests") or ev.get("releases"):  # an evolving job's own activity
            evolving = (f", {ev['requests']} requests ({ev.get('requests_served', 0)} "
                        f"granted), {ev['releases']} releases")
        return (f"{head} ended: {ev['state']} (exit {ev['returncode']}) after "
                f"{ev['run_s']:.1f} s, {ev['shrinks']} shrinks, {ev['grows']} grows"
                f"{evolving}")
    if kind in ("sigkill", "leftover_killed"):
        return f"{head} SIGKILL to {ev['pids']}"
    if kind == "shutdown":
        return f"{head} shutting down, ending jobs {ev['ending']}"
    if kind == "adopted":
        return (f"{head} adopted: still running on {','.join(ev['nodes'])} (pid {ev['pid']})"
                + ("" if ev["reachable"] else ", treated as rigid"))
    if kind == "ended_unseen":
        return (f"{head} ended while the scheduler was down: {ev['state']}"
                + (f" ({ev['reason']})" if ev.get("reason") else ""))
    if kind == "recovered":
        return (f"{head} journal: {ev['queued']} queued again, {ev['pending']} pending, "
                f"{ev['adopted']} running adopted, {ev['ended']} ended while down, "
                f"{ev['history']} finished earlier ({ev['seconds'] * 1000:.0f} ms)")
    if kind == "stopped":
        return f"{head} stopped" + (f"; processes left: {ev['left']}" if ev["left"] else "")
    return None


def _close(nodes: NodeBackend) -> None:
    close = getattr(nodes, "close", None)
    if close is not None:
        close()  # a Slurm backend's scratch directory


def run(args: argparse.Namespace) -> int:
    """Serve until shut down; returns 0, or 1 when the server cannot start."""
    try:
        limits = listener_limits(args)
        ProfileThresholds.from_env()  # a bad threshold is a usage error, before any start
        nodes = make_nodes(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    control = control_path(args.control)
    try:  # before anything starts: a path that is not safely ours stops it here
        prepare_control_path(control)
    except OSError as exc:
        _close(nodes)
        print(f"error: control socket: {exc}", file=sys.stderr)
        return 1
    # Jobs inherit this environment and --env: a misspelt setting would reach none of them.
    for name, close in unknown_variables([*os.environ, *dict(args.env)]):
        print(f"warning: {describe(name, close)}", file=sys.stderr, flush=True)
    note = getattr(nodes, "note", None)
    if note:  # logical nodes sharing this machine's CPUs
        print(f"note: {note}", file=sys.stderr, flush=True)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="apgaspy-scheduler-"))
    state_dir = args.state_dir or Path(run_dir) / "state"

    def show(ev: dict[str, Any]) -> None:
        line = format_event(ev)
        if line:
            print(line, file=sys.stderr, flush=True)

    try:
        server = Server(
            nodes, make(args.algorithm, cooldown_s=args.cooldown, **priority_options(args)),
            port=0 if getattr(args, "parent", False) and args.port == DEFAULT_PORT
            else args.port, parent=getattr(args, "parent", False),
            listen=args.listen, run_dir=run_dir, log_path=args.log, interval_s=args.interval,
            grace_s=args.grace, job_env=dict(args.env), on_event=None if args.quiet else show,
            state_dir=state_dir, plain_lines=args.plain_lines, limits=limits,
            shape=args.shape, colocate_bound=args.colocate_bound, pin=not args.no_pin,
        )
        keeper = PoolKeeper(server, nodes) if isinstance(nodes, SlurmPool) else None
        if keeper is not None:
            keeper.adopt()  # before the start: the pool's journaled nodes need them
        server.start()
    except OSError as exc:
        _close(nodes)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if keeper is not None:
        keeper.start()
    link = None
    if getattr(args, "parent", False):
        try:
            link = ParentLink(server, nodes.names())
            link.start()
        except Exception as exc:  # noqa: BLE001 - a bad parent link stops the child at once
            print(f"error: --parent: {exc}", file=sys.stderr)
            server.shutdown()
            return 1
        finally:
            scrub_parent_env()  # the child's jobs see their own scheduler only
    try:
        path = server.serve_control(control, group=args.control_group)
    except KeyError:
        print(f"error: --control-group: no group {args.control_group!r}", file=sys.stderr)
        server.detach()  # the jobs it adopted run on, still journaled
        return 1
    except OSError as exc:
        print(f"error: control socket: {exc}", file=sys.stderr)
        server.detach()
        return 1
    if not args.quiet:
        print(f"control socket {path}", file=sys.stderr, flush=True)

    def stop(signum: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, name="scheduler-signal-stop").start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not server.wait(0.5):
        pass
    if link is not None:
        link.stop()
    if keeper is not None:
        keeper.stop()
        _close(nodes)  # the placeholders go back to Slurm
    return 0
