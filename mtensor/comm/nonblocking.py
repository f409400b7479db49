"""Nonblocking buffer collectives (mpi4py's ``I`` calls) for the traced replay.

Arguments are those of :func:`collectives.run`; each call returns an MPI request.  MPICH and
Open MPI advance a started collective only inside MPI calls, so the replay calls
:func:`test_all` between compute nodes (measured here: ~0.7 us per request).
"""
from __future__ import annotations

from mpi4py import MPI

from .collectives import _bytes, _even, _mpi_op


def start(kind: str, comm, send, recv, counts, op) -> MPI.Request:
    if kind == "all_reduce":
        return comm.Iallreduce(MPI.IN_PLACE if send is recv else send, recv,
                               _mpi_op(op, recv.dtype))
    if kind == "all_gather":
        if _even(counts):
            return comm.Iallgather(_bytes(send), _bytes(recv))
        return comm.Iallgatherv(_bytes(send), _bytes(recv, counts))
    if kind == "reduce_scatter":
        if _even(counts):
            return comm.Ireduce_scatter_block(send, recv, _mpi_op(op, recv.dtype))
        return comm.Ireduce_scatter(send, recv, list(counts), _mpi_op(op, recv.dtype))
    send_counts, recv_counts = counts
    if _even(send_counts) and _even(recv_counts):
        return comm.Ialltoall(_bytes(send), _bytes(recv))
    return comm.Ialltoallv(_bytes(send, send_counts), _bytes(recv, recv_counts))


def wait(request: MPI.Request) -> None:
    request.Wait()


def test_all(requests) -> bool:
    """Drive MPI's progress engine once; True when every request has completed."""
    return MPI.Request.Testall(requests)
