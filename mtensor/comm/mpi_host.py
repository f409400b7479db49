"""``MPIHost``: the Communicator backend for host (numpy) buffers, through mpi4py.

Upper-case mpi4py calls on buffers, no pickling of arrays.  Data-movement collectives
(gather, scatter, all-to-all) move raw bytes, so every numpy dtype travels unchanged;
reductions use the MPI datatype of the array's dtype.  Equal counts take the plain
collective, which MPI libraries tune best; uneven ones the v-variant.  A halo exchange is one
``Neighbor_alltoallv`` on the mesh dim's ring (one request, like the collectives; measured
against ``Sendrecv`` pairs by ``benchmarks/halo_exchange.py``); ``send``/``recv`` are
``Send``/``Recv`` of raw bytes to one rank of the group (``Isend``/``Irecv`` started).
Nonblocking calls (mpi4py's ``I`` calls) progress only inside MPI calls with MPICH and Open
MPI, so the replay polls ``test_all`` between compute nodes (~0.7 us per request here).
"""
from __future__ import annotations

import functools
import itertools

import numpy as np
from mpi4py import MPI

from ..placement import REDUCE_OPS
from .protocol import EvenExchange


def _nan_op(ufunc):
    """An MPI op that combines floats with ``ufunc`` (np.maximum/np.minimum), so a NaN on any
    rank gives NaN as numpy does; MPI's built-in MAX/MIN may drop it, depending on order."""
    def combine(inbuf, inoutbuf, datatype):
        dtype = np.dtype(datatype.tocode())
        ufunc(np.frombuffer(inbuf, dtype), np.frombuffer(inoutbuf, dtype),
              out=np.frombuffer(inoutbuf, dtype))
    return MPI.Op.Create(combine, commute=True)


_MPI_OPS = {name: getattr(MPI, op.mpi) for name, op in REDUCE_OPS.items()}
_MPI_BOOL_OPS = {"sum": MPI.LOR, "avg": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND}
_MPI_FLOAT_OPS = dict(_MPI_OPS, max=_nan_op(np.maximum), min=_nan_op(np.minimum))


def _mpi_op(op: str, dtype: np.dtype):
    """MPI has no MAX/MIN on booleans (they are logical OR/AND there), and its MAX/MIN on
    floats need not propagate NaN (nor order complex numbers as numpy does)."""
    if dtype.kind == "b":
        return _MPI_BOOL_OPS[op]
    return (_MPI_FLOAT_OPS if dtype.kind in "fc" else _MPI_OPS)[op]


def builtin_op(op: str, dtype: np.dtype):
    """MPI's own op for ``op`` (no NaN carrying): what device buffers get, since a Python
    op cannot read device memory; the caller carries NaN (``comm.nan_flags``)."""
    return (_MPI_BOOL_OPS if dtype.kind == "b" else _MPI_OPS)[op]


def _bytes(buf: np.ndarray, counts=None):
    """A byte-typed MPI buffer spec over contiguous ``buf`` (counts given in elements)."""
    if counts is None:
        return [buf, MPI.BYTE]
    return [buf, _byte_layout(tuple(counts), buf.dtype.itemsize), MPI.BYTE]


@functools.lru_cache(maxsize=1024)
def _byte_layout(counts: tuple, itemsize: int):
    """(byte counts, byte displacements) of pieces of ``counts`` elements end to end: a plan's
    counts repeat call after call, so mpi4py need not rebuild them each time."""
    sizes = tuple(c * itemsize for c in counts)
    return sizes, (0, *itertools.accumulate(sizes[:-1]))


def _even(counts) -> bool:
    """Whether every piece has one size (a plan's counts repeat call after call: kept, by
    their tuple; data-dependent counts may come as lists)."""
    key = counts if type(counts) is tuple else tuple(counts)
    even = _EVEN.get(key)
    if even is None:
        even = _EVEN[key] = all(c == key[0] for c in key)
    return even


_EVEN: dict = {}


class HostMetadata:
    """The metadata collectives of a device backend, on its host ``MPIHost`` (``self.host``):
    small integer vectors, pickled objects and barriers never touch device memory."""

    def sum_ints(self, values):
        return self.host.sum_ints(values)

    def allgather_object(self, obj) -> list:
        return self.host.allgather_object(obj)

    def barrier(self) -> None:
        self.host.barrier()


