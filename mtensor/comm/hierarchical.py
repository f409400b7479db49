"""``Hierarchical``: host MPI over a group that spans nodes, with two-level collectives.

A group whose ranks sit ``k`` per node on ``m`` nodes runs a large collective in two levels,
so the slow link between nodes carries fewer bytes than a flat algorithm that does not follow
the nodes (a ring, recursive doubling) sends over it:

- all-reduce: reduce-scatter inside each node (the fast link), all-reduce of each rank's 1/k
  piece across the nodes (the ranks of one local index), all-gather inside;
- all-gather: all-gather across the nodes (each rank collects the pieces of its local index
  on every node), all-gather of those inside each node, then each piece to its rank's place;
- reduce-scatter: the pieces put in that two-level order, reduce-scatter inside each node
  (each rank gets its local index's pieces summed over the node), reduce-scatter of those
  across the nodes.

Below the crossover sizes the cost model gives (``cost.hierarchical_crossover``) the flat
collective runs: latency dominates there.  All-to-all, broadcasts and the nonblocking starts
of ``mt.compile``'s replay are the flat ones of ``MPIHost``.
"""
from __future__ import annotations

import numpy as np

from ..device import buffers
from ..placement import shard_counts
from .mpi_host import MPIHost


class Hierarchical(MPIHost):
    """``MPIHost`` over ``raw`` plus the node-local and the across-node communicators.

    ``crossovers``: bytes per collective kind (all-reduce: its buffer; all-gather: the
    gathered one; reduce-scatter: the one scattered) from which the two levels run."""

    name = "mpi-hier"

    def __init__(self, raw, node_of_rank, crossovers):
        super().__init__(raw)
        labels = sorted(set(node_of_rank), key=node_of_rank.index)
        local = [[r for r, label in enumerate(node_of_rank) if label == node].index(r)
                 for r, node in enumerate(node_of_rank)]
        mine = node_of_rank[raw.rank]
        self.local = local[raw.rank]
        # intra ranks follow the local index, inter ranks the members of one local index
        self.intra = MPIHost(raw.Split(labels.index(mine), raw.rank))
        self.inter = MPIHost(raw.Split(self.local, raw.rank))
        self.members = [[r for r in range(raw.size) if local[r] == i]
                        for i in range(self.intra.size)]
        self.crossover = dict(crossovers)

    def _flat(self, kind: str, nbytes: int) -> bool:
        return nbytes < self.crossover[kind] or self.intra.size == 1

    def all_reduce(self, send, recv, counts, op) -> None:
        if self._flat("all_reduce", recv.nbytes):
            return super().all_reduce(send, recv, counts, op)
        flat = recv.reshape(-1)
        if send is not recv:
            np.copyto(flat, send.reshape(-1))
        pieces = shard_counts(flat.size, self.intra.size)
        mine = buffers.empty((pieces[self.intra.rank],), recv.dtype)
        self.intra.reduce_scatter(flat, mine, pieces, op)
        self.inter.all_reduce(mine, mine, None, op)
        self.intra.all_gather(mine, flat, pieces, None)

    def all_gather(self, send, recv, counts, op) -> None:
        if self._flat("all_gather", recv.nbytes):
            return super().all_gather(send, recv, counts, op)
        mine = self.members[self.local]
        part = buffers.empty((sum(counts[r] for r in mine),), recv.dtype)
        self.inter.all_gather(send, part, [counts[r] for r in mine], None)
        sizes = [sum(counts[r] for r in group) for group in self.members]
        staged = buffers.empty((sum(sizes),), recv.dtype)
        self.intra.all_gather(part, staged, sizes, None)
        self._reorder(staged, recv.reshape(-1), counts, to_ranks=True)

    def reduce_scatter(self, send, recv, counts, op) -> None:
        if self._flat("reduce_scatter", send.nbytes):
            return super().reduce_scatter(send, recv, counts, op)
        staged = buffers.empty((send.size,), send.dtype)
        self._reorder(staged, send.reshape(-1), counts, to_ranks=False)
        sizes = [sum(counts[r] for r in group) for group in self.members]
        part = buffers.empty((sizes[self.local],), send.dtype)
        self.intra.reduce_scatter(staged, part, sizes, op)
        self.inter.reduce_scatter(part, recv, [counts[r] for r in self.members[self.local]], op)

    def _reorder(self, staged, by_rank, counts, to_ranks: bool) -> None:
        """Copy between ``staged`` (the pieces by local index, then node) and ``by_rank``
        (the pieces in rank order), ``counts[r]`` elements each, in the direction asked."""
        offsets = np.cumsum([0, *counts])
        at = 0
        for group in self.members:
            for r in group:
                n = counts[r]
                if to_ranks:
                    by_rank[offsets[r]:offsets[r] + n] = staged[at:at + n]
                else:
                    staged[at:at + n] = by_rank[offsets[r]:offsets[r] + n]
                at += n
