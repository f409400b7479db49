"""Point-to-point messages between pipeline stages: a stage's output (or its input's
gradient) sent as the local block of a DTensor to the rank at the same (dp, tp) coordinate
of the next (or previous) stage, over the pipeline mesh dim's communicator with the ``send``
and ``recv`` step kinds (``Isend``/``Irecv``).

Sender and receiver sit at the same coordinate of meshes of one shape, so the block alone
carries the tensor once its spec (global shape, dtype, placements) is known.  The first time
a call signature sends a given message, a fixed-size header with the spec goes first
(``encode_spec``; message ``t`` travels with MPI tag ``2 t``, its header with ``2 t + 1``),
and both ends remember it: later calls with that signature send blocks
only, and a receive can be posted before its sender runs (the runner posts one action
ahead).  While ``mt.compile`` records, each send and receive is a collective node of the
graph (the headers are not: the replay knows every shape), which the replay starts where it
was traced and waits for where the block is first read (a send: at the end).
"""
from __future__ import annotations

import time

import numpy as np

from .. import modes
from ..comm import guard
from ..device import arrays as device
from ..dtensor import DTensor
from ..placement import REDUCE_OPS, Partial, Replicate, Shard, local_shape
from ..redistribute.execute import Collective
from ..spec import DTensorSpec

HEADER = 32       # int64 words: ndim, dtype, shape..., placements...
DTYPES = ("float64", "float32", "float16", "complex128", "complex64", "int64", "int32",
          "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool")
_OPS = tuple(REDUCE_OPS)


def encode_spec(shape, dtype, placements) -> np.ndarray:
    """The header of a message: (ndim, dtype index, shape..., placement codes...) in
    ``HEADER`` int64 words; a placement is its shard dim, -1 (Replicate) or -2 - the reduce
    op's index (Partial)."""
    name = np.dtype(dtype).name
    if name not in DTYPES or len(shape) + len(placements) + 2 > HEADER:
        raise ValueError(f"pipeline: cannot send a tensor of shape {tuple(shape)} and dtype "
                         f"{name} between stages (dtypes {DTYPES}, at most "
                         f"{HEADER - 2} dims and mesh dims together)")
    codes = [p.dim if isinstance(p, Shard) else -1 if isinstance(p, Replicate)
             else -2 - _OPS.index(p.reduce_op) for p in placements]
    out = np.zeros(HEADER, np.int64)
    words = [len(shape), DTYPES.index(name), *shape, *codes]
    out[:len(words)] = words
    return out


def decode_spec(header, mesh_ndim: int):
    """(shape, dtype, placements) of ``encode_spec``'s header."""
    ndim, dtype = int(header[0]), np.dtype(DTYPES[int(header[1])])
    shape = tuple(int(s) for s in header[2:2 + ndim])
    codes = [int(c) for c in header[2 + ndim:2 + ndim + mesh_ndim]]
    placements = tuple(Shard(c) if c >= 0 else Replicate() if c == -1
                       else Partial(_OPS[-2 - c]) for c in codes)
    return shape, dtype, placements


class Receipt:
    """A receive on its way: the header's request (a spec not known yet) or the block's."""

    __slots__ = ("peer", "tag", "key", "header", "request", "block", "spec", "local")

    def __init__(self, peer, tag, key):
        self.peer, self.tag, self.key = peer, tag, key
        self.header = self.request = self.block = self.spec = self.local = None


