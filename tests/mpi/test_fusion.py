"""Composites on the tape (``autodiff.fusion``): layer norm, GELU, softmax and logsumexp
written in plain numpy get their hand-derived backward, on every layout (the normalised
axis split too): gradients equal the unfused ones to rounding and numpy's finite
differences, the collectives stay those of the unfused backward or fewer, eager and
compiled agree bit for bit, and a composite whose inner value is read elsewhere is left
unfused (its gradient still right)."""
import itertools
import math
import sys

import numpy as np
import pytest
from launcher import ROOT
from mpi_helpers import assert_all_ranks, host, numeric_grads

import mtensor as mt
from mtensor import Replicate, Shard
from mtensor.autodiff import fusion

sys.path.insert(0, str(ROOT / "examples"))
import lm_model as lm  # noqa: E402  (from examples/, put on the path above)


def layer_norm(x, g, b):
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    return xc / np.sqrt(var + 1e-5) * g + b


def layer_norm_np_var(x, g, b):
    rstd = 1 / np.sqrt(np.var(x, axis=-1, keepdims=True) + 1e-5)
    return (x - x.mean(axis=-1, keepdims=True)) * rstd * g + b


def gelu(x, g, b):
    u = x * g
    return 0.5 * u * (1 + np.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3))) + b


def softmax(x, g, b):
    s = x * g
    e = np.exp(s - mt.stop_gradient(s.max(axis=-1, keepdims=True)))
    return e / e.sum(axis=-1, keepdims=True) + b


def log_softmax(x, g, b):
    s = x * g
    m = s.max(axis=-1, keepdims=True)
    return s - (np.log(np.exp(s - m).sum(axis=-1, keepdims=True)) + m) + b


COMPOSITES = {"layer_norm": layer_norm, "layer_norm (np.var)": layer_norm_np_var,
              "gelu": gelu, "softmax": softmax, "logsumexp": log_softmax}
NAMES = {"layer_norm (np.var)": "layer_norm", "log_softmax": "logsumexp"}


def _loss(fn):
    def loss(p, x):
        out = fn(x, p["g"], p["b"])
        w = np.linspace(0.5, 1.5, math.prod(out.shape)).reshape(out.shape)
        return (out * w).sum()
    return loss


def _counted(fn):
    """``fn`` and the composites each call fused."""
    found = []
    original = fusion.fuse

    def counting(*args, **kwargs):
        found.append(original(*args, **kwargs))
        return found[-1]

    def run(*args, **kwargs):
        fusion.fuse = counting
        try:
            return fn(*args, **kwargs)
        finally:
            fusion.fuse = original
    return run, found


def _setup(mesh, x_place, seed=0, shape=(5, 3, 7)):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    g, b = 1 + 0.1 * rng.standard_normal(shape[-1]), 0.1 * rng.standard_normal(shape[-1])
    rep = [Replicate()] * mesh.ndim
    p = {"g": mt.distribute_tensor(g, mesh, rep), "b": mt.distribute_tensor(b, mesh, rep)}
    return (x, g, b), p, mt.distribute_tensor(x, mesh, x_place)


def _placements(mesh):
    """The input split on each of its dims over the last mesh dim, or replicated."""
    lead = [Replicate()] * (mesh.ndim - 1)
    return [lead + [p] for p in (Replicate(), Shard(0), Shard(1), Shard(2))]


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_fused_gradients_equal_unfused_and_numpy(mesh, name):
    fn = COMPOSITES[name]
    bad = []
    for place in _placements(mesh):
        (x, g, b), p, X = _setup(mesh, place)
        fused, found = _counted(mt.value_and_grad(_loss(fn), argnums=(0, 1)))
        (v1, (g1, gx1)) = fused(p, X)
        v0, (g0, gx0) = mt.value_and_grad(_loss(fn), argnums=(0, 1), fuse=False)(p, X)
        num_x, num_g, num_b = numeric_grads(fn, [x, g, b])
        if found != [1]:
            bad.append(f"{place}: fused {found}")
        for what, a, ref, num in (("x", gx1, gx0, num_x), ("g", g1["g"], g0["g"], num_g),
                                  ("b", g1["b"], g0["b"], num_b)):
            if a.placements != ref.placements:
                bad.append(f"{place} {what}: laid out {a.placements} vs {ref.placements}")
            scale = np.abs(host(ref)).max()
            if np.abs(host(a) - host(ref)).max() > 1e-12 * scale:
                bad.append(f"{place} {what}: fused vs unfused")
            if np.abs(host(a) - num).max() > 1e-6 * max(scale, 1):
                bad.append(f"{place} {what}: vs finite differences")
        if float(v1) != float(v0):
            bad.append(f"{place}: values differ")
    assert_all_ranks(not bad, "; ".join(bad))


