"""A bucket at run time: several collectives of one key as one MPI call.

Packing follows what each rank sends and receives:
- all-reduce: the members' buffers end to end; each result is a slice of the result.
- all-gather: each rank sends its members' pieces end to end, so rank r's segment of the
  result holds every member's r-th piece; each member's result is cut back out of the
  segments.
- reduce-scatter (per-destination interleaving): the send buffer holds, for each rank r in
  turn, every member's r-th segment, so rank r receives all of its pieces in one block.
Offsets and counts are worked out once, when the replay is built.
"""
from __future__ import annotations

import math

import numpy as np

from .. import modes
from ..device import arrays as device


class Bucket:
    """Collectives of one kind on one mesh dim, fused into a single call: ``pack`` copies the
    members' blocks into one send buffer (or lends a lone member's block), the collective
    runs on it, and ``unpack`` hands each member its part of the received buffer."""

    def __init__(self, members, ins, outs, where=("", "forward")):
        first = members[0]
        self.members, self.ins, self.outs, self.where = members, ins, outs, where
        self.kind, self.group, self.op, self.dtype = first.kind, first.group, first.op, first.dtype
        self.run = first.run
        self.mesh, self.mesh_dim = first.mesh, first.mesh_dim
        self.nbytes = sum(m.nbytes for m in members)
        self.global_shapes = tuple(m.global_shape for m in members)
        self.fused = len(members) > 1
        self.in_place = not self.fused and self.kind == "all_reduce"
        if not self.fused:
            self.counts, self.recv_shape = first.counts, first.recv_shape
        elif self.kind == "all_reduce":
            self.offsets = np.cumsum([0] + [math.prod(m.recv_shape) for m in members]).tolist()
            self.counts, self.recv_shape = None, (self.offsets[-1],)
        else:
            self._segments(members)

    def _segments(self, members):
        per = np.array([m.counts for m in members], dtype=np.int64)   # member x rank
        self.counts = tuple(int(c) for c in per.sum(axis=0))
        base = np.cumsum([0] + list(self.counts))[:-1]                  # rank r's segment
        within = np.cumsum(per, axis=0) - per                           # member's place in it
        own = np.cumsum(per, axis=1) - per                              # rank r's part of a member
        self.pieces = [[(int(base[r] + within[i, r]), int(own[i, r]), int(per[i, r]))
                        for r in range(per.shape[1])] for i in range(len(members))]
        me = members[0].index
        self.recv_shape = (self.counts[me],) if self.kind == "reduce_scatter" else (int(per.sum()),)
        self.mine = [(int(within[i, me]), int(per[i, me])) for i in range(len(members))]

    def pack(self, env, alone=False):
        """(send buffer, receive buffer) from the members' inputs.  ``alone``: the input dies
        here and only the replay holds it; an unfused all-reduce then reduces a host block
        of the result's layout in place (MPI_IN_PLACE: no fresh buffer, no copy)."""
        first = env[self.ins[0]]
        if alone and self.in_place and self._fits(first):
            return first, first
        recv = device.empty(self.recv_shape, self.dtype, like=first)
        if not self.fused:
            return self.members[0].prepare(first), recv
        sends = [m.prepare(env[s]).reshape(-1) for m, s in zip(self.members, self.ins)]
        if self.kind in ("all_reduce", "all_gather"):
            send = device.empty((sum(a.size for a in sends),), self.dtype, like=first)
            np.concatenate(sends, out=send)
            return send, recv
        send = device.empty((sum(self.counts),), self.dtype, like=first)
        for flat, pieces in zip(sends, self.pieces):
            for at, start, n in pieces:
                send[at:at + n] = flat[start:start + n]
        return send, recv

    def _fits(self, block) -> bool:
        """Whether ``block`` is a whole C-contiguous host array of the result's layout."""
        return (type(block) is np.ndarray and block.shape == self.recv_shape
                and block.dtype == self.dtype and block.flags.c_contiguous
                and device.owns_memory(block))

    def unpack(self, recv, env) -> None:
        """Each member's result, finished, into its slot."""
        if not self.fused:
            env[self.outs[0]] = self.members[0].finish(recv)
            return
        for i, (m, out) in enumerate(zip(self.members, self.outs)):
            if self.kind == "all_reduce":
                piece = recv[self.offsets[i]:self.offsets[i + 1]].reshape(m.recv_shape)
            elif self.kind == "reduce_scatter":
                at, n = self.mine[i]
                piece = recv[at:at + n].reshape(m.recv_shape)
            else:
                piece = device.empty(m.recv_shape, self.dtype, like=recv)
                flat = piece.reshape(-1)
                for at, start, n in self.pieces[i]:
                    flat[start:start + n] = recv[at:at + n]
            env[out] = m.finish(piece)

    def count(self) -> None:
        """One entry in CommDebugMode for the whole bucket, in the region and phase its first
        member was traced in."""
        active = modes.active
        outer, active.region, active.phase = (active.region, active.phase), *self.where
        try:
            self.members[0].count(self.nbytes)
        finally:
            active.region, active.phase = outer
