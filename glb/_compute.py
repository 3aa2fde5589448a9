"""``compute_dynamic`` and ``compute_static``: run a bag over all places and fold the result."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apgaspy import (
    GlobalRef,
    MalleabilityError,
    async_at,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    finish,
    here,
    places,
)
from apgaspy.elastic import HandlerState, malleable_state

from ._bag import Bag
from ._config import glb_setting, workers_per_place
from ._exceptions import PlaceZeroOnlyError
from ._fold import Fold
from ._handler import GLBHandler
from ._liveness import only_dead
from ._params import Params
from ._recovery import collect_dead, resilient_rounds
from ._stats import PlaceStats
from ._store import Store, install_store, on_backup
from ._worker import current_worker, make_worker, start

__all__ = ["GLBResult", "compute_dynamic", "compute_static"]

log = logging.getLogger("glb")

_X10_DEFAULT_N = 511


@dataclass
class GLBResult:
    """The outcome of a GLB computation.

    Attributes:
        result: the folded result (a :class:`Fold`).
        seconds: wall-clock time of the computation, from start to the final reduction.
        log: per-place statistics (released places included, flagged ``released``).
        places: the places at the end.
        params: the GLB parameters used.
        orders: malleability orders carried out during the computation (kind, places).
        phases: seconds spent setting up (workers, handler), computing, and in the final
            reduction.
        recovered: places that died during a resilient computation, whose work and partial
            result were recovered (in the order they were taken over).
        rounds: rounds of a resilient computation (1 when no recovery was needed).
        order_times: when each of ``orders`` began (``time.time()``).
    """

    result: Fold
    seconds: float
    log: list[PlaceStats]
    places: list[int]
    params: Params
    orders: list[tuple[str, list[int]]] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    recovered: list[int] = field(default_factory=list)
    rounds: int = 1
    order_times: list[float] = field(default_factory=list)

    @property
    def value(self) -> Any:
        """The plain value of the result."""
        return self.result.value()


def _params(bag_class: type | None, n: int | None, w: int | None, l: int | None,  # noqa: E741
            z: int | None, resilient: bool | None, workers: int | None = None) -> Params:
    default_n = getattr(bag_class, "DEFAULT_WORK_UNITS", None) if bag_class else None
    if default_n is None and bag_class is not None:
        default_n = getattr(sys.modules.get(bag_class.__module__), "DEFAULT_WORK_UNITS", None)
    n_value = glb_setting("N", n) or default_n or _X10_DEFAULT_N
    return Params(int(n_value), int(glb_setting("W", w) or 1), int(glb_setting("L", l) or 2),
                  glb_setting("Z", z), bool(glb_setting("RESILIENT", resilient)),
                  float(glb_setting("BACKUP_INTERVAL")), workers_per_place(workers),
                  bool(glb_setting("PIN_WORKERS")))


def _make_workers(params: Params, result_factory: Callable[[], Fold],
                  bag_for: Callable[[int, int], Bag | None]) -> None:
    members = [p.id for p in places()]
    with finish():
        for i, p in enumerate(places()):
            async_at(p, _create, params, result_factory, bag_for, i, len(members), members)


def _create(params: Params, result_factory: Callable[[], Fold],
            bag_for: Callable[[int, int], Bag | None], index: int, count: int,
            members: list[int]) -> None:
    w = make_worker(params, result_factory, bag_for(index, count), members)
    if params.resilient and w.me != 0 and w.bag is not None:
        # the first backup, counted: the computation does not start before place 0 has it
        seq, consumed = w.snapshot()
        async_at(0, on_backup, w.me, seq, w.bag, w.result, consumed)


def _collect() -> tuple[Fold, PlaceStats]:
    w = current_worker()
    w.recall()  # W > 1: the results of the other workers (they have all stopped)
    if w.bag is not None:
        w.bag.submit(w.result)
        w.bag = None
    return w.result, w.finish_stats()


def _run(params: Params, result_factory: Callable[[], Fold],
         bag_for: Callable[[int, int], Bag | None], malleable: bool | None) -> GLBResult:
    if here().id != 0:
        raise PlaceZeroOnlyError(f"GLB computations start at place 0, not at {here()}")
    t0 = time.perf_counter()
    s = install_store(Store(result_factory)) if params.resilient else None
    _make_workers(params, result_factory, bag_for)
    handler: GLBHandler | None = None
    state = malleable_state()
    if malleable is True and state is not HandlerState.UNDEFINED:
        raise MalleabilityError(
            f"cannot make this GLB computation malleable: the program's handler is {state}")
    if malleable is not False and state is HandlerState.UNDEFINED:
        handler = GLBHandler(params, result_factory, s)
        define_malleable_handler(handler)
    elif malleable is None and state is not HandlerState.UNDEFINED:
        log.info("GLB runs without malleability: the program's handler is already %s", state)
    t1 = time.perf_counter()
    rounds = 1
    try:
        if s is None:
            with finish():
                for p in places():
                    async_at(p, start)
        else:
            rounds = resilient_rounds(s)
    finally:
        if handler is not None:
            disable_malleable_handler()  # waits for an order under way; no more orders
    t2 = time.perf_counter()
    total = result_factory()
    stats: list[PlaceStats] = []
    for p in places():
        try:
            res, st = at(p, _collect)
        except Exception as exc:  # noqa: BLE001 - a death shows as DeadPlaceError or a group
            if s is None or not only_dead(exc):
                raise
            res, st = collect_dead(s, p.id)
        total.fold(res)
        stats.append(st)
    if handler is not None:
        for res, st in handler.released:
            total.fold(res)
            stats.append(st)
    recovered: list[int] = []
    if s is not None:
        total.fold(s.recovered_result)
        recovered = list(s.recovered)
        stats.extend(PlaceStats(p, died=True) for p in recovered)
    t3 = time.perf_counter()
    return GLBResult(total, t3 - t0, sorted(stats, key=lambda s: s.place),
                     [p.id for p in places()], params,
                     handler.orders if handler is not None else [],
                     {"setup_s": t1 - t0, "compute_s": t2 - t1, "reduce_s": t3 - t2},
                     recovered, rounds, handler.order_times if handler is not None else [])


def compute_dynamic(initial: Bag, result_factory: Callable[[], Fold], *, n: int | None = None,
                    w: int | None = None, l: int | None = None,  # noqa: E741
                    z: int | None = None, malleable: bool | None = None,
                    resilient: bool | None = None, workers: int | None = None) -> GLBResult:
    """Process ``initial`` with all places: the work starts at place 0 and spreads by stealing.

    Lifeline-based global load balancing (Saraswat et al., PPoPP 2011): random steals, then
    lifelines on a cyclic hypercube, termination by one ``finish`` at place 0.  Malleable with
    no change to the bag: unless told otherwise, the computation defines a malleable handler
    while it runs (shrinks move work off released places, grows bring new places into the
    lifeline graph) and disables it before the final reduction.

    Args:
        initial: the whole work, at place 0.
        result_factory: makes an empty result (a picklable callable, e.g. ``LongSum``).
        n: work units per ``process`` call (default ``GLB_N``, else the bag module's
            ``DEFAULT_WORK_UNITS``, else 511).
        w: random steals before lifelines (default ``GLB_W``, else 1).
        l: lifeline hypercube base (default ``GLB_L``, else 2).
        z: hypercube dimensions (default ``GLB_Z``, else enough to reach every place).
        malleable: ``None`` (default): malleable if the program has not used its handler yet;
            ``True``: require it (MalleabilityError otherwise); ``False``: never.
        resilient: survive the death of places other than 0 with the exact result (default
            ``GLB_RESILIENT``, else off): work and partial results are backed up at place 0
            and recovered (see ``glb._store``; costs one backup per place every
            ``GLB_BACKUP_INTERVAL`` seconds and a hop through place 0 per steal).
        workers: worker threads per place, W (default ``GLB_WORKERS``, else 1; 0: the host's
            cores over ``APGAS_PLACES_PER_HOST``): each has
            its own bag, and the workers of a place share work among themselves before the
            place steals from others (Yamashita and Kamada, IPSJ JIP 2016).  W > 1 uses W
            cores of a place where the bag's kernels release the GIL; pure-Python and numpy
            bags stay correct but may not run faster (docs/concepts/glb.md).

    Returns:
        A :class:`GLBResult` with the folded result and per-place statistics.

    Raises:
        MultipleException: a bag method raised at some place, or (not resilient) a place
            died (its members are then ``DeadPlaceError``).
        MalleabilityError: ``malleable=True`` and the program's handler is taken.
        ConfigurationError: a GLB_* variable is malformed.
        PlaceZeroOnlyError: called away from place 0 (a ``RuntimeError``).
    """
    params = _params(type(initial), n, w, l, z, resilient, workers)
    ref = GlobalRef(initial)
    try:
        return _run(params, result_factory, _InitialAtZero(ref), malleable)
    finally:
        ref.free()


def compute_static(bag_factory: Callable[[int, int], Bag], result_factory: Callable[[], Fold],
                   *, n: int | None = None, w: int | None = None,
                   l: int | None = None, z: int | None = None,  # noqa: E741
                   malleable: bool | None = None, bag_class: type | None = None,
                   resilient: bool | None = None, workers: int | None = None) -> GLBResult:
    """Process work that every place creates for itself, balancing it by stealing.

    Args:
        bag_factory: ``bag_factory(index, count)`` returns the bag of the place with that index
            among ``count`` places (picklable; it runs at each place).
        result_factory, n, w, l, z, malleable, resilient, workers: as for
            :func:`compute_dynamic`.
        bag_class: the bag type, for the default ``n`` (optional).

    Returns:
        A :class:`GLBResult`.

    Raises:
        As :func:`compute_dynamic`.
    """
    params = _params(bag_class, n, w, l, z, resilient, workers)
    return _run(params, result_factory, bag_factory, malleable)


class _InitialAtZero:
    """Gives place 0 the initial bag (fetched from its GlobalRef there), others nothing."""

    def __init__(self, ref: GlobalRef[Bag]) -> None:
        self.ref = ref

    def __call__(self, index: int, count: int) -> Bag | None:
        return self.ref.get() if here().id == self.ref.home.id else None

