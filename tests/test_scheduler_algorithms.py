"""Scheduling algorithms on hand-made snapshots, with exact expected decisions."""

from __future__ import annotations

import pytest

from scheduler.algorithms import (
    FCFS,
    Algorithm,
    Backfilling,
    EasyBackfilling,
    FreeNodes,
    Grow,
    MalleableMinAgree,
    RunningJob,
    Shrink,
    Start,
    View,
    WaitingJob,
    make,
    node_key,
    registry,
)
from scheduler.algorithms.base import reservation
from scheduler.jobs import JobClass, JobSpec


def rigid(n: int, req: float = 100.0, name: str = "r") -> JobSpec:
    return JobSpec(name, JobClass.RIGID, nodes=n, required_time_s=req)


def mall(lo: int, hi: int, req: float = 100.0, name: str = "m") -> JobSpec:
    return JobSpec(name, JobClass.MALLEABLE, min_nodes=lo, max_nodes=hi, required_time_s=req)


def mold(lo: int, hi: int, req: float = 100.0) -> JobSpec:
    return JobSpec("mo", JobClass.MOLDABLE, min_nodes=lo, max_nodes=hi, required_time_s=req)


def names(*numbers: int) -> tuple[str, ...]:
    return tuple(f"n{i}" for i in numbers)


def wait(job_id, spec, submit=0.0) -> WaitingJob:
    return WaitingJob(job_id, spec, submit)


def run(job_id, spec, nodes, start=0.0, ready=True, last=None) -> RunningJob:
    return RunningJob(job_id, spec, nodes, start, malleable_ready=ready, last_order_s=last)


def view(now, free, running=(), waiting=(), total=None) -> View:
    total = total or len(free) + sum(len(j.nodes) for j in running)
    return View(now, tuple(free), tuple(running), tuple(waiting), total)


def test_registry_and_protocol():
    assert set(registry) == {"fcfs", "backfilling", "easy", "malleable", "rigid-min",
                             "rigid-max", "moldable", "elastic-priority",
                             "elastic-priority-easy", "evolving-easy", "evolving-smallest",
                             "evolving-reserve", "evolving-easy-malleable", "evolving-elastic"}
    for name in registry:
        algorithm = make(name, cooldown_s=30.0)
        assert isinstance(algorithm, Algorithm)
        assert algorithm.name == name
    assert make("malleable", cooldown_s=30.0).cooldown_s == 30.0
    with pytest.raises(ValueError, match="unknown algorithm"):
        make("sjf")


def test_node_key_natural_order():
    assert sorted(["n10", "n2", "n1"], key=node_key) == ["n1", "n2", "n10"]
    assert sorted(["127.0.1.10", "127.0.1.9"], key=node_key) == ["127.0.1.9", "127.0.1.10"]


# ------------------------------------------------------------------------------ FCFS


def test_fcfs_starts_prefix_and_blocks():
    v = view(0, names(1, 2, 3, 4), waiting=[wait(1, rigid(2)), wait(2, rigid(3)),
                                            wait(3, rigid(1))])
    assert FCFS().decide(v) == [Start(1, names(1, 2))]


def test_fcfs_flexible_jobs_take_up_to_max_lowest_names_first():
    v = view(0, ("n10", "n2", "n1", "n3"), waiting=[wait(1, mall(1, 2)), wait(2, mold(1, 8))])
    assert FCFS().decide(v) == [Start(1, ("n1", "n2")), Start(2, ("n3", "n10"))]


def test_fcfs_flexible_job_needs_its_minimum():
    v = view(0, names(1, 2), waiting=[wait(1, mall(3, 8)), wait(2, rigid(1))])
    assert FCFS().decide(v) == []


def test_fcfs_never_resizes():
    running = [run(1, mall(1, 4), names(1))]
    assert FCFS().decide(view(0, names(2, 3), running)) == []


# ----------------------------------------------------------------------- Backfilling


def test_backfilling_starts_any_job_that_fits():
    v = view(0, names(1, 2), waiting=[wait(1, rigid(3)), wait(2, rigid(2)), wait(3, rigid(1))])
    assert Backfilling().decide(v) == [Start(2, names(1, 2))]


def delaying_scenario(backfill_req: float) -> View:
    # X holds n1,n2 until 100 s.  The head H needs all 4 nodes: reservation at 100 s with
    # no extra node.  B (2 nodes) fits now.
    running = [run(10, rigid(2, req=100.0), names(1, 2), start=0.0)]
    waiting = [wait(1, rigid(4)), wait(2, rigid(2, req=backfill_req))]
    return view(0.0, names(3, 4), running, waiting)


def test_backfilling_delays_the_head_easy_does_not():
    v = delaying_scenario(backfill_req=500.0)
    assert Backfilling().decide(v) == [Start(2, names(3, 4))]
    assert EasyBackfilling().decide(v) == []


# ------------------------------------------------------------------------------ EASY


def test_easy_backfills_a_job_that_ends_before_the_reservation():
    assert EasyBackfilling().decide(delaying_scenario(100.0)) == [Start(2, names(3, 4))]
    assert EasyBackfilling().decide(delaying_scenario(100.1)) == []


