"""``python -m scheduler submit|status|cancel|shutdown``: talk to a running ``serve``.

::

    python -m scheduler submit job.sh [more.sh …]    # job scripts (#NODES, #MIN_NODES …)
    python -m scheduler submit - < job.sh             # a script on stdin
    python -m scheduler submit --batch jobs.json      # a batch file (JSON or CSV)
    python -m scheduler status [--json]
    python -m scheduler cancel 3
    python -m scheduler shutdown
    python -m scheduler history --run-dir DIR [--json]   # past jobs, from the journal

Each but ``history`` (which reads the journal of a state directory) finds the server
through ``--control`` (else ``$APGAS_SCHEDULER_CONTROL``, else
``$XDG_RUNTIME_DIR/apgaspy-scheduler.sock``, else ``<tmp>/apgaspy-<uid>/scheduler.sock``)
and talks to it only if it runs as the user, as root, or as the uid ``--server-uid`` names
(:func:`scheduler.control_client.check_server`; otherwise nothing is sent).  Exit status: 0
when done, 1 when the scheduler refuses (unknown job id, a script that does not parse, a job
that can never fit), cannot be reached or is not trusted, 2 for a usage error.  The server
keeps running in every case but ``shutdown``.
``submit`` prints a ``warning:`` line for what in a script parses but is most likely a slip
(a bare ``#REQUIRED_TIME`` under 1000, read in milliseconds) and submits the job all the same.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path
from typing import Any

from ._argtypes import seconds, whole_number
from ._table import format_table
from .control_client import ControlError, UntrustedServerError, control_path, request
from .jobs import job_script_warnings, parse_priority

__all__ = [
    "CANCEL_HELP",
    "HISTORY_HELP",
    "SHUTDOWN_HELP",
    "STATUS_HELP",
    "SUBMIT_HELP",
    "add_cancel_arguments",
    "add_history_arguments",
    "add_shutdown_arguments",
    "add_status_arguments",
    "add_submit_arguments",
    "format_history",
    "format_status",
    "history_rows",
    "run_cancel",
    "run_history",
    "run_shutdown",
    "run_status",
    "run_submit",
]

SUBMIT_HELP = "submit job scripts or a batch file to a running scheduler"
STATUS_HELP = "show the nodes, jobs and allotments of a running scheduler"
CANCEL_HELP = "cancel a job of a running scheduler (ends it if it runs)"
SHUTDOWN_HELP = "end every job and stop a running scheduler"


def _uid(text: str) -> int:
    return whole_number(text, 0, not_a_number="a uid is a number", out_of_range="a uid is >= 0")


def _control(p: argparse.ArgumentParser) -> None:
    p.add_argument("--control", default=None,
                   help="the scheduler's control socket (default $APGAS_SCHEDULER_CONTROL, "
                        "else $XDG_RUNTIME_DIR/apgaspy-scheduler.sock, else "
                        "<tmp>/apgaspy-<uid>/scheduler.sock)")
    p.add_argument("--server-uid", type=_uid, default=None, metavar="UID",
                   help="also trust a scheduler running as this uid (default: only one "
                        "running as you or as root; any other is refused before a byte is "
                        "sent)")


def _error(exc: Exception) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 1


#: Seconds a client command waits for the scheduler's reply before it says that it waits.
NOTICE_AFTER_S = 2.0


def _request(path: Path, message: dict[str, Any], *, timeout_s: float = 60.0,
             waiting: str = "the scheduler to answer", server_uid: int | None = None
             ) -> dict[str, Any]:
    """:func:`scheduler.control_client.request`, with one line on stderr (``waiting for
    ...``) when the reply takes longer than :data:`NOTICE_AFTER_S` seconds, so that a busy
    scheduler is not mistaken for a hung command.  Raises as ``request`` does."""
    def notice() -> None:
        print(f"waiting for {waiting} ({path}; up to {timeout_s:g} s) ...", file=sys.stderr,
              flush=True)

    timer = threading.Timer(NOTICE_AFTER_S, notice)
    timer.daemon = True
    timer.start()
    try:
        return request(path, message, timeout_s=timeout_s, server_uid=server_uid)
    finally:
        timer.cancel()


# ------------------------------------------------------------------------------ submit


def _priority(text: str) -> int:
    try:
        return parse_priority(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _warn_about_script(what: str, text: str) -> None:
    """Print a ``warning:`` line to stderr for each slip of a job script
    (:func:`scheduler.jobs.job_script_warnings`); the job is submitted all the same."""
    for warning in job_script_warnings(text):
        print(f"warning: {what}: {warning}", file=sys.stderr)


def add_submit_arguments(p: argparse.ArgumentParser) -> None:
    """``submit``'s options."""
    p.add_argument("scripts", nargs="*", metavar="SCRIPT",
                   help="job scripts ('-': read one from stdin)")
    p.add_argument("--batch", type=Path, default=None,
                   help="a batch file (JSON or CSV, jobs with submit_s offsets)")
    p.add_argument("--delay", type=seconds, default=0.0,
                   help="queue the scripts this many seconds from now (default 0)")
    p.add_argument("--name", default=None, help="job name of a script read from stdin")
    p.add_argument("--priority", type=_priority, default=None,
                   help="priority 1 (lowest) to 5 (highest) of the scripts, replacing "
                        "their #PRIORITY (default: the script's, else 3)")
    p.add_argument("--json", action="store_true", help="print the replies as JSON")
    _control(p)


