"""The compiled (numba) Monte-Carlo π kernel of :mod:`benchmarks.kernels.pi`.

Imported only when the backend is numba (:func:`benchmarks.kernels.backend`).  It draws the
same words as the numpy kernel and counts the same samples: SFC64 (Chris Doty-Humphrey's
Small Fast Chaotic generator, 64-bit variant, as numpy's ``SFC64`` bit generator implements
it) is written out here and started from the numpy generator's state, and the sample layout
of ``pi.py`` is applied to each block, so the hit counts are identical.  The gain is fusion:
the numpy kernel writes every block's words to memory and then runs about fifteen array
passes over them; here one loop makes the words (its state in registers) and one loop tests
the samples, without temporaries.

``tasks_hits`` also seeds the tasks it begins: it computes numpy's
``SFC64(SeedSequence([seed, task]))`` starting state itself (``task_state``, below), so that
one call draws the samples of many tasks, begun or not, without the GIL and without a
Python-level generator object per task.
"""

from __future__ import annotations

from . import _backend

_backend.numba_available()  # sets NUMBA_CACHE_DIR before numba is imported

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

__all__ = ["task_state", "tasks_hits"]

_HALF = 1 << 15  # words in half a block (pi._HALF)
_FIELD = np.uint64((1 << 21) - 1)
_THRESHOLD = np.uint64((1 << 42) - 2_668_942)  # pi._THRESHOLD

# numpy's SeedSequence constants (numpy/random/bit_generator.pyx): the pool of four uint32
# words is mixed with hash constant INIT_A/MULT_A and read out with INIT_B/MULT_B.
_POOL = 4
_INIT_A = np.uint32(0x43B0D7E5)
_MULT_A = np.uint32(0x931E8875)
_INIT_B = np.uint32(0x8B51F9DD)
_MULT_B = np.uint32(0x58F38DED)
_MIX_MULT_L = np.uint32(0xCA01F9DD)
_MIX_MULT_R = np.uint32(0x4973F715)
_XSHIFT = np.uint32(16)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def _hashmix(value, hash_const):  # type: ignore[no-untyped-def]
    """SeedSequence's ``hashmix``: returns ``(mixed value, next hash constant)`` (uint32)."""
    value = np.uint32(value ^ hash_const)
    hash_const = np.uint32(hash_const * _MULT_A)
    value = np.uint32(value * hash_const)
    value = np.uint32(value ^ (value >> _XSHIFT))
    return value, hash_const


@njit(cache=True, nogil=True, inline="always")
def _mix(x, y):  # type: ignore[no-untyped-def]
    """SeedSequence's ``mix`` of two uint32 words."""
    result = np.uint32(np.uint32(_MIX_MULT_L * x) - np.uint32(_MIX_MULT_R * y))
    return np.uint32(result ^ (result >> _XSHIFT))


@njit(cache=True, nogil=True, inline="always")
def _sfc64_round(state):  # type: ignore[no-untyped-def]
    """One SFC64 step on ``state`` (``uint64[4]``: a, b, c, counter), in place; returns the
    output word."""
    a = state[0]
    b = state[1]
    c = state[2]
    out = a + b + state[3]
    state[3] += np.uint64(1)
    state[0] = b ^ (b >> np.uint64(11))
    state[1] = c + (c << np.uint64(3))
    state[2] = ((c << np.uint64(24)) | (c >> np.uint64(40))) + out
    return out


