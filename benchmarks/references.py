"""The reference figures and the targets that the benchmark scripts compare against.

Each reference is a published or earlier-measured figure kept as what it is: the figure, what
was measured, on which machine, and where it comes from (``source``, and ``cite``, the short
form the results table of ``docs/benchmarks.md`` shows).  Each target is a goal of the project
(or a guard against regressions) with what it is (``cite``).  They are typed here once.  The
scripts copy the ones they measure against into their JSON file (keys ``references`` and
``targets``) and ``benchmarks.report`` reads them from that file, or from here for a file
written before the figure was added.

The kernels need no typed reference: ``benchmarks.kernels_speed`` runs Java reference kernels
in the same run (the figures it shows without a JDK are typed there, with machine and date);
the runtime-scale reference is typed in ``benchmarks.runtime_scale``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["REFERENCES", "TARGETS", "pick"]

_PAPER = {
    "machine": "48-core nodes (the paper's cluster)",
    "source": "Finnerty, Posner et al., \"On the Performance of Malleable APGAS Programs and "
              "Batch Job Schedulers\", 2024: APGAS for Java with Hazelcast, averages over a "
              "job batch",
    "cite": "Finnerty, Posner et al. 2024",
}
_PEERS = {
    "machine": "this project's 2-core machine, 2 worker processes, no tuning",
    "date": "November 2026",
    "source": "measured on this project's 2-core machine, November 2026: the peers in one run, "
              "beside apgaspy's at 373 µs and 39.9 k tasks/s",
    "cite": "measured on this project's 2-core machine, Nov. 2026, peers in one run",
}
_GOAL = "project goal"

#: name -> reference: ``value`` (or ``values``), ``unit``, ``text`` (as the README shows it),
#: ``machine``, ``source``, ``cite``, and what else the figure carries.
REFERENCES: dict[str, dict[str, Any]] = {
    "java_apgas_ready": {
        "value": 6.04, "unit": "s", "runtime_start_s": 4.27,
        "text": "Java APGAS 6.04 s", "what": "start of program until it accepts orders",
        **_PAPER},
    "java_apgas_grow": {
        "value": 14.55, "unit": "s", "places": 3.8, "runtime_s": 14.09, "glb_s": 0.46,
        "text": "Java APGAS 14.55 s for 3.8 places",
        "what": "grow, 3.8 places on average (14.09 s in the runtime, 0.46 s in GLB)",
        **_PAPER},
    "java_apgas_shrink": {
        "value": 7.41, "unit": "s", "places": 2.55, "runtime_s": 6.31, "glb_s": 1.10,
        "text": "Java APGAS 7.41 s for 2.55 places",
        "what": "shrink, 2.55 places on average (6.31 s in the runtime, 1.10 s in GLB)",
        **_PAPER},
    "peers_round_trip_us": {
        "values": {"mpi4py.futures": 454, "Ray actor call": 799, "Ray task": 1614,
                   "Dask submit().result()": 10711},
        "unit": "µs", "text": "Ray actor 799 µs, Ray task 1,614 µs, Dask 10,711 µs",
        "what": "synchronous no-op round trip", **_PEERS},
    "peers_tasks_per_s": {
        "values": {"mpi4py.futures": 2200, "Ray actor": 5400, "Ray task": 2000,
                   "Dask": 600},
        "unit": "tasks/s", "text": "Ray actor 5.4 k/s, Ray task 2.0 k/s, Dask 0.6 k/s",
        "what": "20,000 empty tasks", **_PEERS},
    "paper_batch": {
        "makespan_s": {"fcfs": {"0": 1157.0, "100": 1022.0},
                       "malleable": {"0": 1168.0, "100": 1006.0}},
        "utilisation": {"malleable": {"0": 0.748, "100": 0.905}},
        "unit": "s", "text": "the paper's job batch, Java scheduler",
        "what": "25 jobs, 32 nodes, submissions uniform in [0, 10) min, first 5 at 0, 10 "
                "seeded batches, the job mix of the paper's Table 2; malleable share 0 % "
                "and 100 %",
        **_PAPER},
    "xie_colocation": {
        "counts": [2, 3, 5], "gain": [1.77, 2.59, 3.74], "duty": [0.05, 0.19],
        "beta_n2": 0.773, "beta": 0.524, "beta_stderr": 0.021, "model_error_pct": 4.0,
        "unit": "×", "text": "Xie 2026: 1.77x, 2.59x, 3.74x at N = 2, 3, 5",
        "what": "throughput of N co-located MPI-CFD simulations against one alone on the same "
                "cores, ranks of 5 % (sparse) to 19 % (dense) duty cycle; beta of "
                "T_N = T_1 (1 + beta (rho_N - rho_1)) fitted from N = 2 and from all points",
        "machine": "Kubernetes nodes (the paper's cluster)",
        "source": "Xie, \"Sparse-domain multiplexing of MPI-CFD on Kubernetes\", 2026",
        "cite": "Xie 2026"},
}

#: name -> target: ``op`` ("<=" or ">="), ``value``, ``unit``, ``text``, ``cite`` (what it is:
#: a project goal, or a guard against regressions); ``efficiency_2_places`` also has ``sizes``
#: (the least size of each benchmark it is set for).
TARGETS: dict[str, dict[str, Any]] = {
    "at_over_bare": {"op": "<=", "value": 2.5, "unit": "×", "text": "≤ 2.5× bare pyzmq",
                     "cite": "regression guard"},
    "async_tasks_per_s": {"op": ">=", "value": 60000, "unit": "tasks/s",
                          "text": "≥ 60,000 /s", "cite": _GOAL},
    "ready_s": {"op": "<=", "value": 1.5, "unit": "s", "text": "≤ 1.5 s", "cite": _GOAL},
    "grow_4_s": {"op": "<=", "value": 1.0, "unit": "s", "text": "≤ 1.0 s",
                 "cite": _GOAL},
    "shrink_2_s": {"op": "<=", "value": 0.5, "unit": "s", "text": "≤ 0.5 s",
                   "cite": _GOAL},
    "efficiency_2_places": {
        "op": ">=", "value": 0.90, "unit": "", "text": "≥ 90 %",
        "cite": _GOAL, "sizes": {"uts": 13, "nqueens": 16, "bc": 14}},
    "efficiency_16_places": {"op": ">=", "value": 0.85, "unit": "", "text": "≥ 85 %",
                             "cite": _GOAL},
    "resilient_overhead": {"op": "<=", "value": 0.10, "unit": "", "text": "≤ +10 %",
                           "cite": _GOAL},
    "colocation_gain_n3": {"op": ">=", "value": 2.0, "unit": "×",
                           "text": "≥ 2x for 3 co-located low-duty jobs", "cite": _GOAL},
    "colocation_model_error_pct": {"op": "<=", "value": 10.0, "unit": "%",
                                   "text": "beta model within ±10 % of every point",
                                   "cite": _GOAL},
}


def pick(*names: str) -> dict[str, dict[str, Any]]:
    """The references and targets named, for a results file.

    Args:
        names: keys of :data:`REFERENCES` or :data:`TARGETS`.

    Returns:
        ``{"references": {...}, "targets": {...}}`` with copies of the entries named.

    Raises:
        KeyError: a name that is neither a reference nor a target.
    """
    refs: dict[str, dict[str, Any]] = {}
    targets: dict[str, dict[str, Any]] = {}
    for name in names:
        if name in REFERENCES:
            refs[name] = dict(REFERENCES[name])
        elif name in TARGETS:
            targets[name] = dict(TARGETS[name])
        else:
            raise KeyError(f"no reference or target named {name!r}")
    return {"references": refs, "targets": targets}
