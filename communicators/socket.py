"""The socket communicator: the Java ElasticJobScheduler's text protocol over TCP.

Configured from the environment the scheduler gives a job (docs/reference/protocol.md):
``SCHEDULER_IP``,
``SCHEDULER_PORT``, ``NODE_FILE``.  The job's address is the resolved first host of
``NODE_FILE`` (without it, this machine's address); the job listens there, on
``SCHEDULER_PORT``, and nowhere else, unless ``APGAS_ORDER_PORT`` gives it a port of its own
(apgaspy's scheduler gives ``0`` where jobs may share a first node: an ephemeral port,
announced as ``APGAS-Ready;<port>``).  One order per connection; orders run one at a time.
Only the scheduler's address may send orders unless ``APGAS_ORDERS_FROM`` says otherwise.

With a key from the scheduler (``SCHEDULER_KEY``, or the owner-only file
``SCHEDULER_KEY_FILE`` names; :mod:`apgaspy.wire.auth`), every notification is signed and
every order must carry a valid MAC with a new counter: an order that does not (no MAC, a
wrong one, a replayed line) is refused (``ERROR authentication failed: ...``), counted and
logged with its peer address (at most 10 lines every 10 s), and changes nothing.  Without a
key the lines are the plain Java ones (docs/reference/security.md).

Anything malformed (``shrink x``, ``grow 2 onlyonehost``, ``shrink 99``, bytes that are not
ASCII, a connection that sends nothing for ``APGAS_ORDER_TIMEOUT`` seconds) is logged and
answered ``ERROR <reason>`` where a reply is possible; the program runs on unharmed.

Evolving jobs (docs/guides/evolving.md): :meth:`~SocketMalleableCommunicator.request` sends
``Evolving;Request;1``, :meth:`~SocketMalleableCommunicator.release` one
``Evolving;Release;<host>`` per freed host, each ``:<job address>`` as every notification;
the scheduler answers a request with an ordinary ``grow 1 <host>``.  In evolving mode
(``APGAS_ELASTIC=evolving`` or ``ELASTIC=evolving``) a ``shrink`` order is not carried out:
it is logged and answered ``ERROR <reason>`` (APGAS for Java ignores it; the Java scheduler
never sends one to an evolving job).

While it runs, every ``APGAS_LOAD_INTERVAL`` seconds (5; 0: never) it sends the job's load,
``APGAS-Load;<duty>;<bytes/s>;<gil>;<rss>`` (:class:`apgaspy.elastic.LoadReporter`), signed
as every line; the Java scheduler answers it ``undefined Message`` and goes on.  A job run
as rigid (``ELASTIC=rigid``) takes no orders but still reports its load, through a
:class:`SocketNotifier` (the sending half of this communicator)::

    SocketNotifier            signs and sends lines, runs the LoadReporter   (rigid jobs)
      └─ SocketMalleableCommunicator   + the order listener, APGAS-Ready   (malleable jobs)
"""

from __future__ import annotations

import logging
import os
import selectors
import socket
import threading
import time
from collections.abc import Callable

from apgaspy import ConfigurationError, MalleabilityError, OrdersEndedError
from apgaspy.config import setting
from apgaspy.elastic import LoadReporter, MalleableCommunicator, evolving_mode
from apgaspy.hosts import is_local_host, local_addresses, node_file_hosts, resolve_host
from apgaspy.wire.auth import (
    NOTIFICATION,
    ORDER,
    Counter,
    LineAuthError,
    RefusalLog,
    ReplayGuard,
    load_key,
    sign_line,
    verify_line,
)
from apgaspy.wire.framing import LineReader, LineTimeoutError, LineTooLongError
from apgaspy.wire.protocol import (
    DISABLED,
    GROW_TIME,
    MAX_LINE_BYTES,
    SHRINK_TIME,
    OrderError,
    evolving_release,
    evolving_request,
    format_notification,
    format_reply,
    parse_order,
    ready_message,
    refusal,
    rigid_message,
    timing_message,
)

__all__ = ["SocketMalleableCommunicator", "SocketNotifier"]

log = logging.getLogger("apgaspy.communicators")


