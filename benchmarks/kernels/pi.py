"""Monte-Carlo π: throw points uniformly into the unit square and count those in the quarter disk.

Definition: with ``hits`` of ``n`` uniform points ``(x, y)`` in ``[0, 1)²`` falling in
``x² + y² < 1``, ``π ≈ 4·hits/n``; ``hits`` is binomial with ``p = π/4``, so the estimate has
standard error ``sqrt(π(4-π)/n) ≈ 1.642/√n`` (``standard_error``).

Source: the Monte-Carlo π benchmark of the GLB suite (LifelineGLB by Posner; the X10/APGAS GLB
examples), where the samples are cut into tasks that places steal from each other.

Reproducibility.  The ``n`` samples are cut by index into tasks of ``TASK_SAMPLES`` samples
(the last one shorter).  Task ``i`` draws from its own numpy bit generator
``SFC64(SeedSequence([seed, i]))``, and each sample of a task is a fixed function of the task's
raw 64-bit words (below), so the total hit count is a deterministic function of ``(n, seed)``:
it does not depend on how many places there are, on how the bag is split, merged, pickled or
moved by shrinks and grows, nor on the order in which tasks run.

Sample layout (why: numpy's fastest bit generator, SFC64, gives one 64-bit word every ~1.7 ns,
the largest cost, so each word carries three coordinates: 1.5 samples a word).  A task reads
its words in blocks of ``2^16``; in a block ``w[0 .. 2^16)`` word ``w[j]`` is paired with
``w[j + 2^15]``.  A word holds three 21-bit fields, ``f_0`` = bits 0-20, ``f_1`` = bits 21-41,
``f_2`` = bits 43-63 (bit 42 unused), and sample ``k·2^15 + j`` of the block is the grid point
``(x, y) = (f_k(w[j]), f_k(w[j + 2^15]))`` of ``[0, 2^21)²``, i.e. ``(x, y) / 2^21`` in the unit
square.  The last block of the last task may be used only in part (its first samples in this
order).

Hit test and bias.  A point is a hit when ``x² + y² < T`` in exact uint64 arithmetic, with
``T = 2^42 - 2,668,942`` (``_THRESHOLD``) rather than the squared radius ``2^42``: counting the
grid points exactly, ``T = 2^42`` gives ``P(hit) = 3,454,219,747,773 / 2^42`` and a bias
``4·P(hit) - π = +1.9e-6`` (from the grid points on the two axes), 1.3 standard errors of a run of
``1.2·10^12`` samples, whereas ``T`` is the threshold whose count ``3,454,217,652,358`` is the
closest to ``π/4·2^42``, with a bias of ``+3.3e-13``: 2e-7 of that standard error
(``tests/kernels/test_pi.py`` recounts it).

Differences from the Java GLB kernel, which draws two random doubles (two 64-bit words) a
sample: three 21-bit coordinates a 64-bit word (1.5 samples a word, ``raw_words``), numpy's
SFC64 generator, whole blocks of ``2^16`` words a numpy pass, and an exact integer hit test on
the ``2^21 × 2^21`` grid.  Samples per second therefore compare different work; random 64-bit
words per second compare the generators' output rates, not the same work either.

Backends: ``APGAS_KERNELS`` (:mod:`benchmarks.kernels._backend`) chooses this numpy kernel or
the compiled one of :mod:`benchmarks.kernels._pi_numba` (numba; imported only when chosen),
which ``PiBag.process`` and so ``estimate_pi`` dispatch on.  The compiled kernel runs the same
SFC64 generator, written out, and the same sample layout, fused into one pass per block; it
also seeds the tasks itself, computing numpy's ``SeedSequence([seed, task])`` and SFC64
seeding (so a ``process`` call plans its tasks in Python, then seeds and draws all of them in
one compiled call without the GIL).  A begun task keeps its SFC64 state as four ``uint64``
words, which both backends read and leave alike, so both give identical hit counts, take the
same samples per ``process`` call and leave the bag in the same state: a bag one backend
worked on is continued exactly by the other.  It is
about 3.7 times faster (1.8 G against 0.48 G samples/s on one core of the reference machine).

Public API: ``PiBag`` (a GLB ``Bag[LongSum]`` of hit counts), ``estimate_pi``, ``raw_words``,
``standard_error``, ``warm_up``, ``DEFAULT_WORK_UNITS`` and ``TASK_SAMPLES``.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np

from glb import Bag, LongSum, nogil_call, process_all

from ._backend import compiled_now, register_warm_up

__all__ = [
    "PiBag",
    "estimate_pi",
    "raw_words",
    "standard_error",
    "DEFAULT_WORK_UNITS",
    "TASK_SAMPLES",
    "warm_up",
]

#: Samples of one task (the unit of stealing and of seeding): 32 blocks of ``3·2^15`` samples,
#: about 10 ms of work, so that stealing can balance the load finely.
TASK_SAMPLES = 3 << 20

#: Samples drawn by one ``PiBag.process`` call (the bag's work unit is one sample): roughly
#: 5-20 ms on one core of the reference machine.
DEFAULT_WORK_UNITS = 3 << 20

# Words of one block: the unit of the sample layout and of one vectorized pass.  A pass makes
# ~15 numpy calls (~1 µs overhead each), amortized over 98,304 samples; blocks of 2^14 .. 2^18
# words measured within noise of each other (2.4-2.9 ns a sample, best of 7), 2^14 the slowest.
_BLOCK_WORDS = 1 << 16
_HALF = _BLOCK_WORDS // 2
_BLOCK_SAMPLES = 3 * _HALF

_FIELD_MASK = np.uint64((1 << 21) - 1)
_SHIFT_1 = np.uint64(21)
_SHIFT_2 = np.uint64(43)
#: Hit threshold on ``x² + y²`` (grid units); see the module docstring.
_THRESHOLD = (1 << 42) - 2_668_942
_THRESHOLD_U64 = np.uint64(_THRESHOLD)


def standard_error(samples: int) -> float:
    """Standard error of the π estimate from ``samples`` points: ``sqrt(π(4-π)/samples)``.

    Args:
        samples: number of points (≥ 1).

    Returns:
        The standard error (a float), about ``1.642 / sqrt(samples)``.

    Raises:
        TypeError: ``samples`` is not an integer.
        ValueError: ``samples`` < 1.
    """
    samples = _check_samples(samples)
    return math.sqrt(math.pi * (4.0 - math.pi) / samples)


def raw_words(samples: int) -> int:
    """Random 64-bit words a run of ``samples`` samples draws from its generators.

    Every task draws whole blocks of ``2^16`` words (``3·2^15`` samples each), so a task of
    ``s`` samples draws ``ceil(s / (3·2^15)) · 2^16`` words: about ``samples / 1.5``, rounded up
    to whole blocks per task.  ``raw_words(10**8)`` is 66,715,648.

    Args:
        samples: number of points (≥ 1).

    Returns:
        The number of words (a Python int); it does not depend on the seed, on the number of
        places nor on how the bag is split.

    Raises:
        TypeError: ``samples`` is not an integer.
        ValueError: ``samples`` < 1.
    """
    samples = _check_samples(samples)
    full, rest = divmod(samples, TASK_SAMPLES)
    blocks = full * (TASK_SAMPLES // _BLOCK_SAMPLES) + -(-rest // _BLOCK_SAMPLES)
    return blocks * _BLOCK_WORDS


def _check_samples(samples: int) -> int:
    """Validate a sample count and return it as a Python int (raises TypeError/ValueError)."""
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)):
        raise TypeError(f"samples must be an integer, got {type(samples).__name__}")
    samples = int(samples)
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    return samples


def _task_generator(seed: int, task: int, state: np.ndarray | None = None) -> np.random.SFC64:
    """The bit generator of task ``task``: SFC64 seeded by ``SeedSequence([seed, task])``, or,
    given ``state`` (``uint64[4]``, a begun task's ``[a, b, c, counter]``), one at that state."""
    if state is None:
        return np.random.SFC64(np.random.SeedSequence([seed, task]))
    gen = np.random.SFC64(_ANY_SEED)
    full = gen.state
    full["state"]["state"] = state.copy()
    full["has_uint32"] = 0
    gen.state = full
    return gen


def _generator_state(gen: np.random.SFC64) -> np.ndarray:
    """The ``uint64[4]`` state ``[a, b, c, counter]`` of an SFC64 generator (a copy)."""
    return np.array(gen.state["state"]["state"], dtype=np.uint64)


#: The state of a task planned but not yet seeded (replaced before it is used).
_NO_STATE = np.zeros(4, dtype=np.uint64)

#: Any seed, for a generator whose state is then replaced (seeding is cheap from a
#: ``SeedSequence`` made once).
_ANY_SEED = np.random.SeedSequence(0)


def _seed_words(seed: int) -> np.ndarray:
    """``seed`` as numpy's ``SeedSequence`` reads it: its 32-bit words, least significant
    first (``[0]`` for 0), a ``uint32`` array for the compiled kernel's seeding."""
    words = [0] if seed == 0 else []
    while seed:
        words.append(seed & 0xFFFFFFFF)
        seed >>= 32
    return np.array(words, dtype=np.uint32)


class _Scratch(threading.local):
    """Preallocated buffers of one pass, one set per thread (places may share a process)."""

    def __init__(self) -> None:
        self.x = np.empty((3, _HALF), dtype=np.uint64)
        self.y = np.empty((3, _HALF), dtype=np.uint64)
        self.inside = np.empty((3, _HALF), dtype=bool)
        self.words = np.empty(_BLOCK_WORDS, dtype=np.uint64)


def _nb() -> Any:
    """The compiled kernel module (imports numba; only called when the backend is numba)."""
    from . import _pi_numba

    return _pi_numba


_scratch = _Scratch()


def _block_hits(words: np.ndarray, samples: int, s: _Scratch) -> int:
    """Hits among the first ``samples`` samples of one block.

    Args:
        words: uint64 array of the block's ``_BLOCK_WORDS`` raw words.
        samples: how many of the block's ``_BLOCK_SAMPLES`` samples to count (1 .. all).
        s: scratch buffers.

    Returns:
        The number of hits (a Python int).
    """
    x, y, inside = s.x, s.y, s.inside
    # Row k of x (of y) is field k of the first (second) half of the block.
    for half, v in ((words[:_HALF], x), (words[_HALF:], y)):
        np.bitwise_and(half, _FIELD_MASK, out=v[0])
        np.right_shift(half, _SHIFT_1, out=v[1])
        np.bitwise_and(v[1], _FIELD_MASK, out=v[1])
        np.right_shift(half, _SHIFT_2, out=v[2])  # the top 21 bits: no mask needed
    np.square(x, out=x)
    np.square(y, out=y)
    np.add(x, y, out=x)  # < 2^43: exact
    np.less(x, _THRESHOLD_U64, out=inside)
    if samples >= _BLOCK_SAMPLES:
        return int(np.count_nonzero(inside))
    # Sample k·2^15 + j is inside[k, j]: the first ``samples`` of the C-ordered array.
    return int(np.count_nonzero(inside.reshape(-1)[:samples]))


class _Started:
    """A task that has begun: its index, samples done (whole blocks) and SFC64 state
    (``uint64[4]``, ``[a, b, c, counter]``, positioned after the blocks done)."""

    __slots__ = ("task", "done", "state")

    def __init__(self, task: int, done: int, state: np.ndarray) -> None:
        self.task = task
        self.done = done
        self.state = state


class PiBag(Bag[LongSum]):
    """A GLB bag of Monte-Carlo π samples; the result is the number of hits.

    Args:
        samples: total number of points ``n`` (≥ 1); the new bag holds all of them.
        seed: integer seed (≥ 0) of the run; the hit count is a deterministic function of
            ``(samples, seed)``.

    Raises:
        TypeError: ``samples`` or ``seed`` is not an integer.
        ValueError: ``samples`` < 1 or ``seed`` < 0.

    Work unit: one sample.  ``process(k, result)`` draws about ``k`` samples (rounded up to
    whole blocks of ``3·2^15`` samples) and adds their hits to ``result``.

    The pending work is a list of task ranges ``[lo, hi)`` not yet begun (an ``(r, 2)`` int64
    array) plus the tasks already begun (index, samples done, SFC64 state as ``uint64[4]``).
    ``split`` gives away whole tasks not yet begun, about half of the remaining samples; a
    begun task is finished where it is, unless ``split(True)`` empties a bag that is not
    splittable.
    """

    def __init__(self, samples: int, seed: int = 0) -> None:
        self.samples = _check_samples(samples)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an integer, got {type(seed).__name__}")
        if seed < 0:
            raise ValueError(f"seed must be non-negative, got {seed}")
        self.seed = int(seed)
        tasks = -(-self.samples // TASK_SAMPLES)
        self._ranges = np.array([[0, tasks]], dtype=np.int64)
        self._started: list[_Started] = []

    @classmethod
    def share(cls, samples: int, seed: int, index: int, count: int) -> PiBag:
        """The bag of share ``index`` of ``count`` (whole tasks, as equal as possible) of a
        run of ``samples`` samples: the shares of 0..count-1 together are ``PiBag(samples,
        seed)`` (for ``glb.compute_static``).

        Raises:
            ValueError: not ``0 <= index < count``, or ``samples``/``seed`` invalid.
        """
        if not 0 <= index < count:
            raise ValueError(f"share {index} of {count} does not exist")
        bag = cls(samples, seed)
        tasks = int(bag._ranges[0, 1])
        lo, hi = tasks * index // count, tasks * (index + 1) // count
        bag._ranges = np.array([[lo, hi]] if hi > lo else [], dtype=np.int64).reshape(-1, 2)
        return bag

    # -- bookkeeping ---------------------------------------------------------------------------

    def _task_size(self, task: int) -> int:
        return min(TASK_SAMPLES, self.samples - task * TASK_SAMPLES)

    def _range_samples(self, lo: int, hi: int) -> int:
        """Samples of the tasks ``lo .. hi-1`` (only the very last task is short)."""
        if hi <= lo:
            return 0
        return (hi - 1 - lo) * TASK_SAMPLES + self._task_size(hi - 1)

    def remaining(self) -> int:
        """Number of samples not yet drawn in this bag."""
        rest = sum(self._task_size(t.task) - t.done for t in self._started)
        for lo, hi in self._ranges.tolist():
            rest += self._range_samples(lo, hi)
        return rest

    def _unstarted_tasks(self) -> int:
        return int((self._ranges[:, 1] - self._ranges[:, 0]).sum())

    def is_empty(self) -> bool:
        return not self._started and self._ranges.shape[0] == 0

    def is_splittable(self) -> bool:
        # Whole unstarted tasks are given; keep at least one unit of work here.
        unstarted = self._unstarted_tasks()
        return unstarted >= 2 or (unstarted >= 1 and bool(self._started))

    # -- work ----------------------------------------------------------------------------------

    def process(self, n: int, result: LongSum) -> None:
        """Draw about ``n`` samples (rounded up to whole blocks of ``3·2^15``) and add their
        hits to ``result``.

        The tasks are taken in a fixed order: the begun ones (last begun first), then new
        ones from the front of the ranges; each gives whole blocks until it ends or the
        ``n`` samples are reached.  The compiled backend plans the whole call first and then
        seeds and draws all its tasks in one kernel call without the GIL.

        Args:
            n: work units, samples (≥ 1).
            result: the ``LongSum`` receiving the hit count.
        """
        budget = max(int(n), 1)
        plan = self._plan(budget)
        if not plan:
            return
        if compiled_now(__name__):
            hits = self._compiled_hits(plan)
        else:
            hits = self._numpy_hits(plan)
        if hits:
            result.add(hits)

    def _plan(self, budget: int) -> list[tuple[_Started, bool, int, int]]:
        """Take the tasks of the next ``budget`` samples out of the bag: a list of ``(task,
        fresh, blocks, last)`` (``fresh``: begins now, its state not yet set; ``blocks`` whole
        blocks to draw, ``last`` samples of the last one); the task that does not end is put
        back among the begun tasks (its ``done`` already counts this call's samples)."""
        plan: list[tuple[_Started, bool, int, int]] = []
        new = 0  # tasks taken from the front of the ranges
        ranges = self._ranges.tolist() if self._ranges.shape[0] else []
        r = 0  # current range, ``new_in_r`` tasks of it taken
        new_in_r = 0
        while budget > 0:
            if self._started:
                cur = self._started.pop()
                fresh = False
            else:
                while r < len(ranges) and ranges[r][0] + new_in_r >= ranges[r][1]:
                    r += 1
                    new_in_r = 0
                if r == len(ranges):
                    break
                cur = _Started(ranges[r][0] + new_in_r, 0, _NO_STATE)
                fresh = True
                new_in_r += 1
                new += 1
            left = self._task_size(cur.task) - cur.done
            blocks = min(-(-left // _BLOCK_SAMPLES), -(-budget // _BLOCK_SAMPLES))
            take = min(blocks * _BLOCK_SAMPLES, left)
            plan.append((cur, fresh, blocks, take - (blocks - 1) * _BLOCK_SAMPLES))
            cur.done += take
            budget -= take
            if take < left:
                self._started.append(cur)
        if new:
            # A new array, never an in-place edit: copies of the bag may share the old one.
            rest = ranges[r:]
            if rest and new_in_r:
                rest[0] = [rest[0][0] + new_in_r, rest[0][1]]
                if rest[0][0] >= rest[0][1]:
                    rest = rest[1:]
            self._ranges = np.array(rest, dtype=np.int64).reshape(-1, 2)
        return plan

    def _numpy_hits(self, plan: list[tuple[_Started, bool, int, int]]) -> int:
        """Hits of the planned blocks by the numpy kernel, one block a pass."""
        scratch = _scratch
        hits = 0
        for cur, fresh, blocks, last in plan:
            gen = _task_generator(self.seed, cur.task, None if fresh else cur.state)
            for blk in range(blocks):
                take = _BLOCK_SAMPLES if blk < blocks - 1 else last
                hits += _block_hits(gen.random_raw(_BLOCK_WORDS), take, scratch)
            cur.state = _generator_state(gen)
        return hits

    def _compiled_hits(self, plan: list[tuple[_Started, bool, int, int]]) -> int:
        """Hits of the planned blocks by the compiled kernel: one call, without the GIL,
        seeding the fresh tasks and drawing all the blocks."""
        rows = np.array([(cur.task, fresh, blocks, last) for cur, fresh, blocks, last in plan],
                        dtype=np.int64)
        states = np.array([cur.state for cur, _, _, _ in plan], dtype=np.uint64)
        hits = int(nogil_call(_nb().tasks_hits, _seed_words(self.seed), rows, states,
                              _scratch.words))
        for i, (cur, _, _, _) in enumerate(plan):
            cur.state = states[i].copy()
        return hits

    # -- load balancing ------------------------------------------------------------------------

    def _empty_like(self) -> PiBag:
        bag = PiBag.__new__(PiBag)
        bag.samples = self.samples
        bag.seed = self.seed
        bag._ranges = np.empty((0, 2), dtype=np.int64)
        bag._started = []
        return bag

    def split(self, take_all: bool) -> PiBag | None:
        """Give away whole unstarted tasks holding about half of the remaining samples.

        Args:
            take_all: when the bag is not splittable (one task or less), give all of it,
                including a begun task with its generator state.

        Returns:
            A new ``PiBag`` with the loot, or ``None`` when nothing is given.
        """
        if self.is_empty():
            return None
        loot = self._empty_like()
        if not self.is_splittable():
            if not take_all:
                return None
            loot._ranges, self._ranges = self._ranges, loot._ranges
            loot._started, self._started = self._started, loot._started
            return loot
        unstarted = self._unstarted_tasks()
        half = self.remaining() / 2
        give = int(round(half / TASK_SAMPLES))
        # At least one task; keep at least one unit of work (a begun task or a task).
        give = max(1, min(give, unstarted if self._started else unstarted - 1))
        # Take from the high end of the ranges (the short last task, if any, goes first).
        ranges = self._ranges.tolist()
        given: list[list[int]] = []
        while give > 0:
            lo, hi = ranges[-1]
            k = min(give, hi - lo)
            given.append([hi - k, hi])
            give -= k
            if k == hi - lo:
                ranges.pop()
            else:
                ranges[-1] = [lo, hi - k]
        given.reverse()
        self._ranges = np.array(ranges, dtype=np.int64).reshape(-1, 2)
        loot._ranges = np.array(given, dtype=np.int64).reshape(-1, 2)
        return loot

    def merge(self, other: Bag[LongSum]) -> None:
        """Add all of ``other``'s tasks (begun or not) to this bag.

        Raises:
            TypeError: ``other`` is not a ``PiBag``.
            ValueError: ``other`` belongs to another run (other ``samples`` or ``seed``).
        """
        if not isinstance(other, PiBag):
            raise TypeError(f"cannot merge {type(other).__name__} into PiBag")
        if (other.samples, other.seed) != (self.samples, self.seed):
            raise ValueError(
                f"cannot merge a bag of run (samples={other.samples}, seed={other.seed}) into "
                f"one of run (samples={self.samples}, seed={self.seed})"
            )
        if other._ranges.shape[0]:
            self._ranges = np.concatenate([self._ranges, other._ranges])
        self._started.extend(other._started)
        other._ranges = np.empty((0, 2), dtype=np.int64)
        other._started = []

    # -- pickling ------------------------------------------------------------------------------

    def __getstate__(self) -> tuple:
        started = [(t.task, t.done, t.state) for t in self._started]
        return self.samples, self.seed, self._ranges, started

    def __setstate__(self, state: tuple) -> None:
        self.samples, self.seed, self._ranges, started = state
        self._started = [_Started(task, done, words) for task, done, words in started]

    def __repr__(self) -> str:
        return f"PiBag(samples={self.samples}, seed={self.seed}, remaining={self.remaining()})"


def estimate_pi(samples: int, seed: int = 0) -> tuple[float, int]:
    """Estimate π from ``samples`` points by running one ``PiBag`` to the end on this thread.

    Args:
        samples: number of points (≥ 1).
        seed: run seed (≥ 0); the result is a deterministic function of ``(samples, seed)``.

    Returns:
        ``(pi_estimate, hits)``: ``4·hits/samples`` (float) and the hit count (int).

    Raises:
        TypeError: ``samples`` or ``seed`` is not an integer.
        ValueError: ``samples`` < 1 or ``seed`` < 0.
    """
    bag = PiBag(samples, seed)
    hits = process_all(bag, LongSum(), DEFAULT_WORK_UNITS).value()
    return 4.0 * hits / bag.samples, hits


@register_warm_up
def warm_up() -> None:
    """Compile, or load from numba's cache, the compiled π kernel (a tiny run, the argument
    types of real use); see :func:`benchmarks.kernels.warm_up`.  Requires the numba
    backend."""
    PiBag(10).process(10, LongSum())