@njit(cache=True, nogil=True)
def task_state(seed_words, task, state):  # type: ignore[no-untyped-def]
    """Write into ``state`` the starting state of ``SFC64(SeedSequence([seed, task]))``.

    numpy's algorithm (``numpy/random/bit_generator.pyx``, ``SeedSequence``, and
    ``numpy/random/_sfc64.pyx``): the entropy ``[seed, task]`` becomes uint32 words (each
    integer's 32-bit words, least significant first; 0 is one word 0), which are hashed into a
    pool of four words (``mix_entropy``); ``generate_state(3, uint64)`` reads six uint32 words
    out of the pool (pairs, low word first, make three uint64); SFC64 takes them as
    ``a, b, c`` with counter 1 and discards its first 12 outputs.

    Args:
        seed_words: ``uint32`` array, the seed's 32-bit words (least significant first; ``[0]``
            for seed 0).
        task: the task index (``0 <= task < 2**63``).
        state: ``uint64`` array of 4, overwritten with ``[a, b, c, counter]``.
    """
    n_seed = seed_words.shape[0]
    entropy = np.zeros(n_seed + 2, dtype=np.uint32)
    entropy[:n_seed] = seed_words
    t = np.uint64(task)
    entropy[n_seed] = np.uint32(t & _LOW32)
    n = n_seed + 1
    if t >> np.uint64(32):
        entropy[n] = np.uint32(t >> np.uint64(32))
        n += 1
    mixer = np.zeros(_POOL, dtype=np.uint32)
    hash_const = _INIT_A
    for i in range(_POOL):
        v = entropy[i] if i < n else np.uint32(0)
        mixer[i], hash_const = _hashmix(v, hash_const)
    for i_src in range(_POOL):
        for i_dst in range(_POOL):
            if i_src != i_dst:
                h, hash_const = _hashmix(mixer[i_src], hash_const)
                mixer[i_dst] = _mix(mixer[i_dst], h)
    for i_src in range(_POOL, n):
        for i_dst in range(_POOL):
            h, hash_const = _hashmix(entropy[i_src], hash_const)
            mixer[i_dst] = _mix(mixer[i_dst], h)
    hash_b = _INIT_B
    for i in range(3):
        words = np.uint64(0)
        for half in range(2):
            v = np.uint32(mixer[(2 * i + half) % _POOL] ^ hash_b)
            hash_b = np.uint32(hash_b * _MULT_B)
            v = np.uint32(v * hash_b)
            v = np.uint32(v ^ (v >> _XSHIFT))
            words |= np.uint64(v) << np.uint64(32 * half)
        state[i] = words
    state[3] = np.uint64(1)
    for _ in range(12):
        _sfc64_round(state)


@njit(cache=True, nogil=True, inline="always")
def _blocks_hits(state, blocks, last, buf):  # type: ignore[no-untyped-def]
    """Hits among the samples of the next ``blocks`` blocks of one SFC64 stream.

    Args:
        state: ``uint64`` array ``[a, b, c, counter]``, the generator's state; advanced in
            place by ``blocks * 2**16`` words.
        blocks: whole blocks to draw (>= 1).
        last: samples counted in the last block (1 .. ``3 * 2**15``; the others count all
            of theirs).
        buf: ``uint64`` scratch array of ``2**16`` words.

    Returns:
        The number of hits (int).
    """
    a = state[0]
    b = state[1]
    c = state[2]
    counter = state[3]
    hits = 0
    for blk in range(blocks):
        for j in range(2 * _HALF):
            out = a + b + counter
            counter += np.uint64(1)
            a = b ^ (b >> np.uint64(11))
            b = c + (c << np.uint64(3))
            c = ((c << np.uint64(24)) | (c >> np.uint64(40))) + out
            buf[j] = out
        take = 3 * _HALF if blk < blocks - 1 else last
        # Sample k * 2**15 + j is field k of words j (x) and j + 2**15 (y).
        for k in range(3):
            shift = np.uint64(0 if k == 0 else (21 if k == 1 else 43))
            count = min(take - k * _HALF, _HALF)
            for j in range(count):
                x = (buf[j] >> shift) & _FIELD
                y = (buf[j + _HALF] >> shift) & _FIELD
                hits += (x * x + y * y) < _THRESHOLD
    state[0] = a
    state[1] = b
    state[2] = c
    state[3] = counter
    return hits


@njit(cache=True, nogil=True)
def tasks_hits(seed_words, plan, states, buf):  # type: ignore[no-untyped-def]
    """Hits of the next blocks of several tasks, seeding those not yet begun: one call.

    Args:
        seed_words: ``uint32`` array, the run seed's 32-bit words (see ``task_state``).
        plan: ``int64`` array ``(k, 4)``: row ``i`` is ``[task, fresh, blocks, last]``: task
            ``i``'s index, whether it begins in this call (1) or has begun (0), the whole
            blocks to draw from it (>= 1) and the samples counted in its last block.
        states: ``uint64`` array ``(k, 4)``: row ``i`` is task ``i``'s SFC64 state (ignored
            for a task that begins: its starting state is computed here), left advanced by
            ``blocks * 2**16`` words.
        buf: ``uint64`` scratch array of ``2**16`` words.

    Returns:
        The total number of hits (int).
    """
    hits = 0
    # ``_blocks_hits`` is inlined by numba (``inline="always"``): called as a compiled
    # function, the draw measured about 45 % slower when loaded from numba's cache.
    for i in range(plan.shape[0]):
        if plan[i, 1]:
            task_state(seed_words, plan[i, 0], states[i])
        hits += _blocks_hits(states[i], plan[i, 2], plan[i, 3], buf)
    return hits
