"""Command line of the scheduler: ``python -m scheduler COMMAND [options]``.

Each command is one :class:`Command` in :data:`COMMANDS`: a help line, a function that adds
its options to an ``argparse`` parser, and a function that runs it and returns the exit
status.  Adding a command (``serve``, ``submit``, ``status`` …) is one module with those two
functions and one line in :data:`COMMANDS`.  An unknown command is an argparse error (exit
status 2) that lists the known ones.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from . import client_cli, demo, serve_cli, simulate_cli

__all__ = ["COMMANDS", "Command", "build_parser", "main"]


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
    "shutdown": Command(client_cli.SHUTDOWN_HELP, client_cli.add_shutdown_arguments,
                        client_cli.run_shutdown),
    "history": Command(client_cli.HISTORY_HELP, client_cli.add_history_arguments,
                       client_cli.run_history),
    "demo": Command(demo.HELP, demo.add_arguments, demo.run),
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m scheduler`` with every command of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="python -m scheduler",
        description="Elastic batch job scheduler for apgaspy jobs.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(p)
        p.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status."""
    args = build_parser().parse_args(argv)
    return int(args._run(args))


if __name__ == "__main__":
    sys.exit(main())
