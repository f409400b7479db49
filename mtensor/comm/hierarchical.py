"""``Hierarchical``: host MPI over a group that spans nodes, with a two-level all-reduce.

A group whose ranks sit ``k`` per node on ``m`` nodes all-reduces a large buffer as a
reduce-scatter inside each node (the fast link), an all-reduce of each rank's 1/k piece
across the nodes (ranks of the same local index: the slow link carries 1/k of the bytes a
flat all-reduce sends over it), and an all-gather inside each node.  Below the crossover
size the cost model gives (``cost.hierarchical_crossover``) the flat all-reduce runs:
latency dominates there.  The other collectives are the flat ones of ``MPIHost``.
"""
from __future__ import annotations

import numpy as np

from ..placement import shard_counts
from .mpi_host import MPIHost


class Hierarchical(MPIHost):
    """``MPIHost`` over ``raw`` plus the node-local and the across-node communicators."""

    name = "mpi-hier"

    def __init__(self, raw, node_of_rank, crossover_bytes: float):
        super().__init__(raw)
        labels = sorted(set(node_of_rank), key=node_of_rank.index)
        mine = node_of_rank[raw.rank]
        local = [r for r, label in enumerate(node_of_rank) if label == mine].index(raw.rank)
        self.intra = MPIHost(raw.Split(labels.index(mine), raw.rank))
        self.inter = MPIHost(raw.Split(local, raw.rank))
        self.crossover = crossover_bytes

    def all_reduce(self, send, recv, counts, op) -> None:
        if recv.nbytes < self.crossover or self.intra.size == 1:
            return super().all_reduce(send, recv, counts, op)
        flat = recv.reshape(-1)
        if send is not recv:
            np.copyto(flat, send.reshape(-1))
        pieces = shard_counts(flat.size, self.intra.size)
        mine = np.empty(pieces[self.intra.rank], recv.dtype)
        self.intra.reduce_scatter(flat, mine, pieces, op)
        self.inter.all_reduce(mine, mine, None, op)
        self.intra.all_gather(mine, flat, pieces, None)
