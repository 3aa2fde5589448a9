"""Tests that run inside an MPI world, every rank a place (pytest-mpi).

Run with ``mpiexec -n 2 python -m pytest --with-mpi tests/mpi`` (and -n 3); the plain test
suite does that through ``tests/test_mpi_world.py``.  Assertions are made at place 0.
"""

from __future__ import annotations

import os

import pytest

from apgaspy import MultipleException, async_at, at, finish, here, places, session


def _fail():
    raise ValueError("boom")


@pytest.mark.mpi(min_size=2)
def test_every_rank_is_a_place():
    from mpi4py import MPI

    size = MPI.COMM_WORLD.Get_size()
    with session() as main:
        if main:
            assert [p.id for p in places()] == list(range(size))
            ranks = [at(p, lambda: MPI.COMM_WORLD.Get_rank()) for p in places()]
            assert ranks == list(range(size))
            assert len({at(p, os.getpid) for p in places()}) == size


@pytest.mark.mpi(min_size=2)
def test_sessions_can_follow_each_other():
    for _ in range(2):
        with session() as main:
            if main:
                assert [at(p, lambda: here().id) for p in places()] == [p.id for p in places()]


@pytest.mark.mpi(min_size=2)
def test_finish_collects_remote_errors():
    with session() as main:
        if main:
            with pytest.raises(MultipleException) as info:
                with finish():
                    for p in places()[1:]:
                        async_at(p, _fail)
            assert len(info.value.exceptions) == len(places()) - 1
