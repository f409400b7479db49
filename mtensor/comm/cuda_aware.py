"""``CudaAware``: device pointers straight to a CUDA-aware MPI.

mpi4py hands MPI a CuPy buffer's raw device pointer unchecked (DESIGN.md, facts for the GPU
layer), and MPI reads it outside any CUDA stream, so the producing stream is synchronised
before every call.  Reductions use MPI's built-in ops (a Python op cannot read device
memory), with NaN carried by flags (``nan_flags``); the one pairing MPI has no built-in op
for, max/min of complex numbers, is staged.  Chosen only when every rank of the group says
its MPI is CUDA-aware (``select``): a non-CUDA-aware MPI segfaults on a device pointer.
"""
from __future__ import annotations

from ..device import arrays as device
from . import nan_flags
from .mpi_host import MPIHost, builtin_op
from .requests import Started, test_all, wait
from .staged import Staged


def _staged_only(op, dtype) -> bool:
    return op in ("max", "min") and dtype.kind == "c"


class CudaAware(MPIHost):
    """``MPIHost`` on device buffers, after a stream synchronise."""

    name = "cuda-aware"
    _op = staticmethod(builtin_op)

    def __init__(self, raw):
        super().__init__(raw)
        self.staged = Staged(raw)

    def _reduce(self, kind, send, recv, counts, op) -> None:
        if _staged_only(op, recv.dtype):
            return getattr(self.staged, kind)(send, recv, counts, op)
        run = getattr(super(), kind)
        if nan_flags.needs_flags(op, recv.dtype):
            nan_flags.reduce_keeping_nan(run, send, recv, counts, op, device.synchronize)
        else:
            device.synchronize(send)
            run(send, recv, counts, op)

    def all_reduce(self, send, recv, counts, op) -> None:
        self._reduce("all_reduce", send, recv, counts, op)

    def reduce_scatter(self, send, recv, counts, op) -> None:
        self._reduce("reduce_scatter", send, recv, counts, op)

    def all_gather(self, send, recv, counts, op) -> None:
        device.synchronize(send)
        super().all_gather(send, recv, counts, op)

    def all_to_all(self, send, recv, counts, op) -> None:
        device.synchronize(send)
        super().all_to_all(send, recv, counts, op)

    def halo(self, send, recv, counts, op) -> None:
        device.synchronize(send)
        super().halo(send, recv, counts, op)

    def send(self, send, recv, counts, op) -> None:
        device.synchronize(send)
        super().send(send, recv, counts, op)

    def recv(self, send, recv, counts, op) -> None:
        device.synchronize(recv)      # no kernel may still write the buffer MPI fills
        super().recv(send, recv, counts, op)

    def start(self, kind, send, recv, counts, op) -> Started:
        if kind in ("send", "recv"):
            device.synchronize(send if kind == "send" else recv)
            return Started([super().start(kind, send, recv, counts, op)])
        if _staged_only(op, recv.dtype):
            return self.staged.start(kind, send, recv, counts, op)
        if not nan_flags.needs_flags(op, recv.dtype):
            device.synchronize(send)
            return Started([super().start(kind, send, recv, counts, op)])
        flags = nan_flags.flags_of(send)
        reduced = device.empty(recv.shape, flags.dtype, like=recv)
        device.synchronize(send)
        parts = [super().start(kind, send, recv, counts, op),
                 super().start(kind, flags, reduced, counts, "max")]
        return Started(parts, lambda: nan_flags.restore(recv, reduced))

    wait = staticmethod(wait)
    test_all = staticmethod(test_all)

    def broadcast(self, buf, root) -> None:
        device.synchronize(buf)
        super().broadcast(buf, root)

    def scatter(self, send, recv, counts, root) -> None:
        device.synchronize(recv)
        super().scatter(send, recv, counts, root)
