"""Passing tests, skips on every rank and on one rank only: the job passes."""
import numpy as np
import pytest
from mpi4py import MPI

import mtensor as mt
from mtensor.placement import Replicate, Shard


@pytest.mark.parametrize("placement", [Shard(0), Replicate()], ids=str)
def test_round_trip(placement):
    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
    full = mt.distribute_tensor(np.arange(6.0), mesh, [placement]).full_tensor()
    np.testing.assert_array_equal(full, np.arange(6.0))


@pytest.mark.skip(reason="lockstep sample: skipped everywhere")
def test_skipped_everywhere():
    pass


def test_skipped_on_rank_1():
    if MPI.COMM_WORLD.rank == 1:
        pytest.skip("lockstep sample: skipped on rank 1")
