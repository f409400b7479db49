"""``mt.remat``: gradients equal those without it (a tensor-parallel MLP on every mesh, the
GPT of examples/lm_model.py with each transformer block rematerialised on a (dp, tp) mesh),
the tape holds fewer bytes, the recompute's collectives are billed to the block's regions
in the backward, a compiled step replays it as eager runs it, pytrees, nesting and the
errors."""
import sys

import numpy as np
import pytest
from launcher import ROOT
from mpi_helpers import WORLD, assert_all_ranks, assert_each_raises, host

import mtensor as mt
from mtensor import Replicate, Shard
from mtensor.debug import region
from mtensor.pytree import flatten

sys.path.insert(0, str(ROOT / "examples"))
import lm_model as lm  # noqa: E402  (from examples/, put on the path above)


def _close(a, b, tol=1e-12) -> bool:
    """Same placements and values within ``tol`` (relative to the largest)."""
    if a.placements != b.placements:
        return False
    x, y = host(a), host(b)
    return bool(np.abs(x - y).max(initial=0) <= tol * max(1.0, np.abs(x).max(initial=0)))


def _all_close(a: dict, b: dict, tol=1e-12) -> list:
    return [k for k in a if not _close(a[k], b[k], tol)]


# --- a tensor-parallel MLP: the batch split on mesh dim 0, the weights on the last one ----

def _mlp_setup(mesh, layers=3, batch=13, d=6, hidden=10, seed=0):
    rng, rest = np.random.default_rng(seed), [Replicate()] * (mesh.ndim - 1)
    col, row = [Replicate()] * (mesh.ndim - 1) + [Shard(1)], [Replicate()] * (mesh.ndim - 1) + [Shard(0)]
    params = [{"a": mt.distribute_tensor(rng.standard_normal((d, hidden)) / 3, mesh, col),
               "b": mt.distribute_tensor(rng.standard_normal((hidden, d)) / 3, mesh, row)}
              for _ in range(layers)]
    x, t = (mt.distribute_tensor(rng.standard_normal((batch, d)), mesh, [Shard(0)] + rest)
            for _ in range(2))
    return params, x, t


def _layer(p, h):
    return h + np.tanh(np.tanh(h @ p["a"]) @ p["b"])


def _deep(params, h):
    for p in params:
        h = _layer(p, h)
    return h


def _mlp_loss(how, held):
    def loss(params, x, t):
        if how == "per_layer":
            h = x
            for p in params:
                h = mt.remat(_layer)(p, h)
        else:
            h = (mt.remat(_deep) if how == "whole" else _deep)(params, x)
        held.append(mt.debug.tape_bytes())
        return ((h - t) ** 2).mean()
    return loss


@pytest.mark.mpi
def test_mlp_gradients_equal_without_remat_and_the_tape_holds_less(mesh):
    params, x, t = _mlp_setup(mesh)
    held, results = [], {}
    for how in ("plain", "per_layer", "whole"):
        results[how] = mt.value_and_grad(_mlp_loss(how, held), argnums=(0, 1))(params, x, t)
    (value, (g, gx)) = results["plain"]
    for how in ("per_layer", "whole"):
        v, (gr, gxr) = results[how]
        bad = [f"{i}{k}" for i in range(len(g)) for k in _all_close(g[i], gr[i])]
        assert_all_ranks(float(v) == float(value) and not bad and _close(gx, gxr),
                         f"{how}: gradients differ from those without remat: {bad}")
    plain, per_layer, whole = held
    # the whole deep block keeps its input and output only: far below every activation
    assert_all_ranks(whole * 2 <= plain and per_layer < plain, f"tape bytes {held}")
    assert mt.debug.tape_bytes() == 0


@pytest.mark.mpi
def test_outside_a_gradient_remat_is_the_function(mesh):
    params, x, _ = _mlp_setup(mesh)
    got, want = mt.remat(_deep)(params, x), _deep(params, x)
    assert_all_ranks(np.array_equal(host(got), host(want)) and got.placements == want.placements,
                     "remat outside value_and_grad")
    assert mt.remat(lambda a: a + 1)(2) == 3           # plain values pass through as well


@pytest.mark.mpi
def test_auto_shard_counts_a_remat_blocks_activations_as_not_kept():
    """auto_shard records the recompute as backward ops: its memory bill drops with remat,
    and the planned step gives eager's values."""
    mesh = mt.init_device_mesh((WORLD.size,))
    params, x, t = _mlp_setup(mesh, batch=16)
    params = [{k: v.redistribute(placements=[Replicate()]) for k, v in p.items()} for p in params]
    bills, bad = {}, []
    for how in ("plain", "whole"):
        step = mt.value_and_grad(_mlp_loss(how, []))
        plan = mt.auto_shard(step, params, x, t, mesh=mesh,
                             fixed={"x": x.placements, "t": t.placements})
        bills[how] = plan.bill.memory_bytes
        (v, g), (v0, g0) = plan.compile()(plan.distribute(params), x, t), step(params, x, t)
        bad += [how] * (abs(float(v) - float(v0)) > 1e-12 or any(
            not np.allclose(host(a[k]), host(b[k]), rtol=1e-12, atol=1e-14)
            for a, b in zip(g, g0) for k in a))
    assert_all_ranks(bills["whole"] < bills["plain"] and not bad, f"{bills}, {bad}")


