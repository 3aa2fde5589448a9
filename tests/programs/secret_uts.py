"""UTS on GLB, malleable, then the job secret (place 0's, printed to its own output) and a
digest of every place's, for the capture test (the secret must never cross a wire in any
form): prints one JSON line."""

import hashlib
import json
import sys

from apgaspy import at, places, run
from apgaspy._runtime import runtime
from benchmarks.kernels.uts import UTSBag
from glb import LongSum, compute_dynamic


def fingerprint():
    """A digest of the place's secret (the secret itself must not travel, even here)."""
    return hashlib.blake2b(runtime().secret, digest_size=16).hexdigest()


def main():
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 13
    res = compute_dynamic(UTSBag(19, depth), LongSum)
    value = res.value
    print(json.dumps({"result": value, "places": len(places()), "orders": res.orders,
                      "fingerprints": sorted({at(p, fingerprint) for p in places()}),
                      # printed by place 0 into its own output file: no wire
                      "secret": runtime().secret.hex()}), flush=True)


if __name__ == "__main__":
    run(main)
