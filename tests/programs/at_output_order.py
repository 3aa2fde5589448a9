"""Print from the tasks of ``at`` calls, then from place 0: every line that the ``at``'s place
printed before it answered must be written before the ``at`` returns.

Rounds: ``at(p, print, ...)`` to every other place, and an ``at`` whose body spawns a printing
task to every place in a finish of its own.  Only the lines of the ``at``'s own place (and of
place 0, written directly) are ordered: a third place's line travels on its own connection,
as it did before ``at`` had an inbox.
"""

from apgaspy import async_at, at, finish, places, run

ROUNDS = 60


def _fan_out(i):
    with finish():
        for q in places():
            async_at(q, print, f"fan {i} from {q.id}")


def main():
    for i in range(ROUNDS):
        for p in places()[1:]:
            at(p, print, f"remote {i} at {p.id}")
            print(f"local {i} after {p.id}")
        at(places()[-1], _fan_out, i)
        print(f"local {i} after fan")


if __name__ == "__main__":
    run(main)
