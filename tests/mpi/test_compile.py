"""mt.compile under real MPI: compiled steps against eager ones (bitwise when no bucket
changes a reduction, else within float64 rounding), bucketing counts, retracing, refusals,
the check mode over buckets, and the trace file."""
import json
import os
import tempfile

import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, host

import mtensor as mt
from mtensor import Partial, Replicate, Shard
from mtensor.dtensor import relayout

R = Replicate()


def _layouts(mesh):
    """(batch, column-parallel, row-parallel) placements: dp x tp on 2-D and 3-D meshes,
    plain data parallelism on 1-D."""
    if mesh.ndim == 1:
        return [Shard(0)], [R], [R]
    rest = [R] * (mesh.ndim - 2)
    return [Shard(0), R] + rest, [R, Shard(1)] + rest, [R, Shard(0)] + rest


def _model(mesh, seed=0):
    rng = np.random.default_rng(seed)
    batch, col, row = _layouts(mesh)
    params = {"a": mt.distribute_tensor(rng.standard_normal((6, 10)) / 3, mesh, col),
              "b": mt.distribute_tensor(rng.standard_normal((10, 6)) / 3, mesh, row),
              "bias": mt.distribute_tensor(rng.standard_normal(6) / 3, mesh, [R] * mesh.ndim)}
    x, t = (mt.distribute_tensor(rng.standard_normal((11, 6)), mesh, batch) for _ in range(2))
    return params, x, t


def _loss(p, x, t):
    return ((np.tanh(x @ p["a"]) @ p["b"] + p["bias"] - t) ** 2).mean()


_grad = mt.value_and_grad(_loss)


def _sgd_step(p, x, t):
    value, g = _grad(p, x, t)
    mt.optim.sgd(p, g, 0.2)
    return value


def _adam_step(p, x, t, state):
    value, g = _grad(p, x, t)
    mt.optim.adam(p, g, state, lr=0.05)
    return value


def _full(tree):
    return {k: host(v) for k, v in tree.items()}


@pytest.mark.mpi
@pytest.mark.parametrize("cap", [0, 25], ids=["unfused", "fused"])
def test_compiled_training_equals_eager(mesh, cap):
    eager, x, t = _model(mesh)
    compiled, _, _ = _model(mesh)
    step = mt.compile(_sgd_step, bucket_cap_mb=cap, first_bucket_mb=cap)
    for _ in range(3):
        want, got = float(_sgd_step(eager, x, t)), float(step(compiled, x, t))
        assert_all_ranks(want == got if cap == 0 else np.isclose(want, got, rtol=1e-12),
                         f"loss {got} != eager {want}")
    for k, v in _full(eager).items():
        got = host(compiled[k])
        same = np.array_equal(v, got) if cap == 0 else np.allclose(v, got, rtol=1e-12, atol=0)
        assert_all_ranks(same, f"{k}: compiled parameters differ from eager")
    assert step.trace_count() == 1


def _chain(a, w, c):
    t = np.copy(np.einsum("bhtk,hkd->btd", a, w))   # its own block, in einsum's order (not C)
    u = t * c                                # t dies here; the fresh result is C-ordered
    view = u[1:]                             # a view of u's block, returned
    v = (u + 1.0) * 2.0                      # u dies here, but the view still holds its block
    return view, v.sum(axis=1), (v * v).sum()


@pytest.mark.mpi
def test_the_replay_writes_into_dying_blocks_and_keeps_eager_bits(mesh):
    """Elementwise results go into blocks that die there (after the first replay has seen
    their shapes and strides); a block a view still holds, or one of other strides than the
    fresh result's (later sums would add in another order), is never one of them; every
    output equals eager's bit for bit, replay after replay."""
    rng = np.random.default_rng(3)
    whole = [R] * mesh.ndim
    a, w, c = (mt.distribute_tensor(rng.standard_normal(s), mesh, whole)
               for s in [(4, 4, 32, 32), (4, 32, 64), (4, 32, 64)])
    step = mt.compile(_chain)
    want = [host(o) for o in _chain(a, w, c)]
    for _ in range(3):
        got = [host(o) for o in step(a, w, c)]
        assert_all_ranks(all(np.array_equal(x, y) for x, y in zip(want, got)), "bits")
    assert step.traced.replay.reused > 0


