"""The compiled (numba) UTS kernel: SHA-1 over lanes, child counts and the bag's process loop.

Used by :mod:`benchmarks.kernels.uts` when :func:`benchmarks.kernels._backend.backend` is
``"numba"``; imported only then (importing it imports numba).  It computes exactly what the
numpy kernel computes, on the same data:

* SHA-1 (FIPS 180-4) of the one-block UTS messages: a child message is the parent's 20-byte
  digest and the child index (4 bytes, big-endian), a root message 16 zero bytes and the
  seed.  The 80 rounds are written out straight (one statement per round and per message
  word, the state variables renamed instead of moved, as in the usual C code of SHA-1) inside
  a loop over lanes, with the message's constant words as constants; LLVM folds the constants
  and vectorises the loop across lanes (16 lanes per AVX-512 register, one ``vprold`` per
  rotation where the CPU has it).  The straight-line source is generated at import by
  :func:`_lane_loop_source` and compiled with this file's name, so numba caches it like any
  function of the file; lanes that only need their child count stop after round 75 (digest
  word 4 is final there).  Written as calls of small inlined round functions instead, the
  same code compiles eight times slower; without inlining, LLVM does not vectorise it.
* Child counts from the integer threshold table of the numpy path (``T[k]`` = least ``v``
  with ``n(v) >= k``, computed with a correctly rounded ``log``): ``n(v)`` = the number of
  thresholds ``<= v``, found by a branch-free binary search (7 steps over 127 entries).  No floating
  point, so no libm difference can change a count.
* :func:`process`: the bag's loop over the interval stack of :class:`~benchmarks.kernels.uts.
  UTSBag` (columns: digest words 0..4, ``lo``, ``hi``, budget), in batches of children taken
  from the top of the stack.  The stack's layout and meaning are the numpy path's, so a bag
  processed here can be split, merged, pickled and continued by either backend.

Every function is compiled once per machine into numba's on-disk cache
(:func:`benchmarks.kernels._backend.cache_dir`); :func:`benchmarks.kernels.uts.warm_up`
compiles or loads them all.  They release the GIL (``nogil``), so the other threads of a place
(its messages, GLB's answers to thieves) run while it computes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

u32 = np.uint32

_H0, _H1, _H2, _H3, _H4 = 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0


# -- SHA-1 over lanes: straight-line source --------------------------------------------------
# Numba types an operation on two uint32 values as uint64; every state word and message word is
# truncated back to uint32 where it is assigned, which LLVM turns into 32-bit vector operations.

_K = (0x5A827999, 0x6ED9EBA1, 0x8F1BBCDC, 0xCA62C1D6)
_H = (_H0, _H1, _H2, _H3, _H4)
# A child message: words 0..4 the parent's digest, 5 the index, 6 the padding bit, 7..14 zero,
# 15 the length in bits (24 bytes).
_CHILD_WORDS = ("par[0, l]", "par[1, l]", "par[2, l]", "par[3, l]", "par[4, l]", "idx[l]",
                "u32(0x80000000)") + ("u32(0)",) * 8 + ("u32(192)",)


def _lane_loop_source(name: str, rounds: int) -> str:
    """Source of ``name(par, idx, out, k)``: SHA-1 of the ``k`` child messages (par[:, l] ‖
    idx[l]), straight-line rounds inside the loop over lanes.

    ``rounds`` = 80: ``out`` (5, >= k) gets the whole digests; ``rounds`` = 76: ``out`` (>= k,)
    gets digest word 4 only (rounds 76..79 do not change it: it is ``rotl30(A75) + H4``).
    """
    ind = " " * 8
    lines = [f"def {name}(par, idx, out, k):", "    for l in range(k):"]
    lines += [f"{ind}w{i} = {w}" for i, w in enumerate(_CHILD_WORDS)]
    lines += [f"{ind}{v} = u32({h:#x})" for v, h in zip("abcde", _H, strict=True)]
    st = ["a", "b", "c", "d", "e"]
    for t in range(rounds):
        a, b, c, d, e = st
        if t >= 16:
            i = t % 16
            lines.append(f"{ind}x = w{(t - 3) % 16} ^ w{(t - 8) % 16} ^ w{(t - 14) % 16} ^ w{i}")
            lines.append(f"{ind}w{i} = u32((x << 1) | (x >> 31))")
        if t < 20:
            f = f"({d} ^ ({b} & ({c} ^ {d})))"
        elif 40 <= t < 60:
            f = f"(({b} & {c}) | ({d} & ({b} | {c})))"
        else:
            f = f"({b} ^ {c} ^ {d})"
        lines.append(f"{ind}{e} = u32((({a} << 5) | ({a} >> 27)) + {f} + {e} + "
                     f"{_K[t // 20]:#x} + w{t % 16})")
        lines.append(f"{ind}{b} = u32(({b} << 30) | ({b} >> 2))")
        st = [e, a, b, c, d]
    if rounds == 80:
        lines += [f"{ind}out[{i}, l] = u32({v} + {h:#x})"
                  for i, (v, h) in enumerate(zip(st, _H, strict=True))]
    else:
        lines.append(f"{ind}out[l] = u32((({st[0]} << 30) | ({st[0]} >> 2)) + {_H4:#x})")
    return "\n".join(lines) + "\n"


def _compile_lane_loops() -> tuple[Any, Any]:
    made = []
    for name, rounds in (("sha1_children", 80), ("sha1_word4", 76)):
        # Defined in this module's namespace and compiled with this file's name, as if
        # written here: numba's cache finds a function by its file and module, and keys it
        # by its bytecode, so the generated functions are cached like the others.
        exec(compile(_lane_loop_source(name, rounds), __file__, "exec"), globals())
        made.append(njit(cache=True, nogil=True)(globals()[name]))
    return made[0], made[1]


sha1_children, sha1_word4 = _compile_lane_loops()
"""``sha1_children(par, idx, out, k)``: ``out[:, l]`` = SHA-1(``par[:, l]`` ‖ ``idx[l]``) for
lanes ``l < k`` (uint32 arrays, ``par`` and ``out`` of shape (5, >= k), big-endian digest
words); ``sha1_word4(par, idx, out, k)``: only digest word 4, ``out`` of shape (>= k,)."""


# -- child counts -------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def child_counts(word4, tab, out):
    """``out[l]`` = the child count of a digest whose word 4 is ``word4[l]``.

    ``n(v)``, ``v`` = ``word4[l]`` without its top bit, is the number of thresholds
    ``tab[j] = T[j + 1]`` that are ``<= v`` (``tab``: 127 sorted uint32 entries, those after
    ``T[96]`` equal to 2**31), found by a branch-free binary search; ``out`` int64.
    """
    for j in range(word4.shape[0]):
        v = u32(word4[j] & 0x7FFFFFFF)
        p = 0
        if tab[p + 63] <= v:
            p += 64
        if tab[p + 31] <= v:
            p += 32
        if tab[p + 15] <= v:
            p += 16
        if tab[p + 7] <= v:
            p += 8
        if tab[p + 3] <= v:
            p += 4
        if tab[p + 1] <= v:
            p += 2
        if tab[p] <= v:
            p += 1
        out[j] = p


# -- the bag's loop ------------------------------------------------------------------------------


@njit(cache=True, nogil=True)
def process(stack, m, n, par_in, idx_in, bud_in, out, cnt, par_lf, idx_lf, tab):
    """Hash up to ``n`` children off the top of an interval stack, in batches; count and push.

    Args:
        stack: uint32 (8, capacity): columns ``0 .. m-1`` are intervals (rows 0..4 the
            parent's digest, 5 ``lo``, 6 ``hi``, 7 the children's budget), top last.
        m: intervals on the stack.
        n: children to hash at most.
        par_in, idx_in, bud_in, out, cnt, par_lf, idx_lf: lane buffers of one batch
            (at least ``lanes`` = ``idx_in.shape[0]`` columns or entries each): parents,
            indices and budgets of the children that are expanded, their digests and child
            counts, and parents and indices of the children that are only counted (budget 1).
        tab: the thresholds, as :func:`child_counts`.

    Returns:
        ``(m, hashed, counted)``: the new number of intervals, the children hashed and the
        nodes counted.  Stops early, before a batch, when fewer than ``lanes`` free columns
        are left (the caller grows the stack and calls again) or the stack is empty.
    """
    lanes = idx_in.shape[0]
    cap = stack.shape[1]
    hashed = 0
    counted = 0
    while hashed < n and m > 0 and m + lanes <= cap:
        want = min(lanes, n - hashed)
        taken = 0
        k_in = 0
        k_lf = 0
        while taken < want and m > 0:
            j = m - 1
            lo = np.int64(stack[5, j])
            hi = np.int64(stack[6, j])
            c = min(hi - lo, want - taken)
            start = hi - c
            budget = stack[7, j]
            p0, p1, p2, p3, p4 = stack[0, j], stack[1, j], stack[2, j], stack[3, j], stack[4, j]
            if budget > 1:
                b = u32(budget - 1)
                for q in range(k_in, k_in + c):
                    par_in[0, q] = p0
                    par_in[1, q] = p1
                    par_in[2, q] = p2
                    par_in[3, q] = p3
                    par_in[4, q] = p4
                    idx_in[q] = u32(start + q - k_in)
                    bud_in[q] = b
                k_in += c
            else:
                for q in range(k_lf, k_lf + c):
                    par_lf[0, q] = p0
                    par_lf[1, q] = p1
                    par_lf[2, q] = p2
                    par_lf[3, q] = p3
                    par_lf[4, q] = p4
                    idx_lf[q] = u32(start + q - k_lf)
                k_lf += c
            taken += c
            if start == lo:
                m -= 1
            else:
                stack[6, j] = u32(start)
        hashed += taken
        counted += taken
        if k_lf:
            # the hash, then the counts, each a loop of its own: with the table look-ups
            # inside, LLVM does not vectorise the hash
            w4 = out[0, :k_lf]
            sha1_word4(par_lf, idx_lf, w4, k_lf)
            child_counts(w4, tab, cnt[:k_lf])
            counted += cnt[:k_lf].sum()
        if k_in:
            sha1_children(par_in, idx_in, out, k_in)
            child_counts(out[4, :k_in], tab, cnt[:k_in])
            for q in range(k_in):
                if cnt[q] > 0:
                    stack[0, m] = out[0, q]
                    stack[1, m] = out[1, q]
                    stack[2, m] = out[2, q]
                    stack[3, m] = out[3, q]
                    stack[4, m] = out[4, q]
                    stack[5, m] = 0
                    stack[6, m] = u32(cnt[q])
                    stack[7, m] = bud_in[q]
                    m += 1
    return m, hashed, counted
