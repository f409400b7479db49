"""Gradients through numpy's functions on DTensors: picks (take, take_along_axis, array
keys: a scatter-add back), cumulative sums, differences, pads, round, interp, real/imag/conjugate, and
the functions built as compositions (norm, nansum, average, cov, corrcoef, outer, kron), each against
central finite differences of the same function in numpy on the whole arrays, on every
mesh, with split, replicated, uneven and partial inputs."""
from functools import partial

import numpy as np
import pytest
from mpi_helpers import (
    assert_all_ranks,
    dtensor_of,
    host,
    numeric_grads,
    weighted_loss,
)

import mtensor as mt
from mtensor import Partial, Replicate, Shard

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

RNG = np.random.default_rng(5)
A, B = RNG.standard_normal((7, 5)), RNG.standard_normal((7, 5))
ROW, VEC = RNG.standard_normal(5), RNG.standard_normal(6)
IDS = np.array([[0, 6, 3, 3], [-1, 2, 0, 6], [5, 5, 5, 1]])      # repeats and a negative
LABELS = np.array([4, 0, 2, 2, 1, 3, 4])
DOWN = np.array([[6, 0, 1, 1, 3], [2, 2, 4, 5, 0], [0, 6, 6, 6, 1]])
XP, FP = np.array([-3.0, -1.0, 0.0, 0.5, 2.0]), np.array([1.0, -2.0, 0.0, 3.0, 2.5])


def _logsoftmax(z):
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


# name: (function of (lift, *arrays), arrays); lift(index array) is the plain array in the
# numpy reference and a split DTensor in the distributed run
CASES = {
    "embedding_take": (lambda lift, w: np.tanh(np.take(w, lift(IDS), axis=0))
                       + np.take(w, IDS[1], axis=0)[None], A),
    "take_modes": (lambda lift, a: (np.take(a, [[-1, 9], [3, 3]], axis=1, mode="wrap") ** 2)
                   .sum() + np.take(a, [0, 34, 40, 34], mode="clip") @ np.arange(1.0, 5.0)
                   + np.take(a, [2, 2, 0], axis=0).sum(axis=0) @ ROW, A),
    "cross_entropy": (lambda lift, z: -np.take_along_axis(
        _logsoftmax(z), lift(LABELS)[:, None], axis=1).mean()
        + (np.take_along_axis(z, DOWN, axis=0) ** 2).sum(), A),
    "advanced_getitem": (lambda lift, a: (a[[0, 6, 6, -1]] ** 2).sum(axis=0) @ ROW
                         + a[a > 0.5].sum() + a[1:, [0, 4, 0]].sum(axis=0)
                         * a[lift(LABELS)][:, 1:4], A),
    "cumsum": (lambda lift, a: np.cumsum(a, axis=0) * np.cumsum(a * a, axis=1)
               + np.cumsum(a).reshape(7, 5) + np.nancumsum(a, axis=0), A),
    "diff": (lambda lift, a, r: (np.diff(a, axis=0) ** 2).sum(axis=1) @ np.diff(a, n=2, axis=1)[1:]
             + np.diff(a, axis=0, prepend=r[None, :], append=0.5).sum(), A, ROW),
    "pad": (lambda lift, a: (np.pad(a, ((2, 1), (0, 3)), "edge") ** 2).sum(axis=0)
            @ np.arange(8.0) + np.pad(a, ((1, 9), (1, 0)), "wrap")[::2, 1:].sum(axis=0) @ ROW
            + (np.pad(a[:1], ((3, 1), (2, 2)), "edge") * np.pad(a, 2)[:5, :9]).sum(), A),
    "round_interp_imag": (lambda lift, a: np.round(a, 1) * a + np.interp(a, XP, FP) * a
                          + np.imag(a) + np.real(a), A),
    "compositions": (lambda lift, a, b: np.linalg.norm(a, axis=1)[:, None] * b
                     + np.nansum(a * b, axis=0) + np.average(a, axis=1, weights=ROW)[:, None]
                     + np.linalg.norm(a - b), A, B),
    "cov_corrcoef": (lambda lift, a: np.cov(a)[:5, :5] + np.corrcoef(a.T), A),
    "outer_kron": (lambda lift, v, a: np.outer(v, v).sum(axis=1)[:, None]
                   * np.kron(a[:2, :3], a[5:, 1:4]).sum(axis=0)[None, :], VEC, A),
}