@pytest.mark.mpi
def test_an_all_reduce_of_a_dying_block_runs_in_place_and_spares_held_ones(mesh):
    """A Partial made inside the step dies at its all-reduce, which then reduces its block in
    place (no buffer, no copy); a Partial the caller passed in keeps its terms."""
    rest = [R] * (mesh.ndim - 1)
    rng = np.random.default_rng(5)
    x, w, terms = (rng.standard_normal(s) for s in [(8, 6), (6, 5), (3, 4)])
    X = mt.distribute_tensor(x, mesh, [Shard(1)] + rest)
    W = mt.distribute_tensor(w, mesh, [Shard(0)] + rest)
    held = mt.DTensor.from_local(terms.copy(), mesh, [Partial()] + rest, shape=terms.shape)
    whole = [R] * mesh.ndim

    def step(X, W, held):
        return (X @ W).redistribute(mesh, whole), held.redistribute(mesh, whole)

    fn = mt.compile(step, bucket_cap_mb=0, first_bucket_mb=0)
    for _ in range(3):
        product, summed = fn(X, W, held)
        np.testing.assert_allclose(host(product), x @ w, rtol=1e-12)
        assert_all_ranks(np.array_equal(host(summed), terms * mesh.shape[0]), "held's sum")
        assert_all_ranks(np.array_equal(host(held.to_local()), terms), "held was written")
    # host blocks only: a device backend's send and receive buffers stay apart
    assert (fn.traced.replay.reused > 0) == (mesh.shape[0] > 1 and mesh.device_type == "cpu")


@pytest.mark.mpi
def test_an_all_reduce_of_a_view_of_a_dying_block_runs_in_place(mesh):
    """A reshaped product (a view whose base nothing else holds) dies at its all-reduce,
    which reduces it in place; the same view of a product the step returns is reduced
    into a buffer of its own, and the product keeps its terms."""
    rest = [R] * (mesh.ndim - 1)
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((8, 6)), rng.standard_normal((6, 5))
    X = mt.distribute_tensor(x, mesh, [Shard(1)] + rest)
    W = mt.distribute_tensor(w, mesh, [Shard(0)] + rest)
    whole = [R] * mesh.ndim

    def dying(X, W):
        return (X @ W).reshape(-1).redistribute(mesh, whole)

    def kept(X, W):
        p = X @ W
        return p.reshape(-1).redistribute(mesh, whole), p

    reused = []
    for fn in (mt.compile(dying, bucket_cap_mb=0, first_bucket_mb=0),
               mt.compile(kept, bucket_cap_mb=0, first_bucket_mb=0)):
        for _ in range(3):
            out = fn(X, W)
            flat, p = (out, None) if type(out) is not tuple else out
            np.testing.assert_allclose(host(flat), (x @ w).reshape(-1), rtol=1e-12)
            if p is not None:
                np.testing.assert_allclose(host(p), x @ w, rtol=1e-12)
        reused.append(fn.traced.replay.reused)
    cpu_ranks = mesh.shape[0] > 1 and mesh.device_type == "cpu"
    assert (reused[0] > 0) == cpu_ranks and reused[1] == 0, reused


@pytest.mark.mpi
def test_compiled_adam_advances_its_step_count(mesh):
    eager, x, t = _model(mesh, seed=1)
    compiled, _, _ = _model(mesh, seed=1)
    se, sc = mt.optim.adam_init(eager), mt.optim.adam_init(compiled)
    step = mt.compile(_adam_step, bucket_cap_mb=0, first_bucket_mb=0)
    for _ in range(3):
        assert float(_adam_step(eager, x, t, se)) == float(step(compiled, x, t, sc))
    assert int(sc["step"]) == int(se["step"]) == 3
    for k, v in _full(eager).items():
        assert_all_ranks(np.array_equal(v, host(compiled[k])), k)


@pytest.mark.mpi
def test_a_collective_after_an_update_sees_the_updated_values(mesh):
    """sgd writes p in place, then p is gathered: the gather must not start early."""
    shard = [Shard(0)] + [R] * (mesh.ndim - 1)
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal((9, 4)) for _ in range(2)]

    def step(p, g):
        mt.optim.sgd([p], [g], 0.5)
        return p.redistribute(mesh, [R] * mesh.ndim)

    eager = [mt.distribute_tensor(a, mesh, shard) for a in arrays]
    compiled = [mt.distribute_tensor(a, mesh, shard) for a in arrays]
    fn = mt.compile(step)
    for _ in range(3):
        want, got = step(*eager).to_local(), fn(*compiled).to_local()
        assert_all_ranks(np.array_equal(want, got), "the gather read the parameter's old value")


