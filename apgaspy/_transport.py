"""Messages between places: ZeroMQ PUSH/PULL over TCP, authenticated with keyed BLAKE2b.

How a message travels (``async_at(q, f)`` at place p; ``at`` is the same plus the reply)::

    place p                                               place q
    ───────                                               ───────
    caller thread                                         receiver thread (one per place)
      pickle task (cloudpickle) ─► Outbox[q].append
      try-lock Outbox[q]: drain it, sign the batch
      [MAC | len msg | len msg ...] ─► PUSH ══ TCP ══►  PULL socket ─► verify the MAC (drop
                                                          and log on mismatch, before any
                                                          unpickling) ─► per message:
                                                            Task      ─► worker pool ─► f()
                                                            Update    ─► finish home (inline)
                                                            Immediate ─► immediate pool
    receiver thread ◄════ [MAC | len Update(+result)] ◄══ worker ends f, its place is
      finish counts hit zero ─► waiting thread wakes      quiescent for that finish: flush

An ``at`` called outside the worker pool waits on an inbox of its calling thread instead (a
PULL socket of its own, :meth:`Transport.inbox`): the finish id carries the inbox's endpoint,
every place sends that finish's UPDATEs there, and the calling thread handles them itself, so
no receiver thread has to wake it.

Sending needs no thread hop: the caller sends itself.  Sockets are not thread-safe, so each
destination has a lock; a caller that finds it taken leaves its message in the outbox and the
holder sends it with its own (combining), so bursts from several threads go out as batches.

Bursts from one thread (``send_soon``, used for ``async_at`` tasks) are batched too, as
Nagle's algorithm does for TCP (RFC 896) but bounded in size and time: a message that follows
the previous one to the same place within ``_BURST_S`` stays in the outbox, the batch leaves
when it holds ``_BATCH`` messages, and the flusher thread sends what is left as soon as it gets
the interpreter (at the latest after the sender's switch interval, 5 ms by default, or when the
sender blocks: a thread that waits for a finish flushes first).  A lone message, or the first
of a burst, leaves at once.

Failure detection: every place watches its connection to place 0, and place 0 watches its
connections to all places (ZeroMQ socket monitors plus ZMTP heartbeats, so a silent host is
noticed too).  A connection that breaks and stays down for ``APGAS_DEAD_PLACE_TIMEOUT``
seconds makes ``on_peer_lost`` fire for that place, once the receiver has caught up with what
the place sent before (:meth:`Transport._check_watches`)::

    place p (shutdown)                    place 0: receiver thread
    ──────────────────                    ────────────────────────
    'bye' ══ its PUSH, TCP ═══════════►   queued on the PULL socket ─┐ (another connection:
    closes its PULL ═ TCP FIN of the ═►   monitor: DISCONNECTED,     │  either may be read
      connection place 0 sends on           since = now              │  first)
                                          ... not run for > timeout (a loaded machine) ...
                                          check: down > timeout ─► catch up: read the
                                            monitor, handle what waits on the PULL ◄─┘
                                            ('bye': p ended cleanly); next check, still
                                            down: catch up again, then on_peer_lost(p)

Why: the goodbye leaves before the socket closes, but the two travel on two connections, and
place 0 often reads the close first (a backlog on its PULL socket, one message per poll).  A
receiver starved right after that, for longer than the timeout, would otherwise give its
verdict with the goodbye still queued, and a clean shutdown would report ``place(p) died
during shutdown``.  The second check (one check interval, 50 ms, later, with a poll between)
gives the ZeroMQ I/O thread, starved as long when the whole process did not run, the time to
queue what had reached the machine.  (The goodbye does leave: :meth:`Transport.close` sends
what a sender left queued for the holder of a connection's lock.)

A batch is one ZeroMQ frame::

    MAC (32) | stream (16) | counter (8, LE) | len (4, LE) msg | len msg | ...
               └──────────── covered by the MAC, keyed with the job secret and salted with
                             the receiving socket's nonce ──────────────────────────────┘

One frame, not one frame per message, because every frame costs pyzmq's Python layer a few
microseconds on both sides, which a round trip of small messages feels.

Security: the per-job secret (32 random bytes, handed to each place sealed to its own
one-time key: :mod:`apgaspy._keys`) keys a MAC over every batch (as the Jupyter wire protocol
signs its messages); a frame with a wrong or missing MAC is dropped before anything in it is
unpickled (each frame of a multipart message, which no place sends, on its own).  The MAC is
keyed BLAKE2b with a 32-byte digest, not HMAC: BLAKE2's keyed mode is a MAC by itself and
needs no HMAC construction (RFC 7693, section 2.9); it costs a third of OpenSSL's HMAC-SHA256
per call, whose key set-up dominates for small batches.  The MACs are compared in constant
time (``hmac.compare_digest``).

Replays: every receiving socket (a place's PULL socket and each thread's inbox) draws a random
16-byte *nonce* when it is bound and advertises it with its address (``tcp://ip:port#nonce``);
the MAC is salted with it (BLAKE2b's salt parameter), so a frame is valid at one socket of one
process only: sent to another place, to another socket of the same place, or to a later
process that got the same address, it fails its MAC.  Every sending connection (an
:class:`_Outbox`) is a *stream* with a random 16-byte id and a counter that grows by one per
frame, inside the MAC; one connection delivers in order (ZeroMQ over one TCP connection may
lose frames when it breaks, never reorder them), so the receiving socket keeps the last
counter of each stream and drops every frame whose counter is not above it: a captured frame
sent again changes nothing.  This is IPsec's anti-replay check (RFC 4303, section 3.4.3) with
a window of one, which in-order delivery allows.

Bounds: a receiving socket refuses a frame larger than ``max_message_bytes`` before it is
read (ZeroMQ's ``ZMQ_MAXMSGSIZE`` closes the connection that announces it), and a sender
refuses a message that could not arrive (:class:`ValueError`) and splits batches below the
bound.  Dropped frames are counted (``dropped``, by reason in ``drops``) and logged at most
once every ``_DROP_LOG_S`` seconds.
"""

