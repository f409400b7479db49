"""Gradients over real MPI: every differentiable op family against central finite
differences (float64) on many layouts, a Megatron MLP against a numpy reference with the
collectives of its backward counted, and gradients laid out like their parameters."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, host, numeric_grads, weighted_loss

import mtensor as mt
from mtensor import Replicate, Shard

RNG = np.random.default_rng(11)
A, B = RNG.standard_normal((7, 5)), RNG.standard_normal((7, 5))
ROW, W = RNG.standard_normal(5), RNG.standard_normal((5, 3))
CUBE = RNG.standard_normal((3, 4, 5))
X3, W3 = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 2, 3))
Q4, K4 = RNG.standard_normal((2, 2, 3, 4)), RNG.standard_normal((2, 2, 5, 4))

CASES = {  # name: (function of the arrays, arrays); the function works on numpy and DTensors
    "arith": (lambda a, b: a * b - a / (b * b + 1) + 2.0 * a - b ** 2, A, B),
    "broadcast": (lambda a, r: a * r + r - a / 3, A, ROW),
    "unary": (lambda a: np.exp(a / 4) + np.tanh(a) + np.sqrt(a * a + 1) + np.log1p(a * a)
              + np.sin(a) + np.cos(a) + np.square(a) + abs(a) + np.log(a * a + 2), A),
    "max_min_where_clip": (lambda a, b: np.maximum(a, b) + np.minimum(a, 0.3)
                           + np.where(a > 0, a * b, b) + np.clip(a, -0.5, 0.5), A, B),
    "matmul": (lambda a, w: np.tanh(a @ w), A, W),
    "contractions": (lambda a, b: np.einsum("ij,kj->ik", a, b) + np.dot(a, b.T)
                     + np.tensordot(a, b, axes=([1], [1])), A, B),
    "batched": (lambda c, w: c @ w, CUBE, W),
    # attention's products: a GEMM whose output interleaves its operands' labels (the
    # cotangent laid out once for both gradients) and products of matrix stacks
    "interleaved": (lambda x, w: np.tanh(np.einsum("btd,dhk->bhtk", x, w))
                    * np.einsum("btd,dhk->bhtk", x, w), X3, W3),
    "stacked": (lambda q, k: np.tanh(np.einsum("abik,abjk->abij", q, k))
                + np.einsum("abjk,abik->abij", k, q) ** 2, Q4, K4),
    "reductions": (lambda a: a.sum(axis=0) * a.mean(axis=0) + a.max(axis=0) + a.min(axis=0)
                   + np.var(a, axis=0) + np.std(a, axis=0) + (a * a + 1).prod(axis=0), A),
    "views": (lambda a: np.concatenate([a.T.reshape(35, 1), np.expand_dims(a.ravel(), 1)],
                                       axis=1).sum(axis=1) + np.stack([a, a], 0)[1, 2:5, 1:].sum()
              + np.broadcast_to(a[:, :1], (7, 5)).sum(axis=1).sum() + a[::-2, 3].sum(), A),
    "astype_copy": (lambda a: (a.astype(np.float32).astype(np.float64) * 0 + a.copy()) ** 3, A),
    # the rest of the rules the tape keeps no operand for (autodiff.residuals)
    "residual_free": (lambda a: np.roll(np.squeeze(a[None]), 1, axis=0) * np.reciprocal(a * a + 1)
                      + np.expm1(a / 4) - (-a) + (+a) + np.stack([a, a]).sum(axis=0), A),
}


def _layouts(mesh, ndim):
    per_dim = [Replicate()] + [Shard(d) for d in range(ndim)]
    return [tuple(per_dim[(k + i) % len(per_dim)] for i in range(mesh.ndim)) for k in range(len(per_dim))]


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_finite_differences(mesh, name):
    fn, *arrays = CASES[name]
    want = numeric_grads(fn, arrays)
    failures = []
    for k, layout in enumerate(_layouts(mesh, arrays[0].ndim)):
        layouts = [layout] + [_layouts(mesh, a.ndim)[(k + j) % (a.ndim + 1)]
                              for j, a in enumerate(arrays[1:], 1)]
        ins = [mt.distribute_tensor(a, mesh, p) for a, p in zip(arrays, layouts)]
        value, grads = mt.value_and_grad(lambda *xs: weighted_loss(fn, xs), argnums=tuple(range(len(ins))))(*ins)
        for g, w, x in zip(grads, want, ins):
            if g.placements != x.placements or not np.allclose(host(g), w, rtol=1e-5, atol=1e-6):
                failures.append(layouts)
        if not np.isclose(float(value), weighted_loss(fn, arrays)):
            failures.append(("value", layouts))
    assert_all_ranks(not failures, f"{name}: {failures[:2]}")


def _mlp(params, x, t):
    h = x
    for i in ("1", "2"):
        h = np.tanh(h @ params["a" + i]) @ params["b" + i]
    return ((h - t) ** 2).mean()


def _mlp_numpy_grads(p, x, t):
    """Hand-written backward of _mlp, the reference."""
    acts, h = [], x
    for i in ("1", "2"):
        z = np.tanh(h @ p["a" + i])
        acts.append((h, z))
        h = z @ p["b" + i]
    g = 2 * (h - t) / h.size
    grads = {}
    for i, (inp, z) in zip(("2", "1"), reversed(acts)):
        grads["b" + i] = z.T @ g
        gz = (g @ p["b" + i].T) * (1 - z * z)
        grads["a" + i] = inp.T @ gz
        g = gz @ p["a" + i].T
    return grads


@pytest.mark.mpi
def test_megatron_mlp_gradients_and_backward_collectives():
    """dp x tp: X batch-sharded, A column-, B row-parallel.  Both passes run what Megatron
    places by hand: forward, one all-reduce on tp per block (the loss reads block 2's whole
    output, never a split of it that the backward would gather again); backward, on tp one
    all-reduce of block 2's input gradient (block 1's input is data), and on dp one
    all-reduce per weight gradient, each as soon as that gradient is complete."""
    n = WORLD.size
    if n not in (4, 8):
        pytest.skip("a (2, n/2) dp x tp mesh needs 4 or 8 ranks")
    mesh = mt.init_device_mesh((2, n // 2), mesh_dim_names=("dp", "tp"))
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((8, 16)), rng.standard_normal((8, 16))
    p = {k: rng.standard_normal(s) / 4 for k, s in
         [("a1", (16, 32)), ("b1", (32, 16)), ("a2", (16, 32)), ("b2", (32, 16))]}
    col, row = [Replicate(), Shard(1)], [Replicate(), Shard(0)]
    P = {k: mt.distribute_tensor(v, mesh, col if k[0] == "a" else row) for k, v in p.items()}
    X, T = (mt.distribute_tensor(v, mesh, [Shard(0), Replicate()]) for v in (x, t))
    step = mt.value_and_grad(_mlp)
    with mt.CommDebugMode() as comm:
        value, grads = step(P, X, T)
    want = _mlp_numpy_grads(p, x, t)
    for k in p:
        assert grads[k].placements == P[k].placements
        assert np.allclose(host(grads[k]), want[k], rtol=1e-10, atol=1e-12)
    assert np.isclose(float(value), ((np.tanh(np.tanh(x @ p["a1"]) @ p["b1"] @ p["a2"]) @ p["b2"] - t) ** 2).mean())
    runs = [(e.collective, e.mesh_dim) for e in comm.log]
    forward = [("all_reduce", 1), ("all_reduce", 1)]
    # each weight's dp all-reduce runs as soon as its gradient is complete (b2, a2, then
    # block 1's after the tp all-reduce of its input gradient), as DDP's hooks order them
    backward = [("all_reduce", 0)] * 2 + [("all_reduce", 1)] + [("all_reduce", 0)] * 2
    assert runs == forward + backward, runs


@pytest.mark.mpi
def test_comm_regions_bill_each_backward_collective_to_its_forward_region():
    """``mt.debug.region`` names the blocks; CommDebugMode bills each collective to the
    region whose op ran it, the backward's to the region of the op it differentiates."""
    n = WORLD.size
    if n not in (4, 8):
        pytest.skip("a (2, n/2) dp x tp mesh needs 4 or 8 ranks")
    mesh = mt.init_device_mesh((2, n // 2), mesh_dim_names=("dp", "tp"))
    rng = np.random.default_rng(1)
    col, row = [Replicate(), Shard(1)], [Replicate(), Shard(0)]
    P = {k: mt.distribute_tensor(rng.standard_normal(s) / 4, mesh, col if k[0] == "a" else row)
         for k, s in [("a1", (16, 32)), ("b1", (32, 16)), ("a2", (16, 32)), ("b2", (32, 16))]}
    X, T = (mt.distribute_tensor(rng.standard_normal((8, 16)), mesh, [Shard(0), Replicate()])
            for _ in range(2))

    def loss(p, x, t):
        for i in "12":
            with mt.debug.region(f"block{i}"):
                x = np.tanh(x @ p["a" + i]) @ p["b" + i]
        with mt.debug.region("loss"):
            return ((x - t) ** 2).mean()
    with mt.CommDebugMode() as comm:
        mt.value_and_grad(loss)(P, X, T)
    # the tp all-reduce between the blocks runs, forward, in block 2 (which reads block 1's
    # output whole) and, backward, in block 1 (whose product needs that cotangent whole)
    assert comm.get_counts_by_region() == {
        ("block2", "forward"): {("all_reduce", 1): 1},
        ("loss", "forward"): {("all_reduce", 1): 1},
        ("block2", "backward"): {("all_reduce", 0): 2},
        ("block1", "backward"): {("all_reduce", 1): 1, ("all_reduce", 0): 2}}


@pytest.mark.mpi
def test_stop_gradient_passes_the_value_and_no_gradient(mesh):
    w0 = np.random.default_rng(2).standard_normal((6, 4))
    w = mt.distribute_tensor(w0, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    value, g = mt.value_and_grad(lambda w: (mt.stop_gradient(w) * w * w).sum())(w)
    assert np.isclose(float(value), (w0 ** 3).sum())
    assert np.allclose(host(g), 2 * w0 * w0)   # d/dw of c * w^2, c = w held fixed
    assert mt.stop_gradient(w).placements == w.placements
    assert np.array_equal(mt.stop_gradient(w0), w0)


@pytest.mark.mpi
def test_optimizers_step_without_communication(mesh):
    w = mt.distribute_tensor(W, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    x = mt.distribute_tensor(A, mesh, [Replicate()] * mesh.ndim)
    loss = mt.value_and_grad(lambda w, x: ((x @ w) ** 2).mean())
    value, g = loss(w, x)
    state = mt.optim.adam_init(w)
    with mt.CommDebugMode() as comm:
        mt.optim.sgd(w, g, lr=0.1)
        mt.optim.adam(w, g, state, lr=0.01)
    assert comm.get_total_counts() == 0
    assert float(loss(w, x)[0]) < float(value)


@pytest.mark.mpi
def test_pytrees_aux_and_unused_parameters(mesh):
    x = mt.distribute_tensor(A, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    params = {"w": [mt.distribute_tensor(W, mesh, [Replicate()] * mesh.ndim)],
              "unused": (mt.distribute_tensor(ROW, mesh, [Replicate()] * mesh.ndim),)}

    def fn(p, x):
        y = x @ p["w"][0]
        return (y * y).sum(), y.shape

    (value, aux), grads = mt.value_and_grad(fn, has_aux=True)(params, x)
    assert aux == (7, 3) and set(grads) == {"w", "unused"}
    assert np.allclose(host(grads["w"][0]), 2 * A.T @ (A @ W))
    assert np.array_equal(host(grads["unused"][0]), np.zeros(5))
    only = mt.grad(lambda x: (x ** 2).sum())(x)
    assert np.allclose(host(only), 2 * A) and only.placements == x.placements


@pytest.mark.mpi
def test_gradient_misuse_raises_clear_errors(mesh):
    x = mt.distribute_tensor(A, mesh, [Replicate()] * mesh.ndim)
    with pytest.raises(TypeError, match="must return a scalar float DTensor"):
        mt.value_and_grad(lambda x: x * 2)(x)
    with pytest.raises(TypeError, match="leaves the gradient's graph"):
        mt.value_and_grad(lambda x: float((x * 2).sum()))(x)
    with pytest.raises(TypeError, match="arctan2 has no gradient rule"):
        mt.value_and_grad(lambda x: np.arctan2(x, 1.0).sum())(x)
    value, g = mt.value_and_grad(lambda x: (x * (x > 0) + np.floor(x)).sum())(x)
    assert np.array_equal(host(g), (A > 0).astype(float))  # comparisons, floor: constants
