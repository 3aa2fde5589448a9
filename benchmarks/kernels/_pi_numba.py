"""The compiled (numba) Monte-Carlo π kernel of :mod:`benchmarks.kernels.pi`.

Imported only when the backend is numba (:func:`benchmarks.kernels.backend`).  It draws the
same words as the numpy kernel and counts the same samples: SFC64 (Chris Doty-Humphrey's
Small Fast Chaotic generator, 64-bit variant, as numpy's ``SFC64`` bit generator implements
it) is written out here and started from the numpy generator's state, and the sample layout
of ``pi.py`` is applied to each block, so the hit counts are identical.  The gain is fusion:
the numpy kernel writes every block's words to memory and then runs about fifteen array
passes over them; here one loop makes the words (its state in registers) and one loop tests
the samples, without temporaries.
"""

from __future__ import annotations

from . import _backend

_backend.numba_available()  # sets NUMBA_CACHE_DIR before numba is imported

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

__all__ = ["blocks_hits"]

_HALF = 1 << 15  # words in half a block (pi._HALF)
_FIELD = np.uint64((1 << 21) - 1)
_THRESHOLD = np.uint64((1 << 42) - 2_668_942)  # pi._THRESHOLD


@njit(cache=True, nogil=True)
def blocks_hits(state, blocks, last, buf):  # type: ignore[no-untyped-def]
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
