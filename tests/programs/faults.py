"""Fault injection: SIGKILL a place while the program waits on it (tests/test_faults.py).

    python tests/programs/faults.py <phase>

Phases (3 places unless said): ``finish``, ``at``, ``shrink-released`` (the place a shrink
releases dies on its way out), ``shrink-two`` (4 places; of the two places a shrink releases,
one dies on its way out), ``shrink-other`` (a continuing place dies during a shrink),
``grow-existing`` (an existing place dies while the grow's acknowledgements are pending),
``grow-new`` (the new place dies before it is ready), ``glb`` (a place dies during a UTS run on
GLB; the error leaves main: exit code 1), ``shutdown`` (a place dies right before ``run()``
returns), ``start`` (nothing: for the start-up test, which kills a place from outside),
``notify`` (notifications the socket communicator cannot send).

Prints JSON lines: first ``{"pids": ..., "tree": ...}`` (place id -> pid; every process below
this one), then the phase's report.  Every phase but ``glb`` catches what it expects and exits
0.  Hook for places started by the program (read when they import this module):
``APGAS_TEST_FAULTS_IMPORT=die`` (SIGKILL itself) or ``sleep:<seconds>``.
"""

import json
import os
import signal
import sys
import threading
import time

from apgaspy import (
    BadPlaceError,
    DeadPlaceError,
    GlobalRef,
    MalleabilityError,
    MalleableHandler,
    MultipleException,
    Place,
    async_at,
    at,
    define_malleable_handler,
    disable_malleable_handler,
    finish,
    here,
    notify_scheduler,
    place,
    places,
    run,
)

if __name__ == "__mp_main__":  # a place importing the program (start-up or grow)
    _hook = os.environ.get("APGAS_TEST_FAULTS_IMPORT", "")
    if _hook.startswith("sleep:"):
        time.sleep(float(_hook[6:]))  # paces on purpose: a slow import
    elif _hook == "die":
        os.kill(os.getpid(), signal.SIGKILL)


def emit(**event):
    print(json.dumps(event), flush=True)


def tree():
    """Pids of every process below this one (MPI process manager, anchors, places)."""
    import psutil

    return [p.pid for p in psutil.Process().children(recursive=True)]


def leaves(exc):
    """The exceptions inside (nested) exception groups, as (type name, place) pairs."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaves(e)]
    return [[type(exc).__name__, getattr(exc, "place", None)]]


def kill(pid):
    os.kill(pid, signal.SIGKILL)


def naming(pid):
    """What naming place ``pid`` raises now: [type name, is a BadPlaceError] or None."""
    try:
        place(pid)
    except BadPlaceError as exc:
        return [type(exc).__name__, True]
    except Exception as exc:  # noqa: BLE001 - reported
        return [type(exc).__name__, False]
    return None


def views():
    """Every place's view of the places."""
    return {p.id: at(p, lambda: [q.id for q in places()]) for p in places()}


def start():
    pids = {p.id: at(p, os.getpid) for p in places()}
    emit(pids=pids, tree=tree())
    return pids


# ---------------------------------------------------------------------- finish
def _nested_finish_report(victim):
    """At place 1: a finish whose home is not place 0 waits on the victim too."""
    t = time.monotonic()
    try:
        with finish():
            async_at(victim, time.sleep, 60)  # runs until its place dies
    except MultipleException as group:
        return {"errors": leaves(group), "waited": time.monotonic() - t}
    return {"errors": [], "waited": time.monotonic() - t}


def _make_list_ref():
    return GlobalRef([1, 2, 3])


