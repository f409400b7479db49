"""Failures on rank 1 only, with no collective after them: every rank reports them and the
ranks stay in step for the next test; passing tests and skips (on every rank, on one rank
only) around them stay as they are."""
import numpy as np
import pytest
from mpi4py import MPI

import mtensor as mt
from mtensor.placement import Replicate, Shard

RANK = MPI.COMM_WORLD.rank


@pytest.fixture
def rank_1_cannot_set_up():
    if RANK == 1:
        raise OSError("lockstep sample: no fixture on rank 1")


@pytest.mark.parametrize("placement", [Shard(0), Replicate()], ids=str)
def test_round_trip(placement):
    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
    full = mt.distribute_tensor(np.arange(6.0), mesh, [placement]).full_tensor()
    np.testing.assert_array_equal(full, np.arange(6.0))


@pytest.mark.skip(reason="lockstep sample: skipped everywhere")
def test_skipped_everywhere():
    pass


def test_skipped_on_rank_1():
    if RANK == 1:
        pytest.skip("lockstep sample: skipped on rank 1")


def test_fails_on_rank_1():
    assert RANK != 1, "lockstep sample: wrong on rank 1"


def test_setup_fails_on_rank_1(rank_1_cannot_set_up):
    pass


def test_still_in_step():
    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
    full = mt.distribute_tensor(np.arange(8.0), mesh, [Shard(0)]).full_tensor()
    np.testing.assert_array_equal(full, np.arange(8.0))