@pytest.mark.parametrize("name", ["layer_norm", "softmax", "logsumexp"])
def test_fused_backward_moves_no_more_than_the_unfused(mesh, name):
    """The normalised axis split over the last mesh dim: the fused backward's collectives
    are no more (by count and bytes) than autodiff's of the unfused ops."""
    counts = []
    for fuse in (True, False):
        _, p, X = _setup(mesh, [Replicate()] * (mesh.ndim - 1) + [Shard(2)])
        step = mt.value_and_grad(_loss(COMPOSITES[name]), argnums=(0, 1), fuse=fuse)
        step(p, X)
        with mt.CommDebugMode() as comm:
            step(p, X)
        counts.append((comm.get_total_counts(), sum(comm.get_comm_bytes().values())))
    (fused_calls, fused_bytes), (calls, nbytes) = counts
    assert_all_ranks(fused_calls <= calls and fused_bytes <= nbytes, f"{counts}")


def test_gpt_fuses_every_composite_and_compiles_bit_for_bit(mesh):
    """The GPT of examples/lm_model.py: 5 layer norms, 2 GELUs, 2 softmaxes and the loss's
    logsumexp fuse; the gradients equal the unfused ones to rounding, and the compiled
    step's replay equals its eager step bit for bit."""
    tp = mesh.shape[-1]
    grid = mt.init_device_mesh((mesh.size() // tp, tp), mesh_dim_names=("dp", "tp"))
    params = lm.init_params(grid, 2, 12, 4, 6)
    ids = np.random.default_rng(3).integers(0, lm.VOCAB, (5, 7))
    x, y = lm.distribute(lm.one_hot(ids), grid)
    fused, found = _counted(mt.value_and_grad(lm.loss))
    v1, g1 = fused(params, x, y)
    v0, g0 = mt.value_and_grad(lm.loss, fuse=False)(params, x, y)
    step = mt.compile(mt.value_and_grad(lm.loss))
    step(params, x, y)
    v2, g2 = step(params, x, y)
    far = [k for k in g0 if np.abs(host(g1[k]) - host(g0[k])).max()
           > 1e-12 * max(1.0, np.abs(host(g0[k])).max())]
    replay = [k for k in g1 if not np.array_equal(host(g1[k]), host(g2[k]))]
    assert_all_ranks(found == [10] and not far and not replay and float(v1) == float(v2)
                     and abs(float(v1) - float(v0)) < 1e-14 * abs(float(v0)),
                     f"fused {found}, far {far}, replay differs {replay}")


def test_an_inner_value_read_elsewhere_keeps_the_ops_apart(mesh):
    def loss(p, x):
        xc = x - x.mean(axis=-1, keepdims=True)
        y = xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + 1e-5) * p["g"] + p["b"]
        return (y * y).sum() + (xc * 3.0).sum()        # xc read outside the layer norm

    _, p, X = _setup(mesh, [Replicate()] * mesh.ndim)
    fused, found = _counted(mt.value_and_grad(loss, argnums=(0, 1)))
    _, (g1, gx1) = fused(p, X)
    _, (g0, gx0) = mt.value_and_grad(loss, argnums=(0, 1), fuse=False)(p, X)
    same = all(np.array_equal(host(a), host(b)) for a, b in
               itertools.chain([(gx1, gx0)], ((g1[k], g0[k]) for k in g0)))
    assert_all_ranks(found == [0] and same, f"fused {found}, same {same}")


def test_a_followed_shift_is_not_a_constant(mesh):
    """softmax(x - s) with ``s`` a differentiated value of the full shape: the shift's own
    gradient is wanted, so the ops stay apart."""
    def loss(p, x):
        e = np.exp(x - p["s"])
        return (e / e.sum(axis=-1, keepdims=True) * np.arange(7.0)).sum()

    rng = np.random.default_rng(1)
    p = {"s": mt.distribute_tensor(rng.standard_normal((5, 3, 7)), mesh,
                                   [Replicate()] * mesh.ndim)}
    X = mt.distribute_tensor(rng.standard_normal((5, 3, 7)), mesh, [Replicate()] * mesh.ndim)
    fused, found = _counted(mt.value_and_grad(loss, argnums=(0, 1)))
    _, (g1, _) = fused(p, X)
    _, (g0, _) = mt.value_and_grad(loss, argnums=(0, 1), fuse=False)(p, X)
    assert_all_ranks(found == [0] and np.array_equal(host(g1["s"]), host(g0["s"])),
                     f"fused {found}")


def test_remat_fuses_its_composites_and_moves_what_the_plain_walk_moves(mesh):
    """A remat'd block's nested backward walk fuses its layer norm (seeded by the cotangent
    of the block's output) and runs the plain walk's collectives plus the forward it runs
    again (a seed read as a use count once reduced a Partial cotangent: one more all-reduce
    per block)."""
    _, p, X = _setup(mesh, [Replicate()] * (mesh.ndim - 1) + [Shard(2)])
    counts, grads = [], []
    for run in (layer_norm, mt.remat(layer_norm)):
        step, found = _counted(mt.value_and_grad(_loss(run), argnums=(0, 1)))
        with mt.CommDebugMode() as comm:
            _, (g, gx) = step(p, X)
        counts.append((comm.get_total_counts(), found))
        grads.append([host(gx), host(g["g"]), host(g["b"])])
    with mt.CommDebugMode() as comm:
        layer_norm(X, p["g"], p["b"])            # the forward remat runs again
    again = comm.get_total_counts()
    same = all(np.abs(a - b).max() <= 1e-12 * max(1.0, np.abs(b).max())
               for a, b in zip(*grads))
    assert_all_ranks(counts[1][0] == counts[0][0] + again and counts[1][1] == [0, 1] and same,
                     f"{counts}, forward again {again}, same {same}")


def test_remat_reads_a_partial_seed_as_is(mesh):
    """Two Megatron blocks remat'd: the cotangent seeding block 0's nested walk is Partial
    on tp, and the step moves what the plain one does (the forwards run again read the
    reduced twins the first ones left; a seed read as a use count once reduced the
    cotangent: one all-reduce more)."""
    rng = np.random.default_rng(2)
    rep = [Replicate()] * (mesh.ndim - 1)
    X = mt.distribute_tensor(rng.standard_normal((6, 8)), mesh, rep + [Replicate()])
    params = [{"a": mt.distribute_tensor(rng.standard_normal((8, 12)), mesh, rep + [Shard(1)]),
               "b": mt.distribute_tensor(rng.standard_normal((12, 8)), mesh, rep + [Shard(0)])}
              for _ in range(2)]

    def block(blk, h):
        return np.tanh(h @ blk["a"]) @ blk["b"]

    def loss_with(run):
        def loss(params, x):
            for blk in params:
                x = run(blk, x)
            return (x * x).sum()
        return loss

    counts = []
    for run in (block, mt.remat(block)):
        with mt.CommDebugMode() as comm:
            mt.value_and_grad(loss_with(run))(params, X)
        counts.append(comm.get_total_counts())
    assert_all_ranks(counts[0] == counts[1], f"{counts}")