def phase_finish(pids):
    victim = max(pids)
    far_ref = at(victim, _make_list_ref)  # a GlobalRef whose home is about to die
    nested = {}
    side = threading.Thread(target=lambda: nested.update(at(1, _nested_finish_report, victim)))
    side.start()
    errors, t_kill = [], None
    try:
        with finish():
            for p in places():
                async_at(p, time.sleep, 60 if p.id == victim else 0.1)
            time.sleep(0.3)  # paces on purpose: the kill comes while the tasks run
            kill(pids[victim])
            t_kill = time.monotonic()
    except MultipleException as group:
        errors = leaves(group)
    waited = time.monotonic() - t_kill
    side.join()
    far_ref.free()  # home dead: a no-op, no error
    # GlobalRef.free() away from home: the free travels to the home place
    ref = GlobalRef({"big": "object"})
    at(1, ref.free)
    freed_after = None
    t = time.monotonic()
    while time.monotonic() - t < 5:
        try:
            ref.get()
        except BadPlaceError:
            freed_after = time.monotonic() - t
            break
        time.sleep(0.01)
    ref.free()  # again, at home: harmless
    emit(phase="finish", errors=errors, waited=waited, nested=nested,
         naming=naming(victim), places=[p.id for p in places()], views=views(),
         freed_after=freed_after)


def phase_finish_body(pids):
    """The victim dies while the finish's body still runs: when the body ends, the finish
    (failed meanwhile) raises at once."""
    victim = max(pids)
    errors, t_kill, body_end = [], 0.0, 0.0
    try:
        with finish():
            async_at(victim, time.sleep, 60)  # runs until its place dies
            kill(pids[victim])
            t_kill = time.monotonic()
            while victim in [p.id for p in places()] and time.monotonic() - t_kill < 30:
                time.sleep(0.05)  # the body runs on until the death is known
            body_end = time.monotonic()
    except MultipleException as group:
        errors = leaves(group)
    emit(phase="finish-body", errors=errors, known_after=body_end - t_kill,
         waited=time.monotonic() - body_end, places=[p.id for p in places()])


# ---------------------------------------------------------------------- at
def _at_report(victim):
    t = time.monotonic()
    try:
        at(victim, time.sleep, 60)  # runs until its place dies
    except DeadPlaceError as exc:
        return [type(exc).__name__, exc.place, isinstance(exc, BadPlaceError),
                time.monotonic() - t]
    return None


def phase_at(pids):
    victim = max(pids)
    from_1 = {}
    side = threading.Thread(target=lambda: from_1.update(r=at(1, _at_report, victim)))
    side.start()
    time.sleep(0.1)  # paces on purpose: place 1's at is under way before the kill
    killer = threading.Timer(0.3, kill, (pids[victim],))
    t0 = time.monotonic()
    killer.start()
    error = None
    try:
        at(victim, time.sleep, 60)  # runs until its place dies
    except DeadPlaceError as exc:
        error = [type(exc).__name__, exc.place]
    waited = time.monotonic() - t0 - 0.3
    side.join()
    t = time.monotonic()
    try:
        at(victim, os.getpid)
        again = None
    except DeadPlaceError as exc:
        again = [type(exc).__name__, exc.place, time.monotonic() - t]
    emit(phase="at", error=error, waited=waited, from_1=from_1.get("r"), again=again,
         naming=naming(victim), places=[p.id for p in places()])


# ---------------------------------------------------------------------- orders
class FaultyHandler(MalleableHandler):
    """Kills ``victim`` in ``pre_shrink``/``pre_grow``; releases the places ``release``."""

    def __init__(self, pids, victim, release=(), kill_on_grow=False):
        self.pids, self.victim, self.release = pids, victim, list(release)
        self.kill_on_grow = kill_on_grow
        self.t_kill = None
        self.calls = []

    def _kill(self):
        kill(self.pids[self.victim])
        self.t_kill = time.monotonic()

    def pre_shrink(self, n):
        self.calls.append(["pre_shrink", n])
        self._kill()
        return [Place(r) for r in self.release]

    def post_shrink(self, n, removed):
        self.calls.append(["post_shrink", n, [p.id for p in removed]])

    def pre_grow(self, n):
        self.calls.append(["pre_grow", n])
        if self.kill_on_grow:
            self._kill()

    def post_grow(self, n, continued, added):
        self.calls.append(["post_grow", n, [p.id for p in continued], [p.id for p in added]])


def _order(handler, do):
    define_malleable_handler(handler)
    outcome, report, t0 = None, None, time.monotonic()
    try:
        report = do()
        outcome = "completed"
    except MalleabilityError as exc:
        outcome = f"refused: {exc}"
    elapsed = time.monotonic() - (handler.t_kill or t0)
    disable_malleable_handler()
    return {"outcome": outcome, "elapsed": elapsed, "calls": handler.calls,
            "released": [p.id for p in report.places] if report else None,
            "died": [p.id for p in report.died] if report else None,
            "places": [p.id for p in places()], "views": views()}