from __future__ import annotations

import collections
import logging
import struct
import threading
import time
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable
from time import perf_counter as _perf_counter

import zmq

try:  # what hashlib.blake2b and hmac.compare_digest are, without hashlib loading OpenSSL's
    # libcrypto (3.7 MB RSS in every place)
    from _blake2 import blake2b
    from _operator import _compare_digest as compare_digest
except ImportError:  # another Python implementation
    from hashlib import blake2b
    from hmac import compare_digest

from ._sockets import (
    _NOBLOCK,
    _POLLIN,
    _Inbox,
    _max_sockets,
    _monitor_event,
    _Outbox,
    _Receiver,
    _Waker,
    _Watch,
    split_endpoint,
)

__all__ = ["Transport"]

log = logging.getLogger("apgaspy")

_POLL_MS = 100
_BURST_S = 100e-6  # a message this soon after the previous one to its place joins a batch
_BATCH = 64  # messages in a batch before it leaves without waiting for the flusher
_MAC_SIZE = 32
_HEADER = struct.Struct("<16sQ")  # stream id, counter
_HEAD = _MAC_SIZE + _HEADER.size  # bytes before the first message of a batch
_DROP_LOG_S = 10.0  # at most one warning about dropped frames this often
_MAX_INBOXES = 64  # threads with an inbox of their own (see Transport.inbox)
_DRAIN_ABOVE = 8  # sockets polled by the receiver above which it drains bursts (_receive_loop)
_DRAIN_BURST = 256  # messages taken at most before the monitors are polled again
_LEN = struct.Struct("<I")


