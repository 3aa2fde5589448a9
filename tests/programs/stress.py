"""Stress test: random recursive task trees over all places, checked exactly.

Each node of a seeded random tree runs as a task at a place chosen by the seed; about a third
of the inner nodes wait for their children in a nested ``finish`` (catching and checking the
errors of their subtree), the others spawn into the governing finish; some leaves raise.
A sequential simulation of the same tree gives the exact node count and, for every finish,
the exact set of errors that must reach it.

    python stress.py SEED DEPTH     (prints one JSON line per tree, exits 0 when all match)
"""

import json
import random
import sys
import threading

from apgaspy import MultipleException, PlaceLocalObject, async_at, at, finish, places, run


class LeafError(Exception):
    pass


class Tally(PlaceLocalObject):
    """Per place: nodes visited and nested finishes whose errors did not match."""

    def __init__(self):
        self.nodes = 0
        self.mismatches = []
        self.lock = threading.Lock()


def shape(seed, depth, nplaces):
    rng = random.Random(seed)
    if depth == 0:
        return "leaf", rng.random() < 0.08, []
    k = rng.randint(1, 4)
    nested = rng.random() < 0.3
    children = [(rng.getrandbits(32), rng.randrange(nplaces)) for _ in range(k)]
    return ("nested" if nested else "plain"), False, children


def simulate(seed, depth, nplaces):
    """(nodes, errors escaping to the governing finish) of the subtree at ``seed``."""
    kind, fails, children = shape(seed, depth, nplaces)
    if kind == "leaf":
        return 1, ([seed] if fails else [])
    nodes, escaping = 1, []
    for s, _ in children:
        n, e = simulate(s, depth - 1, nplaces)
        nodes += n
        escaping += e
    return nodes, ([] if kind == "nested" else escaping)


def caught(group):
    out = []
    for e in group.exceptions:
        if isinstance(e, MultipleException):
            out += caught(e)
        elif isinstance(e, LeafError):
            out.append(int(str(e)))
        else:
            raise e
    return out


def node(tally, seed, depth, nplaces):
    with tally.lock:
        tally.nodes += 1
    kind, fails, children = shape(seed, depth, nplaces)
    ps = places()
    if kind == "leaf":
        if fails:
            raise LeafError(str(seed))
        return
    if kind == "plain":
        for s, p in children:
            async_at(ps[p], node, tally, s, depth - 1, nplaces)
        return
    expected = []
    for s, _ in children:
        expected += simulate(s, depth - 1, nplaces)[1]
    got = []
    try:
        with finish():
            for s, p in children:
                async_at(ps[p], node, tally, s, depth - 1, nplaces)
    except MultipleException as group:
        got = caught(group)
    if sorted(got) != sorted(expected):
        with tally.lock:
            tally.mismatches.append((seed, sorted(got), sorted(expected)))


def main(seed, depth):
    nplaces = len(places())
    ok = True
    for tree in range(3):
        root = seed * 1000 + tree
        tally = Tally.make(places(), Tally)
        expected_nodes, expected_errors = simulate(root, depth, nplaces)
        got_errors = []
        try:
            with finish():
                node(tally, root, depth, nplaces)
        except MultipleException as group:
            got_errors = caught(group)
        nodes = sum(at(p, lambda t=tally: t.nodes) for p in places())
        mismatches = [m for p in places() for m in at(p, lambda t=tally: t.mismatches)]
        good = (nodes == expected_nodes and sorted(got_errors) == sorted(expected_errors)
                and not mismatches)
        ok &= good
        print(json.dumps({"tree": root, "nodes": nodes, "expected_nodes": expected_nodes,
                          "errors": len(got_errors), "expected_errors": len(expected_errors),
                          "mismatches": mismatches[:3], "ok": good}), flush=True)
    return ok


if __name__ == "__main__":
    raise SystemExit(0 if run(main, int(sys.argv[1]), int(sys.argv[2])) else 1)
