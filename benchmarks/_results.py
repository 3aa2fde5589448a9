"""Writing benchmark results: JSON under ``benchmarks/results/`` with the machine they ran on."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["machine_info", "vector_isa", "write_result", "RESULTS_DIR"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# /proc/cpuinfo flags of the vector and hashing instructions the compiled kernels can use
# (LLVM picks them for the machine it compiles on): x86 and Arm names
_ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "bmi2", "avx512f", "avx512bw", "avx512vl",
              "avx512_vnni", "avx512vbmi", "sha_ni", "asimd", "sve", "sve2", "sha1", "sha2")


def vector_isa(cpuinfo: str | None = None) -> dict[str, Any]:
    """The machine's vector instruction sets, from the CPU flags of ``/proc/cpuinfo``.

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (default: read it).

    Returns:
        ``{"avx2": bool, "avx512": bool, "sha": bool, "flags": [...]}``: AVX2, AVX-512
        (``avx512f``), the SHA extensions (x86 ``sha_ni``, Arm ``sha1``), and those of
        ``_ISA_FLAGS`` the CPU has; ``{}`` where ``/proc/cpuinfo`` cannot be read.
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
                cpuinfo = fh.read()
        except OSError:
            return {}
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
            break
    return {"avx2": "avx2" in flags, "avx512": "avx512f" in flags,
            "sha": "sha_ni" in flags or "sha1" in flags,
            "flags": [f for f in _ISA_FLAGS if f in flags]}


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=Path(__file__).resolve().parent, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """Where a benchmark ran: host, CPU model, its vector instruction sets (``isa``, see
    :func:`vector_isa`), cores, Python, numpy and numba versions (numba ``None`` where not
    installed), date (UTC).

    ``APGAS_MACHINE_LABEL`` (e.g. ``"2-core dev VM"``) is recorded as ``label`` when set.
    """
    import numpy

    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "cpu": _cpu_model(),
        "isa": vector_isa(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": _version("numba"),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": _git_commit(),
    }
    label = os.environ.get("APGAS_MACHINE_LABEL")
    if label:
        info["label"] = label
    return info


def write_result(name: str, data: dict[str, Any], directory: Path | None = None) -> Path:
    """Write ``data`` plus ``machine`` and ``kernels`` to ``<directory>/<name>.json`` and
    return the path.

    ``kernels`` is the kernel backend of this process, ``"numba"`` or ``"numpy"``
    (``APGAS_KERNELS``, :func:`benchmarks.kernels.backend`), unless ``data`` has its own;
    ``isa`` beside it is the machine's vector instruction sets (:func:`vector_isa`), on which
    the compiled kernels' speed depends.
    """
    from .kernels._backend import backend

    directory = directory or RESULTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    payload = {"benchmark": name, "machine": machine_info(), "kernels": backend(),
               "isa": vector_isa(), **data}
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path
