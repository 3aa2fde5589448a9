"""The numpy SHA-1 lane kernel of UTS: the 80 rounds of SHA-1 on uint32 lane arrays of many
messages at once, with constant folding of the first rounds and of the constant message
words.  The tree's definition and the kernel's description are the docstring of
:mod:`benchmarks.kernels.uts`, which holds the bag and re-exports the names used elsewhere.
"""

from __future__ import annotations

import numpy as np

_M32 = 0xFFFFFFFF
_H = (0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0)
_K = (0x5A827999, 0x6ED9EBA1, 0x8F1BBCDC, 0xCA62C1D6)
# The 16 message words (None: a lane input, words 0..4 always are).  A child message is
# digest(20) ‖ index(4) ‖ 0x80 ‖ zeros ‖ bit length 192; a root message is 16 zero bytes ‖
# seed(4) ‖ 0x80 ‖ zeros ‖ bit length 160.
_CHILD_TEMPLATE: tuple[int | None, ...] = (None,) * 6 + (0x80000000,) + (0,) * 8 + (192,)
_ROOT_TEMPLATE: tuple[int | None, ...] = (None,) * 5 + (0x80000000,) + (0,) * 9 + (160,)


def _rotl(x: int, s: int) -> int:
    return ((x << s) | (x >> (32 - s))) & _M32


def _r30(x: int) -> int:
    return _rotl(x, 30)


def _ch(b: int, c: int, d: int) -> int:
    return (b & c) ^ (~b & d & _M32)


# The numpy ufuncs are bound once; calls pass `out` positionally and constants as 0-d
# uint32 arrays, which is two to three times cheaper per call than `out=` keywords and
# Python int operands (they are converted on every call).
_xor, _and, _or, _add = np.bitwise_xor, np.bitwise_and, np.bitwise_or, np.add
_shl, _shr = np.left_shift, np.right_shift
_CONSTS: dict[int, np.ndarray] = {}


def _c(v: int) -> np.ndarray:
    """A cached 0-d uint32 array holding ``v mod 2**32``."""
    v &= _M32
    a = _CONSTS.get(v)
    if a is None:
        a = _CONSTS[v] = np.array(v, dtype=np.uint32)
    return a