def phase_shrink(pids, victim, release):
    from apgaspy._runtime import runtime

    nested = {}
    side = None
    if victim in release:  # a finish at place 1 waits on the place that dies on its way out
        side = threading.Thread(
            target=lambda: nested.update(at(1, _nested_finish_report, victim)))
        side.start()
        time.sleep(0.2)  # paces on purpose: the nested finish waits before the shrink
    handler = FaultyHandler(pids, victim, release)
    result = _order(handler, lambda: runtime().malleability.shrink(len(release)))
    if side is not None:
        side.join()
    emit(phase="shrink", naming={p: naming(p) for p in sorted({victim, *release})},
         nested=nested, **result)


def phase_grow(pids, die_new):
    from apgaspy._runtime import runtime

    victim = max(pids)
    handler = FaultyHandler(pids, victim, kill_on_grow=not die_new)
    if die_new:
        os.environ["APGAS_TEST_FAULTS_IMPORT"] = "die"  # the new place kills itself
    result = _order(handler, lambda: runtime().malleability.grow(["localhost"]))
    new = max(p.id for p in places())
    emit(phase="grow", new_pid=at(new, os.getpid) if new not in pids else None,
         naming=naming(victim if not die_new else max(pids) + 1), tree=tree(), **result)


# ---------------------------------------------------------------------- glb
def phase_glb(pids):
    from benchmarks.kernels.uts import UTSBag
    from glb import LongSum, compute_dynamic

    victim = max(pids)
    killer = threading.Timer(0.5, kill, (pids[victim],))
    t0 = time.monotonic()
    killer.start()
    try:
        compute_dynamic(UTSBag(19, 13), LongSum)
    except MultipleException as group:
        emit(phase="glb", errors=leaves(group), waited=time.monotonic() - t0 - 0.5)
        raise  # out of main: every place ends, the program exits 1
    emit(phase="glb", errors=[], waited=time.monotonic() - t0 - 0.5)


# ---------------------------------------------------------------------- shutdown
def phase_shutdown(pids):
    victim = max(pids)
    kill(pids[victim])
    emit(phase="shutdown", killed_at=time.time())


# ---------------------------------------------------------------------- notify
class QuietHandler(MalleableHandler):
    def pre_shrink(self, n):
        return places()[-n:]

    def post_shrink(self, n, removed):
        pass

    def pre_grow(self, n):
        pass

    def post_grow(self, n, continued, added):
        pass


def phase_notify(pids):
    define_malleable_handler(QuietHandler())  # the socket communicator: APGAS-Ready
    raised = []
    for message in ["has:colon", "two\nlines", "non-ascii-h\u00e9", "faults-ok"]:
        try:
            notify_scheduler(message)
        except Exception as exc:  # noqa: BLE001 - reported
            raised.append([message, type(exc).__name__])
    disable_malleable_handler()
    emit(phase="notify", raised=raised)


def main(phase):
    pids = start()
    if phase == "finish":
        phase_finish(pids)
    elif phase == "finish-body":
        phase_finish_body(pids)
    elif phase == "at":
        phase_at(pids)
    elif phase == "shrink-released":
        phase_shrink(pids, victim=max(pids), release=[max(pids)])
    elif phase == "shrink-two":  # 4 places: 2 and 3 released, 3 dies on its way out
        phase_shrink(pids, victim=max(pids), release=[max(pids) - 1, max(pids)])
    elif phase == "shrink-other":
        phase_shrink(pids, victim=1, release=[max(pids)])
    elif phase == "grow-existing":
        phase_grow(pids, die_new=False)
    elif phase == "grow-new":
        phase_grow(pids, die_new=True)
    elif phase == "glb":
        phase_glb(pids)
    elif phase == "shutdown":
        phase_shutdown(pids)
    elif phase == "notify":
        phase_notify(pids)
    elif phase == "start":
        emit(phase="start", here=here().id)
    else:
        raise SystemExit(f"unknown phase {phase!r}")


if __name__ == "__main__":
    run(main, sys.argv[1])
