"""Resilient GLB: places killed with SIGKILL during a computation, and the answer is exact.

Each run is ``tests/programs/glb_resilient.py`` (places spawned, the embedded default: a place
that dies does not end the job) with ``resilient=True``; it kills places by pid at chosen
moments after the computation started.  Every run must give the exact count (BC: the
sequential Brandes result within float rounding), name exactly the killed places as
recovered, and leave no process behind.  The store's bookkeeping is tested without processes
at the end.
"""

from __future__ import annotations

import random

import pytest
from conftest import env_for, run_program, wait_gone

from glb import Bag, LongSum
from glb._store import HaltReport, Store

# (kernel, size, places, kills "PLACE@SECONDS", extra args).  Every kill comes well before the
# computation could end on a fast machine (a kill after the end tests nothing: the test
# fails then, as the killed place is not reported).
RUNS = [
    ("uts", 12, 4, ["2@0.5"], []),
    ("uts", 12, 4, ["1@0.3", "3@1.1"], []),  # two places, one after the other
    ("uts", 12, 3, ["2@0.4"], ["--static"]),  # all the work starts at the place that dies
    ("nqueens", 16, 3, ["1@0.3"], []),
    ("nqueens", 16, 3, ["2@0.7"], []),
    ("bc", 12, 3, ["1@0.15"], []),
    ("pi", 400_000_000, 3, ["1@0.15"], ["--static"]),
]
# random moments and places, seeded: different every seed, the same every run
for _seed in (1, 2):
    _rng = random.Random(_seed)
    RUNS.append(("uts", 12, 4, [f"{_rng.randint(1, 3)}@{_rng.uniform(0.1, 1.5):.2f}"], []))


def _run(kernel, size, places, kills, extra, **env):
    args = [kernel, str(size), *extra]
    for k in kills:
        args += ["--kill", k]
    r = run_program("glb_resilient.py", places, "spawn", *args,
                    env=env_for(places, **env), timeout=60)
    lines = r.json_lines()
    assert r.returncode == 0 and len(lines) == 2, f"--- stdout\n{r.stdout}--- stderr\n{r.stderr}"
    start, report = lines
    pids = [int(p) for p in start["pids"].values()] + start["tree"]
    assert wait_gone(pids, 10) == [], "processes of the run are left"
    return report, r


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kernel,size,places,kills,extra", RUNS,
                         ids=[f"{k}{s}-{p}p-kill{'+'.join(x)}{''.join(e)}"
                              for k, s, p, x, e in RUNS])
def test_a_killed_place_loses_nothing(kernel, size, places, kills, extra):
    report, r = _run(kernel, size, places, kills, extra)
    assert report["correct"] is True, report
    assert report["result"] == pytest.approx(report["expected"], rel=1e-12)  # BC: floats
    killed = sorted(p for p, _ in report["killed"])
    assert killed == sorted(int(k.split("@")[0]) for k in kills), report  # the kills happened
    assert sorted(report["recovered"]) == killed, report
    assert report["died"] == killed
    assert report["places"] == [p for p in range(places) if p not in killed]
    assert report["rounds"] >= 2 or report["recovered"], report


@pytest.mark.timeout(90)
@pytest.mark.parametrize("kernel,size,kills,workers,kernels", [
    ("uts", 13, ["1@0.4"], 3, "numba"),  # d = 12 could end before the kill, 0.4 s in
    ("bc", 11, ["2@0.2"], 2, "numpy"),
])
def test_a_killed_place_with_workers_loses_nothing(kernel, size, kills, workers, kernels):
    """W workers a place: a halt recalls them all, and the dead place's backup holds the
    work of all its workers."""
    report, _ = _run(kernel, size, 3, kills, [], GLB_WORKERS=str(workers),
                     APGAS_KERNELS=kernels)
    assert report["correct"] is True, report
    killed = sorted(p for p, _ in report["killed"])
    assert killed == sorted(int(k.split("@")[0]) for k in kills), report
    assert sorted(report["recovered"]) == killed, report


@pytest.mark.timeout(90)
def test_no_failure_costs_one_round():
    report, r = _run("uts", 11, 3, [], [])
    assert report["correct"] is True and report["rounds"] == 1
    assert report["recovered"] == [] and report["places"] == [0, 1, 2]


@pytest.mark.timeout(90)
def test_a_place_killed_as_a_shrink_releases_it():
    """Place 3 dies while the shrink that releases it waits for its hand-over: its messages
    to place 0 are held back 2 s (``APGAS_TEST_DELAY``), so the shrink (about 0.5-1 s into the
    computation) is still waiting for them when the kill comes (1.5 s into it)."""
    report, r = _run("uts", 12, 4, ["3@1.5"], [], APGAS_COMMUNICATOR="schedule",
                     APGAS_SCHEDULE="after 1.5 s shrink 1", APGAS_TEST_DELAY="3>0:2.0")
    assert report["correct"] is True, report
    assert report["recovered"] == [3], report
    assert report["places"] == [0, 1, 2]
    # the runtime refuses a handler answer that names a dead place; the job runs on
    assert report["orders"] == [["shrink", []]], report
    assert "refused: pre_shrink returned places that died: [3]" in r.stderr


