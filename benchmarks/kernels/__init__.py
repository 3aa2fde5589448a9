"""The benchmark kernels (UTS, N-Queens, BC, Pi) and their GLB bags.

Each kernel has a numpy implementation, and the hot ones a compiled (numba) one that gives
bit-identical answers; ``APGAS_KERNELS`` (``auto`` | ``numba`` | ``numpy``) chooses, see
:mod:`benchmarks.kernels._backend` and docs/guides/compiled-kernels.md.
"""

from ._backend import backend, register_warm_up, warm_up

__all__ = ["backend", "register_warm_up", "warm_up"]
