"""Print the pid of every place as JSON, then end normally."""

import json
import os

from apgaspy import at, places, run


def main():
    print(json.dumps({"pids": {p.id: at(p, os.getpid) for p in places()}}), flush=True)


if __name__ == "__main__":
    run(main)