@pytest.mark.mpi
def test_many_small_gradients_become_one_collective():
    mesh = mt.init_device_mesh((WORLD.size,))
    rng = np.random.default_rng(2)
    params = [mt.distribute_tensor(rng.standard_normal(512), mesh, [R]) for _ in range(100)]
    x = mt.distribute_tensor(rng.standard_normal((9, 512)), mesh, [Shard(0)])

    def loss(ps):
        total = (x * ps[0]).mean()
        for w in ps[1:]:
            total = total + (x * w).mean()     # stays a Partial sum: no collective
        return total

    def grads(params, x):
        return mt.grad(loss)(params)

    step = mt.compile(grads)
    want = grads(params, x)
    step(params, x)
    with mt.CommDebugMode() as eager:
        grads(params, x)
    with mt.CommDebugMode() as compiled:
        got = step(params, x)
    if WORLD.size > 1:
        assert eager.get_comm_counts() == {"all_reduce": 100}
        assert compiled.get_comm_counts() == {"all_reduce": 1}
        assert compiled.get_total_bytes() == eager.get_total_bytes()
    for w, g in zip(want, got):
        assert g.placements == w.placements
        assert np.allclose(g.to_local(), w.to_local(), rtol=1e-12, atol=1e-15)


@pytest.mark.mpi
def test_fused_gathers_and_reduce_scatters_unpack_each_member(mesh):
    """Uneven blocks (7 and 5 rows) of several tensors in one all-gather and one
    reduce-scatter: each member must come back in its place."""
    rng = np.random.default_rng(3)
    shard = [Shard(0)] + [R] * (mesh.ndim - 1)
    arrays = [rng.standard_normal(s) for s in [(7, 3), (5, 4), (7, 2, 2)]]
    split = [mt.distribute_tensor(a, mesh, shard) for a in arrays]
    terms = [mt.distribute_tensor(a, mesh, [Partial()] + [R] * (mesh.ndim - 1)) for a in arrays]

    def move(split, terms):
        gathered = [s.redistribute(mesh, [R] * mesh.ndim) for s in split]
        scattered = [relayout(p, tuple(shard)) for p in terms]
        return gathered, scattered

    step = mt.compile(move)
    step(split, terms)
    with mt.CommDebugMode() as comm:
        gathered, scattered = step(split, terms)
    if mesh.shape[0] > 1:
        assert comm.get_comm_counts() == {"all_gather": 1, "reduce_scatter": 1}
    for a, g, s in zip(arrays, gathered, scattered):
        assert np.array_equal(host(g.to_local()), a)
        assert np.allclose(host(s), a, rtol=1e-12)


@pytest.mark.mpi
def test_every_collective_kind_replays(mesh):
    """A NaN max (MPI user op, nonblocking), an all-to-all, gathers, and a constant operand."""
    rng = np.random.default_rng(6)
    a = rng.standard_normal((7, 5))
    a[2, 3] = np.nan
    shard = tuple([Shard(0)] + [R] * (mesh.ndim - 1))
    x = mt.distribute_tensor(a, mesh, shard)
    y = mt.distribute_tensor(rng.standard_normal((6, 9)), mesh, shard)
    ones = np.ones((9, 2))

    def f(x, y):
        return (x.max(axis=0) * 2 + 1, relayout(y, (Shard(1),) + shard[1:]) * 3,
                np.tanh(y) @ ones)

    step = mt.compile(f)
    want = [host(r) for r in f(x, y)]
    step(x, y)
    got = step(x, y)
    for w, g in zip(want, got):
        assert_all_ranks(np.array_equal(w, host(g), equal_nan=True), f"{w} != {g}")


@pytest.mark.mpi
def test_new_signatures_retrace(mesh):
    shard = [Shard(0)] + [R] * (mesh.ndim - 1)
    step = mt.compile(lambda x, scale: (x * scale).sum(axis=0))
    a, b = np.arange(12.0).reshape(6, 2), np.arange(15.0).reshape(5, 3)
    for array, scale, traces in [(a, 2.0, 1), (a, 2.0, 1), (b, 2.0, 2), (a, 3.0, 3), (a, 2.0, 3)]:
        x = mt.distribute_tensor(array, mesh, shard)
        assert np.allclose(host(step(x, scale)), (array * scale).sum(axis=0))
        assert step.trace_count() == traces
    x = mt.distribute_tensor(a, mesh, [R] * mesh.ndim)
    step(x, 2.0)
    assert step.trace_count() == 4


