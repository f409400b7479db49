"""Rank 0 alone enters a collective (no exception anywhere): the collective timeout names
the test."""
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor.placement import Shard


def test_gathers_on_rank_0_only():
    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
    if MPI.COMM_WORLD.rank == 0:
        mt.distribute_tensor(np.arange(8.0), mesh, [Shard(0)]).full_tensor()
    else:
        time.sleep(3)