# --- the GPT of examples/lm_model.py, each transformer block rematerialised -----------------

LAYERS, D, HEADS, SEQ, BATCH = 2, 16, 4, 32, 8
BLOCK = ["ln1_g", "ln1_b", "wq", "wk", "wv", "wo", "ln2_g", "ln2_b", "w1", "b1", "w2", "b2"]


def _gpt_mesh():
    n = WORLD.size
    dp = 2 if n >= 4 and n % 2 == 0 else 1
    return mt.init_device_mesh((dp, n // dp), mesh_dim_names=("dp", "tp"))


def _block(p, h):
    """One transformer block of lm_model.hidden, its parameters by their names in BLOCK."""
    with region("attention"):
        a = lm.layer_norm(h, p["ln1_g"], p["ln1_b"])
        h = h + lm.attention(a, p["wq"], p["wk"], p["wv"], p["wo"])
    with region("mlp"):
        a = lm.layer_norm(h, p["ln2_g"], p["ln2_b"])
        return h + lm.mlp(a, p["w1"], p["b1"], p["w2"], p["b2"])


def _gpt_loss(remat: bool, held: list):
    """lm_model.loss, its blocks called through ``mt.remat`` when ``remat``."""
    block = mt.remat(_block) if remat else _block

    def loss(params, x, y):
        with region("embedding"):
            h = x @ params["wte"] + params["wpe"][: x.shape[1]]
        for i in range(LAYERS):
            with region(f"block{i}"):
                h = block({k: params[f"{k}{i}"] for k in BLOCK}, h)
        with region("head"):
            z = lm.layer_norm(h, params["lnf_g"], params["lnf_b"]) @ params["head"]
        with region("loss"):
            top = mt.stop_gradient(z.max(axis=-1, keepdims=True))
            log_sum = np.log(np.exp(z - top).sum(axis=-1, keepdims=True)) + top
            out = (log_sum - (z * y).sum(axis=-1, keepdims=True)).mean()
        held.append(mt.debug.tape_bytes())
        return out
    return loss


def _gpt_inputs(mesh, seed=0):
    ids = np.random.default_rng(seed).integers(0, lm.VOCAB, (BATCH, SEQ + 1))
    return (lm.init_params(mesh, LAYERS, D, HEADS, SEQ), *lm.distribute(lm.one_hot(ids), mesh))


def _rebilled(plain: dict) -> dict:
    """The counts by region expected with remat, from those without: each block region's
    forward collectives run again in its backward (the recompute), and the parameters'
    gradients, complete when the walk leaves the block, are laid out (their dp all-reduce)
    in the region remat was called in."""
    want = {}
    for (where, phase), counts in plain.items():
        block = where.split("/")[0]
        for (name, dim), calls in counts.items():
            to = (block, phase) if phase == "backward" and dim == 0 and "/" in where else (where, phase)
            want.setdefault(to, {}).setdefault((name, dim), 0)
            want[to][(name, dim)] += calls
    for (where, phase), counts in plain.items():
        if phase == "forward" and where.startswith("block"):
            for key, calls in counts.items():
                back = want.setdefault((where, "backward"), {})
                back[key] = back.get(key, 0) + calls
    return want


@pytest.mark.mpi
def test_gpt_blocks_gradients_equal_without_remat_and_collectives_are_recomputed():
    mesh = _gpt_mesh()
    params, x, y = _gpt_inputs(mesh)
    held, out, comms = [], {}, {}
    for remat in (False, True):
        with mt.CommDebugMode() as comms[remat]:
            out[remat] = mt.value_and_grad(_gpt_loss(remat, held))(params, x, y)
    (v0, g0), (v1, g1) = out[False], out[True]
    bad = _all_close(g0, g1)
    assert_all_ranks(float(v0) == float(v1) and not bad, f"gradients differ: {bad}")
    assert all(g1[k].placements == params[k].placements for k in params)
    # the reference is lm_model's own loss: the same program
    v, g = mt.value_and_grad(lm.loss)(params, x, y)
    assert_all_ranks(float(v) == float(v0) and not _all_close(g, g0), "lm_model.loss")
    plain, remat = held
    assert_all_ranks(remat * 2 <= plain, f"tape bytes with remat {remat}, without {plain}")
    by_region = comms[True].get_counts_by_region()
    assert by_region == _rebilled(comms[False].get_counts_by_region()), by_region


@pytest.mark.mpi
@pytest.mark.parametrize("cap", [0, "auto"], ids=["unfused", "auto"])
def test_compiled_step_with_remat_equals_eager(cap):
    """The trace records the backward as it ran, the recompute included: the first call
    (tracing) and the replays give eager's values, on new data too."""
    mesh = _gpt_mesh()
    params, x, y = _gpt_inputs(mesh)
    eager = mt.value_and_grad(_gpt_loss(True, []))
    step = mt.compile(mt.value_and_grad(_gpt_loss(True, [])), bucket_cap_mb=cap)
    for seed in (0, 0, 1):
        _, x, y = _gpt_inputs(mesh, seed)
        (v, g), (vc, gc) = eager(params, x, y), step(params, x, y)
        tol = 0 if cap == 0 else 1e-12
        bad = _all_close(g, gc, tol)
        assert_all_ranks(abs(float(v) - float(vc)) <= tol * abs(float(v)) and not bad,
                         f"compiled (cap {cap}) differs from eager: {bad}")
    assert step.trace_count() == 1


# --- pytrees, nesting, several outputs, the errors ---------------------------------------

def _tree_fn(params, xs, scale, tag=None, *, power=2):
    """Pytree arguments with non-DTensor leaves (ints, str, None, a numpy array), keyword
    arguments, x twice in the tree, x itself among the outputs, a dict of outputs."""
    assert tag == "t" and isinstance(params["c"], np.ndarray)
    h = np.tanh((xs[0] + 2 * xs[1]) @ params["w"][0]) * scale + params["c"].sum()
    return {"h": h ** power, "pair": (h @ params["w"][1], 7), "same": xs[1]}


def _tree_loss(wrap):
    def loss(params, x):
        out = wrap(_tree_fn)(params, (x, x), 3, "t", power=3)
        inner = wrap(lambda p, h: wrap(_deep)(p, h) * 2)       # a remat inside a remat
        deep = inner(params["mlp"], out["pair"][0])
        return (out["h"].sum() + (deep ** 2).mean() + (out["same"] * x).sum()
                + out["pair"][1])
    return loss


@pytest.mark.mpi
def test_pytrees_keywords_several_outputs_and_nesting(mesh):
    rng, rest = np.random.default_rng(3), [Replicate()] * (mesh.ndim - 1)
    mlp, _, _ = _mlp_setup(mesh, layers=2)
    params = {"w": [mt.distribute_tensor(rng.standard_normal((6, 5)) / 3, mesh, [Shard(1)] + rest),
                    mt.distribute_tensor(rng.standard_normal((5, 6)) / 3, mesh, [Shard(0)] + rest)],
              "c": np.ones(2), "mlp": mlp}
    x = mt.distribute_tensor(rng.standard_normal((9, 6)), mesh, [Shard(0)] + rest)
    want = mt.value_and_grad(_tree_loss(lambda f: f), argnums=(0, 1))(params, x)
    got = mt.value_and_grad(_tree_loss(mt.remat), argnums=(0, 1))(params, x)
    (v0, (g0, gx0)), (v1, (g1, gx1)) = want, got
    pairs = list(zip(flatten(g0)[0], flatten(g1)[0]))
    bad = [k for k, (a, b) in enumerate(pairs) if (a is None) != (b is None)
           or a is not None and not _close(a, b)]
    assert_all_ranks(abs(float(v0) - float(v1)) <= 1e-12 * abs(float(v0)) and not bad
                     and _close(gx0, gx1) and g1["c"] is None and len(pairs) == 7,
                     f"pytree gradients: leaves {bad} differ")


@pytest.mark.mpi
def test_remat_refuses_what_it_cannot_differentiate(mesh):
    w = mt.distribute_tensor(np.ones((4, 3)), mesh, [Replicate()] * mesh.ndim)
    calls = []

    def changes(w):
        calls.append(1)
        return w * 2 if len(calls) == 1 else (w * 2, w * 3)
    assert_each_raises({
        "a float": (lambda: mt.grad(lambda w: mt.remat(lambda w: 3.0)(w) * w.sum())(w),
                    TypeError, "the function must return a DTensor or a pytree"),
        "no DTensor in a tuple": (lambda: mt.grad(lambda w: mt.remat(lambda w: (1, None))(w)[0]
                                                  * w.sum())(w),
                                  TypeError, "it returned tuple (leaves: NoneType, int)"),
        "not pure": (lambda: mt.grad(lambda w: mt.remat(changes)(w).sum())(w),
                     RuntimeError, "the function must be pure"),
    })
