"""``Staged``: device buffers through host MPI, for any MPI (the default for GPU meshes
where NCCL cannot be used and MPI is not CUDA-aware).

Each collective synchronises the producing stream, copies the send buffer into reused
**pinned** host memory (page-locked: the copy runs at full bus speed and may be
asynchronous), runs the host collective of ``MPIHost`` (so NaN, booleans and uneven pieces
behave exactly as on the CPU path), and copies the result back.  A large all-reduce is
pipelined in chunks: while MPI reduces chunk k on the host, the GPU copies chunk k+1 down and
chunk k-1 up.  The other collectives stage in one piece (their per-rank pieces do not chunk
alike on every rank), and so do point-to-point messages (a send's block down before it
starts, a receive's up when it is waited for).
"""
from __future__ import annotations

import os

import numpy as np

from ..device import arrays as device
from .mpi_host import HostMetadata, MPIHost
from .requests import Started, test_all, wait

CHUNK_BYTES = int(os.environ.get("MTENSOR_STAGED_CHUNK_MB", "4")) << 20


class PinnedPool:
    """Pinned host buffers, kept and handed out again: pinning is slow (a system call and a
    page-table walk), so it happens once per size class (powers of two)."""

    def __init__(self):
        self._free: dict = {}

    def take(self, like, count: int, dtype) -> np.ndarray:
        """A pinned host array of ``count`` elements of ``dtype`` (``like``: a device block)."""
        nbytes = max(count * np.dtype(dtype).itemsize, 1)
        size = 1 << (nbytes - 1).bit_length()
        free = self._free.setdefault(size, [])
        raw = free.pop() if free else np.frombuffer(
            device.cuda_api(like).alloc_pinned_memory(size), np.uint8, size)
        return raw[:count * np.dtype(dtype).itemsize].view(dtype)

    def give(self, *arrays) -> None:
        for array in arrays:
            raw = array.base if array.base is not None else array
            while raw.base is not None and isinstance(raw.base, np.ndarray):
                raw = raw.base
            self._free.setdefault(raw.size, []).append(raw)


