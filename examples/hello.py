"""Hello from every place.

    python examples/hello.py            (place 0 spawns the others)
    mpiexec -n 4 python examples/hello.py
"""

from apgaspy import async_at, finish, here, places, run


def main() -> None:
    with finish():
        for p in places():
            async_at(p, lambda: print(f"Hello from {here()}"))
    print("Bye")


if __name__ == "__main__":
    run(main)
