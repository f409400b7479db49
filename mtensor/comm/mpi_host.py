"""Blocking buffer collectives (upper-case mpi4py calls): no pickling of arrays.

Data-movement collectives (gather, scatter, all-to-all) move raw bytes, so every numpy dtype
travels unchanged; reductions use the MPI datatype of the array's dtype.  Callers pass
C-contiguous buffers; counts are in elements of the buffers' dtype.
"""
from __future__ import annotations

import numpy as np
from mpi4py import MPI

def _nan_op(ufunc):
    """An MPI op that combines floats with ``ufunc`` (np.maximum/np.minimum), so a NaN on any
    rank gives NaN as numpy does; MPI's built-in MAX/MIN may drop it, depending on order."""
    def combine(inbuf, inoutbuf, datatype):
        dtype = np.dtype(datatype.tocode())
        ufunc(np.frombuffer(inbuf, dtype), np.frombuffer(inoutbuf, dtype),
              out=np.frombuffer(inoutbuf, dtype))
    return MPI.Op.Create(combine, commute=True)


_MPI_OPS = {"sum": MPI.SUM, "avg": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
_MPI_BOOL_OPS = {"sum": MPI.LOR, "avg": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND}
_MPI_FLOAT_OPS = dict(_MPI_OPS, max=_nan_op(np.maximum), min=_nan_op(np.minimum))


def _mpi_op(op: str, dtype: np.dtype):
    """MPI has no MAX/MIN on booleans (they are logical OR/AND there), and its MAX/MIN on
    floats need not propagate NaN (nor order complex numbers as numpy does)."""
    if dtype.kind == "b":
        return _MPI_BOOL_OPS[op]
    return (_MPI_FLOAT_OPS if dtype.kind in "fc" else _MPI_OPS)[op]


def _bytes(buf: np.ndarray, counts=None):
    """A byte-typed MPI buffer spec over contiguous ``buf`` (counts given in elements)."""
    if counts is None:
        return [buf, MPI.BYTE]
    size = buf.dtype.itemsize
    return [buf, [c * size for c in counts], MPI.BYTE]


def all_reduce(comm, send: np.ndarray, recv: np.ndarray, op: str) -> None:
    """``recv = reduce(send over comm)``; ``send`` may be ``recv`` for an in-place reduction."""
    mpi_op = _mpi_op(op, recv.dtype)
    comm.Allreduce(MPI.IN_PLACE if send is recv else send, recv, mpi_op)


def _even(counts) -> bool:
    return all(c == counts[0] for c in counts)


def all_gather_v(comm, send: np.ndarray, recv: np.ndarray, counts) -> None:
    """Concatenate every rank's ``send`` (rank r sends ``counts[r]`` elements) into ``recv``.

    Equal counts take the plain collective, which MPI libraries tune best."""
    if _even(counts):
        comm.Allgather(_bytes(send), _bytes(recv))
    else:
        comm.Allgatherv(_bytes(send), _bytes(recv, counts))


def reduce_scatter_v(comm, send: np.ndarray, recv: np.ndarray, counts, op: str) -> None:
    """Reduce ``send`` over comm; rank r keeps the r-th segment of ``counts[r]`` elements."""
    if _even(counts):
        comm.Reduce_scatter_block(send, recv, _mpi_op(op, recv.dtype))
    else:
        comm.Reduce_scatter(send, recv, list(counts), _mpi_op(op, recv.dtype))


def all_to_all_v(comm, send: np.ndarray, send_counts, recv: np.ndarray, recv_counts) -> None:
    """Rank r sends ``send_counts[k]`` consecutive elements to rank k and receives likewise."""
    if _even(send_counts) and _even(recv_counts):
        comm.Alltoall(_bytes(send), _bytes(recv))
    else:
        comm.Alltoallv(_bytes(send, send_counts), _bytes(recv, recv_counts))


def scatter_v(comm, send, recv: np.ndarray, counts, root: int) -> None:
    """Root sends ``counts[r]`` consecutive elements of ``send`` to rank r."""
    spec = _bytes(send, counts) if comm.rank == root else None
    comm.Scatterv(spec, _bytes(recv), root=root)


def broadcast(comm, buf: np.ndarray, root: int) -> None:
    comm.Bcast(_bytes(buf), root=root)


def sum_ints(comm, values) -> np.ndarray:
    """Element-wise sum of a small int64 vector over ``comm`` (metadata, not tensor data)."""
    send = np.asarray(values, dtype=np.int64)
    recv = np.empty_like(send)
    comm.Allreduce(send, recv, MPI.SUM)
    return recv


def allgather_object(comm, obj):
    """Small metadata from every rank (pickled: never used for array data)."""
    return comm.allgather(obj)


def run(kind: str, comm, send: np.ndarray, recv: np.ndarray, counts, op) -> None:
    """Collective ``kind`` with the uniform arguments the executors keep per step: ``counts``
    is None for all-reduce, the per-rank element counts for all-gather and reduce-scatter,
    and ``(send_counts, recv_counts)`` for all-to-all."""
    if kind == "all_reduce":
        all_reduce(comm, send, recv, op)
    elif kind == "all_gather":
        all_gather_v(comm, send, recv, counts)
    elif kind == "reduce_scatter":
        reduce_scatter_v(comm, send, recv, counts, op)
    else:
        all_to_all_v(comm, send, counts[0], recv, counts[1])
