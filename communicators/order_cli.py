"""Send one order to a running malleable job, by hand.

    python -m communicators.order_cli shrink 2 --job 127.0.1.1:5000
    python -m communicators.order_cli grow 2 127.0.1.5 127.0.1.6 --job 127.0.1.1:5000 --wait 60

Prints the job's reply on stdout (the released hosts of a shrink, one a line; nothing for a
grow) and confirms on stderr, in one line, what was done::

    grow 2: carried out by the job at 127.0.1.1:5000 (hosts 127.0.1.5, 127.0.1.6)
    shrink 1: carried out by the job at 127.0.1.1:5000; released 127.0.1.3

and exits 0; exits 1 when the job refuses the order (``ERROR ...``, on stdout), 3 when the
job cannot be reached, 2 on a usage error.  The protocol's reply to a grow carries no place
ids: the job prints the places it added (``grow: added places 3, 4``) on its own stderr.
``--wait S`` keeps trying for up to S seconds while nothing listens at the job's address
yet (a job just started accepts orders once its handler is defined), and says so.

A job started with a line key refuses unsigned orders: give this tool the same key, by
``SCHEDULER_KEY`` or ``SCHEDULER_KEY_FILE`` in its environment and the job's id by
``--job-id`` (its ``JOBNAME``), and it signs the order (:mod:`apgaspy.wire.auth`).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

from apgaspy.wire.auth import ORDER, Counter, load_key, sign_line
from apgaspy.wire.protocol import Order, OrderError, format_order, is_refusal, parse_order


def _job(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def _connect(job: tuple[str, int], wait_s: float) -> socket.socket:
    """A connection to the job's order socket; while it refuses, retry every 0.2 s for up to
    ``wait_s`` seconds, saying once on stderr what it waits for.

    Raises:
        OSError: still no connection after ``wait_s`` seconds (or another socket error).
    """
    deadline = time.monotonic() + wait_s
    said = False
    while True:
        try:
            return socket.create_connection(job, timeout=10)
        except ConnectionRefusedError:
            if time.monotonic() >= deadline:
                raise
            if not said:
                print(f"waiting for the job at {job[0]}:{job[1]} to accept orders "
                      f"(up to {wait_s:g} s) ...", file=sys.stderr, flush=True)
                said = True
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, send the order, print the reply; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m communicators.order_cli",
                                     description="Send one shrink or grow order to a job.")
    parser.add_argument("kind", choices=["shrink", "grow"], help="the order")
    parser.add_argument("n", help="number of hosts")
    parser.add_argument("hosts", nargs="*", help="for grow: the n host names")
    parser.add_argument("--job", type=_job, required=True,
                        help="the job's order address HOST:PORT (its first host, SCHEDULER_PORT)")
    parser.add_argument("--job-id", default="",
                        help="the job's JOBNAME, for a signed order (with SCHEDULER_KEY)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the job to carry the order out (default 600)")
    parser.add_argument("--wait", type=float, default=0.0, metavar="S",
                        help="keep trying for up to S seconds while the job does not accept "
                             "orders yet (default 0: try once)")
    args = parser.parse_args(argv)
    try:
        order: Order = parse_order(" ".join([args.kind, args.n, *args.hosts]))
    except OrderError as exc:
        parser.error(str(exc))
    try:
        key = load_key()
    except ValueError as exc:
        parser.error(str(exc))
    line = format_order(order)
    if key is not None:
        line = sign_line(key, ORDER, args.job_id, line, Counter().next()) + "\n"
    try:
        with _connect(args.job, args.wait) as conn:
            conn.sendall(line.encode("ascii"))
            conn.settimeout(args.timeout)
            reply = b""
            while chunk := conn.recv(4096):
                reply += chunk
    except OSError as exc:
        print(f"cannot reach the job at {args.job[0]}:{args.job[1]}: {exc}", file=sys.stderr)
        return 3
    lines = reply.decode("ascii", "replace").splitlines()
    for line in lines:
        print(line)
    sys.stdout.flush()
    if any(is_refusal(line) for line in lines):
        return 1
    print(confirmation(order, args.job, lines), file=sys.stderr)
    return 0


def confirmation(order: Order, job: tuple[str, int], reply: list[str]) -> str:
    """The one line that says what an order did: its kind and host count, the job's address,
    the hosts added (a grow) or those the job's reply released (a shrink)."""
    where = f"{order.kind} {order.n}: carried out by the job at {job[0]}:{job[1]}"
    if order.kind == "grow":
        return f"{where} (hosts {', '.join(order.hosts)})"
    return f"{where}; released {', '.join(reply) if reply else 'no host named in the reply'}"


if __name__ == "__main__":
    raise SystemExit(main())
