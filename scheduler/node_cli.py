"""``python -m scheduler node add|remove|drain``: change a running scheduler's nodes.

::

    python -m scheduler node add                   # one new logical node (127.0.1.k)
    python -m scheduler node add --count 2         # two
    python -m scheduler node add host7             # an ssh host (reached, its nproc read)
    python -m scheduler node drain 127.0.1.2       # no new job there; jobs moved off; stays
    python -m scheduler node remove 127.0.1.2      # drained, then gone from the pool
    python -m scheduler node remove --force h3     # its jobs are ended instead of waited for
    python -m scheduler node add 127.0.1.2         # a draining or drained node serves again

The request goes through the control socket (as ``submit``; :mod:`scheduler.client_cli`) and
is carried out by :mod:`scheduler.pool`.  A drain or removal answers at once; the node leaves
once its jobs have (``status`` shows each node's state: free, busy, draining, drained,
gone).  Exit status 0 when done, 1 when refused (an unknown node, one gone already, a
removal that would leave no node or too few for a queued job, a host that cannot be
reached) with one ``error:`` line and nothing changed, 2 for a usage error.
"""

from __future__ import annotations

import argparse

from ._argtypes import whole_number
from .client_cli import _control, _error, _request
from .control_client import ControlError, control_path

__all__ = ["HELP", "add_arguments", "run"]

HELP = "add, drain or remove nodes of a running scheduler"

_DONE = {"add": "added", "drain": "draining", "remove": "removing"}


def _count(text: str) -> int:
    return whole_number(text, 1, 254, not_a_number="a node count is a number",
                        out_of_range="add 1 to 254 nodes at a time")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``node``'s options."""
    p.add_argument("action", choices=("add", "drain", "remove"),
                   help="add: new nodes join (or held-out ones serve again); drain: no new "
                        "job there, jobs moved off, the node stays held out; remove: drained, "
                        "then gone")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="the nodes (for add of logical nodes: none, the next free address)")
    p.add_argument("--force", action="store_true",
                   help="drain/remove: end the jobs on the nodes (as a dead place ends them) "
                        "instead of waiting for them")
    p.add_argument("--count", type=_count, default=1,
                   help="add without names: how many new logical nodes (default 1)")
    _control(p)


def run(args: argparse.Namespace) -> int:
    """Send the request; print one line: what changed."""
    if args.action != "add" and not args.names:
        return _error(ValueError(f"name the node(s) to {args.action}"))
    message = {"op": "node", "action": args.action, "names": args.names,
               "force": args.force, "count": args.count}
    try:
        reply = _request(control_path(args.control), message,
                         waiting=f"the scheduler to {args.action} the nodes",
                         server_uid=args.server_uid)
    except ControlError as exc:
        return _error(exc)
    nodes = " ".join(reply.get("nodes", []))
    tail = ""
    if args.action != "add":
        tail = " (ending their jobs)" if args.force else " (once their jobs have moved off " \
                                                         "or ended)"
    print(f"{_DONE[args.action]} {nodes}{tail}")
    return 0
