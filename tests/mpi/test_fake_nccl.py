"""The fake NCCL over MPI: its collectives give what NCCL gives (float max drops NaN),
grouped send/recv rings do not deadlock, and two ranks on one GPU are refused on both."""
import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import WORLD, assert_all_ranks

import mtensor.testing.fakecupy as cp
from mtensor.testing.fakecupy import cuda
from mtensor.testing.fakecupy.cuda import nccl

N, RANK = WORLD.size, WORLD.rank


def communicator():
    return nccl.NcclCommunicator(N, WORLD.bcast(nccl.get_unique_id()), RANK)


@pytest.fixture
def comm(monkeypatch):
    """A communicator over every rank, each rank on a fake GPU of its own."""
    monkeypatch.setenv("MTENSOR_FAKE_GPUS", str(N))
    cuda.Device(RANK).use()
    nc = communicator()
    yield nc
    nc.destroy()
    cuda.Device(0).use()


def rows(count, dtype=np.float64):
    """Rank r's contribution: row r of a table every rank can rebuild."""
    table = np.arange(N * count, dtype=dtype).reshape(N, count) - count
    return table, cp.asarray(table[RANK])


@pytest.mark.mpi
def test_all_reduce_sum_and_max_dropping_nan(comm):
    table, send = rows(5)
    table[0, 1] = np.nan                                    # rank 0 sends a NaN
    if RANK == 0:
        send[1] = np.nan
    total, top = cp.empty(5), cp.empty(5)
    comm.allReduce(send.data.ptr, total.data.ptr, 5, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, 0)
    comm.allReduce(send.data.ptr, top.data.ptr, 5, nccl.NCCL_FLOAT64, nccl.NCCL_MAX, 0)
    want = np.fmax.reduce(table, axis=0)
    assert_all_ranks(N == 1 or not np.isnan(want[1]), "the NaN survived the max")
    assert_all_ranks(np.array_equal(top.get(), want, equal_nan=True), f"max {top}")
    assert_all_ranks(np.array_equal(total.get(), table.sum(axis=0), equal_nan=True), "sum")


@pytest.mark.mpi
def test_all_gather_and_reduce_scatter(comm):
    table, send = rows(3, np.int32)
    gathered = cp.empty(3 * N, np.int32)
    comm.allGather(send.data.ptr, gathered.data.ptr, 3, nccl.NCCL_INT32, 0)
    assert_all_ranks(np.array_equal(gathered.get(), table.ravel()), f"gathered {gathered}")
    whole = cp.asarray(np.tile(table[RANK], N))             # N blocks of 3
    mine = cp.empty(3, np.int32)
    comm.reduceScatter(whole.data.ptr, mine.data.ptr, 3, nccl.NCCL_INT32, nccl.NCCL_SUM, 0)
    assert_all_ranks(np.array_equal(mine.get(), table.sum(axis=0)), f"scattered {mine}")


@pytest.mark.mpi
def test_bcast_from_the_last_rank(comm):
    buf = cp.full(4, float(RANK))
    comm.bcast(buf.data.ptr, 4, nccl.NCCL_FLOAT64, N - 1, 0)
    assert_all_ranks((buf.get() == N - 1).all(), f"bcast {buf}")


@pytest.mark.mpi
def test_a_grouped_ring_of_send_and_recv(comm):
    send, got = cp.full(3, float(RANK)), cp.empty(3)
    nccl.groupStart()
    comm.send(send.data.ptr, 3, nccl.NCCL_FLOAT64, (RANK + 1) % N, 0)
    comm.recv(got.data.ptr, 3, nccl.NCCL_FLOAT64, (RANK - 1) % N, 0)
    nccl.groupEnd()
    assert_all_ranks((got.get() == (RANK - 1) % N).all(), f"ring {got}")


@pytest.mark.mpi
def test_results_reach_mpi_only_after_a_synchronize(comm):
    send, out = cp.ones(2), cp.empty(2)
    cuda.Device().synchronize()
    comm.allReduce(send.data.ptr, out.data.ptr, 2, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, 0)
    try:
        MPI.COMM_SELF.Bcast(out)                            # where CUDA-aware MPI reads it
        refused = False
    except RuntimeError:
        refused = True
    assert_all_ranks(refused, "MPI read an NCCL result before a synchronize")


@pytest.mark.mpi
def test_two_ranks_on_one_gpu_are_refused_on_both(monkeypatch):
    if N == 1:
        pytest.skip("needs two ranks")
    monkeypatch.setenv("MTENSOR_FAKE_GPUS", "1")
    cuda.Device(0).use()                                    # every rank on GPU 0
    try:
        communicator().destroy()
        error = ""
    except nccl.NcclError as e:
        error = str(e)
    assert_all_ranks("duplicate GPU detected" in error, f"got {error!r}")
