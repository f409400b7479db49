"""The escape hatches (issue 33): a differentiable ``to_local``/``from_local``, ``local_map``
(eager, compiled, in a training loop, its gradient placements and their check), and
``custom_vjp``; every gradient against finite differences of plain numpy, uneven shards."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host, random_array

import mtensor as mt
from mtensor import Partial, Replicate, Shard


def _fd(f, w, eps=1e-6):
    g = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        d = np.zeros_like(w)
        d[i] = eps
        g[i] = (f(w + d) - f(w - d)) / (2 * eps)
    return g


def _layouts(mesh, ndim=2):
    rest = [Replicate()] * (mesh.ndim - 1)
    return [[Shard(0)] + rest, [Replicate()] + rest] + ([[Shard(ndim - 1)] + rest] * (ndim > 1))


@pytest.mark.mpi
def test_gradient_flows_through_to_local_and_from_local(mesh):
    """The issue's repro on every layout of an uneven 7 x 3 tensor: 2 w, not 0."""
    w = random_array((7, 3), seed=1)
    for placements in _layouts(mesh):
        W = mt.distribute_tensor(w, mesh, placements)

        def loss(W):
            return (mt.DTensor.from_local(np.exp(W.to_local()) * 2, mesh, placements) ** 2).sum()
        value, grad = mt.value_and_grad(loss)(W)
        want = 8 * np.exp(2 * w)
        assert_all_ranks(np.isclose(float(value), (4 * np.exp(2 * w)).sum()), f"{placements}")
        assert_all_ranks(grad.placements == W.placements and np.allclose(host(grad), want),
                         f"gradient on {placements}")


@pytest.mark.mpi
def test_grad_placements_say_how_a_replicated_block_was_used(mesh):
    """Each rank takes its own rows of a replicated w: its gradient is a term of a sum
    (``grad_placements=[Partial()]``), which the default (as forward) would get wrong."""
    w = random_array((7, 2), seed=2)
    rows = mt.placement.local_slices((7, 2), mesh.shape, [Shard(0)] * mesh.ndim,
                                     mesh.coordinate)
    W = mt.distribute_tensor(w, mesh, [Replicate()] * mesh.ndim)

    def loss(W):
        block = W.to_local(grad_placements=[Partial()] * mesh.ndim)
        return (mt.DTensor.from_local(block[rows] ** 3, mesh, [Shard(0)] * mesh.ndim)).sum()
    grad = mt.grad(loss)(W)
    assert_all_ranks(np.allclose(host(grad), 3 * w ** 2), "rows of a replicated w")