def run_submit(args: argparse.Namespace) -> int:
    """Submit; print one line a job; return 1 if anything was refused."""
    if not args.scripts and args.batch is None:
        print("error: give job scripts, '-' (stdin) or --batch FILE", file=sys.stderr)
        return 2
    if args.priority is not None and not args.scripts:
        print("error: --priority applies to job scripts; a batch file gives each job's "
              "priority in its \"priority\" field", file=sys.stderr)
        return 2
    path = control_path(args.control)
    requests: list[dict[str, Any]] = []
    for script in args.scripts:
        if script == "-":
            text = sys.stdin.read()
            requests.append({"op": "submit", "text": text, "name": args.name,
                             "delay_s": args.delay})
            _warn_about_script("<stdin>", text)
        else:
            requests.append({"op": "submit", "script": str(Path(script).resolve()),
                             "delay_s": args.delay})
            try:
                _warn_about_script(script, Path(script).read_text(encoding="utf-8",
                                                                  errors="replace"))
            except OSError:
                pass  # the scheduler reads it, and says why it cannot
    if args.priority is not None:
        for req in requests:
            req["priority"] = args.priority
    if args.batch is not None:
        requests.append({"op": "submit", "batch": str(args.batch.resolve())})
    status = 0
    replies = []
    for req in requests:
        what = req.get("script") or req.get("batch") or "<stdin>"
        try:
            reply = _request(path, req, server_uid=args.server_uid)
        except UntrustedServerError as exc:  # nothing sent; the others would go there too
            return _error(exc)
        except ControlError as exc:
            print(f"error: {exc}" if str(what) in str(exc) else f"error: {what}: {exc}",
                  file=sys.stderr)
            replies.append({"ok": False, "error": str(exc), "what": what})
            status = 1
            continue
        replies.append(reply)
        for job_id in reply["jobs"]:
            if not args.json:
                print(f"submitted job {job_id} ({what})")
        for name, reason in reply.get("refused", []):
            print(f"error: {what}: job {name!r} {reason}", file=sys.stderr)
            status = 1
    if args.json:
        print(json.dumps(replies))
    return status


# ------------------------------------------------------------------------------ status


def add_status_arguments(p: argparse.ArgumentParser) -> None:
    """``status``'s options."""
    p.add_argument("--json", action="store_true", help="print the status as one JSON object")
    _control(p)


def _seconds(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def _rate(x: float | None) -> str:
    """Bytes per second, short: ``820``, ``169k``, ``1.2M``; ``-`` for none."""
    if x is None:
        return "-"
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.0f}"


def _profile(j: dict[str, Any]) -> str:
    """The job's profile as ``status`` shows it: its own (``#PROFILE``), else the measured
    one as ``cpu (measured)``, else ``-`` (the default, not yet measured)."""
    if j.get("profile_declared"):
        return str(j.get("profile", "-"))
    measured = j.get("measured_profile")
    return f"{measured} (measured)" if measured else "-"