def _read_order_line(conn: socket.socket, timeout: float) -> bytes:
    """The order line of ``conn`` (at most MAX_LINE_BYTES), waiting at most ``timeout`` s.

    Raises:
        OrderError: nothing, or no end of line, arrived in time; the line is too long; or
            the connection closed without one.
    """
    try:
        line = LineReader(conn, MAX_LINE_BYTES).line(timeout)
    except LineTimeoutError as exc:
        raise OrderError(f"no complete order line within {timeout:g} s"
                         + (f" (got {exc.partial[:60]!r})" if exc.partial else "")) from None
    except LineTooLongError:
        raise OrderError(f"order line longer than {MAX_LINE_BYTES} bytes") from None
    except OSError as exc:
        raise OrderError(f"the connection failed: {exc}") from None
    if line is None:
        raise OrderError("the connection closed without an order")
    return line


class _OnceReply:
    """The one reply an order connection gets: the first :meth:`send` goes out, a later one
    (a shrink that completed after its refusal was sent) is kept in ``late``."""

    def __init__(self, conn: socket.socket, write: Callable[[socket.socket, list[str]], None]):
        self._conn = conn
        self._write = write
        self._lock = threading.Lock()
        self._sent = False
        self.late: list[str] | None = None

    def send(self, lines: list[str]) -> None:
        with self._lock:
            if self._sent:
                self.late = lines
                return
            self._sent = True
            self._write(self._conn, lines)
            try:  # the reply is complete: the scheduler need not wait for the order's end
                self._conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass


def scheduler_host_addresses(ip: str) -> set[str]:
    """The addresses orders may come from by default: those of the scheduler's host.

    The Java scheduler sends orders from whatever address its machine routes from, which on
    a host with several addresses need not be ``SCHEDULER_IP``.  So the default admits
    ``SCHEDULER_IP``, every address its host name resolves to (forward and reverse lookup),
    and, when the scheduler runs on this machine, every address of this machine; strangers
    stay refused.

    Raises:
        OSError: ``ip`` does not resolve.
    """
    allowed = {resolve_host(ip)}
    try:
        name, aliases, addresses = socket.gethostbyaddr(allowed.copy().pop())
        allowed.update(addresses)
        for host in (name, *aliases):
            try:
                allowed.update(socket.gethostbyname_ex(host)[2])
            except OSError:
                pass
    except OSError:
        pass
    if any(is_local_host(a) for a in allowed):
        allowed.update(local_addresses())
        allowed.add("127.0.0.1")
    return allowed


class SocketNotifier:
    """Sends signed notifications to ``SCHEDULER_IP:SCHEDULER_PORT`` and the job's load; takes
    no orders.  A job the scheduler runs as rigid (``ELASTIC=rigid``) gets one of these
    alone (:meth:`SocketMalleableCommunicator.load_notifier`), so that its duty cycle is
    known (docs/guides/colocation.md); the socket communicator is one, and listens too.

    Attributes:
        scheduler: ``(SCHEDULER_IP, SCHEDULER_PORT)``.
        address: the job's address (its first host's), which every line names.
        load_reporter: the job's :class:`~apgaspy.elastic.LoadReporter`.

    Raises:
        ConfigurationError: ``SCHEDULER_IP`` or ``SCHEDULER_PORT`` is missing or invalid, or
            the key (``SCHEDULER_KEY``, ``SCHEDULER_KEY_FILE``) is malformed or unreadable.
    """

    def __init__(self) -> None:
        ip = os.environ.get("SCHEDULER_IP", "").strip()
        port_text = os.environ.get("SCHEDULER_PORT", "").strip()
        if not ip or not port_text:
            raise ConfigurationError(
                "the socket communicator needs SCHEDULER_IP and SCHEDULER_PORT")
        try:
            port = int(port_text)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            raise ConfigurationError(f"SCHEDULER_PORT={port_text!r} is not a TCP port") from None
        self.scheduler = (ip, port)
        hosts = node_file_hosts()
        self.address = resolve_host(hosts[0] if hosts else socket.gethostname())
        self.notify_timeout = setting("NOTIFY_TIMEOUT")
        try:
            self._key = load_key()
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._job = os.environ.get("JOBNAME", "").strip()
        self._counter = Counter()
        self._send_lock = threading.Lock()
        self.load_reporter = LoadReporter(self.notify)

    def start(self) -> None:
        """Start the load reports (every ``APGAS_LOAD_INTERVAL`` seconds), only for a job
        that has a line key: apgaspy's scheduler gives every job one and reads the reports,
        while the Java scheduler (no key) would answer each ``undefined Message`` and log it."""
        if self._key is not None:
            self.load_reporter.start()

    def stop(self) -> None:
        """Stop the load reports; never raises."""
        self.load_reporter.stop()

    def notify(self, message: str) -> None:
        """Send ``message`` as ``<message>:<job address>`` (signed with a key); a line that
        cannot be delivered is logged as a warning and dropped."""
        try:
            self._send(message)
        except OSError as exc:
            log.warning("could not notify the scheduler at %s:%d of %r: %s",
                        *self.scheduler, message, exc)

    @property
    def authenticated(self) -> bool:
        """Whether the scheduler gave this job a key (lines are signed and checked)."""
        return self._key is not None

    def _send(self, message: str) -> None:
        """Send one notification line (signed when the job has a key); raises OSError when
        the scheduler cannot be reached.  Notifications go out one at a time, so that their
        counters arrive in order."""
        line = format_notification(message, self.address)
        with self._send_lock:
            if self._key is not None:
                line = sign_line(self._key, NOTIFICATION, self._job, line,
                                 self._counter.next()) + "\n"
            with socket.create_connection(self.scheduler, timeout=self.notify_timeout) as s:
                s.sendall(line.encode("ascii"))


