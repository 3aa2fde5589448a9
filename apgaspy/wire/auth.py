"""Authenticated scheduler lines: a per-job key, a MAC and a counter on every line.

The Java ElasticJobScheduler's protocol has no authentication: any process that can reach
the scheduler's notification port can release a job's node, and any process that can reach
a job's order port can shrink it.  When the scheduler gives a job a key (the environment
variable :data:`KEY_ENV`, or the owner-only file named by :data:`KEY_FILE_ENV`), both ends
sign every line they send and refuse every line that is not signed with that key.  Both
ends use this module and nothing else for it (docs/reference/protocol.md, "Authenticated
lines"; docs/reference/security.md says what it protects and what not).

Line format: the Java line (without its end), one space, and a suffix field::

    <Java line> mac=<counter>.<32 hex digits>

    shrink 1 mac=1764198000123456789.4f0c1f5d0a9e8b7c6d5e4f3a2b1c0d9e
    Evolving;Release;127.0.1.3:127.0.1.1 mac=1764198000223456789.9a8b…

The MAC is keyed BLAKE2b (RFC 7693) with a 16-byte digest over
``<direction>|<job id>|<counter>|<Java line>``, where direction is ``n`` for a notification
(job to scheduler) and ``o`` for an order (scheduler to job), so that a line cannot be sent
back the other way, and the job id is ``JOBNAME``, so that a line of one job is no line of
another even with the same key.  MACs are compared with :func:`hmac.compare_digest`
(constant time).

The counter is the sender's wall clock in nanoseconds, made strictly increasing
(:class:`Counter`).  The receiver keeps an anti-replay window (:class:`ReplayGuard`, after
the sliding window of IPsec, RFC 4303 §3.4.3): a counter is accepted once, and only if it is
newer than the highest accepted one minus the window; so a captured line, sent again, is
refused, and lines of one sender that overtake each other on their way (one connection a
line) are still accepted.  Because the counter is a clock, a scheduler restarted on its
journal needs no stored counter: its orders are newer than any it sent before, and it takes
notifications of an adopted job only from its own restart on.
"""

from __future__ import annotations

import heapq
import hmac
import os
import secrets
import stat
import threading
import time
from collections.abc import Mapping
from hashlib import blake2b
from pathlib import Path

from ._exceptions import LineAuthError

__all__ = [
    "KEY_BYTES",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "MAC_FIELD",
    "NOTIFICATION",
    "ORDER",
    "Counter",
    "LineAuthError",
    "RefusalLog",
    "ReplayGuard",
    "decode_key",
    "encode_key",
    "load_key",
    "new_key",
    "sign_line",
    "split_mac",
    "verify_line",
    "write_key_file",
]

#: The environment variable that carries a job's key (hex), given by the scheduler.
KEY_ENV = "SCHEDULER_KEY"
#: The environment variable naming an owner-only file that holds the key (hex), for
#: launches where the environment would travel on a command line (ssh).
KEY_FILE_ENV = "SCHEDULER_KEY_FILE"
#: Bytes of a key the scheduler draws.
KEY_BYTES = 32
#: Shortest key accepted (bytes).
MIN_KEY_BYTES = 16
#: Bytes of the MAC (BLAKE2b digest size).
MAC_BYTES = 16
#: How the MAC field begins (after one space).
MAC_FIELD = "mac="
#: Direction labels inside the MAC.
NOTIFICATION = "n"
ORDER = "o"
#: Lines of one sender may arrive this much out of order (nanoseconds) and still be taken.
WINDOW_NS = 10_000_000_000


def new_key() -> bytes:
    """A fresh random key of :data:`KEY_BYTES` bytes (:func:`secrets.token_bytes`)."""
    return secrets.token_bytes(KEY_BYTES)


def encode_key(key: bytes) -> str:
    """The key as the environment and key files carry it: lower-case hex."""
    return key.hex()


def decode_key(text: str) -> bytes:
    """The key from its hex text (surrounding white space ignored).

    Raises:
        ValueError: not hex, or shorter than 16 bytes or longer than 64 (BLAKE2b's limit);
            the message does not repeat the text.
    """
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        raise ValueError("a scheduler key is hexadecimal text") from None
    if not MIN_KEY_BYTES <= len(key) <= 64:
        raise ValueError(f"a scheduler key has {MIN_KEY_BYTES} to 64 bytes, got {len(key)}")
    return key


def load_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """The job's key: :data:`KEY_ENV`, else the file :data:`KEY_FILE_ENV` names, else None
    (no key: plain Java lines).

    Raises:
        ValueError: the key is malformed, or the file cannot be read or is readable by
            others than its owner (group or world bits set).
    """
    env = os.environ if environ is None else environ
    text = env.get(KEY_ENV, "").strip()
    if text:
        return decode_key(text)
    path = env.get(KEY_FILE_ENV, "").strip()
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise ValueError(f"{KEY_FILE_ENV}: {path} is readable by others "
                                 f"(mode {stat.S_IMODE(mode):o}); it must be owner-only")
            return decode_key(fh.read())
    except OSError as exc:
        raise ValueError(f"{KEY_FILE_ENV}: cannot read {path}: {exc.strerror or exc}") from None


def write_key_file(path: str | os.PathLike[str], key: bytes) -> Path:
    """Write ``key`` (hex) to a new owner-only file (mode 0600, created so, never widened);
    an old file at ``path`` is replaced.  Returns the path.

    Raises:
        OSError: the file cannot be written.
    """
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, (encode_key(key) + "\n").encode("ascii"))
    finally:
        os.close(fd)
    os.replace(tmp, p)
    return p


