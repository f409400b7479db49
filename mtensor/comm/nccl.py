"""``NCCL``: device collectives through ``cupy.cuda.nccl``, one NCCL communicator per MPI
communicator (a mesh dim's, or the whole mesh's).

NCCL is stream-ordered: a collective queued on the current stream runs after the kernels
that produced its buffers, so no host synchronise is needed; a started one runs on a side
stream that first waits for the current stream, and its wait makes the current stream wait
for it, so ``mt.compile``'s overlap works on the GPU too.  What NCCL lacks
(DESIGN.md, facts for the GPU layer) is mapped: booleans travel as bytes (logical or/and as
max/min), complex sums as float pairs, data movement as bytes; uneven all-gather and
reduce-scatter are padded to the largest piece; all-to-all(v) and scatter are grouped
send/recv; NaN rides on flags (``nan_flags``); point-to-point ``send``/``recv`` are NCCL's
own when blocking, staged through host MPI when started (see ``start``).  What is left
(int16, complex max/min, products of booleans) goes through ``Staged``.  Metadata collectives stay on host MPI.
"""
from __future__ import annotations

import numpy as np

from ..device import arrays as device
from . import nan_flags
from .mpi_host import HostMetadata, MPIHost
from .requests import Started, test_all, wait
from .staged import Staged

_TYPES = {"int8": "NCCL_INT8", "uint8": "NCCL_UINT8", "int32": "NCCL_INT32",
          "uint32": "NCCL_UINT32", "int64": "NCCL_INT64", "uint64": "NCCL_UINT64",
          "float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64"}
_OPS = {"sum": "NCCL_SUM", "avg": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}


def _reduction(dtype, op):
    """(dtype to view the buffers as, NCCL type name, NCCL op name), or None: stage it."""
    if dtype.kind == "b":
        return np.dtype(np.uint8), "NCCL_UINT8", "NCCL_MIN" if op == "min" else "NCCL_MAX"
    if dtype.kind == "c":
        if op not in ("sum", "avg"):
            return None
        real = np.dtype(f"f{dtype.itemsize // 2}")
        return real, _TYPES[real.name], "NCCL_SUM"
    if dtype.name not in _TYPES:
        return None
    return dtype, _TYPES[dtype.name], _OPS[op]


def _flat(block, dtype=np.uint8):
    return block.reshape(-1).view(dtype)


class _StreamEvent:
    """A completion event that answers like an mpi4py request: ``Wait`` makes the current
    stream wait for it (the host does not block), ``Test`` polls it."""

    __slots__ = ("event", "cuda")

    def __init__(self, event, cuda):
        self.event, self.cuda = event, cuda

    def Wait(self) -> None:
        self.cuda.get_current_stream().wait_event(self.event)

    def Test(self) -> bool:
        return self.event.done


