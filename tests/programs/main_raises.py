"""Main raises after running tasks: every place must end and the program exit non-zero."""

import json
import os

from apgaspy import at, places, run


def main():
    print(json.dumps({"pids": {p.id: at(p, os.getpid) for p in places()}}), flush=True)
    raise RuntimeError("main failed on purpose")


if __name__ == "__main__":
    run(main)