def format_status(st: dict[str, Any]) -> str:
    """The status as a readable table: the nodes and their jobs, then the jobs; with
    co-location on, a line of its counts and one for each set of jobs sharing cores."""
    names = {j["id"]: j["name"] for j in st["jobs"]}
    serving = [n for n in st["nodes"] if n.get("state") != "gone"]
    lines = [f"{st['algorithm']} scheduler, {len(serving)} nodes ({st['free']} free), "
             f"up {st['now_s']:.1f} s, notifications on {st['listen']}:{st['port']}",
             ""]
    lines += format_table(("NODE", "STATE", "JOB"), [
        (node["name"], node.get("state", "-"),
         "-" if node["job"] is None else f"{node['job']} {names[node['job']]}")
        for node in st["nodes"]], "<<<")
    rows = []
    for j in st["jobs"]:
        rng = f"{j['min_nodes']}-{j['max_nodes']}" if j["min_nodes"] != j["max_nodes"] \
            else str(j["min_nodes"])
        orders = f"-{j['shrinks']}/+{j['grows']}" + ("*" if j["order_in_flight"] else "")
        asked = "-"
        if j["class"] == "evolving" or j.get("requests") or j.get("releases"):
            # the job's own activity: requests (granted) and nodes it gave back
            asked = f"+{j.get('requests', 0)}({j.get('requests_served', 0)})/" \
                    f"-{j.get('releases', 0)}"
        rows.append((j["id"], j["name"][:15], j["class"], rng, j["state"], len(j["nodes"]),
                     f"{j['submit_s']:.1f}", _seconds(j["start_s"]), _seconds(j["run_s"]),
                     orders, asked,
                     "-" if j.get("duty_cycle") is None else f"{j['duty_cycle']:.2f}",
                     _rate(j.get("bytes_per_s")), _profile(j), ",".join(j["nodes"])))
    lines += ["", *format_table(("ID", "NAME", "CLASS", "RANGE", "STATE", "NODES", "SUBMIT_S",
                                 "START_S", "RUN_S", "ORDERS", "ASKED", "DUTY", "BYTES/S",
                                 "PROFILE", "NODE LIST"),
                                rows, "><<<<>>>><<>><<")]
    if not st["jobs"]:
        lines.append("   (no jobs)")
    elif any(j["class"] == "evolving" for j in st["jobs"]):
        lines.append("ORDERS: -shrinks/+grows the scheduler ordered (*: one in flight); "
                     "ASKED: +requests (granted)/-nodes given back by an evolving job")
    for change in (st.get("pool") or {}).get("changes", [])[-5:]:
        lines.append(f"pool: {change['t']:.1f} s {change['change']} {' '.join(change['nodes'])}")
    slurm = (st.get("pool") or {}).get("slurm")
    if slurm:  # a Slurm pool (serve --slurm-pool)
        line = (f"slurm pool: {slurm['held']} held, {slurm['pending']} pending "
                f"({slurm['min']}..{slurm['max']}, partition {slurm['partition']})")
        if slurm.get("lost"):
            last = slurm["lost"][-1]
            line += (f"; {len(slurm['lost'])} lost, latest {last['slurm_job']} on "
                     f"{last['node'] or '-'}: {last['state']}")
        if slurm.get("failures"):
            line += (f"; Slurm failing ({slurm['failures']} in a row, backoff "
                     f"{slurm['backoff_s']:g} s): {slurm['last_error']}")
        elif slurm.get("last_error"):
            line += f"; last error: {slurm['last_error']}"
        lines.append(line)
    for name, reason in st.get("refused", []):
        lines.append(f"refused: {name}: {reason}")
    co = st.get("colocation")
    if co:  # co-location on: who shares which cores (docs/guides/colocation.md)
        shared: dict[tuple[int, ...], list[str]] = {}
        for core in co["shared"]:
            shared.setdefault(tuple(core["jobs"]), []).append(f"{core['node']}:{core['core']}")
        lines.append(f"co-location: bound {co['bound']:g}, beta {co['beta']:g}, "
                     f"{co['separations']} separations, {co.get('moves', 0)} moves, "
                     f"{co['overloads']} overloads")
        for jobs, cores in shared.items():
            lines.append(f"  jobs {','.join(map(str, jobs))} share {' '.join(cores)}")
    counts = [(st.get(key) or 0, what) for key, what in _PORT_COUNTS]
    if any(n for n, _ in counts):  # the notification port turned something away
        lines.append("notification port: " + ", ".join(f"{n} {what}" for n, what in counts))
    return "\n".join(lines)


#: ``status`` fields that count what the notification port turned away, as ``format_status``
#: words them (docs/reference/security.md, "Denial of service").
_PORT_COUNTS = (("refused_connections", "connections refused over a cap"),
                ("cut_connections", "cut (idle, long or chatty)"),
                ("refused_lines", "lines refused (a job's check)"),
                ("refused_load_lines", "load lines refused (not running, malformed, range)"),
                ("dropped_lines", "lines dropped (no job at the address)"))


def run_status(args: argparse.Namespace) -> int:
    """Print the status (table or JSON)."""
    try:
        st = _request(control_path(args.control), {"op": "status"},
                      server_uid=args.server_uid)
    except ControlError as exc:
        return _error(exc)
    st.pop("ok", None)
    print(json.dumps(st, indent=1) if args.json else format_status(st))
    return 0


# ------------------------------------------------------------------------------ cancel


def _job_id(text: str) -> int:
    return whole_number(text, 1, not_a_number="a job id is a number",
                        out_of_range="job ids start at 1")


def add_cancel_arguments(p: argparse.ArgumentParser) -> None:
    """``cancel``'s options."""
    p.add_argument("job", type=_job_id, help="the job id (from submit or status)")
    _control(p)


def run_cancel(args: argparse.Namespace) -> int:
    """Cancel one job."""
    try:
        reply = _request(control_path(args.control), {"op": "cancel", "job": args.job},
                         waiting=f"the scheduler to end job {args.job}",
                         server_uid=args.server_uid)
    except ControlError as exc:
        return _error(exc)
    print(f"cancelled job {reply['job']} (was {reply['was']})")
    return 0


