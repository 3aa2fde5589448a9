"""Print the pid of every place as JSON, then end normally.

Also ``anchors``: for each place, its parent process (pid, argv, VmRSS in kB) while it runs;
for a spawned place that is its MPI anchor, waiting in its small form (``apgaspy/_child.py``).
"""

import json
import os
import time

from apgaspy import at, places, run


def parent():
    """The parent's pid, argv and RSS; an anchor still finalizing MPI is waited for (≤ 5 s)."""
    ppid = os.getppid()
    deadline = time.monotonic() + 5
    while True:
        with open(f"/proc/{ppid}/cmdline", "rb") as fh:
            argv = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
        if argv and not any(a.endswith("_child.py") for a in argv):  # empty: in execve
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    with open(f"/proc/{ppid}/status", encoding="ascii", errors="replace") as fh:
        rss = next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))
    return ppid, argv, rss


def main():
    pids = {p.id: at(p, os.getpid) for p in places()}
    anchors = {p.id: at(p, parent) for p in places()}
    print(json.dumps({"pids": pids, "anchors": anchors}), flush=True)


if __name__ == "__main__":
    run(main)