@pytest.mark.mpi
def test_reading_values_while_tracing_is_refused(mesh):
    x = mt.distribute_tensor(np.arange(6.0), mesh, [R] * mesh.ndim)

    def branchy(x):
        return x * 2 if x.sum() > 0 else x

    for fn in (branchy, lambda x: x.to_local() * 2):
        with pytest.raises(TypeError, match="mt.compile: .* reads DTensor values while tracing"):
            mt.compile(fn)(x)
    assert float((x * 2).sum()) == 30.0   # eager dispatch is untouched afterwards


@pytest.mark.mpi
def test_differentiating_a_compiled_function_is_refused(mesh):
    x = mt.distribute_tensor(np.arange(6.0), mesh, [R] * mesh.ndim)
    inner = mt.compile(lambda x: (x * x).sum())
    with pytest.raises(TypeError, match="take the gradient inside"):
        mt.grad(inner)(x)


@pytest.mark.mpi
def test_check_mode_agrees_on_every_bucket(mesh):
    """Check mode fingerprints every bucket before it runs and changes no result."""
    params, x, t = _model(mesh, seed=4)
    eager = {k: mt.distribute_tensor(host(v), mesh, v.placements)
             for k, v in params.items()}
    step = mt.compile(_sgd_step)
    step(params, x, t)
    _sgd_step(eager, x, t)
    mt.set_checks(True)
    try:
        value = float(step(params, x, t))
    finally:
        mt.set_checks(False)
    want = float(_sgd_step(eager, x, t))
    assert_all_ranks(np.isclose(value, want, rtol=1e-12), f"checked loss {value} != {want}")
    for k, v in _full(eager).items():
        assert_all_ranks(np.allclose(v, host(params[k]), rtol=1e-12), k)


@pytest.mark.mpi
def test_graph_explain_and_trace_file(mesh):
    params, x, t = _model(mesh, seed=5)
    step = mt.compile(_sgd_step)
    step(params, x, t)
    step(params, x, t)
    text = str(step.graph)
    assert "matmul(" in text and "sgd(" in text and "(in place)" in text
    report = mt.explain(step, params, x, t)
    assert 0.0 <= report.hidden_fraction <= 1.0
    assert sum(r["members"] for r in report.rows) == report.ncollectives
    path = WORLD.bcast(os.path.join(tempfile.mkdtemp(), "trace.json") if WORLD.rank == 0 else None)
    step.export_trace(path)
    if WORLD.rank == 0:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        spans = [e for e in events if e["ph"] == "X"]
        assert {e["pid"] for e in spans} == set(range(WORLD.size))
        assert {e["cat"] for e in spans} == ({"compute", "collective"} if report.ncollectives
                                              else {"compute"})
        assert all(e["dur"] >= 0 for e in spans)


@pytest.mark.mpi
@pytest.mark.parametrize("model", ["default", "network"])
def test_auto_buckets_are_the_same_on_every_rank_and_results_match_eager(mesh, model):
    """bucket_cap_mb="auto" (the default) decides from timings, which differ by rank: the
    ranks agree on them first, so they split alike; with the default model (shared memory)
    and with a network's (links move behind compute: buckets leave as gradients appear)."""
    from mtensor.cost.model import CostModel, get_cost_model, set_cost_model
    before = get_cost_model()
    if model == "network":
        set_cost_model(CostModel(alpha=12e-6, beta=1.2e8, overlap_rate=0.4))
    try:
        params, x, t = _model(mesh, seed=6)
        eager = {k: mt.distribute_tensor(host(v), mesh, v.placements)
                 for k, v in params.items()}
        step = mt.compile(_sgd_step)
        for _ in range(3):
            want, got = float(_sgd_step(eager, x, t)), float(step(params, x, t))
            assert_all_ranks(np.isclose(want, got, rtol=1e-12), f"loss {got} != {want}")
        traced = step.traced
        everyone = WORLD.allgather((traced.buckets, traced.seconds))
        assert_all_ranks(all(e == everyone[0] for e in everyone), "ranks chose differently")
        report = mt.explain(step, params, x, t)
        assert report.chosen_by.startswith("auto")
        assert sorted(m for b in traced.buckets for m in b) == [
            i for i, n in enumerate(traced.graph.nodes) if n.kind == "collective"]
        for k, v in _full(eager).items():
            assert_all_ranks(np.allclose(v, host(params[k]), rtol=1e-12), k)
    finally:
        set_cost_model(before)
