"""A battery of API checks run at place 0; prints one JSON line per check, exits 0 if all pass.

Run with any number of places (spawned or under mpiexec)."""

import json
import os
import pickle
import threading
import time
import traceback

import numpy as np

from apgaspy import (
    ApgasError,
    BadPlaceError,
    GlobalRef,
    MultipleException,
    Place,
    PlaceLocalObject,
    RemoteError,
    RemoteTraceback,
    async_,
    async_at,
    at,
    finish,
    here,
    immediate_async_at,
    place,
    places,
    run,
    uncounted_async_at,
)
from glb import Bag, GLBError, LongSum, PlaceZeroOnlyError, compute_dynamic

CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def fail_with(message):
    raise ValueError(message)


class UnpicklableError(Exception):
    def __reduce__(self):
        raise TypeError("no pickling")


def raise_unpicklable():
    raise UnpicklableError("cannot travel")


class Counter(PlaceLocalObject):
    def __init__(self):
        self.n = 0
        self.lock = threading.Lock()

    def bump(self):
        with self.lock:
            self.n += 1


@check
def place_values(n):
    assert [p.id for p in places()] == list(range(n)), places()
    assert here() == Place(0) and str(here()) == "place(0)"
    assert sorted([Place(2), Place(1)]) == [Place(1), Place(2)]
    assert pickle.loads(pickle.dumps(Place(3))) == Place(3)
    assert {Place(1): 1}[Place(1)] == 1
    assert place(n - 1) == Place(n - 1)


@check
def at_returns_values(n):
    got = [at(p, lambda: (here().id, os.getpid())) for p in places()]
    assert [g[0] for g in got] == list(range(n)), got
    assert len({g[1] for g in got}) == n, "each place is its own process"


@check
def at_reraises(n):
    p = places()[-1]
    try:
        at(p, fail_with, "at failure")
    except ValueError as exc:
        assert str(exc) == "at failure"
        if p.id != 0:
            assert isinstance(exc.__cause__, RemoteTraceback), exc.__cause__
            assert f"Traceback at place({p.id})" in str(exc.__cause__)
        assert f"raised at place({p.id})" in "".join(getattr(exc, "__notes__", []))
    else:
        raise AssertionError("at did not raise")


@check
def finish_collects_exceptions(n):
    try:
        with finish():
            for p in places():
                async_at(p, fail_with, f"from {p.id}")
                async_at(p, lambda: None)
    except MultipleException as group:
        got = sorted(str(e) for e in group.exceptions)
        assert got == sorted(f"from {i}" for i in range(n)), got
        for e in group.exceptions:
            pid = int(str(e).split()[-1])
            assert f"raised at place({pid})" in "".join(e.__notes__)
    else:
        raise AssertionError("finish did not raise")


@check
def finish_single_error_is_a_group(n):
    try:
        with finish():
            async_at(places()[-1], fail_with, "only one")
    except MultipleException as group:
        assert len(group.exceptions) == 1 and isinstance(group, ExceptionGroup)
    else:
        raise AssertionError("finish did not raise")


@check
def finish_body_error_joins_group(n):
    try:
        with finish():
            async_at(places()[-1], fail_with, "task")
            raise KeyError("body")
    except MultipleException as group:
        assert sorted(type(e).__name__ for e in group.exceptions) == ["KeyError", "ValueError"]
    else:
        raise AssertionError("finish did not raise")


@check
def finish_function_form(n):
    assert finish(lambda a, b: a + b, 2, 3) == 5


@check
def finish_waits_transitively(n):
    ref = GlobalRef([])

    def leaf(i):
        time.sleep(0.01)  # paces on purpose: the leaves end after their parents
        at(ref.home, lambda: ref.get().append(i))

    def middle(i):
        for p in places():
            async_at(p, leaf, (i, p.id))

    with finish():
        for p in places():
            async_at(p, middle, p.id)
    assert len(ref.get()) == n * n, ref.get()
    ref.free()


@check
def nested_finish_on_every_place(n):
    def inner():
        total = [0]
        lock = threading.Lock()

        def add(v):
            with lock:
                total[0] += v

        with finish():
            for i in range(10):
                async_(add, i)
        return here().id, total[0]

    assert [at(p, inner) for p in places()] == [(i, 45) for i in range(n)]


@check
def blocked_workers_do_not_deadlock(n):
    # Every hop blocks a worker (APGAS_THREADS=1 by default): the pool must compensate.
    ps = places()

    def hop(k):
        if k == 0:
            return here().id
        return at(ps[k % len(ps)], hop, k - 1)

    assert at(ps[-1], hop, 12) == ps[1 % n].id  # hop(0) runs where hop(1) sent it


@check
def outside_finish_is_an_error(n):
    errors = []

    def thread_body():
        try:
            async_at(places()[-1], lambda: None)
        except ApgasError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=thread_body)
    t.start()
    t.join()
    assert errors and "with finish()" in errors[0], errors


@check
def bad_places(n):
    for call in (lambda: place(n + 5), lambda: async_at(n + 5, print),
                 lambda: at(Place(n + 5), print), lambda: uncounted_async_at(n + 5, print)):
        try:
            call()
        except BadPlaceError as exc:
            assert f"place({n + 5})" in str(exc)
        else:
            raise AssertionError("no BadPlaceError")
    try:
        async_at("one", print)
    except TypeError:
        pass
    else:
        raise AssertionError("no TypeError for a bad place argument")
    try:
        async_at(0, 42)
    except TypeError as exc:
        assert "callable" in str(exc)
    else:
        raise AssertionError("no TypeError for a non-callable task")