class NCCL(HostMetadata):
    """NCCL on device buffers over one communicator; host buffers go to host MPI."""

    name = "nccl"

    def __init__(self, raw):
        self.raw, self.size, self.rank = raw, raw.size, raw.rank
        self.host, self.staged = MPIHost(raw), Staged(raw)
        self.cuda = device.array_module("cuda").cuda
        self.nccl = self.cuda.nccl
        uid = self.nccl.get_unique_id() if raw.rank == 0 else None
        self.comm = self.nccl.NcclCommunicator(raw.size, raw.bcast(uid, root=0), raw.rank)
        self.side = self.cuda.Stream(non_blocking=True)

    def _stream(self) -> int:
        return self.cuda.get_current_stream().ptr

    def all_reduce(self, send, recv, counts, op) -> None:
        self._reduce("all_reduce", send, recv, counts, op)

    def reduce_scatter(self, send, recv, counts, op) -> None:
        self._reduce("reduce_scatter", send, recv, counts, op)

    def _reduce(self, kind, send, recv, counts, op) -> None:
        spec = _reduction(recv.dtype, op) if device.on_device(recv) else None
        if spec is None:
            return getattr(self.staged, kind)(send, recv, counts, op)
        run = self._all_reduce if kind == "all_reduce" else self._reduce_scatter
        if nan_flags.needs_flags(op, recv.dtype):
            return nan_flags.reduce_keeping_nan(run, send, recv, counts, op)
        run(send, recv, counts, op)

    def _all_reduce(self, send, recv, counts, op) -> None:
        view, kind, nccl_op = _reduction(recv.dtype, op)
        s, r = _flat(send, view), _flat(recv, view)
        self.comm.allReduce(s.data.ptr, r.data.ptr, r.size, getattr(self.nccl, kind),
                            getattr(self.nccl, nccl_op), self._stream())

    def _reduce_scatter(self, send, recv, counts, op) -> None:
        view, kind, nccl_op = _reduction(recv.dtype, op)
        scale = recv.dtype.itemsize // view.itemsize
        widest = max(counts) * scale
        s, r = _flat(send, view), _flat(recv, view)
        if any(c * scale != widest for c in counts):
            padded = device.empty((self.size * widest,), view, like=recv)
            lo = 0
            for k, c in enumerate(counts):
                padded[k * widest:k * widest + c * scale] = s[lo:lo + c * scale]
                lo += c * scale
            s = padded
        out = r if r.size == widest else device.empty((widest,), view, like=recv)
        self.comm.reduceScatter(s.data.ptr, out.data.ptr, widest, getattr(self.nccl, kind),
                                getattr(self.nccl, nccl_op), self._stream())
        if out is not r:
            r[...] = out[:r.size]

    def all_gather(self, send, recv, counts, op) -> None:
        if not device.on_device(recv):
            return self.host.all_gather(send, recv, counts, op)
        size = recv.dtype.itemsize
        widest = max(counts) * size
        s, r = _flat(send), _flat(recv)
        if all(c * size == widest for c in counts):
            return self.comm.allGather(s.data.ptr, r.data.ptr, widest, self.nccl.NCCL_UINT8,
                                       self._stream())
        padded_send = device.empty((widest,), np.uint8, like=recv)
        padded_send[:s.size] = s
        padded = device.empty((self.size * widest,), np.uint8, like=recv)
        self.comm.allGather(padded_send.data.ptr, padded.data.ptr, widest,
                            self.nccl.NCCL_UINT8, self._stream())
        lo = 0
        for k, c in enumerate(counts):
            r[lo:lo + c * size] = padded[k * widest:k * widest + c * size]
            lo += c * size

    def all_to_all(self, send, recv, counts, op) -> None:
        if not device.on_device(recv):
            return self.host.all_to_all(send, recv, counts, op)
        size = recv.dtype.itemsize
        send_counts, recv_counts = counts
        s, r = _flat(send), _flat(recv)
        stream, byte = self._stream(), self.nccl.NCCL_UINT8
        send_at = np.cumsum((0,) + tuple(send_counts)) * size
        recv_at = np.cumsum((0,) + tuple(recv_counts)) * size
        self.nccl.groupStart()
        try:
            for peer in range(self.size):
                if send_counts[peer]:
                    self.comm.send(s.data.ptr + int(send_at[peer]), send_counts[peer] * size,
                                   byte, peer, stream)
                if recv_counts[peer]:
                    self.comm.recv(r.data.ptr + int(recv_at[peer]), recv_counts[peer] * size,
                                   byte, peer, stream)
        finally:
            self.nccl.groupEnd()

    def halo(self, send, recv, counts, op) -> None:
        """Grouped send/recv with the previous and next rank.  On one or two ranks both
        neighbours are one peer, and NCCL matches a peer's messages in the order they are
        posted: so the piece for the next rank goes first, as the receiver takes the piece
        from its previous rank first."""
        if not device.on_device(recv):
            return self.host.halo(send, recv, counts, op)
        size = recv.dtype.itemsize
        (to_prev, to_next), (from_prev, from_next) = counts
        prev, next_ = (self.rank - 1) % self.size, (self.rank + 1) % self.size
        s, r = _flat(send), _flat(recv)
        stream, byte = self._stream(), self.nccl.NCCL_UINT8
        self.nccl.groupStart()
        try:
            if to_next:
                self.comm.send(s.data.ptr + to_prev * size, to_next * size, byte, next_, stream)
            if to_prev:
                self.comm.send(s.data.ptr, to_prev * size, byte, prev, stream)
            if from_prev:
                self.comm.recv(r.data.ptr, from_prev * size, byte, prev, stream)
            if from_next:
                self.comm.recv(r.data.ptr + from_prev * size, from_next * size, byte, next_,
                               stream)
        finally:
            self.nccl.groupEnd()

    def send(self, send, recv, counts, op) -> None:
        """NCCL's send on the current stream (it waits there until the peer receives)."""
        if not device.on_device(send):
            return self.host.send(send, recv, counts, op)
        s = _flat(send)
        self.comm.send(s.data.ptr, s.size, self.nccl.NCCL_UINT8, counts[0], self._stream())

    def recv(self, send, recv, counts, op) -> None:
        if not device.on_device(recv):
            return self.host.recv(send, recv, counts, op)
        r = _flat(recv)
        self.comm.recv(r.data.ptr, r.size, self.nccl.NCCL_UINT8, counts[0], self._stream())

    def start(self, kind, send, recv, counts, op) -> Started:
        """Run ``kind`` on the side stream once the current stream's work is done.  A
        started send or receive goes through host MPI (``Staged``): NCCL's ungrouped send
        waits for its peer's receive on the stream, while a pipeline's ranks send to and
        receive from one peer at once (1F1B), which only MPI's ``Isend`` leaves unblocked."""
        if kind in ("send", "recv"):
            return self.staged.start(kind, send, recv, counts, op)
        if not device.on_device(recv):
            return Started([self.host.start(kind, send, recv, counts, op)])
        cuda = self.cuda
        ready = cuda.Event()
        ready.record(cuda.get_current_stream())
        self.side.wait_event(ready)
        with self.side:
            getattr(self, kind)(send, recv, counts, op)
            done = cuda.Event()
            done.record(self.side)
        return Started([_StreamEvent(done, cuda)])

    wait = staticmethod(wait)
    test_all = staticmethod(test_all)

    def broadcast(self, buf, root) -> None:
        if not device.on_device(buf):
            return self.host.broadcast(buf, root)
        b = _flat(buf)
        self.comm.bcast(b.data.ptr, b.size, self.nccl.NCCL_UINT8, root, self._stream())

    def scatter(self, send, recv, counts, root) -> None:
        if not device.on_device(recv):
            return self.host.scatter(send, recv, counts, root)
        if self.rank == root:
            send = device.to_device(send, "cuda")
        size = recv.dtype.itemsize
        stream, byte = self._stream(), self.nccl.NCCL_UINT8
        self.nccl.groupStart()
        try:
            if self.rank == root:
                s, lo = _flat(send), 0
                for peer, c in enumerate(counts):
                    if c:
                        self.comm.send(s.data.ptr + lo, c * size, byte, peer, stream)
                    lo += c * size
            if recv.size:
                r = _flat(recv)
                self.comm.recv(r.data.ptr, r.size, byte, root, stream)
        finally:
            self.nccl.groupEnd()
