"""One job state for the real scheduler, the simulator and the evolving simulation
(docs/design/scheduler-structure.md): the same answer to "does it take orders", the same
view, the same refusal of a decision, the same record."""

from __future__ import annotations

import math
import random

import pytest

from scheduler import InvalidDecisionError, JobSpec
from scheduler.algorithms import Grow, Shrink, Start, View, make
from scheduler.evolving_simulation import (
    EvolvingJob,
    EvolvingSimulator,
    EvoTree,
    MonitorConfig,
    _progress,
)
from scheduler.job_state import check_decision, decision_refusal
from scheduler.model import ResizeCostModel, ScalingCurve
from scheduler.simulate import SimConfig, Simulator, _Job
from scheduler.state import ServerJob

MALLEABLE = JobSpec(name="m", job_class="malleable", min_nodes=1, max_nodes=4,
                    required_time_s=100)
RIGID = JobSpec(name="r", nodes=2, required_time_s=100)


def _three(spec: JobSpec, **state: object) -> list:
    """The same running job as each scheduler keeps it, with ``state`` set on each."""
    nodes = ["n1", "n2"]
    jobs = [
        ServerJob(1, spec, ("true",), 0.0, state="running", elastic=True, nodes=list(nodes),
                  start_s=5.0),
        _Job(1, spec, 0.0, ScalingCurve({1: 10.0}), state="running", elastic=True,
             nodes=list(nodes), start_s=5.0),
        EvolvingJob(1, spec, EvoTree(2, 10.0), 0.0, state="running", elastic=True,
                    nodes=list(nodes), start_s=5.0),
    ]
    for job in jobs:
        for key, value in state.items():
            setattr(job, key, value)
    return jobs


@pytest.mark.parametrize(("state", "takes"), [
    ({"ready": True}, True),
    ({"ready": False}, False),
    ({"ready": True, "busy": True}, False),
    ({"ready": True, "ending": "overrun"}, False),
    ({"ready": True, "reachable": False}, False),
])
def test_each_scheduler_answers_takes_orders_and_the_view_alike(state, takes) -> None:
    for job in _three(MALLEABLE, **state):
        assert job.takes_orders is takes
        view = job.running_view()
        assert (view.job_id, view.nodes, view.start_s, view.malleable_ready) == (
            1, ("n1", "n2"), 5.0, takes)


def test_a_refused_decision_has_one_reason_on_every_side() -> None:
    for job in _three(MALLEABLE, ready=True, busy=True):
        assert decision_refusal(Shrink(1, 1), job, {"n3"}) == (
            "the job is not ready for orders (no APGAS-Ready yet, or an order in flight)")
    for job in _three(RIGID, ready=True):
        assert decision_refusal(Grow(1, ("n3",)), job, {"n3"}) == "the job is not malleable"
        with pytest.raises(InvalidDecisionError, match=r"^p: Grow\(.*the job is not malleable"):
            check_decision(Grow(1, ("n3",)), {1: job}, {"n3"}, "p")
    for job in _three(MALLEABLE, ready=True):
        assert decision_refusal(Shrink(1, 1), job, set()) is None
        assert decision_refusal(Start(1, ("n3",)), job, {"n3"}) == "no such waiting job"


def test_the_evolving_simulation_refuses_as_the_simulator_does() -> None:
    class ShrinkTheRigid:
        name = "shrink-the-rigid"

        def decide(self, view: View) -> list:
            if view.waiting:
                return [Start(view.waiting[0].job_id, view.free_nodes[:2])]
            return [Shrink(view.running[0].job_id, 1)]

    job = EvolvingJob(0, RIGID, EvoTree(2, 10.0), 0.0)
    simulator = EvolvingSimulator([job], ShrinkTheRigid(), SimConfig(total_nodes=4),
                                  MonitorConfig(), ResizeCostModel())
    assert isinstance(simulator, Simulator)
    with pytest.raises(InvalidDecisionError, match="shrink-the-rigid: Shrink.*not malleable"):
        simulator.run()
    # the real scheduler refuses the same decision for the same reason
    assert decision_refusal(Shrink(0, 1), job, set()) == "the job is not malleable"


def test_the_evolving_mode_runs_in_the_simulators_engine(monkeypatch) -> None:
    """The evolving jobs' monitors are events of the simulator's loop, and its policy calls
    and results are the simulator's: one evolving job of 1-2 nodes alone on 2 nodes."""
    samples: list[float] = []
    sample = EvolvingSimulator._sample

    def counted_sample(self, job, now):
        samples.append(now)
        return sample(self, job, now)

    class Recorded:
        """evolving-easy, remembering when it was called."""

        def __init__(self) -> None:
            self.policy = make("evolving-easy", cooldown_s=0.0)
            self.name = self.policy.name
            self.calls: list[float] = []

        def decide(self, view: View) -> list:
            self.calls.append(view.now_s)
            return self.policy.decide(view)

    monkeypatch.setattr(EvolvingSimulator, "_sample", counted_sample)
    spec = JobSpec(name="e", job_class="evolving", min_nodes=1, max_nodes=2,
                   required_time_s=100)
    job = EvolvingJob(0, spec, EvoTree(2, 10.0), 0.0)
    policy = Recorded()
    result = EvolvingSimulator([job], policy, SimConfig(total_nodes=2), MonitorConfig(),
                               ResizeCostModel.free()).run()
    assert result.makespan_s == 40.0 and result.records[0].end_s == 40.0
    assert result.decide_calls == len(policy.calls)
    # one monitor event a second from the standby (3 s) to the step before the end
    assert samples == [float(t) for t in range(3, 40)]
    # calls: the submission at 0, then every 5 s after the last call (the release at 20 s
    # falls on one), the request at 30 s (answered by a grant), the end at 40 s
    assert policy.calls == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
    assert (job.releases, job.requests, job.requests_served) == (1, 1, 1)