def _mac(key: bytes, direction: str, job: str, counter: int, body: str) -> str:
    data = f"{direction}|{job}|{counter}|{body}".encode("ascii", "replace")
    return blake2b(data, key=key, digest_size=MAC_BYTES).hexdigest()


class Counter:
    """A sender's counter: the wall clock in nanoseconds, strictly increasing (thread-safe)."""

    def __init__(self) -> None:
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        """The next counter value (> every earlier one)."""
        with self._lock:
            self._last = max(self._last + 1, time.time_ns())
            return self._last


def sign_line(key: bytes, direction: str, job: str, line: str, counter: int) -> str:
    """``line`` (its end and trailing spaces dropped) with its MAC field, without an end:
    ``<line> mac=<counter>.<hex>``.

    Args:
        key: the job's key.
        direction: :data:`NOTIFICATION` or :data:`ORDER`.
        job: the job id (``JOBNAME``; "" when there is none).
        line: the Java line.
        counter: from the sender's :class:`Counter`.
    """
    body = line.rstrip("\r\n ")
    return f"{body} {MAC_FIELD}{counter}.{_mac(key, direction, job, counter, body)}"


def split_mac(line: str) -> tuple[str, str | None]:
    """``(Java line, MAC field value)`` of a line; the value is None when the line has no
    MAC field (a plain Java line, returned without its end and trailing spaces)."""
    text = line.rstrip("\r\n ")
    body, sep, field = text.rpartition(" " + MAC_FIELD)
    if not sep:
        return text, None
    return body, field


class ReplayGuard:
    """Accepts each counter of one sender once (an anti-replay window, RFC 4303 §3.4.3).

    Args:
        floor: counters at or below it are refused (0: none; a restarted scheduler uses its
            restart time, so that lines sent before are refused).
        window_ns: how far below the highest accepted counter a late line may be.
        keep: the most counters remembered; beyond it the oldest are forgotten and the
            floor raised to them (older lines are then refused).

    The counters inside the window are kept in a set and a min-heap, so that a check costs
    O(log n).  Thread-safe.
    """

    def __init__(self, floor: int = 0, *, window_ns: int = WINDOW_NS, keep: int = 4096) -> None:
        self.floor = floor
        self.window_ns = window_ns
        self.keep = keep
        self._highest = 0
        self._seen: set[int] = set()
        self._heap: list[int] = []
        self._lock = threading.Lock()

    def _forget_below(self, low: int) -> None:
        while self._heap and self._heap[0] <= low:
            self._seen.discard(heapq.heappop(self._heap))

    def accept(self, counter: int) -> bool:
        """Whether ``counter`` is new and recent enough (then it is remembered)."""
        with self._lock:
            low = max(self.floor, self._highest - self.window_ns)
            if counter <= low or counter in self._seen:
                return False
            self._seen.add(counter)
            heapq.heappush(self._heap, counter)
            if counter > self._highest:
                self._highest = counter
                self._forget_below(max(self.floor, counter - self.window_ns))
            while len(self._heap) > self.keep:
                oldest = heapq.heappop(self._heap)
                self._seen.discard(oldest)
                self.floor = max(self.floor, oldest)
            return True


def verify_line(key: bytes, direction: str, job: str, line: str, guard: ReplayGuard) -> str:
    """The Java line of an authenticated ``line``, once its MAC and counter are checked.

    Args: as :func:`sign_line`; ``guard`` is the receiver's window for this sender.

    Raises:
        LineAuthError: the line has no MAC field, a malformed one, a wrong MAC, or a counter
            ``guard`` refuses (a replay, or too old).
    """
    body, field = split_mac(line)
    if field is None:
        raise LineAuthError("no MAC (a plain line from a job that has a key)")
    counter_text, dot, mac = field.partition(".")
    if (not dot or not counter_text.isdigit() or len(counter_text) > 20
            or len(mac) != 2 * MAC_BYTES or not all(c in "0123456789abcdef" for c in mac)):
        raise LineAuthError("malformed MAC field")
    counter = int(counter_text)
    if not hmac.compare_digest(mac, _mac(key, direction, job, counter, body)):
        raise LineAuthError("wrong MAC (another key, another job, or a changed line)")
    if not guard.accept(counter):
        raise LineAuthError(f"counter {counter} seen already or too old (a replay)")
    return body


class RefusalLog:
    """Counts refused lines and says which to log: at most ``burst`` every ``period_s``
    seconds (a flood of bad lines cannot flood the log).  Thread-safe.

    Attributes:
        total: every refusal counted so far.
    """

    def __init__(self, burst: int = 10, period_s: float = 10.0) -> None:
        self.burst = burst
        self.period_s = period_s
        self.total = 0
        self._window_start = -float("inf")
        self._logged = 0
        self._suppressed = 0
        self._lock = threading.Lock()

    def refuse(self) -> int | None:
        """Count one refusal; return None when it should not be logged, else the number of
        refusals not logged since the last one that was (0 or more)."""
        with self._lock:
            self.total += 1
            now = time.monotonic()
            if now - self._window_start >= self.period_s:
                self._window_start, self._logged = now, 0
            if self._logged >= self.burst:
                self._suppressed += 1
                return None
            self._logged += 1
            skipped, self._suppressed = self._suppressed, 0
            return skipped
