"""The training loop's pieces over real MPI, against numpy written here: gradient
accumulation with one reduction per gradient (eager and compiled), clipping by the global
norm on every layout of the gradients (Partial ones included) with one scalar all-reduce,
SGD with momentum and Nesterov, AdamW, Lion, schedules, and optimizer state saved and
loaded like the parameters."""
import math

import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host

import mtensor as mt
from mtensor import Partial, Replicate, Shard

RNG = np.random.default_rng(40)
W1, W2, B1 = RNG.standard_normal((6, 8)), RNG.standard_normal((8, 3)), RNG.standard_normal(8)
X, T = RNG.standard_normal((16, 6)), RNG.standard_normal((16, 3))
K = 4                                             # microbatches


def _mlp(mesh):
    """Parameters replicated over mesh dim 0 (dp); on a 2-D mesh, Megatron's column/row
    split over dim 1 (tp)."""
    rep = [Replicate()] * mesh.ndim
    col, row = list(rep), list(rep)
    if mesh.ndim > 1:
        col[1], row[1] = Shard(1), Shard(0)
    bias = list(rep)
    if mesh.ndim > 1:
        bias[1] = Shard(0)
    return {"w1": mt.distribute_tensor(W1, mesh, col), "b1": mt.distribute_tensor(B1, mesh, bias),
            "w2": mt.distribute_tensor(W2, mesh, row)}


def _batch(mesh, x):
    return mt.distribute_tensor(x, mesh, [Shard(0)] + [Replicate()] * (mesh.ndim - 1))


def _loss(p, x, t):
    h = np.tanh(x @ p["w1"] + p["b1"])
    return (((h @ p["w2"]) - t) ** 2).sum() / len(X)


def _accumulated_step(params, batches, targets, lr):
    grads = None
    for x, t in zip(batches, targets):
        _, g = mt.value_and_grad(_loss, reduce=False)(params, x, t)
        grads = mt.optim.accumulate(grads, g)
    mt.optim.sgd(params, grads, lr)


def _numpy_grads(x, t):
    h = np.tanh(x @ W1 + B1)
    dy = 2 * ((h @ W2) - t) / len(X)
    dz = (dy @ W2.T) * (1 - h * h)
    return {"w1": x.T @ dz, "b1": dz.sum(0), "w2": h.T @ dy}


def _dp_reductions(comm):
    return [r for r in comm.log if r.mesh_dim == 0 and r.collective in (
        "all_reduce", "reduce_scatter")]


@pytest.mark.mpi
@pytest.mark.parametrize("how", ["eager", "compiled"])
def test_accumulating_microbatches_reduces_each_gradient_once(mesh, how):
    params, big = _mlp(mesh), _mlp(mesh)
    xs = [_batch(mesh, part) for part in np.split(X, K)]
    ts = [_batch(mesh, part) for part in np.split(T, K)]
    step = _accumulated_step if how == "eager" else mt.compile(
        _accumulated_step, bucket_cap_mb=0, first_bucket_mb=0)
    if how == "compiled":
        step(_mlp(mesh), xs, ts, 0.1)           # the trace, outside the count
    with mt.CommDebugMode() as comm:
        step(params, xs, ts, 0.1)
    reductions = _dp_reductions(comm)
    if mesh.shape[0] > 1:
        assert_all_ranks(len(reductions) == len(params), f"{len(reductions)} dp reductions")
        assert_all_ranks(all(r.phase == "forward" for r in reductions), "after the backward")
    _, g = mt.value_and_grad(_loss)(big, _batch(mesh, X), _batch(mesh, T))
    mt.optim.sgd(big, g, 0.1)
    want = _numpy_grads(X, T)
    for name in params:
        np.testing.assert_allclose(host(params[name]), host(big[name]), rtol=1e-12, atol=1e-14)
        assert_all_ranks(np.allclose(host(params[name]), {"w1": W1, "b1": B1, "w2": W2}[name]
                                     - 0.1 * want[name], rtol=1e-12), name)


@pytest.mark.mpi
def test_pending_gradients_are_partial_only_where_a_reduction_waits(mesh):
    params = _mlp(mesh)
    _, g = mt.value_and_grad(_loss, reduce=False)(params, _batch(mesh, X), _batch(mesh, T))
    for name, p in params.items():
        want = list(p.placements)
        if mesh.shape[0] > 1:
            want[0] = Partial()
        assert tuple(g[name].placements[1:]) == tuple(want[1:]), name
        assert isinstance(g[name].placements[0], Partial) or mesh.shape[0] == 1, name
    reduced = mt.optim.reduce_grads(g, params)
    for name, p in params.items():
        assert reduced[name].placements == p.placements
        np.testing.assert_allclose(host(reduced[name]), _numpy_grads(X, T)[name], rtol=1e-12)


