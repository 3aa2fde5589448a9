"""The job's load, measured at place 0 for the scheduler: duty cycle, traffic, GIL, memory.

Every ``APGAS_LOAD_INTERVAL`` seconds (5; 0: never) place 0 asks every place for what it has
used so far (:func:`place_usage`, over the immediate pools with :func:`apgaspy.gather.gather`,
as the evolving monitor samples its loads) and reports the difference to the previous sample
to the scheduler, as one ``APGAS-Load`` line (docs/reference/protocol.md)::

    place 0, every interval (orders held off: no place leaves while it is asked)
      │  gather(place_usage) ──► each place: process CPU s (psutil), bytes sent (traffic),
      │                          GIL held / loop CPU s (the GIL source GLB registers), RSS
      ▼
    job_load(previous, now, wall s, cores held)      pure, below
      ▼
    notify("APGAS-Load;<duty>;<bytes/s>;<gil>;<rss>")   the socket communicator signs it

* **duty cycle**: the seconds all places computed over the window / (window wall seconds x
  the cores the job holds), clipped to [0, 1]: the share of its cores' time that computes
  rather than waits (Xie 2026, "sparse-domain multiplexing of MPI-CFD on Kubernetes", where
  jobs whose duty cycles sum under a bound share cores).  A place computes for its CPU
  seconds (psutil) plus the seconds its threads were runnable but waited for a CPU (Linux's
  schedstat run delay): on a machine shared with other work the job wanted to compute then
  and could not, which is not the waiting (for messages, for a sleep) a duty cycle leaves
  out; on cores of its own that delay is about 0.  The cores held are the cores
  ``APGAS_CORES`` (and ``APGAS_CORES_FILE``) name on the hosts of the job's places when set,
  else places x ``APGAS_THREADS``.
* **bytes per second**: bytes the places sent each other (:func:`apgaspy.traffic.traffic`'s
  ``bytes_out``) per second of the window.
* **GIL share**: the GIL-held CPU seconds over the processing-loop CPU seconds of every
  worker GLB runs (:class:`glb.WorkerStats` ``gil_share``, summed over the window), or
  ``None`` where no GLB worker ran.
* **resident memory**: the sum of the places' RSS (bytes) at the end of the window.

Only places that answered in both samples count (a place that joined in the window counts
from the next one).  A sample that cannot be taken (an order under way, a place gone) is
skipped; errors are logged and the program runs on.  The guide is
docs/guides/scheduler.md (duty cycle and profile).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .._config import setting
from .._runtime import current_runtime
from ..gather import gather
from ..wire.protocol import LoadReport, format_load
from ._source import Source

__all__ = ["LoadReporter", "PlaceUsage", "job_cores", "job_load", "place_usage",
           "set_gil_source"]

log = logging.getLogger("apgaspy")

_gil = Source[tuple[float, float]]("GIL source")
_process = None  # this place's psutil.Process, made at its first sample


def set_gil_source(source: Callable[[], tuple[float, float]] | None
                   ) -> Callable[[], tuple[float, float]] | None:
    """Register this place's GIL counters for the load reports (GLB registers its workers').

    Args:
        source: a callable without arguments returning ``(gil_held_cpu_s, loop_cpu_s)``,
            CPU seconds since some fixed start that only grow (the part of the workers'
            processing-loop CPU time they held the GIL, and that time); ``None`` removes it.

    Returns:
        The source registered before (``None`` if none).

    Raises:
        TypeError: ``source`` is neither callable nor ``None``.
    """
    return _gil.set(source)


@dataclass(frozen=True)
class PlaceUsage:
    """What one place has used since it started (:func:`place_usage`).

    Attributes:
        cpu_s: CPU seconds of its process (user + system, every thread).
        wait_s: seconds its live threads were runnable but waited for a CPU (Linux's
            ``/proc/self/task/*/schedstat``; 0 where it cannot be read).
        bytes_out: bytes it has sent other places (the transport's count).
        gil_held_s, loop_s: its GIL source's two counters (CPU s), or ``None`` for none.
        rss_bytes: its resident memory now (bytes).
    """

    cpu_s: float
    wait_s: float
    bytes_out: int
    gil_held_s: float | None
    loop_s: float | None
    rss_bytes: int


def _run_queue_wait_s() -> float:
    """Seconds the live threads of this process have waited for a CPU while runnable: the
    sum of the second field of each ``/proc/self/task/<tid>/schedstat`` (nanoseconds); 0 where
    they cannot be read (not Linux, or no ``CONFIG_SCHED_INFO``)."""
    total = 0
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):  # a thread that ended meanwhile
            continue
    return total / 1e9


def place_usage() -> PlaceUsage:
    """This place's :class:`PlaceUsage` now (psutil, the transport's counters, the GIL
    source); a GIL source that fails is logged and read as none."""
    global _process
    import psutil

    if _process is None:
        _process = psutil.Process()
    with _process.oneshot():
        times = _process.cpu_times()
        rss = _process.memory_info().rss
    rt = current_runtime()
    sent = rt.transport.traffic()["bytes_out"] if rt is not None else 0
    held, loop = _gil.read(_two_counters) or (None, None)
    return PlaceUsage(times.user + times.system, _run_queue_wait_s(), sent, held, loop, rss)


def _two_counters(counters: tuple[float, float]) -> tuple[float, float]:
    """A GIL source's answer as two floats (raises when it is not two numbers)."""
    held, loop = (float(x) for x in counters)
    return held, loop


def job_cores(hosts: list[str], places: int, threads: int,
              cores: Mapping[str, list[int]] | None) -> int:
    """The cores a job holds: those ``cores`` (``APGAS_CORES``'s map, host → core ids) names
    on the distinct ``hosts`` of its places when it names any of them, else ``places x
    threads`` (at least 1).

    Args:
        hosts: the host of each place (as the place table spells it).
        places: the number of places; threads: ``APGAS_THREADS``.
        cores: host → cores, or ``None`` (no ``APGAS_CORES``).
    """
    if cores:
        from .._pinning import host_key

        keys = {host_key(h, cores) for h in set(hosts)}
        held = sum(len(cores[k]) for k in keys if k is not None)
        if held > 0:
            return held
    return max(1, places * threads)


def job_load(before: Mapping[int, PlaceUsage], after: Mapping[int, PlaceUsage],
             wall_s: float, cores: int) -> LoadReport:
    """The job's load over one window (module docstring), from two samples.

    Args:
        before, after: place id → usage at the window's start and end; only places in both
            count (for the memory: those in ``after``).
        wall_s: the window's wall seconds (> 0).
        cores: the cores the job held (>= 1, :func:`job_cores`).

    Returns:
        The :class:`~apgaspy.wire.protocol.LoadReport`: duty clipped to [0, 1], bytes per
        second >= 0, GIL share (``None`` when no place had GIL counters that grew), memory.

    Raises:
        ValueError: ``wall_s`` <= 0 or ``cores`` < 1.
    """
    if not wall_s > 0 or cores < 1:
        raise ValueError(f"a load window needs wall_s > 0 and cores >= 1, got {wall_s}, "
                         f"{cores}")
    both = [p for p in after if p in before]
    cpu = sum(max(0.0, after[p].cpu_s - before[p].cpu_s)
              + max(0.0, after[p].wait_s - before[p].wait_s) for p in both)
    sent = sum(max(0, after[p].bytes_out - before[p].bytes_out) for p in both)
    held = loop = 0.0
    for p in both:
        a, b = after[p], before[p]
        if None not in (a.gil_held_s, a.loop_s, b.gil_held_s, b.loop_s):
            held += a.gil_held_s - b.gil_held_s  # type: ignore[operator]
            loop += a.loop_s - b.loop_s  # type: ignore[operator]
    gil = min(1.0, max(0.0, held / loop)) if loop > 0 else None
    duty = min(1.0, max(0.0, cpu / (wall_s * cores)))
    return LoadReport(duty=duty if math.isfinite(duty) else 0.0, bytes_per_s=sent / wall_s,
                      gil=gil, rss_bytes=sum(u.rss_bytes for u in after.values()))


class LoadReporter:
    """Place 0's load reports (module docstring), on a daemon thread.

    Args:
        send: sends one notification message (the communicator's ``notify``: it adds the
            job's address and signs the line).
        interval_s: seconds between two samples (default ``APGAS_LOAD_INTERVAL``; 0: the
            reporter does nothing).

    Attributes:
        sent: how many reports were sent; last: the last one sent (``None`` before).
    """

    def __init__(self, send: Callable[[str], None], interval_s: float | None = None) -> None:
        self._send = send
        self.interval = setting("LOAD_INTERVAL") if interval_s is None else interval_s
        self.sent = 0
        self.last: LoadReport | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="apgaspy-load", daemon=True)

    def start(self) -> None:
        """Start sampling (nothing when the interval is 0)."""
        if self.interval > 0:
            self._thread.start()

    def stop(self) -> None:
        """Stop; waits for a sample under way (at most about one interval)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 5)

    def _sample(self) -> dict[int, PlaceUsage] | None:
        """Every place's usage, holding orders off (as :func:`apgaspy.elastic.orders_held`:
        no place leaves while it is asked); ``None`` while an order is under way."""
        rt = current_runtime()
        m = rt.malleability if rt is not None else None
        if m is None:
            return gather(place_usage, timeout_s=min(self.interval, 2.0))
        if not m.order_lock.acquire(blocking=False):
            return None
        try:
            return gather(place_usage, timeout_s=min(self.interval, 2.0))
        finally:
            m.order_lock.release()

    def _cores(self, usage: Mapping[int, PlaceUsage]) -> int:
        from .._pinning import cores_map

        rt = current_runtime()
        table = rt.membership.table if rt is not None else {}
        hosts = [table[p].host for p in usage if p in table]
        return job_cores(hosts, len(usage), setting("THREADS"), cores_map())

    def _run(self) -> None:
        last: tuple[float, dict[int, PlaceUsage]] | None = None
        first = True
        while not self._stop.wait(0 if first else self.interval):
            first = False
            try:
                usage = self._sample()
                now = time.monotonic()
                if usage is None:
                    last = None
                    continue
                if last is not None and now > last[0]:
                    report = job_load(last[1], usage, now - last[0], self._cores(usage))
                    if not self._stop.is_set():
                        self._send(format_load(report))
                        self.sent += 1
                        self.last = report
                last = (now, usage)
            except Exception:  # noqa: BLE001 - the reports must not end the program
                log.exception("load report failed")
                last = None
