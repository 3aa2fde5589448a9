"""What a benchmark run shows on stderr while it runs: its orders and its progress.

The four GLB benchmarks' command lines (:mod:`benchmarks._cli`) print, at place 0:

* **each order as it happens**, carried out or refused, with the time since the program
  started (:func:`apgaspy.elastic.watch_orders`)::

      [  2.31 s] grow: added places 2, 3 on localhost
      [  5.02 s] shrink: released places 3 (host 127.0.1.3)
      [  1.04 s] grow refused: could not start place(2) on host nosuchhost: ...

* **progress** once the run has lasted :data:`SHOW_AFTER_S` seconds: elapsed time, the work
  units processed so far summed over the places (:func:`glb.work_done`, polled every
  :data:`POLL_S` seconds; a place that has left keeps its last count) and places × workers.
  On a terminal a tqdm counter redraws in place; elsewhere (a file, a pipe, a scheduler's job
  output), and where tqdm is not installed, a plain line every :data:`PLAIN_EVERY_S`
  seconds::

      progress: 7.0 s, 1,835,008,000 work units, 4 places × 1 worker

``--quiet`` turns both off.  The answer lines on stdout are not touched: everything here goes
to stderr.

    LiveOutput.__enter__ ─► watch_orders(order line) ─► thread: every POLL_S s
        work_done() ─► sum, max per place ─► after SHOW_AFTER_S: tqdm or a plain line
    LiveOutput.__exit__ ─► stop the thread, stop watching, close the bar
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from apgaspy import MalleabilityError
from apgaspy.elastic import OrderReport, watch_orders
from glb import work_done, workers_per_place

__all__ = ["PLAIN_EVERY_S", "POLL_S", "SHOW_AFTER_S", "LiveOutput", "order_line"]

SHOW_AFTER_S = 2.0
"""Seconds of computation before progress shows (a short run stays as quiet as before)."""

POLL_S = 1.0
"""Seconds between two polls of the places' counters."""

PLAIN_EVERY_S = 5.0
"""Seconds between two plain progress lines (off a terminal)."""


def _plural(word: str, n: int) -> str:
    return word if n == 1 else f"{word}s"


def order_line(report: OrderReport, error: MalleabilityError | None, elapsed_s: float) -> str:
    """One order as the benchmarks print it: ``[  2.31 s] grow: added places 2, 3 on
    localhost``, ``[  5.02 s] shrink: released place 3 (host 127.0.1.3)``, or ``[  1.04 s]
    grow refused: <why>`` (``elapsed_s``: seconds since the program started)."""
    stamp = f"[{elapsed_s:7.2f} s]"
    if error is not None:
        what = " ".join(str(error).split())
        return f"{stamp} {report.kind} refused: {what}"
    ids = ", ".join(str(p.id) for p in report.places) or "none"
    places = f"{_plural('place', len(report.places))} {ids}"
    hosts = list(dict.fromkeys(report.host_names))
    if report.kind == "grow":
        line = f"{stamp} grow: added {places} on {', '.join(hosts)}"
    else:
        line = f"{stamp} {report.kind}: released {places} " \
               f"({_plural('host', len(hosts))} {', '.join(hosts)})"
    if report.died:
        line += f"; died meanwhile: {', '.join(str(p.id) for p in report.died)}"
    return line


class LiveOutput:
    """Order lines and progress on ``stream`` while a GLB computation runs (place 0).

    Args:
        started: when the program started (``time.time()``): order lines count from it.
        workers: the ``workers`` option (``None``: ``GLB_WORKERS``, else 1; 0: the cores over
            the places a host; :func:`glb.workers_per_place`), for the ``places × workers``
            figure.
        quiet: show nothing (``--quiet``).
        stream: where to write (default ``sys.stderr``).
        tty: draw a redrawn counter (tqdm) instead of plain lines; default: whether
            ``stream`` is a terminal.

    Use it as a context manager around the computation; the progress clock starts on entry.
    """

    def __init__(self, started: float, workers: int | None, *, quiet: bool = False,
                 stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.started = started
        self.workers = max(1, workers_per_place(workers))
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.counts: dict[int, int] = {}  # place -> the last units it reported
        self.places = 1
        self._lock = threading.Lock()  # one writer at a time (the order thread, the poller)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unwatch: Any = None
        self._bar: Any = None
        self._shown = 0.0  # when the last plain line was written
        self._t0 = time.perf_counter()

    # ------------------------------------------------------------------ context
    def __enter__(self) -> LiveOutput:
        if self.quiet:
            return self
        self._t0 = time.perf_counter()
        self._unwatch = watch_orders(self._order)
        self._thread = threading.Thread(target=self._run, name="benchmark-progress",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.quiet:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._unwatch is not None:
            self._unwatch()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    # ------------------------------------------------------------------ output
    def _write(self, line: str) -> None:
        with self._lock:
            if self._bar is not None:
                self._bar.write(line, file=self.stream)
            else:
                print(line, file=self.stream, flush=True)

    def _order(self, report: OrderReport, error: MalleabilityError | None) -> None:
        self._write(order_line(report, error, time.time() - self.started))

    def progress_line(self, elapsed_s: float) -> str:
        """The plain progress line for now."""
        units = sum(self.counts.values())
        return (f"progress: {elapsed_s:.1f} s, {units:,} work units, {self.places} "
                f"{_plural('place', self.places)} × {self.workers} "
                f"{_plural('worker', self.workers)}")

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            now = work_done()
            if now is None:  # an order is under way: next time
                continue
            for place, units in now.items():
                self.counts[place] = max(units, self.counts.get(place, 0))
            self.places = len(now)
            elapsed = time.perf_counter() - self._t0
            if elapsed >= SHOW_AFTER_S:
                self._show(elapsed)

    def _show(self, elapsed: float) -> None:
        if self.tty and self._bar is None:
            try:
                from tqdm import tqdm
            except ImportError:
                self.tty = False
            else:
                with self._lock:
                    self._bar = tqdm(total=None, unit=" units", unit_scale=True,
                                     file=self.stream, desc="progress", leave=False)
        if self._bar is not None:
            with self._lock:
                self._bar.update(sum(self.counts.values()) - self._bar.n)
                self._bar.set_postfix_str(f"{self.places} places × {self.workers} workers")
        elif self._shown == 0.0 or elapsed - self._shown >= PLAIN_EVERY_S:
            self._shown = elapsed
            self._write(self.progress_line(elapsed))