class SocketMalleableCommunicator(SocketNotifier, MalleableCommunicator):
    """Receives orders on ``<job address>:SCHEDULER_PORT`` (or ``APGAS_ORDER_PORT``), notifies
    ``SCHEDULER_IP`` (:class:`SocketNotifier`).

    Attributes:
        refused_orders: order connections refused for failed authentication (count).
        order_port: the port it takes orders on once started (``None`` before).

    Raises:
        ConfigurationError: ``SCHEDULER_IP`` or ``SCHEDULER_PORT`` is missing or invalid, or
            the key (``SCHEDULER_KEY``, ``SCHEDULER_KEY_FILE``) is malformed or unreadable.
    """

    EVOLVING = True

    def __init__(self) -> None:
        super().__init__()
        ip = self.scheduler[0]
        allowed = setting("ORDERS_FROM")
        if allowed is None:
            self.allowed: set[str] | None = scheduler_host_addresses(ip)
        elif allowed.strip().lower() == "any":
            self.allowed = None
        else:
            self.allowed = {resolve_host(a.strip()) for a in allowed.split(",") if a.strip()}
        self.order_timeout = setting("ORDER_TIMEOUT")
        self.shrink_reply_timeout = setting("SHRINK_REPLY_TIMEOUT")
        self.evolving = evolving_mode()
        self._own_port: int | None = setting("ORDER_PORT")
        self.order_port: int | None = None
        self._guard = ReplayGuard()
        self._refusals = RefusalLog()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @classmethod
    def load_notifier(cls) -> SocketNotifier:
        """A :class:`SocketNotifier` (load reports, no orders) for a job run as rigid.

        Raises:
            ConfigurationError: as the class.
        """
        return SocketNotifier()

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Listen for orders and notify ``APGAS-Ready``.

        If the order port cannot be bound (the Java scheduler holds port 8081 of every
        address of its machine, so a job on that machine cannot listen there), the program
        computes on as a rigid job: the reason is logged and the scheduler is told
        ``APGAS-Rigid;<reason>`` instead of ``APGAS-Ready`` (the Java scheduler answers it
        ``undefined Message`` and treats the job as rigid, which it is).
        """
        port = self.scheduler[1] if self._own_port is None else self._own_port
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            server.bind((self.address, port))
        except OSError as exc:
            server.close()
            why = f"cannot listen for orders on {self.address}:{port}: {exc}"
            log.error("%s; the program computes on as a rigid job", why)
            self.notify(rigid_message(why))
            self.load_reporter.start()
            return
        server.listen(16)
        self._server = server
        self.order_port = server.getsockname()[1]
        self._thread = threading.Thread(target=self._listen, name="apgaspy-orders", daemon=True)
        self._thread.start()
        log.info("accepting orders on %s:%d", self.address, self.order_port)
        # a port of its own is announced: the scheduler cannot guess an ephemeral one
        self.notify(ready_message(None if self._own_port is None else self.order_port))
        self.load_reporter.start()

    def stop(self) -> None:
        self.load_reporter.stop()
        if self._server is None:
            return
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        self._server.close()
        self._server = None
        self.notify(DISABLED)

    @property
    def refused_orders(self) -> int:
        """Order connections refused for failed authentication so far."""
        return self._refusals.total

    # ---------------------------------------------------------------- evolving
    def request(self, n: int) -> None:
        """Send ``Evolving;Request;1:<job address>`` (the Java scheduler serves one node per
        request, with a ``grow 1 <node>`` order when one is free).

        Raises:
            MalleabilityError: ``n`` is not 1, or the scheduler cannot be reached.
        """
        if n != 1:
            raise MalleabilityError(
                f"the socket communicator asks for one host at a time (the Java scheduler "
                f"serves one node per request), not {n}")
        message = evolving_request(1)
        try:
            self._send(message)
        except OSError as exc:
            raise MalleabilityError(
                f"could not send {message!r} to the scheduler at {self.scheduler[0]}:"
                f"{self.scheduler[1]}: {exc}") from None
        log.info("asked the scheduler for one host")

    def release(self, hosts: list[str]) -> None:
        """Send ``Evolving;Release;<host>:<job address>`` for each host (their places have
        ended); a line that cannot be sent is logged (the places are gone either way)."""
        for host in hosts:
            self.notify(evolving_release(host))

    # ---------------------------------------------------------------- orders
    def _listen(self) -> None:
        assert self._server is not None
        sel = selectors.DefaultSelector()
        sel.register(self._server, selectors.EVENT_READ)
        try:
            while not self._stopping.is_set():
                if not sel.select(timeout=0.2):
                    continue
                try:
                    conn, peer = self._server.accept()
                except OSError:
                    continue
                with conn:
                    self._serve(conn, peer[0])
        finally:
            sel.close()

    def _serve(self, conn: socket.socket, peer: str) -> None:
        if self.allowed is not None and peer not in self.allowed:
            why = (f"orders are accepted from the scheduler's host {sorted(self.allowed)} only, "
                   f"not from {peer} (set APGAS_ORDERS_FROM to allow others)")
            log.error("refused an order connection: %s", why)
            self._reply(conn, [refusal(why)])
            return
        try:
            raw = _read_order_line(conn, self.order_timeout)
            try:
                text = raw.decode("ascii")
            except UnicodeDecodeError:
                raise OrderError(f"an order is ASCII text, got {raw[:60]!r}") from None
            if self._key is not None:
                try:
                    text = verify_line(self._key, ORDER, self._job, text, self._guard)
                except LineAuthError as exc:
                    skipped = self._refusals.refuse()
                    if skipped is not None:
                        log.error("refused an order from %s: authentication failed: %s%s",
                                  peer, exc, f" ({skipped} more refused, not logged)"
                                  if skipped else "")
                    self._reply(conn, [refusal(f"authentication failed: {exc}")])
                    return
            order = parse_order(text)
        except OrderError as exc:
            log.error("malformed order from %s: %s", peer, exc)
            self._reply(conn, [refusal(str(exc))])
            return
        log.info("order from %s: %s", peer, text.strip())
        start = time.perf_counter_ns()
        reply = _OnceReply(conn, self._reply)
        if order.kind == "shrink" and self.evolving and not order.hosts:
            # a named shrink (a node being drained) is carried out: the scheduler takes
            # those nodes back whatever the job would choose
            why = ("this job is evolving (ELASTIC=evolving): it gives hosts back by itself, "
                   "shrink orders are ignored")
            log.warning("order %r ignored: %s", text.strip(), why)
            self._reply(conn, [refusal(why)])
            return
        try:
            if order.kind == "shrink":
                timer = threading.Timer(self.shrink_reply_timeout, reply.send, [[refusal(
                    f"the shrink did not complete within {self.shrink_reply_timeout:g} s "
                    "(APGAS_SHRINK_REPLY_TIMEOUT); its places are still being released")]])
                timer.daemon = True
                timer.start()
                try:
                    self.shrink(order.n, on_released=reply.send, hosts=order.hosts)
                finally:
                    timer.cancel()
                if reply.late:
                    log.error("shrink %d completed after the scheduler was told it failed; "
                              "the hosts %s are released", order.n, reply.late)
                self.notify(timing_message(SHRINK_TIME, order.n, time.perf_counter_ns() - start))
            else:
                self.grow(order.hosts)
                self.notify(timing_message(GROW_TIME, order.n, time.perf_counter_ns() - start))
        except OrdersEndedError as exc:  # arrived as the computation ended: no fault
            log.info("order %r %s", text.strip(), exc)
            reply.send([refusal(str(exc))])
        except MalleabilityError as exc:
            log.error("order %r refused: %s", text.strip(), exc)
            reply.send([refusal(str(exc))])
        except Exception as exc:  # noqa: BLE001 - a handler bug must not kill the program
            log.exception("order %r failed", text.strip())
            reply.send([refusal(f"{type(exc).__name__}: {exc}")])

    @staticmethod
    def _reply(conn: socket.socket, lines: list[str]) -> None:
        try:
            conn.sendall(format_reply(lines).encode("ascii", "replace"))
        except OSError as exc:
            log.warning("could not reply to the scheduler: %s", exc)
