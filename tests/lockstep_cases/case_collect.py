"""Rank 1 cannot import this module: the ranks collect different tests."""
from mpi4py import MPI

if MPI.COMM_WORLD.rank == 1:
    raise ImportError("lockstep sample: no module on rank 1")


def test_collected_on_rank_0_only():
    MPI.COMM_WORLD.barrier()
