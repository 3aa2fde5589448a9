"""The evolving study in simulation (docs/guides/evolving-scheduling.md).

:func:`evolving_batch` builds the Java scheduler's evaluation batches of ``evotree`` jobs,
with the jobs that are not evolving all rigid or split over rigid, moldable and malleable
(:data:`MIXES`); :func:`evolving_study` runs them under the evolving policies and all-rigid
EASY (:func:`scheduler.evolving_simulation.simulate_evolving`), and
:func:`plot_evolving_study` draws the cuts against all-rigid.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Any

from ..algorithms import EVOLVING_ALGORITHMS, MIXED_ALGORITHMS, make
from ..evolving_simulation import EvolvingJob, EvoTree, simulate_evolving
from ..jobs import JobClass, JobSpec

__all__ = ["EVOLVING_RANGES", "MIXES", "evolving_batch", "evolving_study",
           "plot_evolving_study"]

#: Rigid size → the node range of its evolving form (the Java scheduler's evaluation scripts).
EVOLVING_RANGES: dict[int, tuple[int, int]] = {1: (1, 2), 2: (1, 4), 4: (2, 8), 8: (4, 16)}

#: Batch compositions of :func:`evolving_batch`: the jobs that are not evolving are all rigid
#: (the Java scheduler's evaluation scripts), or split evenly over rigid, moldable and
#: malleable (the published mixed batch, Posner et al. 2024).
MIXES: tuple[str, ...] = ("rigid", "mixed")


def evolving_batch(seed: int, evolving_share: float, *, jobs: int = 20, g_s: float = 50.0,
                   submit_window_s: float = 600.0, first_at_zero: int = 5,
                   required_factor: float = 1.5, mix: str = "rigid") -> list[EvolvingJob]:
    """The Java scheduler's evolving evaluation batch, seeded.

    ``jobs`` synthetic ``evotree`` jobs of 1, 2, 4 or 8 nodes (drawn uniformly),
    ``first_at_zero`` submitted at 0 and the rest uniformly over ``submit_window_s``;
    ``evolving_share`` % of them (rounded, picked at random) are evolving with the ranges of
    :data:`EVOLVING_RANGES`.  The others, by ``mix``:

    * ``"rigid"``: all rigid, of their drawn size (the Java scheduler's evaluation scripts);
    * ``"mixed"``: split evenly over rigid, moldable and malleable (in random order; with a
      count not divisible by 3 the first classes of a random rotation get one more), the
      moldable and malleable ones with the same ranges as the evolving ones.  This is the
      published mixed batch (Posner et al. 2024: rigid, moldable, malleable and evolving
      jobs), whose proportions the paper does not give: an even split favours no class.

    The sizes, submission times and evolving jobs depend on ``seed`` only, not on ``mix``:
    both mixes (and every share's rigid jobs) run the same programs.  Required time:
    ``required_factor`` × the run time on the job's smallest count.

    Raises:
        ValueError: a share outside 0..100, ``first_at_zero > jobs``, ``jobs < 1`` or an
            unknown ``mix``.
    """
    if not 0 <= evolving_share <= 100:
        raise ValueError(f"evolving_share must lie in 0..100 %, got {evolving_share}")
    if jobs < 1 or not 0 <= first_at_zero <= jobs:
        raise ValueError(f"need jobs >= 1 and 0 <= first_at_zero <= jobs, got {jobs}, "
                         f"{first_at_zero}")
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {', '.join(MIXES)}, got {mix!r}")
    rng = random.Random(seed)
    sizes = [rng.choice(sorted(EVOLVING_RANGES)) for _ in range(jobs)]
    submits = [0.0] * first_at_zero + sorted(
        rng.uniform(0, submit_window_s) for _ in range(jobs - first_at_zero))
    evolving = set(rng.sample(range(jobs), round(jobs * evolving_share / 100)))
    classes = dict.fromkeys(range(jobs), JobClass.RIGID)
    classes.update(dict.fromkeys(evolving, JobClass.EVOLVING))
    if mix == "mixed":
        rest = [i for i in range(jobs) if i not in evolving]
        rng.shuffle(rest)
        kinds = [JobClass.RIGID, JobClass.MOLDABLE, JobClass.MALLEABLE]
        first = rng.randrange(3)
        kinds = kinds[first:] + kinds[:first]
        classes.update({i: kinds[k % 3] for k, i in enumerate(rest)})
    out = []
    for i, (size, submit) in enumerate(zip(sizes, submits, strict=True)):
        tree = EvoTree(size, g_s)
        job_class = classes[i]
        if job_class is JobClass.RIGID:
            spec = JobSpec(name=f"evotree-{i}", nodes=size,
                           required_time_s=required_factor * tree.run_time_s(size))
        else:
            lo, hi = EVOLVING_RANGES[size]
            spec = JobSpec(name=f"evotree-{i}-{job_class.value}", job_class=job_class,
                           min_nodes=lo, max_nodes=hi, nodes=size,
                           required_time_s=required_factor * tree.run_time_s(lo))
        out.append(EvolvingJob(i, spec, tree, round(submit, 3)))
    return out


def evolving_study(*, batches: int = 20, seed: int = 42, shares: Sequence[float] = (
        20, 40, 60, 80, 100), algorithms: Sequence[str] = EVOLVING_ALGORITHMS,
        total_nodes: int = 10, **batch_options: Any) -> list[dict[str, Any]]:
    """The evolving study: every algorithm at every evolving share, and all-rigid.

    For each share and seed ``seed … seed + batches - 1`` the batch of
    :func:`evolving_batch` runs under each algorithm: the policies of
    :data:`~scheduler.algorithms.MIXED_ALGORITHMS` (they resize malleable jobs too) on the
    ``"mixed"`` batch, the others on the ``"rigid"`` one (its other jobs rigid).  The row
    ``all-rigid`` runs the same batches (share 0: every job in its rigid form) under EASY
    backfilling.

    Returns:
        Rows ``{"algorithm", "mix", "evolving_share" (%), "batches", "makespan_s",
        "mean_turnaround_s", "mean_wait_s", "utilisation", "requests", "requests_served",
        "releases", "shrinks", "grows", "makespan_cut", "turnaround_cut"}``: means over the
        batches (``mix``: ``"all-rigid"``, ``"rigid"`` or ``"mixed"``); the cuts are
        ``1 - value / all-rigid value`` of the means (0.23 = 23 % lower).  Rows in the order
        all-rigid, then per share the algorithms in the order given.

    Raises:
        ValueError: ``batches < 1``, an unknown algorithm, a bad share.
    """
    if batches < 1:
        raise ValueError(f"batches must be >= 1, got {batches}")
    for name in algorithms:
        make(name)  # an unknown name fails before any simulation
    seeds = range(seed, seed + batches)

    def row(name: str, mix: str, share: float, runs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"algorithm": name, "mix": mix, "evolving_share": share,
                               "batches": batches}
        for key in runs[0]:
            out[key] = round(statistics.fmean(r[key] for r in runs), 4)
        return out

    base = row("all-rigid", "all-rigid", 0, [
        simulate_evolving(evolving_batch(s, 0, **batch_options), "easy",
                          total_nodes=total_nodes) for s in seeds])
    rows = [base]
    for share in shares:
        for name in algorithms:
            mix = "mixed" if name in MIXED_ALGORITHMS else "rigid"
            rows.append(row(name, mix, share, [
                simulate_evolving(evolving_batch(s, share, mix=mix, **batch_options), name,
                                  total_nodes=total_nodes) for s in seeds]))
    for r in rows:
        r["makespan_cut"] = round(1 - r["makespan_s"] / base["makespan_s"], 4)
        r["turnaround_cut"] = round(1 - r["mean_turnaround_s"] / base["mean_turnaround_s"], 4)
    return rows


def plot_evolving_study(rows: Sequence[dict[str, Any]], directory: Any) -> list[Any]:
    """Plot the study's cuts against all-rigid: ``evolving_study.png`` in ``directory``.

    Args:
        rows: :func:`evolving_study`'s rows.
        directory: a folder (``str`` or :class:`pathlib.Path`; made if missing).

    Returns:
        The paths written (one PNG: makespan cut and mean turnaround cut, %, against the
        evolving share, one line per algorithm, and the published cuts, 23 % and 29 %, as
        dashed lines).

    Raises:
        ValueError: rows without an algorithm other than ``all-rigid``.
    """
    from pathlib import Path

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["algorithm"] for r in rows if r["algorithm"] != "all-rigid"))
    if not names:
        raise ValueError("no algorithm row to plot")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for ax, key, title, published in (
            (axes[0], "makespan_cut", "makespan cut against all-rigid", 23),
            (axes[1], "turnaround_cut", "mean turnaround cut against all-rigid", 29)):
        ax.axhline(published, color="grey", linestyle="--", linewidth=1,
                   label="published, mixed batch (Posner et al. 2024)")
        for name in names:
            mine = [r for r in rows if r["algorithm"] == name]
            ax.plot([r["evolving_share"] for r in mine], [100 * r[key] for r in mine],
                    marker="o", label=f"{name} ({mine[0]['mix']})")
        ax.set_title(title)
        ax.set_xlabel("evolving jobs (%)")
        ax.set_ylabel("%")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    path = folder / "evolving_study.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
