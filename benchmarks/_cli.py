"""The command line shared by the four GLB benchmarks.

Each benchmark module describes itself with a :class:`Benchmark` (its options, its bag, the
expected answer and the throughput unit); :func:`main` parses the command line, runs the
computation on the places (embedded: ``--places`` or ``APGAS_PLACES`` or the cores; or under
mpiexec), prints the result, the expected answer and whether they agree, the time and the
throughput, and exits 1 on a wrong answer.  ``--json`` prints one JSON object instead.
Under a scheduler (``SCHEDULER_IP``/``SCHEDULER_PORT`` set) the run is a malleable job.
While it runs, stderr shows each order as it happens and, after two seconds, the progress
(:mod:`benchmarks._live`); ``--quiet`` leaves stderr to errors and warnings.

Kernels: ``APGAS_KERNELS`` (``auto``, ``numba``, ``numpy``) chooses the compiled or the numpy
kernels (docs/guides/compiled-kernels.md); the report's ``kernels`` field says which ran, and
``isa`` beside it the machine's vector instruction sets (AVX2, AVX-512, SHA), on which the
compiled kernels' speed depends.
Before the computation's clock starts, every place compiles or loads the compiled kernels
(:func:`benchmarks.kernels.warm_up`); ``warm_up_s`` is the time that took.  A place spawned
later, by a grow, starts loading them while it imports the program
(:func:`warm_up_in_background`), so that they are ready when its first work arrives.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from apgaspy import ConfigurationError, MultipleException, async_at, finish, places, run
from apgaspy.config import setting

from ._live import LiveOutput
from ._results import vector_isa
from .kernels._backend import KERNEL_SETTINGS, backend, warm_up, warm_up_modules

__all__ = ["ENVIRONMENT_HELP", "Benchmark", "Outcome", "main", "positive_int",
           "non_negative_int", "positive_ms", "percent", "seconds", "positive_seconds",
           "float_count", "place_counts"]

ENVIRONMENT_HELP = (
    "environment: APGAS_KERNELS=auto|numba|numpy chooses the kernels: auto (the default) "
    "runs the compiled numba kernels where numba is installed (pip install 'apgaspy[fast]') "
    "and the numpy ones elsewhere; numba fails without numba; numpy always runs numpy. "
    "NUMBA_CACHE_DIR: where compiled kernels are cached (default "
    "$XDG_CACHE_HOME/apgaspy/numba, i.e. ~/.cache/apgaspy/numba).")
"""The ``--help`` epilog of the benchmarks: the kernel backend's settings."""


