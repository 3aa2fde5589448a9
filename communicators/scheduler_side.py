"""The scheduler's side of the wire protocol (SPEC.md §2): receive notifications, send orders.

Used by the tests and benchmarks that play the scheduler against a real job over real TCP.
"""

from __future__ import annotations

import queue
import socket
import threading
import time

__all__ = ["SchedulerEndpoint", "free_port"]


def free_port() -> int:
    """A TCP port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SchedulerEndpoint:
    """Listens on ``ip``:``port`` for notifications; sends orders to jobs.

    Args:
        port: the port (``SCHEDULER_PORT``); default a free one.
        ip: the address (``SCHEDULER_IP``), default 127.0.0.1.

    Attributes:
        notifications: queue of (arrival time from ``time.monotonic()``, line without newline).

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, port: int | None = None, ip: str = "127.0.0.1") -> None:
        self.ip = ip
        self.port = port or free_port()
        self.notifications: queue.Queue[tuple[float, str]] = queue.Queue()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind((ip, self.port))
        self._server.listen(16)
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        """The environment variables that point a job at this endpoint."""
        return {"SCHEDULER_IP": self.ip, "SCHEDULER_PORT": str(self.port)}

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while chunk := conn.recv(4096):
                        data += chunk
                except OSError:
                    pass
            now = time.monotonic()
            for line in data.decode("ascii", "replace").splitlines():
                self.notifications.put((now, line))

    def wait_for(self, prefix: str, timeout: float = 30) -> str:
        """The next notification line, which must start with ``prefix``.

        Raises:
            AssertionError: none arrived within ``timeout`` seconds, or another one came.
        """
        return self.wait_for_timed(prefix, timeout)[1]

    def wait_for_timed(self, prefix: str, timeout: float = 30) -> tuple[float, str]:
        """Like :meth:`wait_for`, with the arrival time (``time.monotonic()``)."""
        try:
            arrived, line = self.notifications.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no notification {prefix!r} within {timeout} s") from None
        if not line.startswith(prefix):
            raise AssertionError(f"expected a notification {prefix!r}, got {line!r}")
        return arrived, line

    def order(self, job: tuple[str, int], payload: bytes | str, timeout: float = 60,
              source: str | None = None) -> list[str]:
        """Send ``payload`` on a new connection; return the reply lines (until the job closes).

        Args:
            job: the job's order address (its first host, ``SCHEDULER_PORT``).
            payload: the order line (str or raw bytes); empty sends nothing.
            timeout: seconds to wait for the job to finish the order.
            source: local address to connect from.

        Raises:
            OSError: the job cannot be reached.
        """
        data = payload.encode("ascii") if isinstance(payload, str) else payload
        with socket.socket() as s:
            if source:
                s.bind((source, 0))
            s.settimeout(timeout)
            s.connect(job)
            if data:
                s.sendall(data)
            reply = b""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    chunk = s.recv(4096)
                except ConnectionResetError:  # closed unread: a refusal
                    break
                if not chunk:
                    break
                reply += chunk
        return reply.decode("ascii", "replace").splitlines()

    def close(self) -> None:
        """Stop listening."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()
