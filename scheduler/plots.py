"""PNG charts of simulation results, with matplotlib (imported only when a chart is drawn).

* :func:`gantt`: nodes (rows) over time, one colour a job, for one run; every resize is
  marked (a node added: a triangle up at its row, a node given back or taken: down).
* :func:`usage`: busy nodes over time, one line an algorithm, for one batch.
* :func:`makespan_vs_share`: mean makespan (and utilisation) against the malleable share.
* :func:`priority_sweeps`: the priority study's four metrics against the submission gap and
  the rescale gap, one line a policy (docs/guides/priorities.md).

matplotlib is the ``plot`` extra of the project (``pip install 'apgaspy[plot]'``); without it
every function raises ``RuntimeError`` saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .algorithms.base import node_key
from .records import SimResult

__all__ = ["gantt", "makespan_vs_share", "priority_sweeps", "resize_marks", "usage"]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError(
            "drawing charts needs matplotlib: pip install matplotlib (the 'plot' extra)"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def resize_marks(result: SimResult) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """The resizes of a run, as :func:`gantt` marks them: ``(added, removed)``, each a list
    of ``(time_s, node)`` sorted by time then node: a node a job gained after its start (a
    grow order, an evolving request granted), or lost before its end (a shrink order, an
    evolving job's release)."""
    added: list[tuple[float, str]] = []
    removed: list[tuple[float, str]] = []
    for rec in result.records:
        for (_, before), (t, after) in zip(rec.allotment, rec.allotment[1:-1], strict=False):
            added += [(t, n) for n in set(after) - set(before)]
            removed += [(t, n) for n in set(before) - set(after)]

    def order(marks: list[tuple[float, str]]) -> list[tuple[float, str]]:
        return sorted(marks, key=lambda m: (m[0], node_key(m[1])))

    return order(added), order(removed)


def gantt(result: SimResult, path: str | Path, *, title: str = "") -> Path:
    """Draw one run's node occupation: x time (s), y node, a bar per job and node held.

    Every change of a job's nodes after its start is marked at the node concerned: a grow
    (an order, or an evolving job's request granted) by a green triangle up, a shrink or an
    evolving job's release by a red triangle down.  Writes ``path`` (PNG); returns it.
    Raises ``RuntimeError`` without matplotlib."""
    plt = _pyplot()
    nodes = sorted(
        {n for rec in result.records for _, held in rec.allotment for n in held}, key=node_key
    )
    row = {n: i for i, n in enumerate(nodes)}
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.22 * len(nodes) + 1.5)))
    added, removed = resize_marks(result)
    grown = [(t, row[n]) for t, n in added]
    shrunk = [(t, row[n]) for t, n in removed]
    for index, rec in enumerate(result.records):
        colour = cmap(index % 20)
        hatch = "//" if rec.job_class == "malleable" else None
        spans: dict[str, list[tuple[float, float]]] = {}
        for (t0, held), (t1, _) in zip(rec.allotment, rec.allotment[1:], strict=False):
            for n in held:
                spans.setdefault(n, []).append((t0, t1 - t0))
        for n, segments in spans.items():
            ax.broken_barh(
                segments,
                (row[n] - 0.4, 0.8),
                facecolors=colour,
                edgecolor="black" if hatch else colour,
                linewidth=0.2,
                hatch=hatch,
            )
        if rec.allotment and rec.allotment[0][1]:
            first = min(rec.allotment[0][1], key=node_key)
            ax.text(rec.start_s + 2, row[first], str(rec.job_id), fontsize=6, va="center")
    for points, marker, colour, label in ((grown, "^", "green", "node added"),
                                          (shrunk, "v", "red", "node given back")):
        if points:
            ax.scatter([t for t, _ in points], [r for _, r in points], marker=marker,
                       color=colour, edgecolors="black", linewidths=0.4, s=28, zorder=3,
                       label=f"{label} ({len(points)})")
    if grown or shrunk:
        ax.legend(fontsize=7, loc="upper right")
    ax.set_yticks(range(len(nodes)), nodes, fontsize=6)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("node")
    ax.set_title((title or f"{result.algorithm}: makespan {result.makespan_s:.0f} s")
                 + " (hatched: malleable; labels: job ids)", fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def usage(
    results: Mapping[str, SimResult], path: str | Path, *, total_nodes: int, title: str = ""
) -> Path:
    """Busy nodes / total over time for several runs of one batch (label → result)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    for label, result in results.items():
        curve = result.usage_curve()
        if not curve:
            continue
        xs = [t for t, _ in curve]
        ys = [busy / total_nodes for _, busy in curve]
        ax.step(xs, ys, where="post", label=f"{label} ({result.utilisation:.1%})")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("nodes in use (fraction)")
    ax.set_title(title or "node utilisation over time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def makespan_vs_share(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Mean makespan and utilisation against the malleable share, a line per algorithm."""
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for algorithm in dict.fromkeys(r["algorithm"] for r in rows):
        mine = sorted((r for r in rows if r["algorithm"] == algorithm),
                      key=lambda r: r["malleable_share"])
        shares = [r["malleable_share"] for r in mine]
        ax1.errorbar(shares, [r["makespan_s"] for r in mine],
                     yerr=[r.get("makespan_std_s", 0.0) for r in mine],
                     marker="o", capsize=3, label=algorithm)
        ax2.plot(shares, [100 * r["utilisation"] for r in mine], marker="o", label=algorithm)
    ax1.set_xlabel("malleable jobs (%)")
    ax1.set_ylabel("makespan (s), mean ± sd over batches")
    ax2.set_xlabel("malleable jobs (%)")
    ax2.set_ylabel("node utilisation (%)")
    ax1.legend(fontsize=8)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def priority_sweeps(rows: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """Draw the priority study's sweeps (rows of :func:`scheduler.studies.priority.priority_study`).

    Writes ``priority_submission_gap.png`` and ``priority_rescale_gap.png`` in ``out_dir``
    (created): four panels each (total time, utilisation, weighted mean response and
    completion) against the swept gap (s), one line a policy.  Returns the paths.
    Raises ``RuntimeError`` without matplotlib.
    """
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = (("total_time_s", "total time (s)", 1.0), ("utilisation", "utilisation (%)", 100.0),
               ("weighted_mean_response_s", "weighted mean response (s)", 1.0),
               ("weighted_mean_completion_s", "weighted mean completion (s)", 1.0))
    written = []
    for sweep, x_key, label in (("submission_gap", "submission_gap_s", "submission gap (s)"),
                                ("rescale_gap", "rescale_gap_s", "rescale gap (s)")):
        chosen = [r for r in rows if r["sweep"] == sweep]
        if not chosen:
            continue
        fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
        for ax, (key, title, scale) in zip(axes.flat, metrics, strict=True):
            for policy in dict.fromkeys(r["policy"] for r in chosen):
                pts = sorted((r[x_key], r[key] * scale) for r in chosen if r["policy"] == policy)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3,
                        label=policy)
            ax.set_xlabel(label)
            ax.set_ylabel(title)
            ax.grid(alpha=0.3)
        axes.flat[0].legend(fontsize=8)
        fig.suptitle(f"priority study: {label} swept, means over {chosen[0]['batches']} batches")
        fig.tight_layout()
        path = out / f"priority_{sweep}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
