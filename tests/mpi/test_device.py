"""DTensors on device blocks (the ``xp`` legs of device_legs.py), compared with numpy.

Every test runs on the numpy leg too, so a failure that is only on the device legs names a
device-path defect."""
import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import WORLD, assert_all_ranks

import mtensor as mt
from mtensor.placement import Partial, Replicate, Shard


def backends(xp):
    """The backends to try on this leg: every one on the fake; on a real GPU staged always,
    NCCL where each rank has its own GPU, CUDA-aware where MPI says it is (a non-CUDA-aware
    MPI would crash on a device pointer)."""
    if xp.device_type == "cpu":
        return ("mpi",)
    if xp.name == "fake":
        return ("staged", "cuda-aware", "nccl")
    from mtensor.comm import select
    return select.runnable("cuda", WORLD)


def line_mesh(xp, backend=None, comm=None):
    return mt.init_device_mesh(xp.device_type, (WORLD.size,), mesh_dim_names=("x",),
                               backend=backend, comm=comm)


def full(x) -> np.ndarray:
    return mt.asnumpy(x)


def test_mesh_binds_each_rank_to_a_gpu(xp):
    mesh = line_mesh(xp)
    assert mesh.device_type == xp.device_type
    if xp.device_type == "cuda":
        local = WORLD.Split_type(MPI.COMM_TYPE_SHARED)
        count = xp.module.cuda.runtime.getDeviceCount()
        assert xp.module.cuda.Device().id == local.rank % count
        local.Free()
        assert "backends=" in repr(mesh)


def test_blocks_stay_on_the_device(xp):
    mesh = line_mesh(xp)
    a = np.arange(7 * 5, dtype=np.float64).reshape(7, 5) / 10
    x = mt.distribute_tensor(a, mesh, [Shard(0)])
    y = np.exp(x) @ mt.distribute_tensor(a.T, mesh, [Replicate()])
    assert xp.is_block(x.to_local()) and xp.is_block(y.to_local())
    assert xp.is_block(y.full_tensor())
    np.testing.assert_allclose(full(y), np.exp(a) @ a.T, rtol=1e-12)
    from_device = mt.distribute_tensor(xp.put(a), mesh, [Shard(1)])
    assert xp.is_block(from_device.to_local())
    np.testing.assert_array_equal(full(from_device), a)


def test_host_conversion_is_explicit(xp):
    mesh = line_mesh(xp)
    a = np.linspace(-1, 1, 12).reshape(4, 3)
    x = mt.distribute_tensor(a, mesh, [Shard(0)])
    shifted = x + np.arange(3.0)             # a numpy operand: moved to the device
    assert xp.is_block(shifted.to_local())
    np.testing.assert_array_equal(full(shifted), a + np.arange(3.0))
    if xp.device_type == "cuda":
        with pytest.raises(TypeError, match="mt.asnumpy"):
            np.asarray(x)
    else:
        np.testing.assert_array_equal(np.asarray(x), a)
    assert float(x.sum()) == pytest.approx(a.sum())
    assert x.tolist() == a.tolist()


CASES = [  # (dtype, src placement, dst placement)
    (np.float64, Shard(0), Replicate()),
    (np.float32, Shard(0), Shard(1)),
    (np.int16, Shard(1), Shard(0)),
    (np.bool_, Shard(1), Replicate()),
    (np.complex128, Shard(0), Shard(1)),
    (np.float64, Partial("sum"), Shard(0)),
    (np.float32, Partial("sum"), Replicate()),
    (np.int16, Partial("sum"), Replicate()),
    (np.bool_, Partial("max"), Replicate()),
    (np.complex64, Partial("sum"), Shard(1)),
    (np.complex128, Partial("max"), Replicate()),
    (np.float64, Partial("avg"), Shard(1)),
    (np.int64, Partial("min"), Shard(0)),
]


def _values(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape) + 1j * rng.normal(size=shape)
    if np.dtype(dtype).kind == "b":
        return values.real > 0.3
    if np.dtype(dtype).kind in "iu":
        return (values.real * 40).astype(dtype)
    return (values if np.dtype(dtype).kind == "c" else values.real).astype(dtype)


