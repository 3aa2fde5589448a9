"""Local test clusters on this one machine (Slurm node names, network namespaces)."""