def _xent_blocks(z, onehot):
    """A fused softmax cross-entropy per row, written on blocks (numpy code)."""
    shifted = z - mt.stop_gradient(z.max(axis=-1, keepdims=True)) if isinstance(
        z, mt.DTensor) else z - z.max(axis=-1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -((shifted - log_norm) * onehot).sum(axis=-1)


def _numpy_loss(w, x, onehot):
    return _xent_blocks(x @ w, onehot).mean()


@pytest.mark.mpi
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_local_map_kernel_trains_like_numpy(mesh, compiled):
    """A 7-row batch split unevenly, the loss a per-block kernel: losses of 4 SGD steps
    equal numpy's, and the first gradient equals finite differences."""
    x, w0 = random_array((7, 5), seed=3), random_array((5, 4), seed=4) * 0.3
    onehot = np.eye(4)[np.arange(7) % 4]
    batch = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    X, Y = mt.distribute_tensor(x, mesh, batch), mt.distribute_tensor(onehot, mesh, batch)
    W = mt.distribute_tensor(w0, mesh, [Replicate()] * mesh.ndim)
    xent = mt.local_map(_xent_blocks, out_placements=batch, in_placements=(batch, batch))
    step = mt.value_and_grad(lambda W, X, Y: xent(X @ W, Y).mean())
    step = mt.compile(step) if compiled else step
    w, losses, want = w0.copy(), [], []
    for k in range(4):
        value, grad = step(W, X, Y)
        if k == 0:
            fd = _fd(lambda v: _numpy_loss(v, x, onehot), w0)
            assert_all_ranks(np.allclose(host(grad), fd, atol=1e-7), "gradient vs fd")
        losses.append(float(value))
        want.append(_numpy_loss(w, x, onehot))
        w -= 0.5 * (host(grad) if k else fd)
        W -= 0.5 * grad
    assert_all_ranks(np.allclose(losses, want), f"losses {losses} != numpy {want}")


@pytest.mark.mpi
def test_local_map_defaults_transpose_the_gradient_and_the_check_catches_a_wrong_one(mesh):
    """Replicated input, sharded output: each rank uses its rows of w, so its gradient is a
    term of a sum; the default (Partial) is right, a hand-given Replicate is caught by
    MTENSOR_CHECK on every rank (where ranks really differ)."""
    w = random_array((7, 3), seed=5)
    rows = mt.placement.local_slices((7, 3), mesh.shape, [Shard(0)] * mesh.ndim,
                                     mesh.coordinate)
    R, S = [Replicate()] * mesh.ndim, [Shard(0)] * mesh.ndim
    W = mt.distribute_tensor(w, mesh, R)
    good = mt.local_map(lambda b: np.sin(b[rows]), out_placements=S)
    grad = mt.grad(lambda W: good(W).sum())(W)
    assert_all_ranks(np.allclose(host(grad), np.cos(w)), "default gradient placements")
    if mesh.size() == 1:
        return                      # one rank: its one block cannot differ from another
    bad = mt.local_map(lambda b: np.sin(b[rows]), out_placements=S, in_grad_placements=(R,))
    mt.set_checks(True)
    try:
        with pytest.raises(ValueError, match="holds different blocks") as caught:
            mt.grad(lambda W: bad(W).sum())(W)
    finally:
        mt.set_checks(False)
    assert "Partial()" in str(caught.value)


@pytest.mark.mpi
def test_local_map_checks_and_redistributes_its_inputs(mesh):
    x = random_array((6, 4), seed=6)
    S, R = [Shard(0)] + [Replicate()] * (mesh.ndim - 1), [Replicate()] * mesh.ndim
    X = mt.distribute_tensor(x, mesh, R)
    strict = mt.local_map(lambda b: b * 2, out_placements=S, in_placements=(S,))
    with pytest.raises(ValueError, match="in_placements asks"):
        strict(X)
    loose = mt.local_map(lambda b: b * 2, out_placements=S, in_placements=(S,),
                         redistribute_inputs=True)
    out = loose(X)
    assert_all_ranks(out.placements == tuple(S) and np.allclose(host(out), 2 * x), "loose")
    pair = mt.local_map(lambda b: (b.sum(axis=0), b + 1), out_placements=(
        [Partial()] + [Replicate()] * (mesh.ndim - 1), S), in_placements=(S,))
    total, plus = pair(mt.distribute_tensor(x, mesh, S))
    assert_all_ranks(np.allclose(host(total), x.sum(axis=0)) and np.allclose(host(plus), x + 1),
                     "two outputs")
    plain = mt.compile(lambda X: pair(X)[0] * 3)
    for _ in range(2):
        got = plain(mt.distribute_tensor(x, mesh, S))
    assert_all_ranks(np.allclose(host(got), 3 * x.sum(axis=0)), "compiled local_map")


@pytest.mark.mpi
def test_custom_vjp_replaces_the_gradient_and_runs_bwd_once(mesh):
    w = random_array((5, 3), seed=7)
    W = mt.distribute_tensor(w, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))
    calls = []

    @mt.custom_vjp
    def clip_grad(a, scale):
        return a * scale["s"]

    def fwd(a, scale):
        return a * scale["s"], scale["s"]

    def bwd(s, g):
        calls.append(1)
        return np.clip(g * s, -1.0, 1.0), None

    clip_grad.defvjp(fwd, bwd)
    value, grad = mt.value_and_grad(lambda W: (clip_grad(W, {"s": 3.0}) * W).sum())(W)
    # d/dW of (3 W) * W through the custom rule: clip(3 W, -1, 1) * 3 ... plus W * 3 direct
    want = np.clip(w * 3.0, -1, 1) + 3.0 * w
    assert_all_ranks(np.isclose(float(value), (3 * w * w).sum()), "value")
    assert_all_ranks(np.allclose(host(grad), want) and len(calls) == 1, f"grad, {calls}")
    assert_all_ranks(np.allclose(host(clip_grad(W, {"s": 2.0})), 2 * w), "outside a gradient")


@pytest.mark.mpi
def test_local_map_is_an_opaque_node_of_an_auto_shard_plan(mesh):
    """auto_shard plans around the kernel (its inputs pinned to the declared layouts, its
    output a source of the declared layout): the plan's step gives numpy's loss and
    gradient, and the kernel's own ops never reach the plan."""
    x, w = random_array((7, 5), seed=8), random_array((5, 4), seed=9) * 0.3
    onehot = np.eye(4)[np.arange(7) % 4]
    batch = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    xent = mt.local_map(_xent_blocks, out_placements=batch, in_placements=(batch, batch))
    grads = mt.value_and_grad(lambda W, X, Y: xent(X @ W, Y).mean())
    X, Y = mt.distribute_tensor(x, mesh, batch), mt.distribute_tensor(onehot, mesh, batch)
    W = mt.distribute_tensor(w, mesh, [Replicate()] * mesh.ndim)
    plan = mt.auto_shard(grads, W, X, Y, mesh=mesh, fixed={"X": batch, "Y": batch})
    value, grad = plan.compile()(plan.distribute(W), X, Y)
    fd = _fd(lambda v: _numpy_loss(v, x, onehot), w)
    assert_all_ranks(np.isclose(float(value), _numpy_loss(w, x, onehot)), "planned loss")
    assert_all_ranks(np.allclose(host(grad), fd, atol=1e-7), "planned gradient")