@check
def global_ref(n):
    box = {"v": 1}
    ref = GlobalRef(box)
    assert ref.get() is box and ref.home == here()
    p = places()[-1]
    if p.id != 0:
        try:
            at(p, ref.get)
        except BadPlaceError:
            pass
        else:
            raise AssertionError("GlobalRef.get away from home did not raise")
    assert at(p, lambda: at(ref.home, lambda: ref.get()["v"])) == 1
    ref.free()
    try:
        ref.get()
    except BadPlaceError:
        pass
    else:
        raise AssertionError("get after free did not raise")


@check
def place_local_object(n):
    c = Counter.make(places(), Counter)
    with finish():
        for p in places():
            for _ in range(p.id + 1):
                async_at(p, c.bump)
    assert [at(p, lambda: c.n) for p in places()] == [i + 1 for i in range(n)]
    assert at(places()[-1], lambda: c is not None and type(c).__name__) == "Counter"


REPORTS = set()
REPORTED = threading.Event()


def deliver(kind, who, expected):
    REPORTS.add((kind, who))
    if len(REPORTS) == expected:
        REPORTED.set()


def report(kind, expected):
    uncounted_async_at(0, deliver, kind, here().id, expected)


@check
def uncounted_and_immediate(n):
    for p in places():
        uncounted_async_at(p, report, "uncounted", 2 * n)
        immediate_async_at(p, report, "immediate", 2 * n)
    assert REPORTED.wait(20), REPORTS
    assert REPORTS == {(k, i) for k in ("uncounted", "immediate") for i in range(n)}


@check
def unpicklable_exception(n):
    p = places()[-1]
    try:
        at(p, raise_unpicklable)
    except (RemoteError, UnpicklableError) as exc:
        if p.id != 0:
            assert isinstance(exc, RemoteError) and "cannot travel" in str(exc), exc
    else:
        raise AssertionError("no error")


@check
def big_values(n):
    a = np.arange(2_000_000, dtype=np.float64)
    for p in places():
        b = at(p, lambda: a * 2)
        assert b.shape == a.shape and float(b[-1]) == 2 * (a.size - 1)


@check
def arguments_are_copied(n):
    p = places()[-1]
    data = [1, 2, 3]
    ref = GlobalRef([])
    with finish():
        async_at(p, lambda d: at(ref.home, lambda: ref.get().append(list(d))), data)
        data.append(4)  # after the spawn: must not travel for a remote place
    got = ref.get()[0]
    assert got == ([1, 2, 3] if p.id != 0 else got), got


@check
def many_tasks(n):
    c = Counter.make(places(), Counter)
    with finish():
        for i in range(3000):
            async_at(places()[i % n], c.bump)
    assert sum(at(p, lambda: c.n) for p in places()) == 3000


def inbox_keys():
    """The connections this place holds to the inboxes of other places' threads."""
    from apgaspy._runtime import runtime

    return sorted(k for k in runtime().transport._outboxes if isinstance(k, tuple))


def my_inbox():
    from apgaspy._runtime import runtime

    box = getattr(runtime().transport._local, "inbox", None)
    return None if box is None else box.endpoint


def back_home_later(ref):
    time.sleep(0.2)  # completes after the at's own UPDATE arrived: the last event is local
    ref.get().append("home")


@check
def at_answers_on_the_callers_inbox(n):
    """An at called outside the worker pool gets its answers on an inbox of the
    calling thread, from every place that takes part; a worker's at does not make one."""
    p = places()[-1]
    ref = GlobalRef([])

    def body():
        async_at(0, back_home_later, ref)  # completes the finish at home, on a worker
        for q in places():
            async_at(q, lambda: None)
        return here().id

    assert at(p, body) == p.id and ref.get() == ["home"]
    mine = my_inbox()
    if p.id != 0:
        assert mine is not None
        for q in places()[1:]:
            assert at(q, inbox_keys) == [(0, mine)], (q, at(q, inbox_keys))
    # a plain thread of the program gets an inbox of its own
    out = []
    t = threading.Thread(target=lambda: out.append((at(p, lambda: 7), my_inbox())))
    t.start()
    t.join()
    assert out[0][0] == 7 and (p.id == 0 or out[0][1] not in (None, mine)), out
    # a task (a worker of the pool) waits with compensation, not on an inbox
    assert at(p, lambda: (at(0, lambda: 1), my_inbox())) == (1, None)


class EmptyBag(Bag):
    """No work at all: a computation of it ends as soon as it starts."""

    def process(self, n, result):
        pass

    def split(self, take_all):
        return None

    def merge(self, other):
        pass

    def is_empty(self):
        return True

    def is_splittable(self):
        return False


def glb_from_here():
    return compute_dynamic(EmptyBag(), LongSum).value


@check
def glb_starts_at_place_zero_only(n):
    assert issubclass(PlaceZeroOnlyError, GLBError) and issubclass(GLBError, ApgasError)
    assert issubclass(PlaceZeroOnlyError, RuntimeError)
    assert at(0, glb_from_here) == 0
    if n > 1:
        try:
            at(places()[-1], glb_from_here)
        except PlaceZeroOnlyError as exc:
            assert f"not at place({n - 1})" in str(exc), exc
        else:
            raise AssertionError("a GLB computation started away from place 0")


def main():
    n = len(places())
    failed = 0
    for fn in CHECKS:
        try:
            fn(n)
            print(json.dumps({"check": fn.__name__, "ok": True}))
        except BaseException as exc:  # noqa: BLE001
            failed += 1
            print(json.dumps({"check": fn.__name__, "ok": False,
                              "error": "".join(traceback.format_exception(exc))}))
    return failed


if __name__ == "__main__":
    raise SystemExit(1 if run(main) else 0)
