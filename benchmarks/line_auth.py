"""What authenticating a scheduler line costs, per line, in microseconds.

::

    python -m benchmarks.line_auth [--lines 20000] [--tcp 500] [--rounds 3]
                                   [--out benchmarks/results]

Measures, in one process (docs/reference/security.md):

* ``sign``: :func:`apgaspy.wire.auth.sign_line` of a notification and of an order line, the
  counter included (what a job does per notification, the scheduler per order);
* ``verify``: :func:`apgaspy.wire.auth.verify_line` of those lines, the anti-replay window
  included (what the scheduler does per notification, a job per order);
* ``tcp``: one notification over real TCP as the protocol sends it (a new connection to a
  listening :class:`scheduler.notification_listener.NotificationListener` on 127.0.0.1, the
  line, the close, until the listener has the line), plain Java lines against signed lines checked on
  arrival, alternating, so that the MAC's share of a whole line's cost shows as a ratio
  measured in the same run.

Each figure is the median of ``--rounds`` rounds.  The JSON goes to
``<out>/line_auth.json`` with the machine it ran on.  On a loaded machine compare ratios
within one run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path
from typing import Any

from apgaspy.wire.auth import (
    NOTIFICATION,
    ORDER,
    Counter,
    ReplayGuard,
    new_key,
    sign_line,
    verify_line,
)

__all__ = ["main", "sign_verify_us", "tcp_notification_us"]

NOTIFY_LINE = "Evolving;Release;127.0.1.3:127.0.1.1"
ORDER_LINE = "grow 2 127.0.1.5 127.0.1.6 "


def sign_verify_us(lines: int) -> dict[str, float]:
    """µs per line to sign and to verify ``lines`` notification and order lines."""
    key = new_key()
    out: dict[str, float] = {}
    for name, direction, text in (("notification", NOTIFICATION, NOTIFY_LINE),
                                  ("order", ORDER, ORDER_LINE)):
        counter = Counter()
        t0 = time.perf_counter()
        signed = [sign_line(key, direction, "17", text, counter.next()) for _ in range(lines)]
        t1 = time.perf_counter()
        guard = ReplayGuard()
        for line in signed:
            verify_line(key, direction, "17", line, guard)
        t2 = time.perf_counter()
        out[f"sign_{name}_us"] = (t1 - t0) / lines * 1e6
        out[f"verify_{name}_us"] = (t2 - t1) / lines * 1e6
    return out


def tcp_notification_us(count: int) -> dict[str, float]:
    """µs per notification over TCP, plain and signed (verified on arrival), alternating.

    Raises:
        AssertionError: a line did not arrive, or a signed one did not verify.
    """
    import socket

    from scheduler.notification_listener import NotificationListener

    key = new_key()
    guard = ReplayGuard()
    got = threading.Semaphore(0)
    bad: list[str] = []

    def on_line(line: str, _peer: str) -> None:
        if " mac=" in line:
            try:
                verify_line(key, NOTIFICATION, "17", line, guard)
            except ValueError as exc:
                bad.append(str(exc))
        got.release()

    listener = NotificationListener("127.0.0.1", 0, on_line)
    counter = Counter()
    times: dict[str, list[float]] = {"plain": [], "signed": []}
    try:
        for i in range(2 * count):
            kind = "plain" if i % 2 == 0 else "signed"
            t0 = time.perf_counter()
            line = NOTIFY_LINE if kind == "plain" else sign_line(
                key, NOTIFICATION, "17", NOTIFY_LINE, counter.next())
            with socket.create_connection(("127.0.0.1", listener.port), timeout=5) as s:
                s.sendall(line.encode("ascii") + b"\n")
            assert got.acquire(timeout=5), "a notification did not arrive"
            times[kind].append(time.perf_counter() - t0)
    finally:
        listener.close()
    assert not bad, bad[:3]
    plain = statistics.median(times["plain"]) * 1e6
    signed = statistics.median(times["signed"]) * 1e6
    return {"tcp_plain_us": plain, "tcp_signed_us": signed, "tcp_ratio": signed / plain}


def main(argv: list[str] | None = None) -> int:
    """Run the measurements (module docstring), print and write the JSON; return 0."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.line_auth",
                                description="Per-line cost of authenticated scheduler lines.")
    p.add_argument("--lines", type=int, default=20000, help="lines signed and verified a round")
    p.add_argument("--tcp", type=int, default=500, help="TCP notifications of each kind a round")
    p.add_argument("--rounds", type=int, default=3, help="rounds (the median is kept)")
    p.add_argument("--out", type=Path, default=None, help="results directory")
    args = p.parse_args(argv)
    if min(args.lines, args.tcp, args.rounds) < 1:
        p.error("--lines, --tcp and --rounds must be at least 1")
    from benchmarks._results import write_result

    rounds: list[dict[str, float]] = []
    for _ in range(args.rounds):
        rounds.append({**sign_verify_us(args.lines), **tcp_notification_us(args.tcp)})
    summary: dict[str, Any] = {k: round(statistics.median(r[k] for r in rounds), 3)
                               for k in rounds[0]}
    data = {"benchmark": "line_auth", "lines": args.lines, "tcp": args.tcp,
            "rounds": args.rounds, "median": summary,
            "all": [{k: round(v, 3) for k, v in r.items()} for r in rounds]}
    path = write_result("line_auth", data, args.out)
    for k, v in summary.items():
        print(f"{k:24s} {v:10.3f}")
    print(f"written to {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