def _layouts(mesh):
    """Gradient layouts: replicated, split on each dim, Partial, and mixes over mesh dims."""
    n = mesh.ndim
    out = [[Replicate()] * n, [Shard(0)] * n, [Partial()] + [Replicate()] * (n - 1),
           [Shard(1)] + [Partial()] * (n - 1)]
    if n > 1:
        out.append([Replicate(), Shard(0)] + [Replicate()] * (n - 2))
    return out


def _as_layout(value, mesh, placements):
    """``value`` laid out as ``placements``; a Partial dim holds uneven terms that sum to it."""
    rep = [Replicate() if isinstance(p, Partial) else p for p in placements]
    x = mt.distribute_tensor(value, mesh, rep)
    if rep == list(placements):
        return x
    weight = 1.0
    for d, p in enumerate(placements):
        if isinstance(p, Partial):
            size, at = mesh.shape[d], mesh.coordinate[d]
            weight *= (at + 1) / (size * (size + 1) / 2)
    return mt.DTensor.from_local(x.to_local() * weight, mesh, list(placements))


def _grads(mesh, scale=1.0):
    values = [scale * RNG.standard_normal((5, 7)) for _ in _layouts(mesh)]
    return values, [_as_layout(v, mesh, p) for v, p in zip(values, _layouts(mesh))]


@pytest.mark.mpi
@pytest.mark.parametrize("scale", [0.01, 10.0])
def test_clip_by_global_norm_matches_numpy_with_one_scalar_all_reduce(mesh, scale):
    values, grads = _grads(mesh, scale)
    with mt.CommDebugMode() as comm:
        clipped, norm = mt.optim.clip_by_global_norm(grads, 1.5)
    want = np.linalg.norm(np.concatenate([v.ravel() for v in values]))
    assert math.isclose(float(norm), want, rel_tol=1e-12)
    for c, v, g in zip(clipped, values, grads):
        np.testing.assert_allclose(host(c), v * min(1.0, 1.5 / want), rtol=1e-12)
        assert c.placements == tuple(Replicate() if isinstance(p, Partial) else p
                                     for p in g.placements)
    scalars = [r for r in comm.log if r.shape == ()]
    dims = sum(size > 1 for size in mesh.shape)      # one scalar all-reduce over the mesh
    assert_all_ranks(1 <= len(scalars) <= dims or dims == 0 == len(scalars),
                     f"{len(scalars)} scalar collectives on a {mesh.shape} mesh")
    others = [r for r in comm.log if r.shape != ()]   # the Partial gradients' reductions
    assert_all_ranks(len(others) <= 2 * mesh.ndim, f"{len(others)} gradient reductions")


@pytest.mark.mpi
@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan"), True])
def test_clip_refuses_a_max_norm_that_is_not_a_positive_number(mesh, bad):
    _, grads = _grads(mesh)
    with pytest.raises(ValueError, match="max_norm must be a finite number > 0"):
        mt.optim.clip_by_global_norm(grads, bad)


def _numpy_step(name, p, g, state, lr, step):
    """One update of the optimizer ``name`` in numpy (optax's and PyTorch's formulas)."""
    if name in ("momentum", "nesterov"):
        state["t"] = 0.9 * state.get("t", 0) + g
        return p - lr * (g + 0.9 * state["t"] if name == "nesterov" else state["t"])
    if name == "lion":
        m = state.get("m", 0)
        u = np.sign(0.9 * m + 0.1 * g) + 0.01 * p
        state["m"] = 0.99 * m + 0.01 * g
        return p - lr * u
    m = state["m"] = 0.9 * state.get("m", 0) + 0.1 * g
    v = state["v"] = 0.999 * state.get("v", 0) + 0.001 * g * g
    u = (m / (1 - 0.9 ** step)) / (np.sqrt(v / (1 - 0.999 ** step)) + 1e-8)
    return p - lr * (u + (0.05 * p if name == "adamw" else 0))


def _update(name, params, grads, state, lr):
    if name in ("momentum", "nesterov"):
        return mt.optim.sgd(params, grads, lr, state=state, momentum=0.9,
                            nesterov=name == "nesterov")
    if name == "lion":
        return mt.optim.lion(params, grads, state, lr, weight_decay=0.01)
    if name == "adamw":
        return mt.optim.adamw(params, grads, state, lr, weight_decay=0.05)
    return mt.optim.adam(params, grads, state, lr)


INIT = {"momentum": mt.optim.sgd_init, "nesterov": mt.optim.sgd_init, "adam":
        mt.optim.adam_init, "adamw": mt.optim.adam_init, "lion": mt.optim.lion_init}


