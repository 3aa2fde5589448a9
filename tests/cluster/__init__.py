"""Local test clusters (a Slurm cluster of several node names on this one machine)."""
