"""Importable task functions for benchmarks (mpi4py.futures workers import them by name)."""


def noop() -> None:
    """Do nothing: the empty task of the runtime benchmarks."""