def _layouts(mesh, ndim):
    """Replicate, each Shard, then a partial sum on the last mesh dim."""
    per_dim = [Replicate()] + [Shard(d) for d in range(ndim)]
    out = [tuple(per_dim[(k + i) % len(per_dim)] for i in range(mesh.ndim))
           for k in range(len(per_dim))]
    return out + [out[1][:-1] + (Partial(),)]


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_gradients_match_finite_differences(mesh, name):
    fn, *arrays = CASES[name]
    want = numeric_grads(partial(fn, np.asarray), arrays)
    failures = []
    for k, layout in enumerate(_layouts(mesh, arrays[0].ndim)):
        layouts = [layout] + [_layouts(mesh, a.ndim)[(k + j) % (a.ndim + 1)]
                              for j, a in enumerate(arrays[1:], 1)]
        ins = [dtensor_of(a, mesh, p) for a, p in zip(arrays, layouts)]
        index_layout = (Shard(0) if k % 2 else Replicate(),) + (Replicate(),) * (mesh.ndim - 1)

        def lift(i):
            return mt.distribute_tensor(i, mesh, index_layout)
        step = mt.value_and_grad(lambda *xs: weighted_loss(partial(fn, lift), xs), argnums=tuple(range(len(ins))))
        value, grads = step(*ins)
        for g, w, x in zip(grads, want, ins):
            if g.placements != x.placements or not np.allclose(host(g), w, rtol=1e-5,
                                                               atol=1e-6):
                failures.append(layouts)
        if not np.isclose(float(value), weighted_loss(partial(fn, np.asarray), arrays)):
            failures.append(("value", layouts))
    assert_all_ranks(not failures, f"{name}: {failures[:2]}")


@pytest.mark.mpi
def test_complex_parts_follow_jax_convention(mesh):
    """For a real loss of a complex z, the gradient is dL/dx - i dL/dy (as JAX gives)."""
    z = A + 1j * B
    Z = mt.distribute_tensor(z, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    g = mt.grad(lambda z: (np.real(z) ** 2 * 3 + np.imag(z) * np.real(np.conjugate(z))
                           + np.imag(np.conjugate(z)) ** 3).sum())(Z)
    x, y = A, B
    want = (6 * x + y) - 1j * (x - 3 * y * y)
    assert_all_ranks(np.allclose(host(g), want), "complex gradient")


@pytest.mark.mpi
def test_gradients_without_a_rule_refuse_clearly(mesh):
    x = mt.distribute_tensor(A, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    with pytest.raises(TypeError, match="np.multiply.accumulate"):
        mt.grad(lambda x: np.cumprod(x, axis=0).sum())(x)
    with pytest.raises(TypeError, match="np.gradient has no gradient rule"):
        mt.grad(lambda x: np.gradient(x, axis=0).sum())(x)
    with pytest.raises(TypeError, match="np.convolve has no gradient rule"):
        mt.grad(lambda x: np.convolve(x[:, 0], [1.0, 2.0]).sum())(x)
    with pytest.raises(TypeError, match="np.interp has a gradient rule with respect to x"):
        mt.grad(lambda fp: np.interp(ROW, XP, fp).sum())(
            mt.distribute_tensor(FP, mesh, [Replicate()] * mesh.ndim))


@pytest.mark.mpi
def test_compiled_steps_add_into_fresh_zeros(mesh):
    """A scatter-add's zeros are made afresh at each replay of a compiled step (not the
    constant its trace captured, which replays would keep adding into)."""
    w = mt.distribute_tensor(A, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    fn, _ = CASES["cross_entropy"]
    step = mt.value_and_grad(lambda w: weighted_loss(partial(fn, np.asarray), (w,))
                             + (np.take(w, IDS, axis=0) ** 2).sum())
    want = step(w)[1].full_tensor()
    compiled = mt.compile(step)
    got = [compiled(w)[1].full_tensor() for _ in range(3)]
    assert_all_ranks(all(np.allclose(g, want) for g in got), "compiled replays")