def test_easy_backfills_onto_extra_nodes_only():
    # H needs 3: at 100 s, 2 free + 2 released = 4 -> one extra node.
    running = [run(10, rigid(2, req=100.0), names(1, 2))]
    waiting = [wait(1, rigid(3)), wait(2, rigid(1, req=500.0)), wait(3, rigid(1, req=500.0)),
               wait(4, mall(1, 2, req=500.0))]
    decisions = EasyBackfilling().decide(view(0.0, names(3, 4), running, waiting))
    assert decisions == [Start(2, names(3))]


def test_easy_flexible_backfill_limited_to_extra_nodes():
    running = [run(10, rigid(2, req=100.0), names(1, 2))]
    waiting = [wait(1, rigid(3)), wait(2, mall(1, 4, req=500.0))]
    decisions = EasyBackfilling().decide(view(0.0, names(3, 4), running, waiting))
    assert decisions == [Start(2, names(3))]


def test_easy_starts_fitting_prefix_first_and_counts_it_in_the_reservation():
    # A (2 nodes, 50 s) starts now; the head H (4) then waits for A (50 s) and X (80 s).
    running = [run(10, rigid(2, req=100.0), names(1, 2), start=-20.0)]
    waiting = [wait(1, rigid(2, req=50.0)), wait(2, rigid(4)), wait(3, rigid(1, req=10.0))]
    v = view(0.0, names(3, 4, 5), running, waiting)
    # after A: 1 free (n5); releases: A at 50 (2), X at 80 (2) -> shadow 80, extra 1.
    assert EasyBackfilling().decide(v) == [Start(1, names(3, 4)), Start(3, names(5))]


def test_reservation_helper():
    assert reservation(4, 1, [(80.0, 2), (50.0, 2)]) == (80.0, 1)
    assert reservation(9, 1, [(10.0, 2)]) == (float("inf"), 0)


def test_easy_overdue_job_counts_as_ending_now():
    running = [run(10, rigid(2, req=10.0), names(1, 2), start=0.0)]  # overdue at 50 s
    waiting = [wait(1, rigid(4)), wait(2, rigid(1, req=1.0))]
    # shadow = now (50 s): B ends after it and there is no extra node.
    assert EasyBackfilling().decide(view(50.0, names(3, 4), running, waiting)) == []


# ------------------------------------------------------------------------- Malleable


def test_malleable_starts_malleable_jobs_at_their_minimum():
    waiting = [wait(1, mall(2, 4)), wait(2, rigid(1)), wait(3, mold(1, 8))]
    decisions = MalleableMinAgree().decide(view(0.0, names(1, 2, 3, 4, 5, 6), (), waiting))
    assert decisions == [Start(1, names(1, 2)), Start(2, names(3)), Start(3, names(4, 5, 6))]


def test_malleable_grows_smallest_allotment_first():
    now = 100.0
    running = [
        run(1, mall(1, 4), names(1, 2, 3)),  # 3 nodes, may grow by 1
        run(2, mall(1, 2), names(4)),  # 1 node: first
        run(3, mall(1, 4), names(5, 6), ready=False),  # not ready: never ordered
        run(4, mall(1, 4), names(10, 11), last=now - 30.0),  # cool-down: not ordered
        run(5, rigid(1), names(12)),  # rigid: never ordered
    ]
    decisions = MalleableMinAgree().decide(view(now, names(7, 8, 9), running))
    assert decisions == [Grow(2, names(7)), Grow(1, names(8))]


def test_malleable_grow_ties_by_start_order_and_fills_to_max():
    running = [run(1, mall(1, 8), names(1)), run(2, mall(1, 8), names(2))]
    decisions = MalleableMinAgree().decide(view(10.0, names(3, 4, 5), running))
    assert decisions == [Grow(1, names(3, 4, 5))]


def test_malleable_shrinks_largest_surplus_first_for_the_head():
    running = [
        run(1, mall(2, 6), names(1, 2, 3, 4)),  # surplus 2
        run(2, mall(1, 8), names(5, 6, 7, 8, 9, 10)),  # surplus 5: first
        run(3, mall(1, 4), names(11, 12, 13), ready=False),  # not ready
    ]
    waiting = [wait(7, rigid(4)), wait(8, rigid(1, req=1.0))]
    algorithm = MalleableMinAgree()
    # need 4 - 1 free = 3: from job 2 alone; nothing else happens (no backfill of job 8).
    assert algorithm.decide(view(0.0, names(14), running, waiting)) == [Shrink(2, 3)]
    # need 7 - 1 = 6: job 2 gives 5, job 1 gives 1.
    waiting[0] = wait(7, rigid(7))
    assert algorithm.decide(view(0.0, names(14), running, waiting)) == [
        Shrink(2, 5),
        Shrink(1, 1),
    ]