@pytest.mark.parametrize("shape", [(7, 5), (2, 3), (0, 4)], ids=str)
@pytest.mark.parametrize("dtype,src,dst", CASES, ids=lambda v: str(v))
def test_every_backend_redistributes_like_numpy(xp, dtype, src, dst, shape):
    for backend in backends(xp):
        mesh = line_mesh(xp, backend)
        terms = [_values(dtype, shape, seed) for seed in range(mesh.size())]
        mine = terms[mesh.get_coordinate()[0]]
        if isinstance(src, Partial):
            x = mt.DTensor.from_local(mine, mesh, [src], shape=shape)
            want = {"sum": lambda: sum(terms[1:], terms[0]),
                    "avg": lambda: sum(terms[1:], terms[0]) / len(terms),
                    "max": lambda: np.maximum.reduce(terms),
                    "min": lambda: np.minimum.reduce(terms)}[src.reduce_op]()
        else:
            x = mt.distribute_tensor(terms[0], mesh, [src])
            want = terms[0]
        y = x.redistribute(mesh, [dst])
        assert xp.is_block(y.to_local())
        got = full(y)
        assert_all_ranks(got.dtype == want.dtype and np.allclose(got, want, equal_nan=True),
                         f"{backend}: {dtype.__name__} {src} -> {dst} on {shape}")


@pytest.mark.parametrize("op,reduce", [("max", np.maximum), ("min", np.minimum)])
def test_nan_survives_max_and_min_on_every_backend(xp, op, reduce):
    for backend in backends(xp):
        mesh = line_mesh(xp, backend)
        terms = [np.full((3, 4), float(r)) for r in range(mesh.size())]
        terms[-1][1, 2] = np.nan          # NaN on one rank only: MPI/NCCL's MAX may drop it
        x = mt.DTensor.from_local(terms[mesh.get_coordinate()[0]], mesh, [Partial(op)],
                                  shape=(3, 4))
        for dst in (Replicate(), Shard(0)):
            got = full(x.redistribute(mesh, [dst]))
            np.testing.assert_array_equal(got, reduce.reduce(terms))


def _mlp(x, a, b):
    return (np.tanh(x @ a) @ b).sum()


def test_gradients_and_compile_match_numpy(xp):
    mesh = line_mesh(xp)
    rng = np.random.default_rng(0)
    xs, a, b = rng.normal(size=(6, 4)), rng.normal(size=(4, 8)), rng.normal(size=(8, 4))
    args = (mt.distribute_tensor(xs, mesh, [Replicate()]),
            mt.distribute_tensor(a, mesh, [Shard(1)]), mt.distribute_tensor(b, mesh, [Shard(0)]))
    loss, grads = mt.value_and_grad(_mlp, argnums=(1, 2))(*args)
    h = np.tanh(xs @ a)
    want_b = h.T @ np.ones((6, 4))
    want_a = xs.T @ ((np.ones((6, 4)) @ b.T) * (1 - h ** 2))
    assert xp.is_block(grads[0].to_local())
    np.testing.assert_allclose(float(loss), _mlp(xs, a, b), rtol=1e-12)
    np.testing.assert_allclose(full(grads[0]), want_a, rtol=1e-10)
    np.testing.assert_allclose(full(grads[1]), want_b, rtol=1e-10)
    step = mt.compile(lambda x, a, b: np.exp(np.tanh(x @ a) @ b))    # exp: one all-reduce
    for _ in range(3):          # traced, then replayed with nonblocking collectives
        out = step(*args)
        assert xp.is_block(out.to_local())
        np.testing.assert_allclose(full(out), np.exp(np.tanh(xs @ a) @ b), rtol=1e-12)
    if mesh.size() > 1:                 # explain names the backend of each bucket
        assert f" {mesh.backends[0]} " in str(step.explain())


