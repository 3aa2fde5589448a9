"""What a control message between places costs: typed records against string names.

    python -m benchmarks.control_messages [--number 20000] [--repeats 7] [--no-write]

The one benchmark that imports private modules of apgaspy (its message records and codec are
what it measures); tests/test_structure.py names it as the single allowed exception.

A control message (``apgaspy._messages``: ``Dead``, ``Ack``, ``AddPlaces``, ...) is a named
tuple with named fields, sent as ``(CTRL, src, code, fields)`` and dispatched by its type.
Before, it was ``(CTRL, src, name, args)`` with a string ``name`` and positional ``args``,
dispatched by the name.  This measures both forms in one run, in one process, for three
messages (``Ack(op)``, ``Dead(place)``, ``AddPlaces(infos, op)`` with two place records):

* ``bytes``: the size of the pickled frame (before the transport signs and batches it);
* ``send_us``: building the message and encoding it (median of the repeats, microseconds);
* ``receive_us``: decoding the frame, reading the typed record, finding its handler.

The string form is rebuilt here (it is no longer in apgaspy) exactly as it was encoded and
dispatched.  Writes ``benchmarks/results/control_messages.json`` with the ratios typed/string.
Control messages are not on the path of a task (``at`` and ``async_at`` send ``Task`` and
``Update``); ``python -m benchmarks.runtime`` measures that path.
"""

from __future__ import annotations

import argparse
import functools
import pickle
import statistics
import timeit
from collections.abc import Callable
from typing import Any

from apgaspy._membership import PlaceInfo
from apgaspy._messages import CTRL, Ack, AddPlaces, Ctrl, Dead, control_message, decode
from ._results import write_result

_HANDLERS_BY_TYPE: dict[type, Callable[..., None]] = {Ack: print, Dead: print, AddPlaces: print}
_HANDLERS_BY_NAME: dict[str, Callable[..., None]] = {"ack": print, "dead": print,
                                                     "add_places": print}


def _string_encode(src: int, name: str, args: tuple) -> bytes:
    """The former wire form: ``(CTRL, src, name, args)``."""
    return pickle.dumps((CTRL, src, name, args), 5)


def _string_receive(frame: bytes) -> Any:
    msg: Any = decode(frame)  # a Ctrl of four fields, read here as (name, args)
    return _HANDLERS_BY_NAME[msg[2]], msg[3]


def _typed_receive(frame: bytes) -> Any:
    message = control_message(decode(frame))  # type: ignore[arg-type]
    return _HANDLERS_BY_TYPE[type(message)], message


def _median_us(fn: Callable[[], Any], number: int, repeats: int) -> float:
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeats)) / number * 1e6


def measure(number: int, repeats: int) -> dict[str, Any]:
    """Both forms of the three messages: ``{message: {"typed": {...}, "string": {...},
    "ratio": {...}}}`` with ``bytes``, ``send_us`` and ``receive_us``, and typed/string
    ratios."""
    infos = [PlaceInfo(i, f"tcp://10.0.0.{i}:5{i:04d}", f"node{i}", 4000 + i, "spawned", i)
             for i in (4, 5)]
    cases: dict[str, tuple[Callable[[], bytes], Callable[[], bytes]]] = {
        "ack": (lambda: Ctrl.encode(3, Ack(op=17)),
                lambda: _string_encode(3, "ack", (17,))),
        "dead": (lambda: Ctrl.encode(0, Dead(place=5)),
                 lambda: _string_encode(0, "dead", (5,))),
        "add_places": (lambda: Ctrl.encode(0, AddPlaces(infos=infos, op=17)),
                       lambda: _string_encode(0, "add_places", (17, infos))),
    }
    out: dict[str, Any] = {}
    for name, (typed, string) in cases.items():
        row: dict[str, Any] = {}
        for form, encode, receive in (("typed", typed, _typed_receive),
                                      ("string", string, _string_receive)):
            frame = encode()
            row[form] = {"bytes": len(frame),
                         "send_us": _median_us(encode, number, repeats),
                         "receive_us": _median_us(functools.partial(receive, frame),
                                                  number, repeats)}
        row["ratio"] = {k: row["typed"][k] / row["string"][k] for k in row["typed"]}
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> int:
    """Measure, print a table, write the JSON (unless ``--no-write``); returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20000, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=7, help="timings (the median is kept)")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)
    results = measure(args.number, args.repeats)
    print(f"{'message':<11} {'form':<7} {'bytes':>6} {'send µs':>8} {'receive µs':>11}")
    for name, row in results.items():
        for form in ("typed", "string", "ratio"):
            r = row[form]
            fmt = "{:>6.2f} {:>8.2f} {:>11.2f}" if form == "ratio" else "{:>6d} {:>8.2f} {:>11.2f}"
            print(f"{name:<11} {form:<7} " + fmt.format(r["bytes"], r["send_us"], r["receive_us"]))
    if not args.no_write:
        path = write_result("control_messages", {"number": args.number, "repeats": args.repeats,
                                                 "messages": results})
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
