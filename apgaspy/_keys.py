"""Handing the job secret to a new place so that it never crosses a wire in a usable form.

The job secret (32 random bytes, :func:`new_secret`) keys the MAC of every batch between
places (:mod:`apgaspy._transport`).  Whoever learns it can make any place run any code, so it
must not travel in the clear, yet every start needs it at every place: ranks of ``mpiexec``,
places forked by a launcher on another host, places of a grow.  The messages that carry it go
over MPI, whose traffic (Hydra's proxies, MPICH's TCP channel) is not encrypted.

So the secret travels *sealed* (libsodium's ``crypto_box_seal`` through PyNaCl, the anonymous
public-key box: an ephemeral X25519 key agreement, then XSalsa20-Poly1305)::

    new place                                   the place that holds the secret
    ─────────                                   ───────────────────────────────
    KeyPair(): a fresh X25519 key pair
    its public key (32 bytes) ───────────────►  seal(secret, public key) = 80 bytes
                              ◄───────────────  (only the private key, which never left
    KeyPair.open(box) = the secret               the new place's memory, opens it)

A passive observer of every packet sees two public keys and a box and learns nothing it could
sign with.  An active attacker who can rewrite the MPI traffic at start-up (put its own public
key in place of a place's) could learn the secret; such an attacker can also drive MPI's
process manager, which has no authentication of its own, so this design does not claim more
than MPI gives (docs/reference/security.md says what remains open).

References: D. J. Bernstein, "Curve25519: new Diffie-Hellman speed records" (PKC 2006);
libsodium, "Sealed boxes"; PyNaCl's :class:`nacl.public.SealedBox`.
"""

from __future__ import annotations

import os

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

__all__ = ["SECRET_BYTES", "KeyPair", "new_secret", "seal"]

SECRET_BYTES = 32
"""Bytes of a job secret."""


def new_secret() -> bytes:
    """A fresh job secret: :data:`SECRET_BYTES` bytes from the OS's random source."""
    return os.urandom(SECRET_BYTES)


def seal(secret: bytes, public_key: bytes) -> bytes:
    """``secret`` sealed to the holder of ``public_key`` (32 bytes, from :class:`KeyPair`).

    Returns ``len(secret) + 48`` bytes that only the matching private key opens.

    Raises:
        ValueError: ``public_key`` is not 32 bytes.
    """
    if not isinstance(public_key, bytes) or len(public_key) != 32:
        raise ValueError(f"a place's public key has 32 bytes, got {public_key!r:.40}")
    return bytes(SealedBox(PublicKey(public_key)).encrypt(secret))


class KeyPair:
    """A new place's one-time X25519 key pair (the private half never leaves this object).

    Attributes:
        public: the public key, 32 bytes, to send to the place that holds the secret.
    """

    __slots__ = ("_private", "public")

    def __init__(self) -> None:
        self._private = PrivateKey.generate()
        self.public: bytes = bytes(self._private.public_key)

    def open(self, box: bytes) -> bytes:
        """The secret inside ``box`` (made by :func:`seal` with :attr:`public`).

        Raises:
            ValueError: ``box`` was not sealed to this key pair, or was altered on the way.
        """
        try:
            secret = SealedBox(self._private).decrypt(bytes(box))
        except (CryptoError, TypeError) as exc:
            raise ValueError(f"the job secret's box does not open: {exc}") from None
        if len(secret) != SECRET_BYTES:
            raise ValueError(f"the job secret has {SECRET_BYTES} bytes, got {len(secret)}")
        return secret
