"""Fixtures of the kernel tests: ``kernels`` runs a test once per kernel backend."""

from __future__ import annotations

import pytest

from benchmarks.kernels._backend import backend

from .bagcheck import BACKENDS


@pytest.fixture(params=BACKENDS)
def kernels(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with ``APGAS_KERNELS`` set to each backend in turn (``numpy``, and
    ``numba`` where it is installed; skipped where it is not); returns the backend's name."""
    monkeypatch.setenv("APGAS_KERNELS", request.param)
    assert backend() == request.param
    return request.param
