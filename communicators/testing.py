"""Stand-ins for a scheduler: receive a job's notifications, send it orders, over real TCP.

Used by the tests and benchmarks that play the scheduler against a real job.  The text of
the messages is :mod:`apgaspy.wire.protocol`'s (docs/reference/protocol.md); the real
scheduler's transport is :mod:`scheduler.order_transport`.
"""

from __future__ import annotations

import queue
import socket
import threading
import time

from apgaspy.wire.protocol import (
    DEFAULT_PORT,
    EVOLVING_RELEASE,
    EVOLVING_REQUEST,
    LOAD,
    SHRINK_LINE_TIMEOUT_S,
    UNDEFINED_EVOLVING_REPLY,
    UNDEFINED_REPLY,
    NotificationKind,
    Order,
    format_order,
    java_classify_notification,
    job_environment,
    parse_evolving,
    parse_notification,
)

__all__ = ["SchedulerEndpoint", "JavaSchedulerStandIn", "free_port"]


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

    def wait_for(self, prefix: str, timeout: float = 30, skip: tuple[str, ...] = ()) -> str:
        """The next notification line, which must start with ``prefix``.

        Args:
            prefix: what the line must start with.
            timeout: seconds to wait (for all of it, skipped lines included).
            skip: prefixes of lines to pass over (e.g. GLB's ``preGrowTimeGLB``); the job's
                periodic load reports (``APGAS-Load``) are always passed over unless
                ``prefix`` asks for one.

        Raises:
            AssertionError: none arrived within ``timeout`` seconds, or another one came.
        """
        return self.wait_for_timed(prefix, timeout, skip)[1]

    def wait_for_timed(self, prefix: str, timeout: float = 30,
                       skip: tuple[str, ...] = ()) -> tuple[float, str]:
        """Like :meth:`wait_for`, with the arrival time (``time.monotonic()``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                arrived, line = self.notifications.get(
                    timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no notification {prefix!r} within {timeout} s") \
                    from None
            if line.startswith(prefix):
                return arrived, line
            if line.startswith((LOAD, *skip)):
                continue
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


class JavaSchedulerStandIn(SchedulerEndpoint):
    """Stands in for the Java ElasticJobScheduler (v0.2) as it really behaves (observed
    by running it against apgaspy jobs), for tests that must show a job lives with it
    unchanged.

    Unlike :class:`SchedulerEndpoint` it listens for notifications on port ``port`` (8081, a
    constant in Java) of **every** address of its host, and answers a notification that is
    neither ``APGAS-Ready`` nor a ``...Time...`` line with ``undefined Message``.  Orders go
    out from whatever address the host routes from (not necessarily ``SCHEDULER_IP``); a
    shrink reads its n reply lines with 20 s per line, a grow is sent with a trailing space
    and the connection closed unread.  :meth:`job_env` gives a job the Java scheduler's
    environment (a numeric ``JOBNAME``, ``ELASTIC``).

    Evolving lines are handled as the strategy ``EvolvingEasyBackfilling`` does
    (docs/guides/evolving.md): ``Evolving;Request;1`` puts the job in a set of pending requests
    (at most once per job); pending requests are served, one free node each, by an ordinary
    ``grow 1 <node>`` order (here on every event: a request, a release, an ``APGAS-Ready``, a
    call of :meth:`serve_requests`; Java also every 5 s); no free node, or a job that has not
    announced ``APGAS-Ready``: the request stays pending.  ``Evolving;Release;<node>`` takes
    the node from the job at once, drops its pending request and puts the node back in the
    free pool.  Another ``Evolving;`` type is answered ``Undefined Evolving Message``.

    Args:
        scheduler_ip: the address given to jobs as ``SCHEDULER_IP`` (Java: its host's
            ``getLocalHost()`` address).
        port: the notification and order port (8081).
        free_nodes: the nodes free for evolving requests, served first to last.
        listen_ip: the address it listens on; default every address, as Java.  A test whose
            jobs are logical nodes of this machine (127.0.1.x) passes ``scheduler_ip`` here,
            or job and stand-in collide on the port.

    Attributes:
        ready: the job addresses that announced ``APGAS-Ready`` (Java marks them malleable).
        undefined: the notification lines answered ``undefined Message`` or ``Undefined
            Evolving Message``.
        free_nodes: the free pool (a release appends its node).
        pending: the job addresses with a pending evolving request.
        granted: job address → the nodes given to it by evolving grows, in order.
        released: ``(job address, node)`` of every evolving release, in order.

    Raises:
        OSError: the port cannot be bound.
    """

    LINE_TIMEOUT_S = SHRINK_LINE_TIMEOUT_S

    def __init__(self, scheduler_ip: str, port: int = DEFAULT_PORT,
                 free_nodes: list[str] | None = None, listen_ip: str = "0.0.0.0") -> None:
        self.ready: list[str] = []
        self.undefined: list[str] = []
        self.free_nodes: list[str] = list(free_nodes or [])
        self.pending: list[str] = []
        self.granted: dict[str, list[str]] = {}
        self.released: list[tuple[str, str]] = []
        self._pool_lock = threading.Lock()
        super().__init__(port, listen_ip)
        self.ip = scheduler_ip

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    line = conn.makefile("r", encoding="ascii", errors="replace").readline()
                except OSError:
                    continue
                line = line.rstrip("\n")
                kind = java_classify_notification(line)
                if kind is NotificationKind.READY:
                    self.ready.append(parse_notification(line)[1])
                    self._serve_soon()
                elif kind is NotificationKind.EVOLVING:
                    self._evolving(conn, line)
                elif kind is NotificationKind.UNDEFINED:
                    self.undefined.append(line)
                    try:
                        conn.sendall(f"{UNDEFINED_REPLY}\n".encode("ascii"))
                    except OSError:
                        pass
            self.notifications.put((time.monotonic(), line))

    def _evolving(self, conn: socket.socket, line: str) -> None:
        message, job = parse_notification(line)
        evolving = parse_evolving(message)
        assert evolving is not None
        if evolving.type == EVOLVING_REQUEST:
            with self._pool_lock:
                if job not in self.pending:
                    self.pending.append(job)
            self._serve_soon()
        elif evolving.type == EVOLVING_RELEASE:
            node = evolving.argument
            with self._pool_lock:
                nodes = self.granted.get(job, [])
                if node in nodes:
                    nodes.remove(node)
                if job in self.pending:
                    self.pending.remove(job)
                self.free_nodes.append(node)
                self.released.append((job, node))
            self._serve_soon()
        else:
            self.undefined.append(line)
            try:
                conn.sendall(f"{UNDEFINED_EVOLVING_REPLY}\n".encode("ascii"))
            except OSError:
                pass

    def _serve_soon(self) -> None:
        threading.Thread(target=self.serve_requests, daemon=True).start()

    def serve_requests(self) -> list[tuple[str, str]]:
        """Serve the pending evolving requests of jobs that announced ``APGAS-Ready``, one
        free node each, by ``grow 1 <node>``; return the ``(job address, node)`` served.
        A job that cannot be reached keeps its node back in the pool."""
        served: list[tuple[str, str]] = []
        with self._pool_lock:
            for job in list(self.pending):
                if not self.free_nodes or job not in self.ready:
                    continue
                node = self.free_nodes.pop(0)
                self.pending.remove(job)
                self.granted.setdefault(job, []).append(node)
                served.append((job, node))
        for job, node in served:
            try:
                self.grow((job, self.port), [node])
            except OSError:
                with self._pool_lock:
                    self.granted[job].remove(node)
                    self.free_nodes.append(node)
        return served

    def job_env(self, job_id: int, node_file: str, nodes: int, malleable: bool) -> dict[str, str]:
        """The variables the Java scheduler gives a job (:data:`~apgaspy.wire.protocol.
        JOB_ENVIRONMENT`)."""
        return job_environment(nodes=nodes, node_file=node_file, scheduler_ip=self.ip,
                               port=self.port, job_id=job_id, malleable=malleable)

    def shrink(self, job: tuple[str, int], n: int) -> list[str]:
        """``shrink <n>``, then n reply lines, 20 s per line; ``[]`` where Java would mark the
        job "not reachable" (a line missing in time, or the connection failing)."""
        lines: list[str] = []
        try:
            with socket.create_connection(job, timeout=self.LINE_TIMEOUT_S) as s:
                s.sendall(format_order(Order("shrink", n)).encode("ascii"))
                reader = s.makefile("r", encoding="ascii", errors="replace")
                for _ in range(n):
                    line = reader.readline()
                    if not line:
                        return []
                    lines.append(line.rstrip("\n"))
        except OSError:
            return []
        return lines

    def grow(self, job: tuple[str, int], hosts: list[str]) -> None:
        """``grow <n> <h_1> … <h_n> `` (trailing space), closed without reading a reply."""
        with socket.create_connection(job, timeout=self.LINE_TIMEOUT_S) as s:
            s.sendall(format_order(Order("grow", len(hosts), tuple(hosts))).encode("ascii"))