# ------------------------------------------------------------------------------ shutdown


def add_shutdown_arguments(p: argparse.ArgumentParser) -> None:
    """``shutdown``'s options."""
    _control(p)


def run_shutdown(args: argparse.Namespace) -> int:
    """Stop the scheduler; returns once its jobs have ended."""
    try:
        reply = _request(control_path(args.control), {"op": "shutdown"}, timeout_s=120,
                         waiting="the scheduler to end its jobs and stop",
                         server_uid=args.server_uid)
    except ControlError as exc:
        return _error(exc)
    ended = reply.get("ended", [])
    print("scheduler stopped" + (f"; ended jobs {ended}" if ended else ""))
    return 0


# ------------------------------------------------------------------------------ history

HISTORY_HELP = "list past jobs of a scheduler's journal with their metrics"


def add_history_arguments(p: argparse.ArgumentParser) -> None:
    """``history``'s options."""
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--state-dir", type=Path, default=None,
                       help="the scheduler's state directory (serve --state-dir)")
    where.add_argument("--run-dir", type=Path, default=None,
                       help="the scheduler's run directory (its state is <run-dir>/state)")
    p.add_argument("--all", action="store_true",
                   help="also jobs that have not ended (queued, running)")
    p.add_argument("--json", action="store_true", help="print one JSON list")


def history_rows(state_dir: str | Path, *, ended_only: bool = True) -> list[dict[str, Any]]:
    """The jobs of the journal in ``state_dir`` as dicts: ``id``, ``name``, ``state``,
    ``user``, ``submit``/``start``/``end`` (wall-clock seconds since the epoch, or None),
    ``wait_s``, ``turnaround_s``, ``run_s``, ``max_nodes_held``, ``nodes`` (the last
    allotment), ``returncode``, ``reason``, ``shrinks``, ``grows``, and an evolving job's
    ``requests``, ``requests_served``, ``releases`` (0 for the others).

    Raises:
        FileNotFoundError: no journal there; sqlite3.Error: not a journal.
    """
    from .journal import ENDED, Journal, spec_from_json  # noqa: PLC0415 - only for history

    journal = Journal(state_dir, readonly=True)
    try:
        rows = journal.rows()
    finally:
        journal.close()
    out = []
    for r in rows:
        if ended_only and r.state not in ENDED:
            continue
        try:
            name = spec_from_json(r.spec).name
        except ValueError:
            name = "?"

        def diff(a: float | None, b: float | None) -> float | None:
            return None if a is None or b is None else round(b - a, 3)

        held = [n for _, n in r.allotment if n]
        out.append({
            "id": r.id, "name": name, "state": r.state, "user": r.user,
            "submit": r.submit_wall, "start": r.start_wall, "end": r.end_wall,
            "wait_s": diff(r.submit_wall, r.start_wall),
            "turnaround_s": diff(r.submit_wall, r.end_wall),
            "run_s": diff(r.start_wall, r.end_wall),
            "max_nodes_held": max((len(n) for n in held), default=0),
            "nodes": held[-1] if held else [],
            "returncode": r.returncode, "reason": r.reason,
            "shrinks": r.shrinks, "grows": r.grows,
            "requests": r.requests, "requests_served": r.requests_served,
            "releases": r.releases,
        })
    return out


def format_history(rows: list[dict[str, Any]]) -> str:
    """The history as a readable table."""
    import time as _time  # noqa: PLC0415

    table = []
    for r in rows:
        when = _time.strftime("%Y-%m-%d %H:%M:%S", _time.localtime(r["submit"]))
        table.append((r["id"], r["name"][:15], r["state"], r["user"], when,
                      _seconds(r["wait_s"]), _seconds(r["run_s"]), _seconds(r["turnaround_s"]),
                      r["max_nodes_held"], r["returncode"], r["reason"] or ""))
    lines = format_table(("ID", "NAME", "STATE", "USER", "SUBMITTED", "WAIT_S", "RUN_S",
                          "TURN_S", "NODES", "EXIT", "REASON"), table, "><<><>>>>><")
    if not rows:
        lines.append("   (no jobs)")
    return "\n".join(lines)


def run_history(args: argparse.Namespace) -> int:
    """Print the journal's jobs (table or JSON); 1 when there is no journal."""
    import sqlite3  # noqa: PLC0415

    state_dir = args.state_dir or args.run_dir / "state"
    try:
        rows = history_rows(state_dir, ended_only=not args.all)
    except (OSError, sqlite3.Error) as exc:
        return _error(exc)
    print(json.dumps(rows, indent=1) if args.json else format_history(rows))
    return 0
