"""Command line of the scheduler: ``python -m scheduler COMMAND [options]``.

Each command is one :class:`Command` in :data:`COMMANDS`: a help line, a function that adds
its options to an ``argparse`` parser, and a function that runs it and returns the exit
status.  Adding a command (``serve``, ``submit``, ``status`` …) is one module with those two
functions and one line in :data:`COMMANDS`.

Errors, the same for every command:

* a usage error (an unknown command, an unknown option, a bad value) prints the usage of
  the command it concerns and one line naming the value, exit status 2;
* a file that cannot be read or does not parse (``simulate --swf nope.swf``, a bad batch
  file, a bad mix file) prints one line ``python -m scheduler CMD: error: ...`` naming the
  file and what was expected, exit status 1;
* ``--debug`` (before or after the command) shows the traceback of such an error instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import client_cli, demo, node_cli, serve_cli, simulate_cli

__all__ = ["COMMANDS", "Command", "build_parser", "describe_error", "main"]


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, option set-up, and runner (returns the exit status)."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: Subcommands by name, in the order ``--help`` lists them.
COMMANDS: dict[str, Command] = {
    "simulate": Command(simulate_cli.HELP, simulate_cli.add_arguments, simulate_cli.run),
    "serve": Command(serve_cli.HELP, serve_cli.add_arguments, serve_cli.run),
    "submit": Command(client_cli.SUBMIT_HELP, client_cli.add_submit_arguments,
                      client_cli.run_submit),
    "status": Command(client_cli.STATUS_HELP, client_cli.add_status_arguments,
                      client_cli.run_status),
    "cancel": Command(client_cli.CANCEL_HELP, client_cli.add_cancel_arguments,
                      client_cli.run_cancel),
    "node": Command(node_cli.HELP, node_cli.add_arguments, node_cli.run),
    "shutdown": Command(client_cli.SHUTDOWN_HELP, client_cli.add_shutdown_arguments,
                        client_cli.run_shutdown),
    "history": Command(client_cli.HISTORY_HELP, client_cli.add_history_arguments,
                       client_cli.run_history),
    "demo": Command(demo.HELP, demo.add_arguments, demo.run),
}


_DEBUG_HELP = "show the traceback of an error instead of one line"

#: What a user who gives a command an option it does not take most likely wants.
_HINTS = {
    ("submit", "--nodes"): " (a job's node counts are its script's #NODES, or #MIN_NODES and "
                           "#MAX_NODES, lines)",
    ("submit", "--min-nodes"): " (a job's node range is its script's #MIN_NODES and "
                               "#MAX_NODES lines)",
    ("submit", "--max-nodes"): " (a job's node range is its script's #MIN_NODES and "
                               "#MAX_NODES lines)",
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m scheduler`` with every command of :data:`COMMANDS`.

    Each command's parser is kept in its namespace as ``_parser``, so that :func:`main` can
    report an option the command does not know with the command's own usage.
    """
    parser = argparse.ArgumentParser(
        prog="python -m scheduler",
        description="Elastic batch job scheduler for apgaspy jobs.",
    )
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(p)
        # SUPPRESS: a --debug given before the command is not reset by the command's default
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=_DEBUG_HELP)
        p.set_defaults(_run=command.run, _parser=p)
    return parser


def describe_error(exc: BaseException) -> str:
    """One line for an error a user can fix: a file that is missing or unreadable names the
    file and the reason (``nope.swf: No such file or directory``); any other error is its
    message, whose text names the value and what was expected."""
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())  # one line, whatever the message's own line breaks


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status.

    Exit status 2 for a usage error (with the command's usage), 1 when the command fails on
    a file or a value it was given (one line on stderr; ``--debug`` raises the error
    instead, with its traceback), else the command's own status.
    """
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # argparse would report these with the top-level usage
        hint = _HINTS.get((args.command, unknown[0].split("=")[0]), "")
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    try:
        return int(args._run(args))
    except (OSError, ValueError) as exc:
        # bad input (a missing trace, a malformed file, an impossible setting); a bug
        # elsewhere keeps its traceback
        if args.debug:
            raise
        print(f"python -m scheduler {args.command}: error: {describe_error(exc)}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
