"""Print, as one JSON object, where every place runs:
{id: [hostname, pid, endpoint, Slurm node name or null]}."""

import json
import os
import socket

from apgaspy import at, places, run


def where():
    from apgaspy._runtime import runtime

    return [socket.gethostname(), os.getpid(), runtime().transport.endpoint,
            os.environ.get("SLURMD_NODENAME")]


def main():
    print(json.dumps({"places": {p.id: at(p, where) for p in places()}}), flush=True)


if __name__ == "__main__":
    run(main)
