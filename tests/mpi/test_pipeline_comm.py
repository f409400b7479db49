"""The point-to-point step kinds (``send``/``recv``) through every backend of every device leg
(numpy: host MPI; the strict fake CuPy: staged, CUDA-aware and NCCL), blocking and started,
and a pipelined step on device blocks through each backend against the host's."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks
from test_device import backends, line_mesh
from test_pipeline import batches, loss, params_on, stage

import mtensor as mt

DTYPES = [np.float64, np.float32, np.int16, np.bool_, np.complex64]


def _values(dtype, rank):
    values = np.arange(6).reshape(2, 3) + 10 * rank
    return (values % 2 == 0) if np.dtype(dtype).kind == "b" else values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_ring_of_started_sends_and_receives_on_every_backend(xp, dtype):
    for backend in backends(xp):
        comm = line_mesh(xp, backend).communicator(0)
        n, r = comm.size, comm.rank
        block = xp.put(_values(dtype, r))
        got = xp.put(np.zeros((2, 3), dtype))
        requests = [comm.start("send", block, None, ((r + 1) % n, 5), None),
                    comm.start("recv", None, got, ((r - 1) % n, 5), None)]
        comm.wait(requests[1])
        comm.wait(requests[0])
        want = _values(dtype, (r - 1) % n)
        assert_all_ranks(np.array_equal(mt.device.to_host(got), want), f"{backend} started")


@pytest.mark.parametrize("dtype", DTYPES[:2], ids=lambda d: np.dtype(d).name)
def test_blocking_sends_and_receives_between_pairs_on_every_backend(xp, dtype):
    """Ranks 2k and 2k+1 swap blocks, the even one sending first (a blocking send may wait
    for its receive: NCCL's does); an odd last rank sits out."""
    for backend in backends(xp):
        comm = line_mesh(xp, backend).communicator(0)
        r = comm.rank
        peer = r + 1 if r % 2 == 0 else r - 1
        if peer >= comm.size:
            continue
        block, got = xp.put(_values(dtype, r)), xp.put(np.zeros((2, 3), dtype))
        if r % 2 == 0:
            comm.send(block, None, (peer, 3), None)
            comm.recv(None, got, (peer, 3), None)
        else:
            comm.recv(None, got, (peer, 3), None)
            comm.send(block, None, (peer, 3), None)
        mt.device.synchronize(got)
        assert np.array_equal(mt.device.to_host(got), _values(dtype, peer)), backend


def test_a_pipelined_step_on_device_blocks_matches_the_host(xp):
    pp = 2 if WORLD.size % 2 == 0 else 1
    shape = (pp, WORLD.size // pp, 1)
    host_mesh = mt.init_device_mesh(shape, mesh_dim_names=("pp", "dp", "tp"))
    xs, ys, _, _ = batches(host_mesh, 4)
    want, want_grads = mt.pipeline.value_and_grad(stage, loss, host_mesh)(
        params_on(host_mesh), xs, ys)
    for backend in backends(xp):
        mesh = mt.init_device_mesh(xp.device_type, shape, mesh_dim_names=("pp", "dp", "tp"),
                                   backend=backend)
        xs, ys, _, _ = batches(mesh, 4)
        pipe = mt.pipeline.value_and_grad(stage, loss, mesh, schedule="1f1b")
        value, grads = pipe(params_on(mesh), xs, ys)
        assert all(xp.is_block(g.to_local()) for g in grads.values())
        assert_all_ranks(np.isclose(float(value), float(want), rtol=1e-12, atol=0), backend)
        for k, g in grads.items():
            assert_all_ranks(np.allclose(mt.asnumpy(g), mt.asnumpy(want_grads[k]),
                                         rtol=1e-10, atol=1e-13), f"{backend}: {k}")