class Transport:
    """The ZeroMQ endpoint of one place.

    Args:
        secret: the job's MAC key (bytes; keys BLAKE2b).
        bind_host: IP address to bind and advertise (e.g. ``"127.0.0.1"``).
        on_message: called on the receiver thread with each authenticated message (bytes).
        on_peer_lost: called on the receiver thread with the id of a watched place whose
            connection broke for good.
        on_peer_down: called on the receiver thread as soon as a watched connection breaks
            (a place that leaves on purpose closes its socket when its process ends).
        dead_timeout: seconds a watched connection may stay down before it is lost.
        connect_grace: seconds a new watched connection may take to come up at all.
        heartbeat: seconds between ZMTP heartbeats on outgoing connections.
        max_message_bytes: bytes of the largest frame a receiving socket accepts (and of
            the largest batch this transport sends).

    Attributes:
        endpoint: ``tcp://ip:port#nonce``, the address other places send to, with the
            receiving socket's nonce (see the module docstring).
        dropped: frames dropped so far; ``drops`` counts them by reason.

    Raises:
        zmq.ZMQError: the address cannot be bound.
    """

    def __init__(
        self,
        secret: bytes,
        bind_host: str,
        on_message: Callable[[bytes], None],
        on_peer_lost: Callable[[int], None],
        dead_timeout: float = 1.0,
        connect_grace: float = 5.0,
        heartbeat: float = 1.0,
        on_peer_down: Callable[[int], None] | None = None,
        max_message_bytes: int = 256 << 20,
    ) -> None:
        self._key = secret
        self._max_bytes = int(max_message_bytes)
        self._on_message = on_message
        self._on_peer_lost = on_peer_lost
        self._on_peer_down = on_peer_down
        self._dead_timeout = dead_timeout
        self._connect_grace = connect_grace
        self._heartbeat_ms = max(1, int(heartbeat * 1000))
        self._ctx = zmq.Context(io_threads=1)
        self._ctx.set(zmq.MAX_SOCKETS, _max_sockets(self._ctx))
        self._pull = self._ctx.socket(zmq.PULL)
        self._pull.setsockopt(zmq.RCVHWM, 0)
        self._pull.setsockopt(zmq.LINGER, 0)
        self._pull.setsockopt(zmq.MAXMSGSIZE, self._max_bytes)
        port = self._pull.bind_to_random_port(f"tcp://{bind_host}")
        self._receiver = _Receiver()
        self.endpoint = f"tcp://{bind_host}:{port}#{self._receiver.salt.hex()}"
        self._outboxes: dict[int, _Outbox] = {}
        self._boxes_lock = threading.Lock()
        self._waker = _Waker(self._ctx, f"inproc://apgaspy-wake-{id(self)}")
        self._new_watches: collections.deque[_Watch] = collections.deque()
        self._unwatch: collections.deque[int] = collections.deque()
        self._watches: dict[int, _Watch] = {}
        self._running = False
        self._thread: threading.Thread | None = None
        self.dropped = 0  # frames dropped (failed authentication, replayed, malformed)
        self.drops: collections.Counter[str] = collections.Counter()
        self._drops_logged = 0  # self.dropped when the last warning was logged
        self._drop_log_at = 0.0  # time.monotonic() of the last warning
        # Traffic counters (frames are batches; bytes include the MAC and the lengths), for
        # measurements: plain integers, so counts from concurrent senders may very rarely
        # lose an increment.
        self.frames_in = self.messages_in = self.bytes_in = 0
        self.frames_out = self.messages_out = self.bytes_out = 0
        self._dirty: collections.deque[int] = collections.deque()  # places with held messages
        self._flush_signal = _allocate_lock()  # released to wake the flusher
        self._flush_signal.acquire()
        self._flusher: threading.Thread | None = None
        self._bind_host = bind_host
        self._local = threading.local()  # .inbox: the calling thread's _Inbox
        self._inboxes: list[_Inbox] = []

    # ------------------------------------------------------------------ signing
    def set_key(self, secret: bytes) -> None:
        """Key the MACs with ``secret`` (before :meth:`start`: a spawned place binds its
        socket before it receives the job secret)."""
        self._key = secret

    def _seal(self, messages: list[bytes], box: _Outbox) -> bytes:
        """One batch frame of ``box``'s stream (the caller holds ``box.lock``): MAC ‖ stream ‖
        counter ‖ (length ‖ message) for each message."""
        box.counter += 1
        head = _HEADER.pack(box.stream, box.counter)
        if len(messages) == 1:
            m = messages[0]
            payload = head + _LEN.pack(len(m)) + m
        else:
            pack = _LEN.pack
            parts = [head]
            for m in messages:
                parts += (pack(len(m)), m)
            payload = b"".join(parts)  # one copy of the messages (head + join made two)
        return blake2b(payload, key=self._key, salt=box.salt,
                       digest_size=_MAC_SIZE).digest() + payload

    def _open(self, frame: bytes, receiver: _Receiver) -> list[memoryview] | str:
        """The messages of a batch frame, or why it is dropped (a wrong MAC, a replay, bad
        framing)."""
        if len(frame) < _HEAD + 4:
            return "bad MAC or framing"
        view = memoryview(frame)
        payload = view[_MAC_SIZE:]
        mac = blake2b(payload, key=self._key, salt=receiver.salt,
                      digest_size=_MAC_SIZE).digest()
        if not compare_digest(view[:_MAC_SIZE], mac):
            return "bad MAC or framing"
        stream, counter = _HEADER.unpack_from(frame, _MAC_SIZE)
        seen = receiver.seen
        if counter <= seen.get(stream, 0):
            return "replayed"
        out = []
        end = len(frame)
        i = _HEAD
        unpack = _LEN.unpack_from
        while i < end:
            if i + 4 > end:
                return "bad MAC or framing"
            (n,) = unpack(frame, i)
            i += 4
            if i + n > end:
                return "bad MAC or framing"
            out.append(view[i:i + n])
            i += n
        seen[stream] = counter
        return out

    def traffic(self) -> dict[str, int]:
        """This place's traffic so far: ``frames_in``/``frames_out`` (batches),
        ``messages_in``/``messages_out`` and ``bytes_in``/``bytes_out`` (whole frames, MAC
        included), for measurements."""
        return {"frames_in": self.frames_in, "messages_in": self.messages_in,
                "bytes_in": self.bytes_in, "frames_out": self.frames_out,
                "messages_out": self.messages_out, "bytes_out": self.bytes_out}

    # ------------------------------------------------------------------ peers
    def add_peer(self, place: int, endpoint: str, watch: bool = False) -> None:
        """Open the connection to ``place`` at ``endpoint`` (``tcp://ip:port#nonce``, an
        :attr:`endpoint` or an inbox's).

        Args:
            place: a place id, or ``(place, endpoint)`` for the inbox of one of its threads
                (:meth:`inbox`); such a connection closes with the place's
                (:meth:`remove_peer`).
            watch: monitor the connection and report its loss through ``on_peer_lost``.
        """
        address, salt = split_endpoint(endpoint)
        with self._boxes_lock:
            if place in self._outboxes:
                return
            sock = self._ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.SNDHWM, 0)
            sock.setsockopt(zmq.LINGER, 5000)
            sock.setsockopt(zmq.HEARTBEAT_IVL, self._heartbeat_ms)
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * self._heartbeat_ms)
            sock.setsockopt(zmq.RECONNECT_IVL, 100)
            if watch:
                mon = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
                self._new_watches.append(_Watch(place, mon))
            sock.connect(address)
            self._outboxes[place] = _Outbox(sock, salt)
        if watch:
            self._wake()

    def remove_peer(self, place: int, linger_s: float = 5.0) -> None:
        """Close the connection to ``place``; queued messages get ``linger_s`` seconds to go.

        The connections to the inboxes of ``place`` (keys ``(place, endpoint)``, see
        :meth:`add_peer`) close with it.
        """
        with self._boxes_lock:
            boxes = [self._outboxes.pop(k) for k in list(self._outboxes)
                     if k == place or (type(k) is tuple and k[0] == place)]
        self._unwatch.append(place)
        self._wake()
        for box in boxes:
            self._close_box(box, place, linger_s)

    def _close_box(self, box: _Outbox, place: int, linger_s: float) -> None:
        with box.lock:
            # A sender that found the lock taken left its message in the queue for the holder;
            # if this is the holder now, send it first ('fin' markers travel this way).
            frames = list(box.queue)
            box.queue.clear()
            if frames and linger_s > 0:
                try:
                    for batch in self._batches(frames):
                        box.socket.send(self._seal(batch, box), _NOBLOCK)
                except zmq.ZMQError:
                    log.debug("%d message(s) to place %d dropped at close", len(frames), place)
            box.closed = True
            box.socket.setsockopt(zmq.LINGER, int(linger_s * 1000))
            box.socket.close()

    def has_peer(self, place: int) -> bool:
        """True when a connection to ``place`` is open."""
        return place in self._outboxes

    # ------------------------------------------------------------------ sending
    def send(self, dest: int, message: bytes) -> None:
        """Send one message to place ``dest``.

        Raises:
            KeyError: there is no connection to ``dest`` (unknown or removed place).
            ValueError: the message is larger than ``max_message_bytes`` allows.
        """
        if len(message) > self._max_bytes - _HEAD - 4:
            self._too_large(message)
        self._outboxes[dest].queue.append(message)
        self.pump(dest)

    def _too_large(self, message: bytes) -> None:
        raise ValueError(
            f"a message of {len(message):,} bytes is larger than a place accepts "
            f"({self._max_bytes:,} bytes with its header: APGAS_MAX_MESSAGE_BYTES)")

    def _batches(self, frames: list[bytes]) -> list[list[bytes]]:
        """``frames`` cut into batches that each fit in ``max_message_bytes``."""
        limit = self._max_bytes - _HEAD
        size = sum(map(len, frames)) + 4 * len(frames)
        if size <= limit:
            return [frames]
        out: list[list[bytes]] = [[]]
        size = 0
        for f in frames:
            n = len(f) + 4
            if out[-1] and size + n > limit:
                out.append([])
                size = 0
            out[-1].append(f)
            size += n
        return out

    def post(self, dest: int, message: bytes) -> None:
        """Queue one message for ``dest`` without sending it yet (see :meth:`pump`).

        Messages posted to one destination leave in the order they were posted.

        Raises:
            KeyError: there is no connection to ``dest``.
            ValueError: the message is larger than ``max_message_bytes`` allows.
        """
        if len(message) > self._max_bytes - _HEAD - 4:
            self._too_large(message)
        self._outboxes[dest].queue.append(message)

    def send_soon(self, dest: int, message: bytes) -> None:
        """Send one message to ``dest``, possibly batched with the ones that follow it.

        The message leaves at once unless it follows the previous ``send_soon`` to ``dest``
        within ``_BURST_S``; then it leaves with its batch (see the module docstring), in
        order with every other message to ``dest``.

        Raises:
            KeyError: there is no connection to ``dest``.
            ValueError: the message is larger than ``max_message_bytes`` allows.
        """
        if len(message) > self._max_bytes - _HEAD - 4:
            self._too_large(message)
        box = self._outboxes[dest]
        box.queue.append(message)
        now = _perf_counter()
        burst = now - box.last < _BURST_S
        box.last = now
        if not burst or len(box.queue) >= _BATCH:
            self.pump(dest)
        elif not box.dirty:
            box.dirty = True
            self._dirty.append(dest)
            self._wake_flusher()

    def _wake_flusher(self) -> None:
        if self._flush_signal.locked():
            try:
                self._flush_signal.release()
            except RuntimeError:  # another thread released it first
                pass

    def flush(self) -> None:
        """Send every batch that waits for the flusher (before the caller blocks)."""
        dirty = self._dirty
        while dirty:
            try:
                dest = dirty.popleft()
            except IndexError:
                return
            box = self._outboxes.get(dest)
            if box is not None:
                box.dirty = False
                self.pump(dest)

    def _flush_loop(self) -> None:
        signal = self._flush_signal
        while self._running:
            signal.acquire()
            self.flush()

    def pump(self, dest: int) -> None:
        """Send what is queued for ``dest`` unless another thread is already doing it."""
        box = self._outboxes.get(dest)
        if box is None:
            return
        q = box.queue
        lock = box.lock
        while q and lock.acquire(False):
            try:
                frames = []
                while q:
                    frames.append(q.popleft())
                if frames and not box.closed:
                    for batch in self._batches(frames):
                        frame = self._seal(batch, box)
                        box.socket.send(frame)
                        self.frames_out += 1
                        self.messages_out += len(batch)
                        self.bytes_out += len(frame)
            finally:
                lock.release()

    # ------------------------------------------------------------------ inboxes
    def inbox(self) -> _Inbox | None:
        """The calling thread's own inbox (made on first use), or ``None`` past
        ``_MAX_INBOXES`` threads.

        A thread that waits for the answer of an ``at`` receives it on its own PULL socket
        and handles it itself, instead of the receiver thread handling it and waking the
        waiter: the wake-up of one thread less on the round trip.  The places that
        answer send every UPDATE of that finish there (the finish id carries the endpoint), so
        the UPDATEs of one place to the finish stay in order.
        """
        box = getattr(self._local, "inbox", None)
        if box is not None or not self._running:
            return box
        with self._boxes_lock:
            if len(self._inboxes) >= _MAX_INBOXES:
                return None
            sock = self._ctx.socket(zmq.PULL)
            sock.setsockopt(zmq.RCVHWM, 0)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.MAXMSGSIZE, self._max_bytes)
            port = sock.bind_to_random_port(f"tcp://{self._bind_host}")
            waker = _Waker(self._ctx, f"inproc://apgaspy-inbox-{id(self)}-{len(self._inboxes)}")
            box = _Inbox(sock, f"tcp://{self._bind_host}:{port}", waker)
            self._inboxes.append(box)
        self._local.inbox = box
        return box

    def on_receiver_thread(self) -> bool:
        """True when the calling thread is this transport's receiver thread."""
        return threading.current_thread() is self._thread

    def wait_inbox(self, box: _Inbox, done: Callable[[], bool]) -> None:
        """Handle the messages of the calling thread's inbox until ``done()`` is true.

        ``done`` is checked before each wait and after each message or wake-up
        (:meth:`_Inbox.release`).

        Raises:
            zmq.ZMQError: the transport closed meanwhile.
        """
        items = box.items
        sock = box.socket
        receiver = box.receiver
        zmq_poll = zmq.zmq_poll
        while not done():
            for s, _ in zmq_poll(items, _POLL_MS):
                if s is sock:
                    self._deliver(sock.recv(_NOBLOCK), receiver)
                else:
                    s.recv(_NOBLOCK)

    # ------------------------------------------------------------------ receiving
    def start(self) -> None:
        """Start the receiver thread."""
        self._running = True
        self._thread = threading.Thread(target=self._receive_loop, name="apgaspy-receiver",
                                        daemon=True)
        self._thread.start()
        self._flusher = threading.Thread(target=self._flush_loop, name="apgaspy-flusher",
                                         daemon=True)
        self._flusher.start()

    def _wake(self) -> None:
        self._waker.wake()

    def _deliver(self, frame: bytes, receiver: _Receiver) -> None:
        messages = self._open(frame, receiver)
        if type(messages) is str:
            self._drop(messages)
            return
        self.frames_in += 1
        self.messages_in += len(messages)
        self.bytes_in += len(frame)
        on_message = self._on_message
        for m in messages:
            try:
                on_message(m)
            except Exception:  # noqa: BLE001 - the receiver thread must survive any message
                log.exception("error while handling a message")

    def _drop(self, why: str) -> None:
        """Count a dropped frame; warn at most once every ``_DROP_LOG_S`` seconds."""
        self.dropped += 1
        self.drops[why] += 1
        now = time.monotonic()
        if now - self._drop_log_at >= _DROP_LOG_S:
            new = self.dropped - self._drops_logged
            self._drop_log_at, self._drops_logged = now, self.dropped
            log.warning("dropped %d frame(s) that failed authentication since the last warning "
                        "(last: %s; %s in all): not unpickled", new, why,
                        ", ".join(f"{n} {k}" for k, n in sorted(self.drops.items())))

    def _receive_loop(self) -> None:
        pull, wake = self._pull, self._waker.rx
        # zmq_poll itself, not zmq.Poller: the Poller rebuilds its list and a dict per call.
        items: list[tuple[zmq.Socket, int]] = [(pull, _POLLIN), (wake, _POLLIN)]
        monitors: dict[zmq.Socket, _Watch] = {}
        zmq_poll = zmq.zmq_poll
        deliver = self._deliver
        receiver = self._receiver
        only_pull = [(pull, _POLLIN)]
        next_check = 0.0
        while self._running:
            try:
                ready = zmq_poll(items, _POLL_MS)
            except zmq.ZMQError:
                if not self._running:
                    break
                raise
            for sock, _ in ready:
                if sock is pull:
                    # One message per poll: a second recv would have to be guarded by
                    # zmq.EVENTS (pyzmq builds an enum per getsockopt) or end in zmq.Again;
                    # zmq_poll answers from libzmq's own state and costs less than either.
                    # A frame of a multipart message (never sent by a place) fails its MAC
                    # on its own, each one counted as dropped.
                    deliver(pull.recv(_NOBLOCK), receiver)
                    if len(items) > _DRAIN_ABOVE:
                        # Place 0 polls a monitor per place: a poll of them all per message
                        # made a burst of P messages cost O(P²) (an empty finish over 512
                        # places: ~1 s on 2 cores).  Messages that are already waiting are
                        # taken with a poll of this socket alone, a bounded burst at a time.
                        for _ in range(_DRAIN_BURST):
                            if not zmq_poll(only_pull, 0):
                                break
                            deliver(pull.recv(_NOBLOCK), receiver)
                elif sock is wake:
                    wake.recv(_NOBLOCK)
                else:
                    self._monitor_events(sock, monitors[sock])
            if self._new_watches or self._unwatch:
                self._update_watches(items, monitors)
            if monitors:
                now = time.monotonic()
                if now >= next_check:  # a dead timeout is seconds: every 50 ms is enough
                    next_check = now + 0.05
                    self._check_watches(items, monitors, now)
        # The loop owns the sockets it polls; close them here.
        for sock in monitors:
            sock.close(0)

    def _monitor_events(self, sock: zmq.Socket, w: _Watch) -> None:
        while True:
            try:
                event = _monitor_event(sock)
            except zmq.Again:
                break
            if event == zmq.EVENT_CONNECTED:
                w.connected = w.ever = True
                w.expired = False
            elif event == zmq.EVENT_DISCONNECTED:
                w.connected = w.expired = False
                w.since = time.monotonic()
                if self._on_peer_down is not None:
                    try:
                        self._on_peer_down(w.place)
                    except Exception:  # noqa: BLE001
                        log.exception("error in on_peer_down(%d)", w.place)

    def _update_watches(self, items: list[tuple[zmq.Socket, int]],
                        monitors: dict[zmq.Socket, _Watch]) -> None:
        while self._new_watches:
            w = self._new_watches.popleft()
            self._watches[w.place] = w
            monitors[w.monitor] = w
            items.append((w.monitor, _POLLIN))
        while self._unwatch:
            gone = self._watches.pop(self._unwatch.popleft(), None)
            if gone is not None:
                monitors.pop(gone.monitor, None)
                items.remove((gone.monitor, _POLLIN))
                gone.monitor.close(0)

    def _check_watches(self, items: list[tuple[zmq.Socket, int]],
                       monitors: dict[zmq.Socket, _Watch], now: float) -> None:
        """Declare lost the watched places whose connection stayed down too long.

        A connection down for longer than its limit is first caught up with
        (:meth:`_catch_up`), at two checks in a row: only if it is still down at the
        second is its place lost, after every message that had arrived from it (see the
        module docstring).  Death detection takes one check interval longer (50 ms).
        """
        for sock, w in list(monitors.items()):
            limit = self._dead_timeout if w.ever else max(self._connect_grace,
                                                          self._dead_timeout)
            if not w.connected and now - w.since > limit:
                if not self._running:
                    return  # closing: what is left is no verdict's business
                self._catch_up(w)
                if w.connected or time.monotonic() - w.since <= limit:
                    continue  # up again (or down again only now)
                if not w.expired:
                    w.expired = True  # the verdict at the next check, after a poll
                    continue
                items.remove((sock, _POLLIN))
                del monitors[sock]
                if w.place in self._watches:
                    del self._watches[w.place]
                sock.close(0)
                try:
                    self._on_peer_lost(w.place)
                except Exception:  # noqa: BLE001
                    log.exception("error while handling the loss of place %d", w.place)

    def _catch_up(self, w: _Watch) -> None:
        """Before a verdict on the place of ``w``: read its monitor's events (its connection
        may be up again) and handle the messages already waiting on the receiving socket, at
        most ``_DRAIN_BURST`` of them (a place's goodbye, sent before its connection closed,
        waits there when this thread did not run for a while)."""
        self._monitor_events(w.monitor, w)
        pull = self._pull
        only_pull = [(pull, _POLLIN)]
        zmq_poll = zmq.zmq_poll
        for _ in range(_DRAIN_BURST):
            if not self._running or not zmq_poll(only_pull, 0):
                return
            self._deliver(pull.recv(_NOBLOCK), self._receiver)

    # ------------------------------------------------------------------ shutdown
    def close(self, linger_s: float = 2.0) -> None:
        """Stop receiving, let queued messages go for up to ``linger_s`` seconds, and close.

        Queued means in ZeroMQ's queue and in a connection's outbox too: a message that a
        sender left there for the thread holding the connection's lock (a place's goodbye,
        sent by the receiver thread while a worker was sending to place 0) leaves with the
        others, although this close may take the lock before the holder looks again.

        Returns after at most ``linger_s`` + 1 seconds: a socket closed earlier with a longer
        linger (the last messages to a released place, which may have died since) would
        otherwise hold the context's termination, and the process, for its whole linger.
        """
        self.flush()
        self._running = False
        self._wake()
        self._wake_flusher()  # the flusher sees _running and ends
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        with self._boxes_lock:
            boxes = list(self._outboxes.items())
            self._outboxes.clear()
        for key, box in boxes:
            # What a sender left queued leaves too: a sender that found the lock taken by
            # this close left its message (a place's goodbye) for the holder.
            self._close_box(box, key if type(key) is int else key[0], linger_s)
        with self._boxes_lock:
            for inbox in self._inboxes:
                inbox.waker.close()
                inbox.socket.close(0)
            self._inboxes.clear()
        self._waker.close()
        self._pull.close(0)
        ender = threading.Thread(target=self._ctx.term, name="apgaspy-zmq-term", daemon=True)
        ender.start()
        ender.join(linger_s + 1.0)
        if ender.is_alive():
            log.debug("messages to departed places were dropped at close")