def test_creation_and_random_equal_the_host(xp):
    mesh = line_mesh(xp)
    host = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("x",))
    for make in (lambda m: mt.random.default_rng(5).integers(0, 1000, (9, 3), mesh=m,
                                                               placements=[Shard(0)]),
                 lambda m: mt.random.default_rng(5).random((9, 3), mesh=m,
                                                           placements=[Shard(1)]),
                 lambda m: mt.arange(3, 40, 3, mesh=m, placements=[Shard(0)]),
                 lambda m: mt.full((5, 2), 7, mesh=m, placements=[Shard(0)])):
        on_device, on_host = make(mesh), make(host)
        assert xp.is_block(on_device.to_local())
        np.testing.assert_array_equal(full(on_device), full(on_host))
    normal = mt.random.default_rng(5).standard_normal((9, 3), mesh=mesh, placements=[Shard(0)])
    reference = mt.random.default_rng(5).standard_normal((9, 3), mesh=host,
                                                         placements=[Shard(0)])
    np.testing.assert_allclose(full(normal), full(reference), rtol=4e-16, atol=0)


def test_comm_debug_mode_names_the_backend(xp):
    for backend in backends(xp):
        mesh = line_mesh(xp, backend)
        x = mt.distribute_tensor(np.ones((4, 4)), mesh, [Shard(0)])
        with mt.CommDebugMode() as comm:
            x.redistribute(mesh, [Replicate()])
        assert comm.get_backend_counts() == ({backend: 1} if mesh.size() > 1 else {})


def _fake_only(xp):
    if xp.name != "fake":
        pytest.skip("checks the fake device's own bookkeeping and the selection it drives")
    if WORLD.size == 1:
        pytest.skip("a 1-rank mesh dim runs no collective")


def test_a_missing_synchronise_fails(xp, monkeypatch):
    """What the fake is for: drop the stream synchronise before MPI touches device memory,
    and CUDA-aware MPI is refused while staging sends stale bytes."""
    _fake_only(xp)
    terms = np.arange(4.0) + WORLD.rank
    want = sum(np.arange(4.0) + r for r in range(WORLD.size))
    aware = line_mesh(xp, "cuda-aware", WORLD.Dup())
    x = mt.DTensor.from_local(xp.put(terms) * 1.0, aware, [Partial()], shape=(4,))
    with monkeypatch.context() as patch:
        patch.setattr(mt.device.arrays, "synchronize", lambda block: None)
        with pytest.raises(RuntimeError, match="not synchronised"):
            x.redistribute(aware, [Replicate()])
    staged = line_mesh(xp, "staged", WORLD.Dup())
    y = mt.DTensor.from_local(xp.put(terms) * 1.0, staged, [Partial()], shape=(4,))
    stream = type(xp.module.cuda.get_current_stream())
    with monkeypatch.context() as patch:
        patch.setattr(stream, "synchronize", lambda self: None)
        stale = y.redistribute(staged, [Replicate()])
    assert_all_ranks(not np.array_equal(full(stale), want), "staging without a synchronise "
                     "sent the right bytes: the fake no longer defers device-to-host copies")
    np.testing.assert_array_equal(full(y.redistribute(staged, [Replicate()])), want)


def test_auto_selection_follows_gpus_and_mpi(xp, monkeypatch):
    _fake_only(xp)
    monkeypatch.setenv("MTENSOR_FAKE_GPUS", "1")           # every rank on GPU 0
    assert line_mesh(xp, comm=WORLD.Dup()).backends == ("staged",)
    monkeypatch.setenv("MTENSOR_GPU_COMM", "cuda-aware")
    assert line_mesh(xp, comm=WORLD.Dup()).backends == ("cuda-aware",)
    monkeypatch.setenv("MTENSOR_GPU_COMM", "auto")
    monkeypatch.setenv("MTENSOR_FAKE_GPUS", str(WORLD.size))   # one GPU per rank
    mesh = line_mesh(xp, comm=WORLD.Dup())
    assert mesh.backends == ("nccl",) and mesh.whole_backend == "nccl"
    monkeypatch.setenv("MTENSOR_GPU_COMM", "carrier-pigeon")
    with pytest.raises(ValueError, match="MTENSOR_GPU_COMM"):
        line_mesh(xp, comm=WORLD.Dup())
