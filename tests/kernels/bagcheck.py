"""Helpers of the kernel tests: driving bags as GLB would (random process/split/merge/pickle),
running a function under one kernel backend, and the backends a test runs under (the
``kernels`` fixture of tests/kernels/conftest.py)."""

from __future__ import annotations

import os
import pickle
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from benchmarks.kernels._backend import backend, numba_available
from glb import Bag, Fold, process_all

__all__ = ["BACKENDS", "drive_randomly", "needs_numba", "with_backend"]

#: Skips a test where numba is not installed.
needs_numba = pytest.mark.skipif(not numba_available(), reason="numba is not installed")
#: The kernel backends, as parameters: numpy, and numba where it is installed.
BACKENDS = ["numpy", pytest.param("numba", marks=needs_numba)]


def drive_randomly(bags: list[Bag], result: Fold, rng: random.Random, sizes: Sequence[int],
                   *, max_steps: int, finish_n: int = 4096,
                   on_split: Callable[[Bag, Bag | None, Any], None] | None = None,
                   measure: Callable[[Bag], Any] | None = None,
                   shuffle: bool = False) -> Fold:
    """Random interleavings of process (sizes from ``sizes``), split(False), split(True),
    merge and pickle round trips over ``bags`` until none has work, as GLB's places would;
    after ``max_steps`` steps, whatever is left is processed to the end.

    Args:
        on_split: called as ``on_split(bag, loot, before)`` after each ``split(False)``, with
            ``before = measure(bag)`` taken just before it, to check a bag's own invariants.
        shuffle: also shuffle the bags' order after each step (any processing order).

    Returns:
        ``result``, with every bag's work and partial results added.
    """
    steps = 0
    while bags and steps < max_steps:
        steps += 1
        i = rng.randrange(len(bags))
        bag = bags[i]
        action = rng.random()
        if action < 0.42:
            bag.process(rng.choice(sizes), result)
        elif action < 0.62:
            before = measure(bag) if measure else None
            loot = bag.split(False)
            if loot is not None:
                assert not loot.is_empty()
                bags.append(loot)
            else:
                assert not bag.is_splittable() or bag.is_empty()
            if on_split:
                on_split(bag, loot, before)
        elif action < 0.7:
            loot = bag.split(True)
            if loot is not None:
                bags.append(loot)
        elif action < 0.84 and len(bags) > 1:
            j = rng.randrange(len(bags))
            if j != i:
                bag.merge(bags[j])
                assert bags[j].is_empty()
        else:
            bags[i] = pickle.loads(pickle.dumps(bag))
        kept = []
        for b in bags:  # exhausted bags are dropped, as GLB does, after their partial result
            if b.is_empty():
                b.submit(result)
            else:
                kept.append(b)
        bags[:] = kept
        if shuffle:
            rng.shuffle(bags)
    for b in bags:
        process_all(b, result, finish_n)
    return result


def with_backend(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with ``APGAS_KERNELS`` set to ``name`` (restored afterwards); asserts that
    the backend then in force is ``name``."""
    saved = os.environ.get("APGAS_KERNELS")
    os.environ["APGAS_KERNELS"] = name
    try:
        assert backend() == name
        return fn(*args)
    finally:
        if saved is None:
            del os.environ["APGAS_KERNELS"]
        else:
            os.environ["APGAS_KERNELS"] = saved