def test_jumping_over_steps_gives_the_floats_of_stepping() -> None:
    """The evolving mode takes whole steps of a phase at once; the floats, and so the steps
    at which phases end, are those of one step at a time."""
    rng = random.Random(7)
    for _ in range(300):
        spec = JobSpec(name="e", job_class="evolving", min_nodes=1, max_nodes=8,
                       required_time_s=100)
        job = EvolvingJob(0, spec, EvoTree(rng.randint(1, 8), rng.choice([10.0, 33.3, 50.0])),
                          0.0, nodes=[f"n{i}" for i in range(rng.randint(1, 8))])
        job.left = job.tree.phases()[0][1] - rng.random() * 3
        job.pause_s = rng.choice([0.0, 0.005, 0.17, 1.3])
        ahead = _progress(job, None, 1.0)
        # one step at a time, as a stepped simulation counts it
        phases, steps, left, pause, phase = job.tree.phases(), 0, job.left, job.pause_s, 0
        while phase < len(phases):
            stopped = min(1.0, pause)
            pause -= stopped
            left -= (len(job.nodes) if phases[phase][0] == "tree" else 1) * (1.0 - stopped)
            steps += 1
            while left <= 1e-9:
                phase += 1
                if phase == len(phases):
                    break
                left += phases[phase][1]
            if steps == 50:  # and part of the way, from the state stepping reached
                assert _progress(job, 50, 1.0)[:4] == (phase, left, pause, 50)
        assert ahead[:4] == (phase, left, pause, steps)


def test_every_scheduler_makes_the_same_record() -> None:
    records = []
    for job in _three(MALLEABLE, ready=True):
        job.end_s = 25.0
        job.allotment = [(5.0, ("n1", "n2")), (15.0, ("n1",)), (25.0, ())]
        job.shrinks = 1
        records.append(job.record())
    assert records[0] == records[1] == records[2]
    assert records[0].node_seconds == 30.0 and records[0].wait_s == 5.0
    assert not math.isnan(records[0].run_s)


EVOLVING = JobSpec(name="e", job_class="evolving", min_nodes=1, max_nodes=3,
                   required_time_s=100)


def _waiting(spec: JobSpec) -> list:
    """The same waiting job as each scheduler keeps it."""
    return [ServerJob(1, spec, ("true",), 0.0, state="waiting"),
            _Job(1, spec, 0.0, ScalingCurve({1: 10.0}), state="waiting"),
            EvolvingJob(1, spec, EvoTree(2, 10.0), 0.0, state="waiting")]


def test_the_transitions_count_alike_on_every_side_and_a_grant_is_not_a_grow() -> None:
    """One life of a malleable and of an evolving job through the transitions, on each
    scheduler's job: the records are equal, and only the malleable job's grow counts as a
    grow (the evolving job's is a served request)."""
    for spec, grows, served in ((MALLEABLE, 1, 0), (EVOLVING, 0, 1)):
        records = []
        for job in _waiting(spec):
            job.start(1.0, ["n1"], elastic=True)
            if job.evolving:
                assert job.take_request() is None
            job.order_grow(2.0, ["n2"])
            assert job.busy and job.last_order_s == 2.0
            assert job.grant(["n2"]) is job.evolving
            if job.evolving:  # its grant is in flight: n2 cannot be given back yet
                assert "is in flight" in job.release_refusal("n2")
            job.grow_done()
            assert job.order_shrink(3.0, 1) == ("n2",) and job.releasing == 1
            assert job.shrink_done(4.0, ["n2", "n9"]) == (["n2"], ["n9"])
            job.order_grow(5.0, ["n3"])
            job.withdraw_order(["n3"], 4.0)  # never sent: as before
            assert (job.nodes, job.busy, job.last_order_s) == (["n1"], False, 4.0)
            assert job.end(6.0, "ended") == ["n1"]
            records.append(job.record())
        assert records[0] == records[1] == records[2]
        rec = records[0]
        assert (rec.grows, rec.shrinks, rec.requests, rec.requests_served) == (
            grows, 1, served, served)
        assert [len(n) for _, n in rec.allotment] == [1, 2, 1, 0]


def test_an_evolving_jobs_request_and_release_are_checked_once_for_every_side() -> None:
    for job in _waiting(EVOLVING):
        job.start(0.0, ["n1", "n2", "n3"], elastic=True)
        assert job.take_request() == "the job holds 3 nodes, its maximum"
        assert job.release_refusal("n9") == "the job does not hold 'n9'"
        assert job.release_refusal("n1") == "'n1' is the job's first node (its place 0)"
        with pytest.raises(ValueError, match="first node"):
            job.release(1.0, "n1")
        job.release(1.0, "n3")
        assert job.take_request() is None
        assert job.take_request() == "a request of this job is already pending"
        job.release(2.0, "n2")  # a release drops the pending request
        assert (job.nodes, job.requested, job.requests, job.releases) == (["n1"], 0, 1, 2)
        assert job.allotment == [(0.0, ("n1", "n2", "n3")), (1.0, ("n1", "n2")),
                                 (2.0, ("n1",))]