class _Sha1Lanes:
    """Preallocated buffers and the round code of the lane-parallel SHA-1 (one thread).

    Inputs are written into ``self.w[0..4][:L]`` (message words 0..4) and, for child
    messages, ``self.w[5][:L]`` (the child index); ``compress`` then hashes the ``L`` lanes.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        # Rows a little longer than a power of two: buffers whose starts are a multiple of
        # 4 KiB apart compete for the same L1 sets and run measurably slower.
        row = capacity + 48
        self._ring = np.empty((16, row), dtype=np.uint32)
        self._state = np.empty((7, row), dtype=np.uint32)
        self.word4 = np.empty(row, dtype=np.uint32)
        self.w = [self._ring[i] for i in range(16)]

    def compress(
        self, lanes: int, full: int, template: tuple[int | None, ...]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """Hash ``lanes`` messages: word 4 of every digest, words 0..3 of the first ``full``.

        Args:
            lanes: number of messages (1 ≤ lanes ≤ capacity) whose words are in ``self.w``.
            full: the first ``full`` lanes (0 ≤ full ≤ lanes) get their whole digest; the
                others only word 4, which is what a child count needs (rounds 76..79 are
                skipped for them).
            template: the 16 message words; ``None`` marks a lane word (words 0..4 always
                are), an int a constant.

        Returns:
            ``(w4, [w0, w1, w2, w3])``: uint32 views into this object's buffers, valid until
            the next call; ``w4`` has length ``lanes``, the others length ``full``.
        """
        n = lanes
        ring = [r[:n] for r in self.w]
        st = [r[:n] for r in self._state]
        t1, t2 = st[5], st[6]
        h0, h1, h2, h3, h4 = _H
        k0 = _K[0]

        # Rounds 0..4: the initial state is a constant, so only the terms that touch the
        # message are lane work (38 ufunc calls instead of 65).  The state of round t is
        # a = A[t-1], b = A[t-2], c = R(A[t-3]), d = R(A[t-4]), e = R(A[t-5]) with R =
        # rotl30 and A[-1..-5] standing for the initial words.
        a0, a1, a2, a3, a4 = st[0], st[1], st[2], st[3], st[4]
        _add(ring[0], _c(_rotl(h0, 5) + _ch(h1, h2, h3) + h4 + k0), a0)
        # round 1: a = A0, b = h0, c = R(h1), d = h2, e = h3
        _rot(a0, 5, a1, t1)
        _add(a1, ring[1], a1)
        _add(a1, _c(_ch(h0, _r30(h1), h2) + h3 + k0), a1)
        # round 2: a = A1, b = A0, c = R(h0), d = R(h1), e = h2; Ch = d ^ (b & (c ^ d))
        _rot(a1, 5, a2, t1)
        _and(a0, _c(_r30(h0) ^ _r30(h1)), t1)
        _xor(t1, _c(_r30(h1)), t1)
        _add(a2, t1, a2)
        _add(a2, ring[2], a2)
        _add(a2, _c(h2 + k0), a2)
        # round 3: a = A2, b = A1, c = R(A0), d = R(h0), e = R(h1)
        _rot(a0, 30, a0, t1)
        _rot(a2, 5, a3, t1)
        _xor(a0, _c(_r30(h0)), t1)
        _and(t1, a1, t1)
        _xor(t1, _c(_r30(h0)), t1)
        _add(a3, t1, a3)
        _add(a3, ring[3], a3)
        _add(a3, _c(_r30(h1) + k0), a3)
        # round 4: a = A3, b = A2, c = R(A1), d = R(A0), e = R(h0)
        _rot(a1, 30, a1, t1)
        _rot(a3, 5, a4, t1)
        _xor(a1, a0, t1)
        _and(t1, a2, t1)
        _xor(t1, a0, t1)
        _add(a4, t1, a4)
        _add(a4, ring[4], a4)
        _add(a4, _c(_r30(h0) + k0), a4)
        _rot(a2, 30, a2, t1)  # round 5 expects c = R(A2)
        a, b, c, d, e = a4, a3, a2, a1, a0

        steps, consts = _round_plan(template)
        opnd = ring + consts
        c1, c2, c5, c27, c30, c31 = _c(1), _c(2), _c(5), _c(27), _c(30), _c(31)
        # The rotations are written out (shift, shift, or) because a helper call per
        # rotation costs about 5 % of the whole hash in Python overhead.
        for t, xors, adds in steps:
            if t == 76:
                # Digest word 4 is R(A75) + h4 and A75 is `a` now: finish it for all lanes,
                # then run the last four rounds on the first `full` lanes only.
                w4 = self.word4[:n]
                _rot(a, 30, w4, t1)
                _add(w4, _c(h4), w4)
                if full == 0:
                    return w4, []
                opnd = [r[:full] for r in ring] + consts
                a, b, c, d, e, t1, t2 = (x[:full] for x in (a, b, c, d, e, t1, t2))
            if xors:
                # w[t] = rotl1(w[t-3] ^ w[t-8] ^ w[t-14] ^ w[t-16]) into ring[t % 16]
                dst = opnd[t % 16]
                for i, j in xors:
                    _xor(opnd[i], opnd[j], dst)
                _shr(dst, c31, t1)
                _shl(dst, c1, dst)
                _or(dst, t1, dst)
            # e += rotl5(a) + f(b, c, d) + K + W; the sum is built in e's buffer, which
            # becomes the next a.
            _shl(a, c5, t1)
            _shr(a, c27, t2)
            _or(t1, t2, t1)
            _add(e, t1, e)
            if t < 20:
                _xor(c, d, t2)
                _and(t2, b, t2)
                _xor(t2, d, t2)
            elif t < 40 or t >= 60:
                _xor(b, c, t2)
                _xor(t2, d, t2)
            else:
                # Maj(b, c, d) = (b & c) + (d & (b ^ c)): the two terms share no bits.
                _and(b, c, t2)
                _add(e, t2, e)
                _xor(b, c, t2)
                _and(t2, d, t2)
            _add(e, t2, e)
            for i in adds:
                _add(e, opnd[i], e)
            _shr(b, c2, t1)
            _shl(b, c30, b)
            _or(b, t1, b)
            a, b, c, d, e = e, a, b, c, d
        words = [a, b, c, d]
        for i in range(4):
            _add(words[i], _c(_H[i]), words[i])
        return self.word4[:lanes], words


def _rot(x: np.ndarray, s: int, out: np.ndarray, tmp: np.ndarray) -> None:
    """out = rotl(x, s) on uint32 lanes; ``out`` may be ``x``, ``tmp`` is clobbered."""
    _shr(x, _c(32 - s), tmp)
    _shl(x, _c(s), out)
    _or(out, tmp, out)


_Step = tuple[int, tuple[tuple[int, int], ...], tuple[int, ...]]
_PLANS: dict[tuple[int | None, ...], tuple[list[_Step], list[np.ndarray]]] = {}


def _round_plan(template: tuple[int | None, ...]) -> tuple[list[_Step], list[np.ndarray]]:
    """The message-dependent operations of rounds 5..79 for a message template (cached).

    Returns ``(steps, consts)``.  Operands are numbered: 0..15 are the ring slots (word t
    lives in slot t % 16), 16 + i is ``consts[i]`` (a 0-d uint32 array).  Step
    ``(t, xors, adds)``: when ``xors`` is not empty, word t is built in slot t % 16 by
    ``slot = opnd[i] ^ opnd[j]`` for each ``(i, j)`` (in place over word t-16, whose slot
    it takes; constant words folded into one operand), then rotated left by 1; ``adds`` are
    the operands that round t adds to ``e`` (the word and K, or their constant sum).
    """
    plan = _PLANS.get(template)
    if plan is not None:
        return plan
    consts: list[np.ndarray] = []

    def const(v: int) -> int:
        consts.append(_c(v))
        return 16 + len(consts) - 1

    w: list[int | None] = [None] * 5 + list(template[5:]) + [None] * 64
    steps: list[_Step] = []
    for t in range(5, 80):
        xors: list[tuple[int, int]] = []
        if t >= 16:
            dst = t % 16
            folded = 0
            slots = []
            for s in (t - 3, t - 8, t - 14, t - 16):
                ws = w[s]
                if ws is None:
                    slots.append(s % 16)
                else:
                    folded ^= ws
            if w[t - 16] is None:  # dst holds word t-16, the last of `slots`
                xors = [(dst, x) for x in slots[:-1]]
            elif len(slots) == 1:
                xors = [(slots[0], const(folded))]
                folded = 0
            else:
                xors = [(slots[0], slots[1])] + [(dst, x) for x in slots[2:]]
            if folded:
                xors.append((dst, const(folded)))
        k = _K[t // 20]
        wt = w[t]
        adds = (t % 16, const(k)) if wt is None else (const(k + wt),)
        steps.append((t, tuple(xors), adds))
    plan = _PLANS[template] = (steps, consts)
    return plan
