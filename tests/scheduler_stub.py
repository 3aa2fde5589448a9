"""The scheduler's side of the wire protocol, for tests: real TCP, nothing simulated."""

from __future__ import annotations

import queue
import socket
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SchedulerStub:
    """Listens on 127.0.0.1:``port`` for notifications; sends orders to a job.

    Attributes:
        notifications: queue of notification lines received (without newline).
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.notifications: queue.Queue[str] = queue.Queue()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", self.port))
        self._server.listen(16)
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def env(self) -> dict[str, str]:
        return {"SCHEDULER_IP": "127.0.0.1", "SCHEDULER_PORT": str(self.port)}

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
            for line in data.decode("ascii", "replace").splitlines():
                self.notifications.put(line)

    def wait_for(self, prefix: str, timeout: float = 30) -> str:
        """The next notification, which must start with ``prefix``."""
        try:
            line = self.notifications.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no notification {prefix!r} within {timeout} s") from None
        assert line.startswith(prefix), f"expected {prefix!r}, got {line!r}"
        return line

    def order(self, job: tuple[str, int], payload: bytes | str, timeout: float = 60,
              source: str | None = None) -> list[str]:
        """Send ``payload`` on a new connection; return the reply lines (until the job closes)."""
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
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()
