"""The only layer that calls mpi4py: buffer collectives on numpy arrays."""
from . import nonblocking
from .collectives import (
    all_gather_v,
    all_reduce,
    all_to_all_v,
    allgather_object,
    broadcast,
    reduce_scatter_v,
    run,
    scatter_v,
    sum_ints,
)

__all__ = [
    "nonblocking",
    "all_gather_v",
    "all_reduce",
    "all_to_all_v",
    "allgather_object",
    "broadcast",
    "reduce_scatter_v",
    "run",
    "scatter_v",
    "sum_ints",
]
