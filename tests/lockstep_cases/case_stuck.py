"""Rank 1 raises; rank 0 goes on into a collective that rank 1 never joins."""
import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor.placement import Shard


def test_raises_on_rank_1_then_gathers():
    mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
    if MPI.COMM_WORLD.rank == 1:
        raise ValueError("lockstep sample: rank 1 gave up")
    mt.distribute_tensor(np.arange(8.0), mesh, [Shard(0)]).full_tensor()


def test_never_reached():
    pass
