"""The collectives an expert would place come out on their own (counted with CommDebugMode),
and mixing DTensors with numpy values or bad operands behaves as documented."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, assert_each_raises, host, mesh_shapes, random_array

import mtensor as mt
from mtensor import Partial, Replicate, Shard

R, S0, S1 = Replicate(), Shard(0), Shard(1)


def _mlp_mesh():
    """(dp, tp) mesh: 2 x n/2 where the world allows, else 1 x n."""
    dp = 2 if WORLD.size % 2 == 0 and WORLD.size > 2 else 1
    return mt.init_device_mesh((dp, WORLD.size // dp), mesh_dim_names=("dp", "tp"))


@pytest.mark.mpi
def test_megatron_block_runs_one_all_reduce():
    """Column-parallel A, row-parallel B, batch-sharded X: no collective until the final
    Partial -> Replicate on the tp axis, which is one all-reduce."""
    mesh = _mlp_mesh()
    x, a, b = random_array((8, 16), seed=1), random_array((16, 32), seed=2), random_array((32, 16), seed=3)
    X = mt.distribute_tensor(x, mesh, [S0, R])
    A = mt.distribute_tensor(a, mesh, [R, S1])
    B = mt.distribute_tensor(b, mesh, [R, S0])
    with mt.CommDebugMode() as comm:
        H = np.maximum(X @ A, 0)
        Y = H @ B
        assert comm.get_total_counts() == 0
        assert H.placements == (S0, S1) and Y.placements == (S0, Partial())
        out = Y.redistribute(mesh, [S0, R])
    expected = {"all_reduce": 1} if mesh.shape[1] > 1 else {}
    assert comm.get_comm_counts() == expected
    assert np.array_equal(host(out), np.maximum(x @ a, 0) @ b)


@pytest.mark.mpi
def test_data_parallel_weight_gradient_is_partial():
    """X^T @ dY with both batch-sharded contracts the sharded batch: Partial(sum), which one
    all-reduce turns into the data-parallel gradient."""
    mesh = mt.init_device_mesh((WORLD.size,))
    x, dy = random_array((12, 5), seed=4), random_array((12, 3), seed=5)
    X, DY = (mt.distribute_tensor(v, mesh, [S0]) for v in (x, dy))
    with mt.CommDebugMode() as comm:
        grad = X.T @ DY
        assert grad.placements == (Partial(),)
        full = host(grad)
    assert comm.get_comm_counts() == ({"all_reduce": 1} if WORLD.size > 1 else {})
    assert np.array_equal(full, x.T @ dy)


@pytest.mark.mpi
def test_misaligned_annotation_pays_and_the_cost_model_says_how_much():
    from mtensor.decide import decision_for
    mesh = mt.init_device_mesh((WORLD.size,))
    x, a = random_array((8, 16), seed=1), random_array((16, 32), seed=2)
    good = decision_for("matmul", (mt.distribute_tensor(x, mesh, [R]),
                                   mt.distribute_tensor(a, mesh, [S1])))
    bad = decision_for("matmul", (mt.distribute_tensor(x, mesh, [S1]),
                                  mt.distribute_tensor(a, mesh, [S1])))
    assert good.cost == 0
    assert (bad.cost > 0) == (WORLD.size > 1)


@pytest.mark.mpi
def test_partial_algebra_keeps_partials_and_reduces_before_nonlinear_ops():
    mesh = mt.init_device_mesh((WORLD.size,))
    x = random_array((6, 4), seed=6)
    bias = mt.distribute_tensor(random_array((4,), seed=7), mesh, [R])
    P = mt.distribute_tensor(x, mesh, [Partial()])
    with mt.CommDebugMode() as comm:
        kept = [P + P, P * 2.0, (P - bias) / 4, -P]
    assert comm.get_total_counts() == 0
    if WORLD.size > 1:  # on one rank every layout is the same and any label is free
        assert all(k.placements == (Partial(),) for k in kept)
    for got, want in zip(kept, [x + x, x * 2.0, (x - host(bias)) / 4, -x]):
        assert np.array_equal(host(got), want)
    with mt.CommDebugMode() as comm:
        e = np.exp(P / 10)  # reduces first: reduce_scatter (cheapest) or all-reduce
    assert not isinstance(e.placements[0], Partial)
    assert comm.get_total_counts() == (WORLD.size > 1)
    assert np.allclose(host(e), np.exp(x / 10))
    M = mt.distribute_tensor(x, mesh, [Partial("max")])
    assert np.maximum(M, M).placements == (Partial("max"),)
    assert np.array_equal(host(-M), -x)


@pytest.mark.mpi
def test_partial_terms_are_reduced_once_for_every_later_use():
    """A layer norm of partial terms (a row-parallel product's output): one all-reduce, as
    Megatron places it.  The centred value is reduced where the square needs it whole (the
    square's two uses of it move once), and every later read finds it reduced; a nonlinear
    op never leaves a new split behind (an all-reduce, not a reduce-scatter).  Reading xc
    reduced never changes xc itself."""
    mesh = _mlp_mesh()
    h, b = random_array((8, 32), seed=8), random_array((32, 16), seed=9)
    H = mt.distribute_tensor(h, mesh, [S0, S1])
    B = mt.distribute_tensor(b, mesh, [R, S0])
    with mt.CommDebugMode() as comm:
        y = H @ B
        xc = y - y.mean(axis=-1, keepdims=True)
        out = xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + 1e-5)
    tp = mesh.shape[1] > 1
    assert [(r.collective, r.mesh_dim) for r in comm.log] == [("all_reduce", 1)] * tp
    if tp:   # on a size-1 mesh dim every label is free and the partial one stays
        assert out.placements == (S0, R)
        # xc keeps the layout it was made with; its reduced form lives behind it
        assert xc.placements == (S0, Partial()) and xc.reduced_form().placements == (S0, R)
    yn = h @ b - (h @ b).mean(axis=-1, keepdims=True)
    assert np.allclose(host(out), yn / np.sqrt((yn * yn).mean(-1, keepdims=True) + 1e-5))
    # an in-place op's target keeps its layout: the reduced block is not kept there
    z = H @ B
    z **= 3
    assert z.placements == (S0, Partial())
    assert np.allclose(host(z), (h @ b) ** 3)


@pytest.mark.mpi
def test_numpy_values_mix_in_as_replicated():
    mesh = mt.init_device_mesh((WORLD.size,))
    x, row = random_array((7, 3), seed=8), random_array((3,), seed=9)
    X = mt.distribute_tensor(x, mesh, [S0])
    with mt.CommDebugMode() as comm:
        out = [X + row, row * X, X @ np.eye(3), np.float32(2) * X, X > 0.5]
    assert comm.get_total_counts() == 0
    for got, want in zip(out, [x + row, row * x, x @ np.eye(3), np.float32(2) * x, x > 0.5]):
        assert isinstance(got, mt.DTensor) and got.dtype == want.dtype
        assert np.array_equal(host(got), want)
    assert float(X.sum()) == x.sum() and np.asarray(X).shape == x.shape


@pytest.mark.mpi
def test_bad_operands_raise_the_same_clear_error_everywhere():
    mesh = mt.init_device_mesh((WORLD.size,))
    X = mt.distribute_tensor(random_array((8, 6)), mesh, [S0])
    W = mt.distribute_tensor(random_array((5, 4)), mesh, [R])
    other = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("other",))
    Y = mt.distribute_tensor(random_array((8, 6)), other, [S0])
    assert_each_raises({
        "matmul operands": (lambda: X @ W, ValueError, "matmul of (8, 6) [S(0)], (5, 4) [R]"),
        "matmul inner dims": (lambda: X @ W, ValueError, "inner dims differ (6 != 5)"),
        "broadcast": (lambda: X + W, ValueError, "do not broadcast"),
        "no rule": (lambda: np.packbits(X), TypeError,
                    "numpy.packbits: mtensor has no sharding rule"),
        "where=": (lambda: np.add(X, X, where=np.ones((8, 6), bool)), TypeError,
                   "not supported"),
        "index": (lambda: X[[0, 9]], IndexError,
                  "index 9 is out of bounds for dim 0 of shape (8, 6)"),
        "meshes": (lambda: X + Y, ValueError, "different meshes")})


@pytest.mark.mpi
def test_calibrate_installs_one_model_on_every_rank(mesh):
    """On the 2-D mesh of a world size that has one (two links measured; the probes take
    seconds per mesh dim on 8 oversubscribed ranks), else on its only mesh."""
    if mesh.ndim != 2 and any(len(shape) == 2 for shape in mesh_shapes()):
        pytest.skip("calibrated on this world size's 2-D mesh")
    before = mt.get_cost_model()
    try:
        model = mt.calibrate(mesh, large_bytes=1 << 16, repeats=2)
        assert mt.get_cost_model() is model and len(model.per_dim) == mesh.ndim
        assert all(a > 0 and b > 0 for a, b in model.per_dim) and model.copy_beta > 0
        models = WORLD.allgather(model)
        assert_all_ranks(all(m == models[0] for m in models), f"models differ: {models}")
        X = mt.distribute_tensor(random_array((8, 4)), mesh, [S0] + [R] * (mesh.ndim - 1))
        assert np.array_equal(host((X @ np.eye(4))), random_array((8, 4)))
    finally:
        mt.set_cost_model(before)
