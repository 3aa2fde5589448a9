"""Hosts as apgaspy sees them (public): names, addresses, Slurm allocations.

For communicators and tools that must agree with the runtime on where a job runs: the job's
hosts (``NODE_FILE``), how a name resolves, whether a host is this machine, which address a
place binds, and the Slurm allocation the job runs in.  See :mod:`apgaspy._hosts` for how
each is decided.
"""

from ._hosts import (
    SlurmAllocation,
    choose_address,
    is_local_host,
    is_loopback,
    local_addresses,
    my_host,
    node_file_hosts,
    resolve_host,
    slurm_allocation,
)

__all__ = [
    "SlurmAllocation",
    "choose_address",
    "is_local_host",
    "is_loopback",
    "local_addresses",
    "my_host",
    "node_file_hosts",
    "resolve_host",
    "slurm_allocation",
]
