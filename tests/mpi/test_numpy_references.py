"""Training steps against a single-process numpy reference written out by hand: the
gradients of a small tanh MLP, SGD and Adam (with bias correction, as Kingma and Ba write
it), eager and compiled (fixed and auto buckets) on data-parallel and Megatron layouts; and
``mt.explain``'s totals against the bus bytes computed from the shapes."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host

import mtensor as mt
from mtensor import Replicate, Shard

R = Replicate()
MESH_NDIM_MAX = 2
LR, B1, B2, EPS = 0.05, 0.9, 0.999, 1e-8


def _arrays(seed=3):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((6, 10)) / 3, "b": rng.standard_normal((10, 5)) / 3,
            "bias": rng.standard_normal(5) / 3}, rng.standard_normal((11, 6)), \
        rng.standard_normal((11, 5))


def _layouts(mesh):
    """(batch, column-parallel, row-parallel): data parallel on 1-D, dp x tp on 2-D."""
    if mesh.ndim == 1:
        return [Shard(0)], [R], [R]
    return [Shard(0), R], [R, Shard(1)], [R, Shard(0)]


def _distribute(mesh, params, x, t):
    batch, col, row = _layouts(mesh)
    layout = {"a": col, "b": row, "bias": [R] * mesh.ndim}
    p = {k: mt.distribute_tensor(v.copy(), mesh, layout[k]) for k, v in params.items()}
    return p, mt.distribute_tensor(x, mesh, batch), mt.distribute_tensor(t, mesh, batch)


def _loss(p, x, t):
    return ((np.tanh(x @ p["a"]) @ p["b"] + p["bias"] - t) ** 2).mean()


def numpy_loss_and_grads(p, x, t):
    """The loss and its gradients, by hand."""
    h = np.tanh(x @ p["a"])
    r = h @ p["b"] + p["bias"] - t
    dy = 2 * r / r.size
    dh = dy @ p["b"].T
    return (r ** 2).mean(), {"a": x.T @ (dh * (1 - h ** 2)), "b": h.T @ dy,
                             "bias": dy.sum(axis=0)}


def numpy_sgd(p, g):
    for k in p:
        p[k] = p[k] - LR * g[k]


def numpy_adam(p, g, state):
    state["t"] += 1
    t = state["t"]
    for k in p:
        state["m"][k] = B1 * state["m"][k] + (1 - B1) * g[k]
        state["v"][k] = B2 * state["v"][k] + (1 - B2) * g[k] ** 2
        m_hat = state["m"][k] / (1 - B1 ** t)
        v_hat = state["v"][k] / (1 - B2 ** t)
        p[k] = p[k] - LR * m_hat / (np.sqrt(v_hat) + EPS)


_value_and_grad = mt.value_and_grad(_loss)


def _sgd_step(p, x, t):
    value, g = _value_and_grad(p, x, t)
    mt.optim.sgd(p, g, LR)
    return value


def _adam_step(p, x, t, state):
    value, g = _value_and_grad(p, x, t)
    mt.optim.adam(p, g, state, lr=LR, b1=B1, b2=B2, eps=EPS)
    return value


def _reference(params, x, t, optimizer, steps):
    p = {k: v.copy() for k, v in params.items()}
    state = {"t": 0, "m": {k: np.zeros_like(v) for k, v in p.items()},
             "v": {k: np.zeros_like(v) for k, v in p.items()}}
    losses = []
    for _ in range(steps):
        value, g = numpy_loss_and_grads(p, x, t)
        losses.append(value)
        numpy_sgd(p, g) if optimizer == "sgd" else numpy_adam(p, g, state)
    return losses, p


@pytest.mark.mpi
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("how", ["eager", "compiled auto", "compiled cap 0"])
def test_training_steps_match_numpy(mesh, optimizer, how):
    params, x, t = _arrays()
    want_losses, want = _reference(params, x, t, optimizer, steps=4)
    p, xd, td = _distribute(mesh, params, x, t)
    step = _sgd_step if optimizer == "sgd" else _adam_step
    args = () if optimizer == "sgd" else (mt.optim.adam_init(p),)
    if how != "eager":
        step = mt.compile(step, bucket_cap_mb="auto" if how == "compiled auto" else 0)
    losses = [float(step(p, xd, td, *args)) for _ in range(4)]
    assert_all_ranks(np.allclose(losses, want_losses, rtol=1e-12, atol=0),
                     f"{how} {optimizer} losses {losses} != numpy's {want_losses}")
    for k in want:
        got = host(p[k])
        assert_all_ranks(np.allclose(got, want[k], rtol=1e-11, atol=1e-14),
                         f"{how} {optimizer}: parameter {k} differs from numpy's by "
                         f"{np.abs(got - want[k]).max()}")


@pytest.mark.mpi
def test_explain_totals_are_the_bus_bytes_of_the_shapes(mesh):
    """A Megatron block's forward: the row-parallel product leaves P(sum) on tp, and making
    it replicated is one all-reduce of the (batch, d_out) result: 2(n-1)/n of its bytes."""
    if mesh.ndim < 2:
        pytest.skip("a dp x tp mesh")
    params, x, _ = _arrays()
    p, xd, _ = _distribute(mesh, params, x, x[:, :5])
    xd = xd.redistribute(mesh, [R, R])

    def block(x, a, b):
        return (np.tanh(x @ a) @ b).redistribute(mesh, [R, R])

    totals = mt.explain(block, xd, p["a"], p["b"]).totals
    n = mesh.shape[1]
    full = x.shape[0] * params["b"].shape[1] * x.dtype.itemsize
    want = {} if n == 1 else {"all_reduce": (1, 2 * (n - 1) * full // n)}
    assert_all_ranks(totals == want, f"explain totals {totals} != {want}")
