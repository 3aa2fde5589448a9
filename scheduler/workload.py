"""Workloads for the simulator: the paper's job mix and Standard Workload Format traces.

The paper's mix (Finnerty et al. 2024, Table 2)
-----------------------------------------------
:func:`paper_batch` draws a batch the way the Java experiment generator
(``generateExperiments.py``) does:

1. ``random.Random(seed)`` draws ``jobs`` (25) rows of :data:`PAPER_MIX` by weight
   (``choices``), then one integer submission second per job, uniform in
   ``[0, submit_window_s)`` (600 s = 10 min).
2. Jobs are sorted by drawn second.  The first ``first_at_zero`` (5) are submitted at 0; each
   later job keeps its gap to the previous one, so job ``i`` is submitted at
   ``drawn[i] - drawn[first_at_zero - 1]`` (the Java generator writes ``sleep`` gaps after
   submitting the first five at once).
3. ``malleable_share`` x % turns ``int(jobs * x / 100)`` jobs into their malleable form
   (the row's node range).  The chosen jobs come from one seeded permutation per batch, so
   the malleable jobs at 40 % include those at 20 %: shares differ only by the conversion.
   Rigid jobs keep their node count.
4. Required time (what EASY plans with): the model's run time at the rigid node count times
   ``required_factor`` (1.5); for a malleable job, at its *minimum* node count (the worst
   case if it is never grown, which is what a user asking for a time limit must cover).
   ``required_time_s`` fixes one value for every job instead (the Java job scripts all ask
   for 800 s).

Standard Workload Format (Feitelson et al., Parallel Workloads Archive)
----------------------------------------------------------------------
One job a line, 18 whitespace-separated fields, ``-1`` for unknown; lines starting with ``;``
are header comments.  Fields used (1-based): 1 job number, 2 submit time (s), 4 run time (s),
5 allocated processors, 8 requested processors, 9 requested time (s).  Processors are
field 5, or field 8 when 5 is unknown; nodes = ``ceil(processors / cores_per_node)``.  Jobs
with an unknown or zero run time or processor count are skipped (cancelled jobs); jobs
larger than the cluster are kept and refused by the simulator.  Required time is field 9,
or the run time when unknown; it is raised to the run time when smaller (a job is not killed
in simulation).  Submit times are shifted so the first job is submitted at 0.  A job's run time
at other node counts follows a one-point Amdahl curve with ``serial_fraction`` (0.05).
``malleable_share`` x % of the jobs (a seeded choice) become malleable with the range
``[max(1, n // 2), min(total_nodes, 2 n)]``.  With ``as_cores`` the other jobs ask for their
processors as cores (``#CORES p``, :mod:`scheduler.resources`) instead of ``n`` whole nodes, to
be simulated on nodes of ``cores_per_node`` cores (``SimConfig.cores_per_node``); their run
time is the trace's wherever they are placed.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .jobs import BatchEntry, JobClass, JobSpec
from .model import JACOBI_SIZES, JacobiModel, RuntimeModel, ScalingCurve, jacobi_placeholder
from .records import JobRecord

__all__ = [
    "PAPER_MIX",
    "jacobi_batch",
    "MixRow",
    "SwfJob",
    "Workload",
    "paper_batch",
    "read_swf",
    "swf_workload",
    "synthetic_swf",
    "write_swf",
]


@dataclass(frozen=True)
class MixRow:
    """One row of a job mix: a program and size run rigidly on ``nodes`` nodes, drawn with
    relative ``weight``; its malleable form has the range ``min_nodes``–``max_nodes``."""

    program: str
    size: int
    nodes: int
    weight: float
    min_nodes: int
    max_nodes: int

    @property
    def label(self) -> str:
        """Short name, e.g. ``uts18``, ``pi8e10``."""
        size = f"{self.size:g}".replace("+", "") if self.size >= 1e6 else str(self.size)
        return f"{self.program}{size}"


def _rows(program: str, size: int, rng: tuple[int, int], *counts: tuple[int, float]):
    return [MixRow(program, size, n, w, rng[0], rng[1]) for n, w in counts]


#: Table 2 of Finnerty et al. 2024: (program, size, rigid nodes, weight, malleable range).
PAPER_MIX: tuple[MixRow, ...] = tuple(
    _rows("uts", 18, (1, 4), (2, 1.5), (4, 0.5))
    + _rows("uts", 19, (1, 8), (2, 1.5), (4, 1), (8, 1))
    + _rows("uts", 20, (8, 16), (8, 1), (16, 0.5))
    + _rows("nqueens", 17, (1, 4), (2, 1.5), (4, 1))
    + _rows("nqueens", 18, (8, 16), (8, 1), (16, 0.5))
    + _rows("bc", 17, (1, 4), (2, 1.5), (4, 1))
    + _rows("bc", 18, (1, 8), (2, 1.5), (4, 1), (8, 0.5))
    + _rows("bc", 19, (8, 16), (8, 1), (16, 0.5))
    + _rows("pi", 80_000_000_000, (1, 4), (2, 1.5), (4, 1))
    + _rows("pi", 600_000_000_000, (4, 16), (4, 1.5), (8, 1), (16, 0.5))
    + _rows("pi", 1_200_000_000_000, (8, 16), (8, 1), (16, 0.5))
)


@dataclass(frozen=True)
class Workload:
    """What a simulation runs: the jobs with submission times and the run-time model."""

    entries: tuple[BatchEntry, ...]
    model: RuntimeModel


def paper_batch(
    seed: int,
    malleable_share: float,
    *,
    mix: Sequence[MixRow] = PAPER_MIX,
    model: RuntimeModel | None = None,
    jobs: int = 25,
    submit_window_s: float = 600.0,
    first_at_zero: int = 5,
    required_factor: float = 1.5,
    required_time_s: float | None = None,
) -> Workload:
    """One seeded batch of the paper's evaluation (module docstring, steps 1-4).

    Args:
        seed: the batch's seed (same seed, same jobs and times for every share).
        malleable_share: percentage 0-100 of jobs in malleable form.
        mix: the rows to draw from (default: the paper's Table 2).
        model: run-time model knowing every row's ``(program, size)`` (default the paper's).
        jobs: jobs per batch.
        submit_window_s: submissions are drawn in ``[0, submit_window_s)`` (seconds).
        first_at_zero: how many jobs are submitted at 0.
        required_factor: required time = model time × this factor.
        required_time_s: one required time (seconds) for every job instead.

    Raises ``ValueError`` for a share outside 0-100, no rows, or ``jobs < 1``.
    """
    if not 0 <= malleable_share <= 100:
        raise ValueError(f"malleable_share is a percentage 0-100, got {malleable_share}")
    if not mix or jobs < 1:
        raise ValueError("a batch needs at least one mix row and one job")
    model = model or RuntimeModel.paper()
    rng = random.Random(seed)
    rows = rng.choices(list(mix), weights=[r.weight for r in mix], k=jobs)
    window = max(1, int(submit_window_s))
    drawn = [rng.randint(0, window - 1) for _ in rows]
    order = sorted(range(jobs), key=lambda i: drawn[i])
    base = drawn[order[first_at_zero - 1]] if 0 < first_at_zero <= jobs else 0
    conv = random.Random(f"{seed}/malleable")
    chosen = set(conv.sample(range(jobs), jobs)[: int(jobs * malleable_share / 100 + 1e-9)])
    entries: list[BatchEntry] = []
    for rank, i in enumerate(order):
        row = rows[i]
        submit = 0.0 if rank < first_at_zero else float(drawn[i] - base)
        malleable = rank in chosen
        curve = model.curve(row.program, row.size)
        if malleable:
            req = curve(row.min_nodes) * required_factor
            spec = JobSpec(
                name=f"{row.label}_malleable_{row.min_nodes}-{row.max_nodes}",
                job_class=JobClass.MALLEABLE,
                nodes=row.nodes if row.min_nodes <= row.nodes <= row.max_nodes else None,
                min_nodes=row.min_nodes,
                max_nodes=row.max_nodes,
                required_time_s=required_time_s or req,
                program=row.program,
                size=row.size,
            )
        else:
            spec = JobSpec(
                name=f"{row.label}_rigid_{row.nodes}",
                job_class=JobClass.RIGID,
                nodes=row.nodes,
                required_time_s=required_time_s or curve(row.nodes) * required_factor,
                program=row.program,
                size=row.size,
            )
        entries.append(BatchEntry(spec, submit))
    return Workload(tuple(entries), model)


def jacobi_batch(
    seed: int,
    *,
    jobs: int = 16,
    submission_gap_s: float = 90.0,
    model: JacobiModel | None = None,
    required_factor: float = 1.5,
) -> Workload:
    """One batch of the priority study (Bhosale et al. 2024; docs/guides/priorities.md).

    ``random.Random(seed)`` draws, for each of ``jobs`` jobs in turn, a size uniformly from
    the four Jacobi sizes (:data:`~scheduler.model.JACOBI_SIZES`: small, medium, large,
    xlarge) and then a priority uniformly from 1-5.  Job ``i`` (from 0) is submitted at
    ``i * submission_gap_s``.  Every job is malleable over its size's node range; a policy
    that does not resize simply never orders it.  Required time (what a reservation plans
    with): the model's run time at the job's minimum times ``required_factor``.

    Args:
        seed: the batch's seed.
        jobs: jobs per batch (>= 1).
        submission_gap_s: seconds between two submissions (>= 0).
        model: run times and rescale costs (default :func:`~scheduler.model.jacobi_placeholder`).
        required_factor: required time = model time at the minimum x this (>= 1).

    Raises ``ValueError`` for ``jobs < 1``, a negative gap or a factor below 1.
    """
    if jobs < 1:
        raise ValueError(f"a batch needs at least one job, got {jobs}")
    if not submission_gap_s >= 0:
        raise ValueError(f"submission_gap_s must be >= 0 s, got {submission_gap_s}")
    if not required_factor >= 1:
        raise ValueError(f"required_factor must be >= 1, got {required_factor}")
    model = model or jacobi_placeholder()
    runtime = model.runtime_model()
    rng = random.Random(seed)
    labels = list(JACOBI_SIZES)
    entries = []
    for i in range(jobs):
        label = rng.choice(labels)
        priority = rng.randint(1, 5)
        side, steps, lo, hi = JACOBI_SIZES[label]
        spec = JobSpec(
            name=f"jacobi_{label}_{i}",
            job_class=JobClass.MALLEABLE,
            min_nodes=lo,
            max_nodes=hi,
            required_time_s=runtime.run_time_s("jacobi", label, lo) * required_factor,
            program="jacobi",
            size=label,
            priority=priority,
        )
        entries.append(BatchEntry(spec, i * float(submission_gap_s)))
    return Workload(tuple(entries), runtime)


@dataclass(frozen=True)
class SwfJob:
    """The fields of one SWF line this package uses (seconds, processors)."""

    number: int
    submit_s: float
    run_s: float
    processors: int
    requested_s: float | None


def read_swf(path: str | Path) -> list[SwfJob]:
    """Read an SWF trace (module docstring).  Skips jobs without run time or processors.

    Raises ``ValueError`` naming the line for a line that does not have 18 numeric fields.
    """
    out: list[SwfJob] = []
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(";"):
            continue
        parts = line.split()
        if len(parts) != 18:
            raise ValueError(f"{path}: line {lineno}: expected 18 SWF fields, got {len(parts)}")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise ValueError(f"{path}: line {lineno}: non-numeric SWF field: {line!r}") from None
        number, submit, run = int(values[0]), values[1], values[3]
        procs = values[4] if values[4] > 0 else values[7]
        if run <= 0 or procs <= 0 or submit < 0:
            continue
        req = values[8] if values[8] > 0 else None
        out.append(SwfJob(number, submit, run, int(procs), req))
    return out


def swf_workload(
    path: str | Path,
    *,
    total_nodes: int,
    cores_per_node: int = 1,
    malleable_share: float = 0.0,
    seed: int = 0,
    serial_fraction: float = 0.05,
    max_jobs: int | None = None,
    as_cores: bool = False,
) -> Workload:
    """A workload from an SWF trace (module docstring for the mapping).

    Args:
        path: the ``.swf`` file.
        total_nodes: the simulated cluster's size (nodes), bounds the malleable range.
        cores_per_node: processors per node of the trace's machine.
        malleable_share: percentage 0-100 of jobs made malleable (seeded choice).
        seed: seed of that choice.
        serial_fraction: Amdahl serial fraction of every job's run-time curve.
        max_jobs: keep only the first jobs of the trace.
        as_cores: the jobs not made malleable ask for their processors as cores.
    """
    if cores_per_node < 1:
        raise ValueError(f"cores_per_node must be >= 1, got {cores_per_node}")
    if not 0 <= malleable_share <= 100:
        raise ValueError(f"malleable_share is a percentage 0-100, got {malleable_share}")
    jobs = read_swf(path)
    if max_jobs is not None:
        jobs = jobs[:max_jobs]
    if not jobs:
        raise ValueError(f"{path}: no usable job in the trace")
    t0 = min(j.submit_s for j in jobs)
    chooser = random.Random(f"{seed}/swf-malleable")
    chosen = set(
        chooser.sample(range(len(jobs)), len(jobs))[
            : int(len(jobs) * malleable_share / 100 + 1e-9)
        ]
    )
    model = RuntimeModel()
    entries: list[BatchEntry] = []
    for index, job in enumerate(jobs):
        n = max(1, math.ceil(job.processors / cores_per_node))
        model.add("swf", job.number, ScalingCurve({n: job.run_s}, serial_fraction, floor_s=1.0))
        required = max(job.requested_s or job.run_s, job.run_s)
        lo, hi = max(1, n // 2), min(total_nodes, 2 * n)
        if index in chosen and lo < hi and n <= total_nodes:
            spec = JobSpec(
                name=f"swf{job.number}",
                job_class=JobClass.MALLEABLE,
                nodes=n,
                min_nodes=lo,
                max_nodes=hi,
                required_time_s=max(required, ScalingCurve({n: job.run_s}, serial_fraction)(lo)),
                program="swf",
                size=job.number,
            )
        elif as_cores:
            spec = JobSpec(name=f"swf{job.number}", cores=job.processors,
                           required_time_s=required, program="swf", size=job.number)
            model.add("swf", job.number, ScalingCurve({1: job.run_s}, 0.0, floor_s=1.0))
        else:
            spec = JobSpec(
                name=f"swf{job.number}",
                nodes=n,
                required_time_s=required,
                program="swf",
                size=job.number,
            )
        entries.append(BatchEntry(spec, job.submit_s - t0))
    entries.sort(key=lambda e: e.submit_s)
    return Workload(tuple(entries), model)


def synthetic_swf(
    path: str | Path,
    *,
    jobs: int,
    nodes: int = 64,
    seed: int = 1,
    mean_interarrival_s: float = 3000.0,
    log_run_mu: float = 7.0,
    log_run_sigma: float = 1.5,
    requested_factor: tuple[float, float] = (1.0, 3.0),
    requested_memory_kb: int = 1024,
) -> Path:
    """Write a synthetic SWF trace of rigid jobs on one-core nodes and return its path.

    The workload of the AccaSim comparison (``benchmarks/accasim_compare.py``,
    docs/guides/simulation.md), drawn with ``random.Random(seed)``:

    * submissions: exponential inter-arrival times of mean ``mean_interarrival_s`` (s),
      rounded down to whole seconds, the first job at 0;
    * run time: ``max(1, round(lognormvariate(log_run_mu, log_run_sigma)))`` seconds
      (``mu = 7, sigma = 1.5``: median 1,097 s, mean about 3,400 s);
    * requested time: the run time times a uniform factor in ``requested_factor`` (1-3),
      rounded up to whole seconds;
    * size: uniform integer in ``[1, nodes]`` processors (= nodes, one core each);
    * requested memory ``requested_memory_kb`` per processor (AccaSim refuses jobs that
      request none); user, group, executable, queue, partition 1; status 1 (completed).

    Args:
        path: the ``.swf`` file to write (overwritten).
        jobs: number of jobs (>= 1).
        nodes: the largest job, and the ``MaxNodes``/``MaxProcs`` header (>= 1).
        seed: seed of the draw.
        mean_interarrival_s, log_run_mu, log_run_sigma, requested_factor: as above.
        requested_memory_kb: SWF field 10 (KB per processor, > 0).

    Raises:
        ValueError: for ``jobs < 1``, ``nodes < 1``, a non-positive mean inter-arrival time
            or memory, or a requested-time factor range not within ``[1, inf)``.
    """
    lo_f, hi_f = requested_factor
    if jobs < 1 or nodes < 1:
        raise ValueError(f"jobs and nodes must be >= 1, got {jobs} and {nodes}")
    if not mean_interarrival_s > 0 or requested_memory_kb <= 0:
        raise ValueError("mean_interarrival_s and requested_memory_kb must be > 0")
    if not 1.0 <= lo_f <= hi_f:
        raise ValueError(f"requested_factor must satisfy 1 <= low <= high, got {requested_factor}")
    rng = random.Random(seed)
    lines = [
        "; Version: 2.2",
        f"; Computer: synthetic ({nodes} one-core nodes), scheduler.workload.synthetic_swf",
        f"; Note: seed {seed}, {jobs} jobs, exponential arrivals of mean {mean_interarrival_s} s,",
        f"; Note: log-normal run times (mu {log_run_mu}, sigma {log_run_sigma}),",
        f"; Note: requested time = run time x U({lo_f}, {hi_f}), sizes U{{1..{nodes}}}",
        f"; MaxJobs: {jobs}",
        f"; MaxRecords: {jobs}",
        f"; MaxNodes: {nodes}",
        f"; MaxProcs: {nodes}",
    ]
    submit = 0.0
    for number in range(1, jobs + 1):
        if number > 1:
            submit += rng.expovariate(1.0 / mean_interarrival_s)
        run = max(1, round(rng.lognormvariate(log_run_mu, log_run_sigma)))
        requested = math.ceil(run * rng.uniform(lo_f, hi_f))
        size = rng.randint(1, nodes)
        lines.append(
            f"{number} {int(submit)} -1 {run} {size} -1 -1 {size} {requested} "
            f"{requested_memory_kb} 1 1 1 1 1 1 -1 -1"
        )
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="ascii")
    return out


def write_swf(
    records: Iterable[JobRecord],
    path: str | Path,
    *,
    cores_per_node: int = 1,
    total_nodes: int | None = None,
    notes: Sequence[str] = (),
) -> Path:
    """Write a simulated schedule as an SWF trace (Feitelson et al., Parallel Workloads
    Archive, version 2.2) and return its path.

    One line per record, in job-number order: field 1 the job number (the trace's own
    number for jobs read by :func:`swf_workload`, else the simulator's id), 2 submit time,
    3 wait time (start - submit), 4 run time (end - start; seconds, rounded to 3 decimals),
    5 allocated processors (the most nodes the job held x ``cores_per_node``), 8 requested
    processors (the job's maximum nodes x ``cores_per_node``), 9 requested time (the
    spec's required time when known, else -1), 11 status 1 (completed); other fields -1.
    Read back with :func:`read_swf`.

    Args:
        records: :class:`~scheduler.simulate.JobRecord` objects (``SimResult.records``).
        path: the file to write (overwritten).
        cores_per_node: processors per node (>= 1).
        total_nodes: the simulated cluster's size, for the ``MaxNodes`` header line.
        notes: extra ``; Note:`` header lines (algorithm, options...).

    Raises:
        ValueError: ``cores_per_node < 1``.
    """
    if cores_per_node < 1:
        raise ValueError(f"cores_per_node must be >= 1, got {cores_per_node}")
    rows = sorted(
        records,
        key=lambda r: (r.size if r.program == "swf" and isinstance(r.size, int) else r.job_id),
    )
    lines = ["; Version: 2.2", "; Computer: apgaspy scheduler simulator (scheduler.simulate)"]
    if total_nodes is not None:
        lines += [f"; MaxNodes: {total_nodes}", f"; MaxProcs: {total_nodes * cores_per_node}"]
    lines += [f"; MaxJobs: {len(rows)}", f"; MaxRecords: {len(rows)}"]
    lines += [f"; Note: {note}" for note in notes]

    def num(x: float) -> str:
        return f"{round(x, 3):g}" if x != int(x) else str(int(x))

    for r in rows:
        number = r.size if r.program == "swf" and isinstance(r.size, int) else r.job_id
        held = max((len(nodes) for _, nodes in r.allotment), default=0)
        required = r.required_s
        lines.append(
            f"{number} {num(r.submit_s)} {num(r.wait_s)} {num(r.run_s)} "
            f"{held * cores_per_node} -1 -1 {r.max_nodes * cores_per_node} "
            f"{num(required) if required is not None else -1} -1 1 -1 -1 -1 -1 -1 -1 -1"
        )
    out = Path(path)
    out.write_text("\n".join(lines) + "\n", encoding="ascii")
    return out
