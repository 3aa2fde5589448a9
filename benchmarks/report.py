"""Write the results tables of ``docs/benchmarks.md`` from ``benchmarks/results/*.json``.

    python -m benchmarks.report            # rewrite the tables in docs/benchmarks.md
    python -m benchmarks.report --print    # print the results table instead

The results table sits between the markers ``<!-- results:start -->`` and
``<!-- results:end -->``, the job-batch table between ``<!-- scheduling:start -->`` and
``<!-- scheduling:end -->``.  Each row gives our figure, the reference with where it comes
from (the paper, a figure measured on a named machine and date, or a Java kernel run in the
same run), the target with what it is, and the machine our figure was measured on.  No figure
or target is typed here: each comes from the results file (the scripts copy them there from
``benchmarks.references``; the kernels' rows hold same-run Java figures measured by
``benchmarks.kernels_speed``; the runtime-scale ones come from ``benchmarks.runtime_scale``),
and from ``benchmarks.references`` for a file written before it held them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ._results import RESULTS_DIR
from .references import REFERENCES, TARGETS

#: The page whose tables ``main`` rewrites.
PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
START, END = "<!-- results:start -->", "<!-- results:end -->"


def _load(name: str) -> dict[str, Any] | None:
    path = RESULTS_DIR / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _ref(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Reference ``name`` as the results file holds it, or from ``benchmarks.references``
    for a file written before it held references."""
    ref = (data.get("references") or {}).get(name)
    return ref if isinstance(ref, dict) else REFERENCES[name]