class Messenger:
    """This rank's messages over the pipeline mesh dim ``dim`` of ``mesh``; tensors arrive
    as DTensors of ``stage_mesh``.  ``specs``: what earlier calls learnt, by (call
    signature, peer, tag), kept by the caller across calls."""

    def __init__(self, mesh, dim: int, stage_mesh, specs: dict, signature):
        self.mesh, self.dim, self.stage_mesh = mesh, dim, stage_mesh
        self.group, self.me = mesh.communicator(dim), mesh.coordinate[dim]
        self.specs, self.signature = specs, signature
        self.sends = []               # (request, buffers kept alive until it completes)
        self.local = {}               # tag -> DTensor, for a stage on this rank

    def send(self, x: DTensor, peer: int, tag: int) -> None:
        """Start sending ``x``'s block to rank ``peer`` of the dim (its spec first, the first
        time this signature sends this message)."""
        if peer == self.me:
            self.local[tag] = x
            return
        spec = (x.shape, x.dtype, x.placements)
        key = (self.signature, peer, tag)
        known = self.specs.get(key)
        if known is None:
            header = encode_spec(*spec)
            self.sends.append((self.group.start("send", header, None, (peer, 2 * tag + 1),
                                                None), header))
            self.specs[key] = spec
        elif known != spec:
            raise RuntimeError(
                f"pipeline: the message with tag {tag} to stage rank {peer} was {known} in an "
                f"earlier call with these arguments' specs and is {spec} now; a stage must lay "
                f"its outputs out alike for arguments laid out alike")
        block = x._local
        c = _collective("send", self.mesh, self.dim, peer, tag, block.shape, x.dtype, spec)
        tracer = modes.active.tracer
        start = time.perf_counter()
        sent = c.prepare(block)
        request = self.group.start("send", sent, None, c.counts, None)
        self.sends.append((request, sent))
        if modes.active.counters:
            c.count()
        if tracer is not None:
            tracer.collective(c, block, device.empty((0,), x.dtype, like=block),
                              time.perf_counter() - start)

    def post(self, peer: int, tag: int) -> Receipt:
        """Start receiving the message ``tag`` from rank ``peer``: the block itself when its
        spec is known, else the header."""
        receipt = Receipt(peer, tag, (self.signature, peer, tag))
        if peer == self.me:
            receipt.local = True
            return receipt
        known = self.specs.get(receipt.key)
        if known is None:
            receipt.header = np.empty(HEADER, np.int64)
            receipt.request = self.group.start("recv", None, receipt.header,
                                               (peer, 2 * tag + 1), None)
        else:
            self._post_block(receipt, known)
        return receipt

    def _post_block(self, receipt: Receipt, spec) -> None:
        shape, dtype, placements = spec
        receipt.spec = DTensorSpec(self.stage_mesh, tuple(placements), tuple(shape),
                                   np.dtype(dtype))
        local = local_shape(receipt.spec.shape, self.stage_mesh.shape,
                            receipt.spec.placements, self.stage_mesh.coordinate)
        c = _collective("recv", self.mesh, self.dim, receipt.peer, receipt.tag, local,
                        dtype, spec)
        empty = device.empty_on(self.mesh.device_type, (0,), dtype)
        receipt.block = device.empty_on(self.mesh.device_type, local, dtype)
        receipt.request = self.group.start("recv", None, receipt.block, c.counts, None)
        if modes.active.counters:
            c.count()
        if modes.active.tracer is not None:
            modes.active.tracer.collective(c, empty, receipt.block, 0.0)

    def take(self, receipt: Receipt) -> DTensor:
        """Wait for ``receipt``'s tensor (under the collective timeout)."""
        if receipt.local:
            return self.local.pop(receipt.tag)
        if receipt.header is not None:
            self._wait("recv", receipt.request, receipt, (HEADER,), np.int64)
            spec = decode_spec(receipt.header, self.stage_mesh.ndim)
            self.specs[receipt.key] = spec
            receipt.header = None
            self._post_block(receipt, spec)
        self._wait("recv", receipt.request, receipt, receipt.spec.shape, receipt.spec.dtype)
        return DTensor(receipt.block, receipt.spec)

    def close(self) -> None:
        """Wait for every send started (the receivers have posted theirs by now, or will
        without waiting on this rank)."""
        for request, _ in self.sends:
            self._wait("send", request, None, (), np.uint8)
        self.sends = []
        if self.local:
            raise RuntimeError(f"pipeline: messages {sorted(self.local)} were sent within a "
                               f"rank and never received; the schedule is inconsistent")

    def _wait(self, kind, request, receipt, shape, dtype) -> None:
        if guard.state.active:
            peer = "" if receipt is None else f" from stage rank {receipt.peer}"
            guard.state.op = f"pipeline {kind}{peer}"
            guard.before(kind, self.dim, tuple(shape), dtype, self.mesh.comm, agree=False)
        try:
            self.group.wait(request)
        finally:
            guard.after()


def _collective(kind, mesh, dim, peer, tag, block_shape, dtype, spec) -> Collective:
    """A bound ``send`` or ``recv`` as the tracer and the replay know collectives: ``counts``
    is (peer, MPI tag): the message's even tag (its header has the odd one after it); a
    send's result, and a receive's input, are empty blocks."""
    c = Collective()
    c.kind, c.mesh, c.mesh_dim = kind, mesh, dim
    c.group = mesh.communicator(dim)
    c.run = getattr(c.group, kind)
    c.n, c.index, c.dtype, c.op = mesh.shape[dim], mesh.coordinate[dim], np.dtype(dtype), None
    c.counts = (peer, 2 * tag)
    block_shape = tuple(block_shape)
    c.recv_shape = block_shape if kind == "recv" else (0,)
    c.out_shape = c.recv_shape
    c.global_shape = tuple(spec[0])
    c.unpooled = True
    c.nbytes = int(np.prod(block_shape)) * c.dtype.itemsize
    c.bucket_bytes = 0        # never fused, never counted against the bytes in flight
    c.prepare = device.contiguous if kind == "send" else _same
    c.finish = _same
    return c


def _same(block):
    return block