class MPIHost:
    """mpi4py on host buffers over one communicator (a mesh dim's, or the whole mesh's)."""

    name = "mpi"

    def __init__(self, raw):
        self.raw, self.size, self.rank = raw, raw.size, raw.rank
        self._ring = None

    _op = staticmethod(_mpi_op)

    def all_reduce(self, send, recv, counts, op) -> None:
        self.raw.Allreduce(MPI.IN_PLACE if send is recv else send, recv,
                           self._op(op, recv.dtype))

    def all_gather(self, send, recv, counts, op) -> None:
        if _even(counts):
            self.raw.Allgather(_bytes(send), _bytes(recv))
        else:
            self.raw.Allgatherv(_bytes(send), _bytes(recv, counts))

    def reduce_scatter(self, send, recv, counts, op) -> None:
        if _even(counts):
            self.raw.Reduce_scatter_block(send, recv, self._op(op, recv.dtype))
        else:
            self.raw.Reduce_scatter(send, recv, list(counts), self._op(op, recv.dtype))

    def all_to_all(self, send, recv, counts, op) -> None:
        if type(counts) is EvenExchange:
            self.raw.Alltoall(_bytes(send), _bytes(recv))
        else:
            send_counts, recv_counts = counts
            self.raw.Alltoallv(_bytes(send, send_counts), _bytes(recv, recv_counts))

    def ring(self):
        """The mesh dim as a periodic 1-D cartesian communicator (made by the first halo
        exchange, which every rank of the dim reaches together): MPI orders a rank's two
        neighbours (previous, next) even where they are one rank, on 1 or 2 ranks."""
        if self._ring is None:
            self._ring = self.raw.Create_cart([self.size], periods=[True])
        return self._ring

    def halo(self, send, recv, counts, op) -> None:
        send_counts, recv_counts = counts
        self.ring().Neighbor_alltoallv(_bytes(send, send_counts), _bytes(recv, recv_counts))

    def send(self, send, recv, counts, op) -> None:
        peer, tag = counts
        self.raw.Send(_bytes(send), dest=peer, tag=tag)

    def recv(self, send, recv, counts, op) -> None:
        peer, tag = counts
        self.raw.Recv(_bytes(recv), source=peer, tag=tag)

    def start(self, kind, send, recv, counts, op) -> MPI.Request:
        raw = self.raw
        if kind == "send":
            return raw.Isend(_bytes(send), dest=counts[0], tag=counts[1])
        if kind == "recv":
            return raw.Irecv(_bytes(recv), source=counts[0], tag=counts[1])
        if kind == "halo":
            send_counts, recv_counts = counts
            return self.ring().Ineighbor_alltoallv(_bytes(send, send_counts),
                                                   _bytes(recv, recv_counts))
        if kind == "all_reduce":
            return raw.Iallreduce(MPI.IN_PLACE if send is recv else send, recv,
                                  self._op(op, recv.dtype))
        if kind == "all_gather":
            if _even(counts):
                return raw.Iallgather(_bytes(send), _bytes(recv))
            return raw.Iallgatherv(_bytes(send), _bytes(recv, counts))
        if kind == "reduce_scatter":
            if _even(counts):
                return raw.Ireduce_scatter_block(send, recv, self._op(op, recv.dtype))
            return raw.Ireduce_scatter(send, recv, list(counts), self._op(op, recv.dtype))
        if type(counts) is EvenExchange:
            return raw.Ialltoall(_bytes(send), _bytes(recv))
        send_counts, recv_counts = counts
        return raw.Ialltoallv(_bytes(send, send_counts), _bytes(recv, recv_counts))

    def wait(self, request) -> None:
        request.Wait()

    def test_all(self, requests) -> bool:
        """Drive MPI's progress engine once; True when every request has completed."""
        return MPI.Request.Testall(requests)

    def broadcast(self, buf, root) -> None:
        self.raw.Bcast(_bytes(buf), root=root)

    def scatter(self, send, recv, counts, root) -> None:
        """Root sends ``counts[r]`` consecutive elements of ``send`` to rank r."""
        spec = _bytes(send, counts) if self.rank == root else None
        self.raw.Scatterv(spec, _bytes(recv), root=root)

    def sum_ints(self, values) -> np.ndarray:
        """Element-wise sum of a small int64 vector (metadata, not tensor data)."""
        send = np.asarray(values, dtype=np.int64)
        recv = np.empty_like(send)
        self.raw.Allreduce(send, recv, MPI.SUM)
        return recv

    def allgather_object(self, obj) -> list:
        """Small metadata from every rank (pickled: never used for array data)."""
        return self.raw.allgather(obj)

    def barrier(self) -> None:
        self.raw.Barrier()