def _target(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Target ``name`` as the results file holds it, or from ``benchmarks.references`` for a
    file written before it held cited targets (its ``targets`` were bare numbers then)."""
    t = (data.get("targets") or {}).get(name)
    return t if isinstance(t, dict) else TARGETS[name]


def _cited(ref: dict[str, Any]) -> str:
    """A reference as a table cell: its text and, in brackets, where it comes from."""
    return f"{ref['text']} [{ref['cite']}]"


def _goal(t: dict[str, Any]) -> str:
    """A target as a table cell: its text and, in parentheses, what it is (a goal, a guard)."""
    return f"{t['text']} ({t['cite']})"


def _verdict(rt: dict[str, Any]) -> str:
    """``": PASS"`` or ``": FAIL"`` for the ``at`` guard of ``runtime.json``; empty for a file
    written before the guard was judged."""
    g = rt.get("guard")
    return f": {'PASS' if g['pass'] else 'FAIL'}" if isinstance(g, dict) else ""


def _machine(data: dict[str, Any]) -> str:
    m = data["machine"]
    return f"{m.get('label') or m['host']}, {m['date'][:10]}"


def table() -> str:
    """The Markdown table of the latest results."""
    rows = ["| measure | apgaspy | reference | target | measured on |", "|---|---|---|---|---|"]
    rt = _load("runtime")
    if rt:
        mc = _machine(rt)
        a, m, bare = rt["apgaspy"], rt["mpi4py_futures"], rt["bare_pyzmq"]
        rows.append(f"| `at` round trip, 2 places | {a['at_rtt_us']:.0f} µs = "
                    f"{a['at_over_bare']:.2f}× bare pyzmq | bare pyzmq ping-pong "
                    f"{bare['rtt_us']:.0f} µs, mpi4py.futures {m['at_rtt_us']:.0f} µs (same "
                    f"run); {_cited(_ref(rt, 'peers_round_trip_us'))} | "
                    f"{_goal(_target(rt, 'at_over_bare'))}{_verdict(rt)} | {mc} |")
        rows.append(f"| empty `async_at` tasks, 2 places | {a['async_tasks_per_s']:,.0f} /s | "
                    f"mpi4py.futures {m['async_tasks_per_s']:,.0f} /s (same run); "
                    f"{_cited(_ref(rt, 'peers_tasks_per_s'))} | "
                    f"{_goal(_target(rt, 'async_tasks_per_s'))} | {mc} |")
    ma = _load("malleability")
    if ma:
        mc = _machine(ma)
        med = ma["median"]
        rows.append(f"| start until orders are accepted | {med['ready_s']:.2f} s | "
                    f"{_cited(_ref(ma, 'java_apgas_ready'))} | "
                    f"{_goal(_target(ma, 'ready_s'))} | {mc} |")
        for n in (1, 2, 4, 16):
            if f"grow_{n}" not in med:
                continue  # an older file (grow 16 came later)
            g, s = med[f"grow_{n}"], med[f"shrink_{n}"]
            ref_g = _cited(_ref(ma, "java_apgas_grow")) if n == 4 else ""
            ref_s = _cited(_ref(ma, "java_apgas_shrink")) if n == 2 else ""
            tgt_g = _goal(_target(ma, "grow_4_s")) if n == 4 else ""
            tgt_s = _goal(_target(ma, "shrink_2_s")) if n == 2 else ""
            rows.append(f"| grow {n} place{'s' if n > 1 else ''} (runtime / handler) | "
                        f"{g['total_s']:.3f} s ({g['runtime_s']:.3f} / {g['handler_s']:.4f}) "
                        f"| {ref_g} | {tgt_g} | {mc} |")
            rows.append(f"| shrink {n} place{'s' if n > 1 else ''} (runtime / handler) | "
                        f"{s['total_s']:.3f} s ({s['runtime_s']:.3f} / {s['handler_s']:.4f}) "
                        f"| {ref_s} | {tgt_s} | {mc} |")
    cl = _load("cluster")
    if cl:
        mc = _machine(cl)
        where = {"hosts": "remote host", "slurm": "Slurm node"}
        for kind in ("hosts", "slurm"):
            med = cl.get(kind, {}).get("median")
            if not med:
                continue
            if kind == "hosts":
                rows.append(f"| start until orders are accepted, 3 hosts (embedded / mpiexec) | "
                            f"{med['ready_3_hosts_embedded_s']:.2f} / "
                            f"{med['ready_3_hosts_mpiexec_s']:.2f} s | "
                            f"{_cited(_ref(cl, 'java_apgas_ready'))} | | {mc} |")
            for n in (1, 2):
                g, s = med[f"grow_{n}"], med[f"shrink_{n}"]
                unit = where[kind] + ("s" if n > 1 else "")
                ref_g = _cited(_ref(cl, "java_apgas_grow")) if n == 2 else ""
                ref_s = _cited(_ref(cl, "java_apgas_shrink")) if n == 2 else ""
                rows.append(f"| grow {n} {unit} | {g['total_s']:.3f} s | {ref_g} | | {mc} |")
                rows.append(f"| shrink {n} {unit} | {s['total_s']:.3f} s | {ref_s} | | {mc} |")
    rs = _load("runtime_scale")
    if rs:
        rows.extend(_scale_rows(rs))
    mg = _load("malleability-glb")
    if mg:
        mc = _machine(mg)
        med, depth = mg["median"], mg["params"]["glb"]
        java = {}
        for kind in ("grow", "shrink"):
            ref = _ref(mg, f"java_apgas_{kind}")
            java[kind] = (f"Java: {ref['glb_s']:.2f} s in GLB of {ref['value']:.2f} s, "
                          f"{ref['places']:g} places [{ref['cite']}]")
        for n in (1, 2):
            for kind in ("grow", "shrink"):
                o = med[f"{kind}_{n}"]
                rows.append(
                    f"| {kind} {n} place{'s' if n > 1 else ''} during UTS d={depth} on GLB: "
                    f"GLB handler's share | {o['handler_s']:.3f} s of {o['total_s']:.3f} s | "
                    f"{java[kind] if n == 2 else ''} | | {mc} |")
    ke = _load("kernels")
    if ke:
        rows.extend(_kernel_rows(ke))
    for path in sorted(RESULTS_DIR.glob("scaling*.json")):
        sc = json.loads(path.read_text())
        mc = _machine(sc)
        two, sixteen = _target(sc, "efficiency_2_places"), _target(sc, "efficiency_16_places")
        for name, e in sc["benchmarks"].items():
            counts = sorted(int(k) for k in e if k.isdigit())
            p = counts[-1]
            cell = e[str(p)]
            vs1 = cell.get("efficiency_vs_1_place")
            extra = f", {100 * vs1:.0f} % vs GLB on 1 place" if vs1 else ""
            if cell.get("efficiency_vs_co_run"):
                extra += (f", {100 * cell['efficiency_vs_co_run']:.0f} % vs {p} plain copies "
                          f"at once (each {cell['co_run_slowdown']:.2f}x its time alone)")
            size = int(float(e["args"][-1]))
            big = size >= two["sizes"].get(name, float("inf"))
            if p == 2 and big:
                target = _goal(two)
            else:
                target = _goal(sixteen) if p == 16 else ""
            rows.append(f"| {name} {' '.join(e['args'][1:])}, {p} places | efficiency "
                        f"{100 * cell['efficiency']:.0f} % vs sequential{extra} "
                        f"({cell['seconds']:.2f} s) | | {target} | {mc} |")
            res = cell.get("resilient")
            if res:
                runs = len(res["runs_s"])
                rows.append(f"| resilient GLB, no failure: {name} {' '.join(e['args'][1:])}, "
                            f"{p} places | {res['seconds']:.3f} s against {cell['seconds']:.3f} s"
                            f" plain: {100 * res['overhead']:+.1f} % (medians of {runs}, "
                            f"interleaved) | | {_goal(_target(sc, 'resilient_overhead'))} | "
                            f"{mc} |")
    return "\n".join(rows)


def _met(flag: bool | None) -> str:
    return {True: "met", False: "not met", None: "not measured"}[flag]


def _scale_rows(rs: dict[str, Any]) -> list[str]:
    """Two rows from ``runtime_scale.json`` (written by ``benchmarks.runtime_scale``): time to
    ready and CPU per place from 8 (or the fewest places measured) to the most places, then
    memory and file descriptors at the most places; the references are the figures
    and the targets its goals, both from the JSON, each judged there (met or not)."""
    mc = _machine(rs)
    figs = rs["places"]
    counts = sorted(int(p) for p in figs)
    lo = 8 if 8 in counts else counts[0]
    hi = counts[-1]
    a, b = figs[str(lo)], figs[str(hi)]
    d, g, ref = rs["derived"], rs["goals"], rs["issue_figures"]
    cpu_hi = b["cpu_s"]
    ours = (f"ready {a['ready_s']:.2f} → {b['ready_s']:.1f} s ({a['ready_per_place_s']:.2f} → "
            f"{b['ready_per_place_s']:.2f} s per place); one finish over all places "
            f"{a['finish_s'] * 1e3:.0f} → {b['finish_s'] * 1e3:.0f} ms; CPU per place "
            f"{a['cpu_per_place_s']:.2f} → {b['cpu_per_place_s']:.2f} s (MPI anchors "
            f"{cpu_hi.get('anchor', 0):.0f} of {b['cpu_total_s']:.0f} CPU s at {hi})")
    done = ref["finish_done_s"]
    cpu_ref = ref["cpu_per_place_s"]
    reference = (f"ready + finish {' / '.join(f'{v:g}' for v in done.values())} s at "
                 f"{' / '.join(done)} places; CPU per place {cpu_ref.get('8', '?')} → "
                 f"{cpu_ref.get('64', '?')} s [{ref['cite']}]")
    ready, cpu = d["ready_64_vs_linear_from_8"], d["cpu_per_place_growth_8_to_64"]
    bound = f" = {ready['bound_s']:.1f} s, ours {ready['ratio_to_linear']:.1f}× linear" \
        if ready["met"] is not None else ""
    growth = f", ours {cpu['ratio']:.1f}×" if cpu["met"] is not None else ""
    target = (f"{g['ready_time_linear']['text']}{bound}: {_met(ready['met'])}; "
              f"{g['cpu_per_place_constant']['text']} (taken as ≤ "
              f"{g['cpu_per_place_constant']['max_ratio_64_to_8']:g}×){growth}: "
              f"{_met(cpu['met'])} "
              f"({g['ready_time_linear']['cite']})")
    rows = [f"| runtime start-up, {lo} → {hi} places (embedded; ready: start until main "
            f"runs) | {ours} | {reference} | {target} | {mc} |"]
    mem, conn = d["memory_per_spawned_place"], d["connections_on_demand"]
    r = b["rss_mb"]
    kinds = b["fds_place0_kinds"]
    ours = (f"{b['rss_per_spawned_place_mb']:.1f} MB RSS per spawned place (place "
            f"{r.get('place', 0):.1f}, MPI anchor {r.get('anchor', 0):.1f}, Hydra proxy "
            f"{r.get('proxy', 0):.1f}); {b['pss_per_place_mb']:.1f} MB PSS per place; place 0 "
            f"holds {b['fds_place0']} fds ({kinds.get('tcp', 0)} TCP, {kinds.get('eventfd', 0)}"
            f" eventfd), place 1 {b['fds_place1']} ({b['tcp_place1']} TCP at every count)")
    fd_ref = ref["fds_place0"].get(str(hi))
    reference = (f"{ref['rss_per_spawned_place_mb']:g} MB per spawned place, anchor "
                 f"{ref['anchor_rss_mb']:g} MB" + (f"; {fd_ref} fds at place 0" if fd_ref else "")
                 + f" [{ref['cite']}]")
    target = (f"{g['memory_per_spawned_place']['text']}: {_met(mem['met'])}; "
              f"{g['connections_on_demand']['text']}: {_met(conn['met'])} "
              f"({g['memory_per_spawned_place']['cite']})")
    rows.append(f"| memory and file descriptors, {hi} places | {ours} | {reference} | "
                f"{target} | {mc} |")
    return rows


def scale_plot() -> str:
    """A line pointing to the runtime-scale plot, when ``runtime_scale.png`` exists."""
    if not (RESULTS_DIR / "runtime_scale.png").exists():
        return ""
    return ("Runtime start-up against places (`python -m benchmarks.runtime_scale --plot`):\n\n"
            "![time to ready and CPU per place against places]"
            "(../benchmarks/results/runtime_scale.png)")


def _seconds(x: float) -> str:
    """Seconds with three or four significant digits."""
    return f"{x:.4f} s" if x < 0.1 else (f"{x:.3f} s" if x < 10 else f"{x:.2f} s")


def _rate(x: float, unit: str) -> str:
    """A per-second figure with three significant digits, an SI prefix (k, M, G) and its unit
    (e.g. ``"nodes/s"``)."""
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g} {prefix} {unit}"
    return f"{x:.3g} {unit}"


def _side(f: dict[str, Any], rates: bool = True) -> str:
    """One side's figures: warm median seconds, cold seconds (the first run of a process; for
    ours, after the imports and setup, whose seconds are given too) and (``rates``) warm
    throughputs."""
    per_s = [_rate(v, unit) for unit, v in f["per_s"].items()] if rates else []
    setup = f", after {_seconds(f['setup_s'])} of imports and setup" if "setup_s" in f else ""
    return "; ".join([f"{_seconds(f['warm_median_s'])} warm (cold {_seconds(f['cold_s'])}"
                      f"{setup})", *per_s])


def _ran(backend: str, ours: dict[str, Any]) -> str:
    """Which of our backends ran: its name, or what was asked and what ran where they differ
    (numba asked for a kernel without a compiled path runs numpy)."""
    ran = "/".join(ours["ran"])
    return backend if ran == backend else f"{backend} asked, {ran} ran"


def _kernel_rows(ke: dict[str, Any]) -> list[str]:
    """The kernel rows of the table, all from ``kernels.json`` (written by
    ``benchmarks.kernels_speed``): ours per backend, the Java reference kernel of the same run
    (or, without a JDK, the figure measured earlier, cited with machine and date), the ratio
    only for the same work or the like-for-like unit named, and the goal, met or not."""
    mc = _machine(ke)
    rows = []
    for f in (ke.get("cases") or {}).values():
        ours = "<br>".join(f"{_ran(b, o)}: {_side(o)}" for b, o in f["ours"].items())
        java = f.get("java")
        if java:
            full = bool(f["ratio_unit"])  # else the Java side is another case's, no rates
            cell = f"Java {_side(java, full)} [same run, `{java['kernel']}`]"
            lean = java.get("lean")
            if lean:
                cell += f"; lean Java {_side(lean, full)}"
        else:
            c = f.get("cited_java")
            cell = ("Java not run here (no JDK)" + (
                f"; earlier: {c['text']} [measured on {c['machine']}, {c['date']}], another "
                "run: no ratio" if c else ""))
        ratios = f.get("ratio")
        if ratios:
            parts = []
            for backend, x in ratios.items():
                part = f"{_ran(backend, f['ours'][backend])}: {x:.2f}×"
                lean_ratio = (f.get("ratio_to_lean") or {}).get(backend)
                if lean_ratio is not None:
                    part += f" ({lean_ratio:.2f}× lean)"
                parts.append(part)
            what = "same work" if f["same_work"] else f"per {f['ratio_unit'].removesuffix('s')}"
            cell += f"; ours over Java, {what}: " + ", ".join(parts)
        elif java:
            cell += "; Java runs the full tree: not the same work, no ratio"
        t = f.get("target")
        goal = ""
        if t:
            met = t.get("met")
            goal = _goal(t) + (": " + ", ".join(
                f"{b} {'met' if ok else 'not met'}" for b, ok in met.items()) if met else
                ": not measured")
        rows.append(f"| {f['label']} | {ours} | {cell} | {goal} | {mc} |")
    bound = ke.get("uts_hash_bound")
    if bound:
        rows.append(
            f"| UTS d=11 bound: the numpy SHA-1 passes alone, 1 core | "
            f"{_rate(bound['bound_nodes_per_s'], 'nodes/s')} "
            f"({bound['ufunc_calls_per_pass']:,} numpy calls a pass of {bound['lanes']:,} "
            f"lanes, {bound['best_pass_s'] * 1e3:.2f} ms); "
            f"{_rate(bound['bound_without_schedule_nodes_per_s'], 'nodes/s')} if its "
            f"{bound['schedule_calls_per_pass']} message-schedule calls cost nothing | | | "
            f"{mc} |")
    return rows


def kernel_note() -> str:
    """The paragraph under the table on the kernel rows, from ``kernels.json``: how they were
    measured, what each throughput counts, and what each kernel does differently from Java;
    an empty string without the file."""
    ke = _load("kernels")
    if not ke or "cases" not in ke:
        return ""
    counts: dict[str, str] = {}
    for f in ke["cases"].values():
        for unit, w in f["work"].items():
            counts.setdefault(unit, w["counts"])
    kinds = {"uts": "UTS", "nqueens": "N-Queens", "bc": "BC", "pi": "Pi"}
    notes = " ".join(f"{kinds.get(k, k)}: {text}" for k, text in ke["kernel_notes"].items())
    measured = "; ".join(f"*{unit}*: {text}" for unit, text in counts.items())
    java = ke["java"]
    jdk = (java.get("version") or "a JDK") if java.get("available") else \
        f"no JDK ({java.get('why_not', 'not found')})"
    return (f"Kernel rows ({jdk}; the Java kernels: "
            f"[Java reference kernels](benchmarks/java-references.md)): "
            f"{ke['about']} What each kernel does differently from Java: {notes} "
            f"What the throughputs count: {measured}.")


SCHED_START, SCHED_END = "<!-- scheduling:start -->", "<!-- scheduling:end -->"


def scheduling_table() -> str:
    """The Markdown table of the simulated job-batch evaluation (``scheduling.json``) beside
    the paper's figures (Finnerty, Posner et al. 2024), or an empty string when it was not
    run."""
    sc = _load("scheduling")
    if not sc:
        return ""
    ref = _ref(sc, "paper_batch")
    paper: dict[str, dict[int, str]] = {}
    for algorithm, by_share in ref["makespan_s"].items():
        for share, makespan in by_share.items():
            used = ref["utilisation"].get(algorithm, {}).get(share)
            paper.setdefault(algorithm, {})[int(share)] = (
                f"{makespan:.0f}" + (f" ({100 * used:.1f} %)" if used is not None else ""))
    java = {(r["algorithm"], r["malleable_share"]): r for r in sc["rows"]["java_costs"]}
    rows = ["| algorithm | malleable | makespan s (utilisation) | with Java's resize costs | "
            "paper, Java scheduler | mean wait s | mean turnaround s |",
            "|---|---|---|---|---|---|---|"]
    for r in sc["rows"]["apgaspy_costs"]:
        a, share = r["algorithm"], r["malleable_share"]
        if share not in (0, 100):
            continue
        j = java[(a, share)]
        rows.append(f"| {a} | {share} % | {r['makespan_s']:.0f} ({100 * r['utilisation']:.1f} %)"
                    f" | {j['makespan_s']:.0f} ({100 * j['utilisation']:.1f} %) | "
                    f"{paper.get(a, {}).get(share, '')} | {r['mean_wait_s']:.0f} | "
                    f"{r['mean_turnaround_s']:.0f} |")
    return ("\n".join(rows) + f"\n\nSimulated on {_machine(sc)} (the model is deterministic); "
            f"the paper's column: {ref['what']} [{ref['cite']}].")


def _replace(readme: str, start: str, end: str, text: str) -> str:
    head, rest = readme.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{text}\n{end}{tail}"


def render(page: str) -> str:
    """``page`` (the text of ``docs/benchmarks.md``) with its tables rewritten.

    Raises:
        ValueError: the page has no ``results`` markers.
    """
    if START not in page or END not in page:
        raise ValueError(f"the page has no {START} ... {END} markers")
    text = table()
    note = kernel_note()
    if note:
        text = f"{text}\n\n{note}"
    picture = scale_plot()
    if picture:
        text = f"{text}\n\n{picture}"
    page = _replace(page, START, END, text)
    if SCHED_START in page and SCHED_END in page:
        page = _replace(page, SCHED_START, SCHED_END, scheduling_table())
    return page


def main(argv: list[str] | None = None) -> int:
    """Print the results table or rewrite the tables of ``docs/benchmarks.md``; returns the
    exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.report",
        description=__doc__.split("\n\n")[0])
    parser.add_argument("--print", action="store_true", help="print instead of writing")
    args = parser.parse_args(argv)
    if args.print:
        text = table()
        note = kernel_note()
        print(f"{text}\n\n{note}" if note else text)
        return 0
    try:
        PAGE.write_text(render(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    except (OSError, ValueError) as exc:
        parser.error(f"{PAGE}: {exc}")
    print(f"updated {PAGE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