@pytest.mark.timeout(90)
def test_a_shrink_during_recovery_and_a_death_after_it():
    """Place 1 dies, a shrink releases place 3 about when the recovery runs, then place 2
    dies: the shrink completes, the released place's result counts once, the answer is
    exact.  UTS d=13 (about 10 s of numpy work on 2 cores), so that the last death comes while
    work remains on a quiet machine too (d=12 was done by 2.2 s there)."""
    report, r = _run("uts", 13, 4, ["1@0.3", "2@2.2"], [], APGAS_COMMUNICATOR="schedule",
                     APGAS_SCHEDULE="after 2.2 s shrink 1")
    assert report["correct"] is True, report
    assert sorted(report["recovered"]) == [1, 2], report
    assert [kind for kind, _ in report["orders"]] == ["shrink"], report
    assert report["places"] == [0]


# ---------------------------------------------------------------------- the store, no processes
class CountBag(Bag):
    """``n`` units of work, each adding 1 to the result."""

    def __init__(self, n: int) -> None:
        self.n = n

    def process(self, n: int, result: LongSum) -> None:
        k = min(n, self.n)
        self.n -= k
        result.add(k)

    def split(self, take_all: bool) -> CountBag | None:
        k = self.n if take_all and self.n == 1 else self.n // 2
        if k == 0:
            return None
        self.n -= k
        return CountBag(k)

    def merge(self, other: CountBag) -> None:
        self.n += other.n

    def is_empty(self) -> bool:
        return self.n == 0

    def is_splittable(self) -> bool:
        return self.n > 1


def _bag(n: int) -> CountBag:
    return CountBag(n)


def test_store_split_consume_and_recover():
    s = Store(LongSum)
    s.known = {0, 1, 2}
    r1 = LongSum()
    r1.add(5)
    # place 1 splits 3 units off for place 2: its backup without them, the record with them
    assert s.split(1, 1, _bag(4), r1, frozenset(), (1, 1), _bag(3), 2)
    assert list(s.records) == [(1, 1)]
    # place 2 backs up with the loot consumed: the record closes
    s.backup(2, 1, _bag(3), LongSum(), frozenset({(1, 1)}))
    assert s.records == {}
    # an older backup of place 2 arriving late changes nothing
    s.backup(2, 0, None, LongSum(), frozenset())
    assert s.backups[2].seq == 1
    # place 1 dies: its backup is taken over (result folded, bag an orphan)
    orphans, work_left = s.reconcile([HaltReport(0, 1, None, LongSum(), frozenset(), False),
                                      HaltReport(2, 2, _bag(3), LongSum(), frozenset(), True)],
                                     {0, 2})
    assert [b.n for b in orphans] == [4] and work_left
    assert s.recovered == [1] and s.recovered_result.value() == 5
    # a transfer from the dead place that place 0 handles after the take-over is discarded
    assert not s.split(1, 2, None, r1, frozenset(), (1, 2), _bag(4), 2)
    assert s.records == {}


def test_store_orphans_loot_nobody_took_and_discards_a_late_pass():
    s = Store(LongSum)
    s.known = {0, 1, 2}
    s.record((0, 1), _bag(7), 2)  # place 0's loot for place 2, never taken
    assert s.split(1, 1, None, LongSum(), frozenset(), (1, 1), _bag(2), 3)
    orphans, _ = s.reconcile([HaltReport(1, 2, None, LongSum(), frozenset(), False),
                              HaltReport(2, 1, None, LongSum(), frozenset(), False)], {0, 1, 2})
    assert sorted(b.n for b in orphans) == [2, 7] and s.recovered == []
    # a leaving place passing on loot of a record the recovery dealt again: discarded
    assert not s.pass_on((1, 1), (3, 1), _bag(2), 0)
    # a retired place's result is not taken over again; its stranded work becomes a record
    assert s.retire(2, frozenset(), _bag(1))
    orphans, _ = s.reconcile([], {0, 1})
    assert [b.n for b in orphans] == [1] and s.recovered == []


def test_store_a_transfer_cut_short_by_a_halt_counts_once():
    """The halt report carries loot whose record had not come; the record, coming later, is
    not created (else the loot would be dealt twice)."""
    s = Store(LongSum)
    s.known = {0, 1}
    report = HaltReport(1, 3, None, LongSum(), frozenset(), False, [((1, 9), _bag(6))])
    orphans, _ = s.reconcile([report], {0, 1})
    assert [b.n for b in orphans] == [6]
    assert not s.split(1, 2, None, LongSum(), frozenset(), (1, 9), _bag(6), 0)
    assert s.records == {} and s.backups[1].seq == 3
    # the record came first: it is dealt once, as an open record
    assert s.split(1, 4, None, LongSum(), frozenset(), (1, 10), _bag(5), 0)
    report = HaltReport(1, 5, None, LongSum(), frozenset(), False, [((1, 10), _bag(5))])
    orphans, _ = s.reconcile([report], {0, 1})
    assert [b.n for b in orphans] == [5]