class Staged(HostMetadata):
    """Host MPI on pinned copies of device buffers, over one communicator."""

    name = "staged"

    def __init__(self, raw):
        self.host = MPIHost(raw)
        self.raw, self.size, self.rank = raw, raw.size, raw.rank
        self.pool = PinnedPool()

    def _down(self, block):
        """A pinned host copy of ``block``, complete when this returns."""
        host = self.pool.take(block, block.size, block.dtype)
        stream = device.cuda_api(block).get_current_stream()
        block.reshape(-1).get(out=host, stream=stream, blocking=False)
        stream.synchronize()
        return host

    def _up(self, host, block) -> None:
        """Copy ``host`` into ``block`` and wait for it (``host`` is then free again)."""
        stream = device.cuda_api(block).get_current_stream()
        block.reshape(-1).set(host, stream=stream)
        stream.synchronize()
        self.pool.give(host)

    def _staged(self, kind, send, recv, counts, op) -> None:
        if not device.on_device(recv):          # host buffers (metadata, host constructors)
            return getattr(self.host, kind)(send, recv, counts, op)
        down = self._down(send)
        up = down if send is recv else self.pool.take(recv, recv.size, recv.dtype)
        getattr(self.host, kind)(down, up, counts, op)
        if up is not down:
            self.pool.give(down)
        self._up(up, recv)

    def all_reduce(self, send, recv, counts, op) -> None:
        if send.nbytes <= 2 * CHUNK_BYTES or not device.on_device(recv):
            return self._staged("all_reduce", send, recv, counts, op)
        self._pipelined(send, recv, op)

    def _pipelined(self, send, recv, op) -> None:
        """Chunk k is reduced on the host while chunk k+1 comes down and chunk k goes up."""
        flat_send, flat_recv = send.reshape(-1), recv.reshape(-1)
        step = max(CHUNK_BYTES // send.dtype.itemsize, 1)
        bounds = [(lo, min(lo + step, send.size)) for lo in range(0, send.size, step)]
        host = self.pool.take(send, send.size, send.dtype)
        stream = device.cuda_api(send).get_current_stream()
        lo, hi = bounds[0]
        flat_send[lo:hi].get(out=host[lo:hi], stream=stream, blocking=False)
        stream.synchronize()
        for k, (lo, hi) in enumerate(bounds):
            if k + 1 < len(bounds):
                nlo, nhi = bounds[k + 1]
                flat_send[nlo:nhi].get(out=host[nlo:nhi], stream=stream, blocking=False)
            self.host.all_reduce(host[lo:hi], host[lo:hi], None, op)
            flat_recv[lo:hi].set(host[lo:hi], stream=stream)
            stream.synchronize()
        self.pool.give(host)

    def all_gather(self, send, recv, counts, op) -> None:
        self._staged("all_gather", send, recv, counts, op)

    def reduce_scatter(self, send, recv, counts, op) -> None:
        self._staged("reduce_scatter", send, recv, counts, op)

    def all_to_all(self, send, recv, counts, op) -> None:
        self._staged("all_to_all", send, recv, counts, op)

    def halo(self, send, recv, counts, op) -> None:
        self._staged("halo", send, recv, counts, op)

    def send(self, send, recv, counts, op) -> None:
        if not device.on_device(send):
            return self.host.send(send, recv, counts, op)
        down = self._down(send)
        self.host.send(down, None, counts, op)
        self.pool.give(down)

    def recv(self, send, recv, counts, op) -> None:
        if not device.on_device(recv):
            return self.host.recv(send, recv, counts, op)
        up = self.pool.take(recv, recv.size, recv.dtype)
        self.host.recv(None, up, counts, op)
        self._up(up, recv)

    def _start_point_to_point(self, kind, send, recv, counts) -> Started:
        """A send's block comes down now and its pinned copy goes back once sent; a receive
        lands in pinned memory and goes up to ``recv`` in ``wait``."""
        if kind == "send":
            if not device.on_device(send):
                return Started([self.host.start(kind, send, recv, counts, None)])
            down = self._down(send)
            return Started([self.host.start(kind, down, None, counts, None)],
                           lambda: self.pool.give(down))
        if not device.on_device(recv):
            return Started([self.host.start(kind, send, recv, counts, None)])
        up = self.pool.take(recv, recv.size, recv.dtype)
        return Started([self.host.start(kind, None, up, counts, None)],
                       lambda: self._up(up, recv))

    def start(self, kind, send, recv, counts, op) -> Started:
        """Copy down now, start the host collective, copy up in ``wait``."""
        if kind in ("send", "recv"):
            return self._start_point_to_point(kind, send, recv, counts)
        if not device.on_device(recv):
            return Started([self.host.start(kind, send, recv, counts, op)])
        down = self._down(send)
        up = down if send is recv else self.pool.take(recv, recv.size, recv.dtype)
        request = self.host.start(kind, down, up, counts, op)

        def finish():
            if up is not down:
                self.pool.give(down)
            self._up(up, recv)
        return Started([request], finish)

    wait = staticmethod(wait)
    test_all = staticmethod(test_all)

    def broadcast(self, buf, root) -> None:
        if not device.on_device(buf):
            return self.host.broadcast(buf, root)
        host = self._down(buf)
        self.host.broadcast(host, root)
        self._up(host, buf)

    def scatter(self, send, recv, counts, root) -> None:
        if not device.on_device(recv):
            return self.host.scatter(send, recv, counts, root)
        staged = self.rank == root and device.on_device(send)
        down = self._down(send) if staged else send
        up = self.pool.take(recv, recv.size, recv.dtype)
        self.host.scatter(down, up, counts, root)
        if staged:
            self.pool.give(down)
        self._up(up, recv)