def _number(text: str, convert: Callable[[str], Any], ok: Callable[[Any], bool],
            expected: str) -> Any:
    """``convert(text)`` when it succeeds and passes ``ok``, else argparse's usage error
    ``expected <expected>, got '<text>'``."""
    try:
        value = convert(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer ≥ 1."""
    return int(_number(text, int, lambda v: v >= 1, "a positive integer"))


def non_negative_int(text: str) -> int:
    """argparse type: an integer ≥ 0."""
    return int(_number(text, int, lambda v: v >= 0, "an integer ≥ 0"))


def positive_ms(text: str) -> float:
    """argparse type: a finite duration in ms, > 0."""
    return float(_number(text, float, lambda v: 0 < v < float("inf"),
                         "a positive duration in ms"))


def seconds(text: str) -> float:
    """argparse type: a finite duration in seconds, ≥ 0."""
    return float(_number(text, float, lambda v: 0 <= v < float("inf"), "seconds ≥ 0"))


def positive_seconds(text: str) -> float:
    """argparse type: a finite duration in seconds, > 0."""
    return float(_number(text, float, lambda v: 0 < v < float("inf"), "seconds > 0"))


def percent(text: str) -> float:
    """argparse type: a percentage, 0..100."""
    return float(_number(text, float, lambda v: 0 <= v <= 100, "a percentage 0..100"))


def float_count(text: str) -> int:
    """argparse type: a count written as an integer or in float notation (``1e9``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 1e9, got {text!r}") from None
    if not value.is_integer() or value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole positive number, got {text!r}")
    return int(value)


def place_counts(parser: argparse.ArgumentParser, text: str, minimum: int,
                 why: str = "") -> list[int]:
    """The place counts of a comma-separated ``--places`` value, sorted, without repeats.

    Args:
        parser: the command's parser; its ``error`` ends the program (exit 2) on bad input.
        text: the option's text, e.g. ``"1,2,4"``.
        minimum: the smallest count allowed; why: why (shown in the error), or nothing.
    """
    try:
        counts = sorted({int(p) for p in text.split(",")})
    except ValueError:
        parser.error(f"--places takes integers, got {text!r}")
    if not counts or counts[0] < minimum:
        parser.error(f"--places must be at least {minimum}{why}")
    return counts


@dataclass
class Outcome:
    """A benchmark's result, ready to print.

    Attributes:
        result: the result as JSON data (count, list of values, estimate).
        expected: the known answer, or ``None``.
        correct: whether the result agrees with the expected answer (``None``: unknown).
        work: the amount of work for the throughput, in ``unit``.
        summary: one line describing the result for people.
    """

    result: Any
    expected: Any
    correct: bool | None
    work: float
    summary: str


@dataclass
class Benchmark:
    """What a benchmark module provides to :func:`main`.

    Attributes:
        name: ``"uts"``, ``"nqueens"``, ``"bc"`` or ``"pi"``.
        description: one line for ``--help``.
        unit: the throughput unit (``"nodes/s"``...).
        add_arguments: adds the benchmark's own options to the parser.
        params: the benchmark's parameters from the parsed arguments (JSON data).
        compute: runs the GLB computation at place 0: ``compute(params, glb_kwargs)`` returns
            a ``glb.GLBResult``.
        outcome: turns the computation's value into an :class:`Outcome`.
        validate: checks parameters; returns an error text or ``None``.
    """

    name: str
    description: str
    unit: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    params: Callable[[argparse.Namespace], dict[str, Any]]
    compute: Callable[[dict[str, Any], dict[str, Any]], Any]
    outcome: Callable[[dict[str, Any], Any], Outcome]
    validate: Callable[[dict[str, Any]], str | None] = field(default=lambda p: None)


def _parser(bench: Benchmark) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks.{bench.name}",
                                     description=bench.description, epilog=ENVIRONMENT_HELP)
    bench.add_arguments(parser)
    glb = parser.add_argument_group("placement and GLB parameters")
    glb.add_argument("--places", type=positive_int, default=None,
                     help="places to start without mpiexec (default APGAS_PLACES, else cores)")
    # Problem sizes take the Java benchmarks' short options (-n, -d, -s, -b), so
    # job scripts written for them mean the same here; GLB's parameters are long options
    # only (the Java programs take them as system properties, -Dglb.multiworker.n=...).
    glb.add_argument("--work-units", type=positive_int, default=None, dest="n",
                     help="work units per process() call (default GLB_N, else the kernel's)")
    glb.add_argument("--random-steals", type=positive_int, default=None, dest="w",
                     help="random steal attempts before lifelines (default GLB_W, else 1)")
    glb.add_argument("--lifeline-base", type=positive_int, default=None, dest="l",
                     help="lifeline hypercube base (default GLB_L, else 2)")
    glb.add_argument("--lifeline-dims", type=positive_int, default=None, dest="z",
                     help="lifeline hypercube dimensions (default GLB_Z, else enough)")
    glb.add_argument("--workers", type=non_negative_int, default=None,
                     help="worker threads per place, each with its own bag (default "
                          "GLB_WORKERS, else 1; 0: the host's cores over "
                          "APGAS_PLACES_PER_HOST, a host as one place with 1)")
    glb.add_argument("--resilient", action="store_const", const=True, default=None,
                     help="survive the death of places other than 0 with the exact answer "
                          "(default GLB_RESILIENT, else off)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quiet", action="store_true",
                        help="no order lines or progress on stderr while the run lasts (the "
                             "result on stdout is the same)")
    return parser


def _warm_up_everywhere() -> float:
    """Compile or load the compiled kernels at place 0, then at the other places at once (they
    load what place 0 compiled into the cache); returns the seconds it took."""
    t = time.perf_counter()
    warm_up()
    modules = warm_up_modules()
    with finish():
        for p in places()[1:]:
            async_at(p, warm_up, modules)
    return time.perf_counter() - t


def _job(bench: Benchmark, params: dict[str, Any], glb_kwargs: dict[str, Any],
         started: float = 0.0, quiet: bool = True) -> dict[str, Any]:
    start_places = [p.id for p in places()]
    kernels = backend()
    warm_s = _warm_up_everywhere() if kernels == "numba" else 0.0
    t0 = time.perf_counter()
    with LiveOutput(started or time.time(), glb_kwargs.get("workers"), quiet=quiet):
        res = bench.compute(params, glb_kwargs)
    seconds = time.perf_counter() - t0
    out = bench.outcome(params, res.value)
    return {
        "benchmark": bench.name,
        "params": params,
        "result": out.result,
        "expected": out.expected,
        "correct": out.correct,
        "summary": out.summary,
        "places": len(start_places),
        "places_at_end": len(res.places),
        "seconds": seconds,
        "throughput": out.work / seconds if seconds > 0 else None,
        "unit": bench.unit,
        "kernels": kernels,
        "isa": vector_isa(),
        "warm_up_s": warm_s,
        "glb": {"n": res.params.n, "w": res.params.w, "l": res.params.l, "z": res.params.z,
                "resilient": res.params.resilient, "workers": res.params.workers},
        "orders": res.orders,
        "order_times": res.order_times,
        "phases": res.phases,
        "log": [s.as_dict() for s in res.log],
    }


def _setting_error(exc: BaseException) -> str | None:
    """The message of a bad setting (``APGAS_SCHEDULE``, ``APGAS_KERNELS`` ...), also when
    it comes wrapped in a ``MultipleException`` from place 0's main; ``None`` for any other
    error, which keeps its traceback."""
    if isinstance(exc, ConfigurationError):
        return " ".join(str(exc).split())
    if isinstance(exc, MultipleException):
        inner = [_setting_error(e) for e in exc.exceptions]
        if inner and all(m is not None for m in inner):
            return "; ".join(dict.fromkeys(m for m in inner if m is not None))
    return None


def main(bench: Benchmark, argv: list[str] | None = None) -> int:
    """Parse ``argv``, run ``bench``, print, and return the exit status (1: wrong answer;
    2: a usage error, or a bad setting such as an ``APGAS_SCHEDULE`` entry that does not
    parse, reported in one line)."""
    started = time.time()
    parser = _parser(bench)
    args = parser.parse_args(argv)
    params = bench.params(args)
    problem = bench.validate(params)
    if problem:
        parser.error(problem)
    glb_kwargs = {k: getattr(args, k) for k in ("n", "w", "l", "z", "resilient", "workers")}
    try:
        setting("KERNELS", table=KERNEL_SETTINGS)  # a bad APGAS_KERNELS: before places start
        report = run(_job, bench, params, glb_kwargs, started, args.quiet, places=args.places)
    except (ConfigurationError, MultipleException) as exc:
        message = _setting_error(exc)
        if message is None:
            raise
        print(f"{parser.prog}: error: {message}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report))
    else:
        verdict = {True: "correct", False: "WRONG", None: "no known answer"}[report["correct"]]
        print(f"{bench.name} {' '.join(f'{k}={v}' for k, v in params.items())}")
        print(f"result: {report['summary']}")
        if report["expected"] is not None and not isinstance(report["expected"], list):
            print(f"expected: {report['expected']} ({verdict})")
        else:
            print(f"check: {verdict}")
        for kind, ids in report["orders"]:  # a malleable run: what the scheduler did
            what = "added" if kind == "grow" else "released"
            print(f"{kind}: {what} place{'s' if len(ids) > 1 else ''} "
                  f"{', '.join(map(str, ids))}")
        shrink_grow = "" if report["places"] == report["places_at_end"] else \
            f" (ended on {report['places_at_end']})"
        workers = report["glb"]["workers"]
        per_place = f" × {workers} workers" if workers > 1 else ""
        print(f"places: {report['places']}{per_place}{shrink_grow}, "
              f"time: {report['seconds']:.3f} s, "
              f"throughput: {report['throughput']:.4g} {bench.unit}, "
              f"kernels: {report['kernels']}")
    sys.stdout.flush()
    return 1 if report["correct"] is False else 0
