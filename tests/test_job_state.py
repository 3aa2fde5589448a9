"""One job state for the real scheduler, the simulator and the evolving simulation
(docs/design/scheduler-structure.md): the same answer to "does it take orders", the same
view, the same refusal of a decision, the same record."""

from __future__ import annotations

import math

import pytest

from scheduler import InvalidDecisionError, JobSpec
from scheduler.algorithms import Grow, Shrink, Start, View
from scheduler.evolving_simulation import EvolvingJob, EvoTree, MonitorConfig, _run
from scheduler.job_state import check_decision, decision_refusal
from scheduler.model import ResizeCostModel, ScalingCurve
from scheduler.simulate import _Job
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
        _Job(1, spec, 0.0, ScalingCurve({1: 10.0}), state="running", nodes=list(nodes),
             start_s=5.0),
        EvolvingJob(1, spec, EvoTree(2, 10.0), 0.0, state="running", nodes=list(nodes),
                    start_s=5.0),
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
    with pytest.raises(InvalidDecisionError, match="shrink-the-rigid: Shrink.*not malleable"):
        _run([job], ShrinkTheRigid(), 4, 5.0, MonitorConfig(), ResizeCostModel())


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