@pytest.mark.mpi
@pytest.mark.parametrize("name", list(INIT))
def test_optimizers_with_a_schedule_match_numpy_on_every_gradient_layout(mesh, name):
    schedule = mt.optim.warmup_cosine(0.0, 0.1, warmup_steps=2, decay_steps=5)
    values, _ = _grads(mesh)
    starts = [RNG.standard_normal(v.shape) for v in values]
    params = [mt.distribute_tensor(s, mesh, [Replicate() if isinstance(p, Partial) else p
                                             for p in layout])
              for s, layout in zip(starts, _layouts(mesh))]
    state, want, ref = INIT[name](params), list(starts), [{} for _ in starts]
    for step in range(1, 4):
        _, grads = _grads(mesh)
        values = [host(g) for g in grads]
        state = _update(name, params, grads, state, schedule)
        want = [_numpy_step(name, p, g, s, schedule(step - 1), step)
                for p, g, s in zip(want, values, ref)]
    assert int(state["step"]) == 3
    for p, w in zip(params, want):
        np.testing.assert_allclose(host(p), w, rtol=1e-11, atol=1e-13)
    for tree in [v for k, v in state.items() if k != "step"]:
        assert all(s.placements == p.placements for s, p in zip(tree, params))


@pytest.mark.mpi
def test_compiled_updates_follow_the_schedule_step_by_step(mesh):
    schedule = mt.optim.linear(0.2, 0.0, transition_steps=3)
    eager, compiled = _mlp(mesh), _mlp(mesh)
    x, t = _batch(mesh, X), _batch(mesh, T)

    def step(p, state, x, t):
        loss, g = mt.value_and_grad(_loss)(p, x, t)
        g, _ = mt.optim.clip_by_global_norm(g, 0.5)
        mt.optim.adamw(p, g, state, schedule, weight_decay=0.1)
        return loss

    se, sc, fast = mt.optim.adam_init(eager), mt.optim.adam_init(compiled), mt.compile(step)
    for _ in range(5):                          # the schedule ends at step 3, then holds 0
        assert float(step(eager, se, x, t)) == float(fast(compiled, sc, x, t))
    for name in eager:
        assert_all_ranks(np.array_equal(host(eager[name]), host(compiled[name])), name)


def test_schedules_are_optax_shaped_and_refuse_what_makes_no_sense():
    cosine = mt.optim.warmup_cosine(0.0, 1.0, warmup_steps=4, decay_steps=10, end_value=0.1)
    assert [cosine(s) for s in (0, 2, 4)] == [0.0, 0.5, 1.0]
    assert math.isclose(cosine(7), 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert cosine(10) == cosine(1000) == pytest.approx(0.1)       # past its end: holds
    line = mt.optim.linear(1.0, 0.0, transition_steps=4, transition_begin=2)
    assert [line(s) for s in (0, 2, 3, 6, 99)] == [1.0, 1.0, 0.75, 0.0, 0.0]
    assert mt.optim.constant(0.3)(10 ** 9) == 0.3
    for schedule in (cosine, line, mt.optim.constant(1.0)):
        with pytest.raises(ValueError, match="schedules start at step 0"):
            schedule(-1)
    with pytest.raises(ValueError, match="must be >= warmup_steps"):
        mt.optim.warmup_cosine(0.0, 1.0, warmup_steps=5, decay_steps=3)
    with pytest.raises(ValueError, match="transition_steps"):
        mt.optim.linear(1.0, 0.0, transition_steps=0)


@pytest.mark.mpi
def test_accumulating_different_shapes_or_mismatched_state_is_refused(mesh):
    params = _mlp(mesh)
    xs = [_batch(mesh, X[:8]), _batch(mesh, X[:8, :5])]
    _, g = mt.value_and_grad(_loss, reduce=False)(params, xs[0], _batch(mesh, T[:8]))
    other = {k: mt.distribute_tensor(np.zeros(v.shape[::-1]), mesh, [Replicate()] * mesh.ndim)
             for k, v in params.items()}
    with pytest.raises(ValueError, match=r"accumulate: leaf \d has shape"):
        mt.optim.accumulate(other, g)
    with pytest.raises(ValueError, match="make the state with the optimizer's init"):
        mt.optim.adam(params, g, mt.optim.adam_init(other))
    with pytest.raises(ValueError, match="sgd_init"):
        mt.optim.sgd(params, g, 0.1, momentum=0.9)


@pytest.mark.mpi
def test_optimizer_state_saves_and_loads_like_the_parameters(mesh, ckdir):
    params = _mlp(mesh)
    _, g = mt.value_and_grad(_loss)(params, _batch(mesh, X), _batch(mesh, T))
    state = mt.optim.adamw(params, g, mt.optim.adam_init(params))
    mt.save(f"{ckdir}/opt", {"params": params, "opt": state})
    template = {"params": _mlp(mesh), "opt": mt.optim.adam_init(_mlp(mesh))}
    back = mt.load(f"{ckdir}/opt", like=template)
    assert int(back["opt"]["step"]) == 1
    for key in ("m", "v"):
        for name in params:
            got, want = back["opt"][key][name], state[key][name]
            assert got.placements == want.placements
            assert np.array_equal(host(got), host(want)), (key, name)
