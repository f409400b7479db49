"""A second communication backend through the protocol: registered in one line, chosen per
mesh dim, and every collective (blocking, and nonblocking in a compiled replay) goes
through it with the results numpy gives."""
import numpy as np
import pytest
from counting_backend import CALLS, Counting
from mpi_helpers import WORLD, assert_all_ranks, assert_each_raises, host, random_array

import mtensor as mt
from mtensor import comm

comm.register_backend("counting", Counting)
R, S0, S1, P = mt.Replicate(), mt.Shard(0), mt.Shard(1), mt.Partial()


@pytest.mark.mpi
@pytest.mark.parametrize("backend", ["counting", ("counting", "mpi")])
def test_every_collective_goes_through_the_mesh_dims_backend(backend):
    shape = (WORLD.size, 1) if isinstance(backend, tuple) else (WORLD.size,)
    mesh = mt.init_device_mesh(shape, backend=backend)
    rest = [R] * (mesh.ndim - 1)
    full = random_array((7, 5))
    CALLS.clear()
    with mt.CommDebugMode() as counted:
        x = mt.distribute_tensor(full, mesh, [S0] + rest)
        moved = [x.redistribute(mesh, [S1] + rest), x.redistribute(mesh, [R] + rest)]
        summed = mt.DTensor.from_local(full, mesh, [P] + rest).redistribute(mesh, [S0] + rest)
    seen = dict(CALLS)
    for got, want in zip(moved + [summed], [full, full, full * WORLD.size]):
        assert_all_ranks(np.array_equal(host(got), want), "values")
    ran = {k: v for k, v in counted.get_comm_counts().items() if k in CALLS}
    assert_all_ranks(seen == ran, f"backend saw {seen}, mtensor ran {ran}")
    assert_all_ranks(WORLD.size == 1 or set(seen) == {"all_to_all", "all_gather",
                                                      "reduce_scatter"}, f"{seen}")


@pytest.mark.mpi
def test_a_compiled_replay_starts_its_buckets_through_the_backend():
    mesh = mt.init_device_mesh((WORLD.size,), backend="counting")
    grads = [mt.DTensor.from_local(random_array((4, 3), seed=s), mesh, [P]) for s in range(3)]
    x = mt.distribute_tensor(random_array((64, 64)), mesh, [S0])

    def reduce_while_computing(gs, x):
        reduced = [g.redistribute(mesh, [R]) for g in gs]
        return reduced, np.tanh(x @ np.ones((64, 64))) * 2    # compute to overlap with

    for overlap, call in ((True, "start all_reduce"), ("auto", "all_reduce")):
        step = mt.compile(reduce_while_computing, overlap=overlap)
        step(grads, x)
        CALLS.clear()
        out, _ = step(grads, x)
        for g, s in zip(out, range(3)):
            assert_all_ranks(np.array_equal(g.to_local(),
                                            random_array((4, 3), seed=s) * WORLD.size),
                             "compiled values")
        # "auto" in shared memory (the default model moves nothing behind compute): blocking
        want = {} if WORLD.size == 1 else {call: 1}
        assert_all_ranks(dict(CALLS) == want, f"overlap={overlap}: {dict(CALLS)}")


@pytest.mark.mpi
def test_an_unknown_backend_is_refused_on_every_rank():
    assert_each_raises({"unknown backend": (
        lambda: mt.init_device_mesh((WORLD.size,), backend="nccl-please"), ValueError,
        "unknown communication backend 'nccl-please'")})
