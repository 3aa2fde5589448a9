"""A passive packet capture for the tests: every frame that crosses one network interface, read
from an ``AF_PACKET`` socket (packet(7)) on a thread, as an observer on the path would see it.

Needs root (``CAP_NET_RAW``); :func:`can_capture` tells.  The tests search the capture for a
secret in every form it could be sent in (:func:`forms`).
"""

from __future__ import annotations

import base64
import select
import socket
import threading

ETH_P_ALL = 0x0003


def can_capture() -> bool:
    """True when this process may open a raw packet socket."""
    try:
        socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL)).close()
    except (OSError, AttributeError):
        return False
    return True


class Capture:
    """Every frame on ``interface`` from :meth:`start` to :meth:`stop`, kept in memory.

    Args:
        interface: a network interface of the calling process's namespace (``"lo"``), or
            ``None`` for all of them (a bridge's own device does not see the frames it
            forwards between its ports: capture the ports).
        limit: bytes kept at most (a bound on the test's memory); later frames are counted
            in ``lost``.
    """

    def __init__(self, interface: str | None = "lo", limit: int = 1 << 30) -> None:
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
        if interface:
            self._sock.bind((interface, 0))
        self._sock.setblocking(False)
        self.frames: list[bytes] = []
        self.size = 0
        self.lost = 0
        self._limit = limit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capture", daemon=True)

    def start(self) -> Capture:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._sock], [], [], 0.1)
            if not ready:
                continue
            while True:
                try:
                    frame = self._sock.recv(1 << 17)
                except BlockingIOError:
                    break
                if self.size + len(frame) > self._limit:
                    self.lost += 1
                    continue
                self.frames.append(frame)
                self.size += len(frame)

    def stop(self) -> bytes:
        """End the capture; return every frame kept, joined."""
        self._stop.set()
        self._thread.join(5)
        self._sock.close()
        return b"".join(self.frames)


def forms(secret: bytes) -> list[bytes]:
    """The ways ``secret`` could appear on a wire: raw, hex (both cases), base64 (standard
    and URL-safe, with and without padding)."""
    out = [secret, secret.hex().encode(), secret.hex().upper().encode()]
    for enc in (base64.b64encode(secret), base64.urlsafe_b64encode(secret)):
        out += [enc, enc.rstrip(b"=")]
    return out


def found_in(data: bytes, secret: bytes) -> list[str]:
    """The forms of ``secret`` (:func:`forms`) that occur in ``data``, named."""
    names = ["raw", "hex", "HEX", "base64", "base64 unpadded", "base64url",
             "base64url unpadded"]
    return [n for n, f in zip(names, forms(secret), strict=True) if f in data]


__all__ = ["Capture", "can_capture", "forms", "found_in"]


def _main() -> None:
    """``python capture.py IFACE OUT``: capture IFACE (``all``: every interface) in this
    process's network namespace (e.g. under ``ip netns exec``) until standard input closes,
    then write the frames to OUT."""
    import sys

    cap = Capture(None if sys.argv[1] == "all" else sys.argv[1]).start()
    print("capturing", flush=True)
    sys.stdin.read()
    data = cap.stop()
    with open(sys.argv[2], "wb") as fh:
        fh.write(data)


if __name__ == "__main__":
    _main()