def test_malleable_does_not_shrink_when_it_cannot_make_room():
    running = [run(1, mall(1, 3), names(1, 2, 3), start=0.0)]  # surplus 2, ends at 100 s
    waiting = [wait(7, rigid(5)), wait(8, rigid(1, req=50.0)), wait(9, rigid(1, req=500.0))]
    # need 5 - 1 = 4 > 2: no shrink; EASY backfills job 8 (ends before 100 s), not job 9.
    decisions = MalleableMinAgree().decide(view(0.0, names(4), running, waiting))
    assert decisions == [Start(8, names(4))]


def test_malleable_cooldown_respected():
    algorithm = MalleableMinAgree(cooldown_s=60.0)
    waiting = [wait(7, rigid(2))]

    def decide(now, last):
        return algorithm.decide(view(now, (), [run(1, mall(1, 4), names(1, 2, 3), last=last)],
                                     waiting))

    assert decide(100.0, last=40.1) == []
    assert decide(100.0, last=40.0) == [Shrink(1, 2)]
    assert decide(100.0, last=None) == [Shrink(1, 2)]
    assert MalleableMinAgree(cooldown_s=0.0).decide(
        view(100.0, (), [run(1, mall(1, 4), names(1, 2, 3), last=100.0)], waiting)
    ) == [Shrink(1, 2)]


def test_malleable_never_orders_unready_or_rigid_jobs():
    running = [
        run(1, mall(1, 8), names(1, 2, 3, 4), ready=False),
        run(2, rigid(4), names(5, 6, 7, 8)),
    ]
    algorithm = MalleableMinAgree()
    assert algorithm.decide(view(0.0, (), running, [wait(3, rigid(2))])) == []
    assert algorithm.decide(view(0.0, names(9), running)) == []


def test_malleable_with_only_rigid_jobs_is_easy():
    v = delaying_scenario(backfill_req=500.0)
    assert MalleableMinAgree().decide(v) == EasyBackfilling().decide(v) == []
    v = delaying_scenario(backfill_req=50.0)
    assert MalleableMinAgree().decide(v) == EasyBackfilling().decide(v)


def test_malleable_grows_leftover_after_starts_and_backfill():
    running = [run(1, mall(1, 8), names(1), start=0.0)]
    waiting = [wait(2, rigid(2))]
    decisions = MalleableMinAgree().decide(view(10.0, names(2, 3, 4, 5), running, waiting))
    assert decisions == [Start(2, names(2, 3)), Grow(1, names(4, 5))]


def test_decide_is_pure():
    running = [run(1, mall(1, 8), names(1), start=0.0)]
    v = view(10.0, names(2, 3), running, [wait(2, rigid(1))])
    algorithm = MalleableMinAgree()
    assert algorithm.decide(v) == algorithm.decide(v)


def test_malleable_counts_shrinks_in_flight():
    running = [
        RunningJob(1, mall(1, 4), names(1, 2, 3, 4), 0.0, malleable_ready=False, last_order_s=0.0,
                   releasing=2),
        run(2, mall(1, 4), names(5, 6, 7, 8)),
    ]
    waiting = [wait(3, rigid(2)), wait(4, rigid(1, req=1.0))]
    # the head's 2 nodes come from job 1's shrink in flight: no more shrinks, no backfill.
    assert MalleableMinAgree().decide(view(1.0, (), running, waiting)) == []
    waiting[0] = wait(3, rigid(3))  # one more node needed: job 2 gives it
    assert MalleableMinAgree().decide(view(1.0, (), running, waiting)) == [Shrink(2, 1)]


def test_next_change_times():
    # Running: a rigid job started at 0 s (required 100 s: expected end 100 s), a malleable
    # job ordered at 50 s (cool-down 60 s: orderable again at 110 s), a malleable job never
    # ordered, one not ready yet.  Waiting: a head of 8 nodes.
    running = (run(1, rigid(2, req=100.0), names(1, 2)),
               run(2, mall(1, 4, req=500.0), names(3, 4), last=50.0),
               run(3, mall(1, 4, req=400.0), names(5), last=None),
               run(4, mall(1, 4, req=300.0), names(6), ready=False, last=10.0))
    v = view(70.0, names(7), running, (wait(9, rigid(8)),))
    assert FCFS().next_change_s(v) == Backfilling().next_change_s(v) == float("inf")
    assert EasyBackfilling().next_change_s(v) == 100.0
    assert MalleableMinAgree(cooldown_s=60.0).next_change_s(v) == 100.0
    later = view(105.0, names(7), running, (wait(9, rigid(8)),))
    assert EasyBackfilling().next_change_s(later) == 300.0  # job 4's expected end
    assert MalleableMinAgree(cooldown_s=60.0).next_change_s(later) == 110.0
    assert MalleableMinAgree(cooldown_s=0.0).next_change_s(later) == 300.0
    # an expected end exactly now is no longer ahead
    assert EasyBackfilling().next_change_s(view(300.0, names(7), running)) == 400.0


def test_free_nodes_hands_out_lowest_names_first():
    pool = FreeNodes(["n10", "n2", "n1", "n9"])
    assert len(pool) == 4
    assert pool.take(3) == ("n1", "n2", "n9")
    assert pool.take(1) == ("n10",)
    with pytest.raises(ValueError, match="asked for 1 nodes, 0 free"):
        pool.take(1)
