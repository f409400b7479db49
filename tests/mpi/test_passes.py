"""``mt.compile``'s graph passes under MPI: the exact passes replay a training step (the GPT
of examples/lm_model.py with AdamW: in-place updates among the ops) bit for bit as eager
runs it, step after step (on the fake GPU's meshes with its elementwise chains fused into
generated kernels); ``passes="fast"`` stays within rounding; the passes change no
collective; ``explain`` reports each pass; a bad ``passes=`` is refused on every rank."""
import sys

import numpy as np
import pytest
from launcher import ROOT
from mpi_helpers import assert_all_ranks, assert_each_raises, host

import mtensor as mt

sys.path.insert(0, str(ROOT / "examples"))
import lm_model as lm  # noqa: E402  (from examples/, put on the path above)


def _grid(mesh):
    tp = mesh.shape[-1]
    return mt.init_device_mesh((mesh.size() // tp, tp), mesh_dim_names=("dp", "tp"),
                               device_type=mesh.device_type)


def _setup(grid):
    params = lm.init_params(grid, 2, 12, 4, 6)
    ids = np.random.default_rng(5).integers(0, lm.VOCAB, (5, 7))
    return params, lm.distribute(lm.one_hot(ids), grid)


def _train_step(params, state, x, y):
    loss, grads = mt.value_and_grad(lm.loss)(params, x, y)
    mt.optim.adamw(params, grads, state, 1e-2, weight_decay=0.1)
    return loss


@pytest.mark.parametrize("passes", ["exact", None, ("cse", "dce")])
def test_exact_passes_replay_training_steps_bit_for_bit(mesh, passes):
    grid = _grid(mesh)
    (eager, (x, y)), (fast, _) = _setup(grid), _setup(grid)
    se, sf = mt.optim.adam_init(eager), mt.optim.adam_init(fast)
    step = mt.compile(_train_step, passes=passes)
    losses = [(float(_train_step(eager, se, x, y)), float(step(fast, sf, x, y)))
              for _ in range(3)]
    same = [k for k in eager if np.array_equal(host(eager[k]), host(fast[k]))]
    assert_all_ranks(all(a == b for a, b in losses) and len(same) == len(eager),
                     f"losses {losses}; parameters differing: {set(eager) - set(same)}")


def test_fast_passes_stay_within_rounding_and_move_the_same_bytes(mesh):
    grid = _grid(mesh)
    params, (x, y) = _setup(grid)
    exact = mt.compile(mt.value_and_grad(lm.loss), passes="exact")
    fast = mt.compile(mt.value_and_grad(lm.loss), passes="fast")
    counts = []
    for step in (exact, fast):
        step(params, x, y)
        with mt.CommDebugMode() as comm:
            loss, grads = step(params, x, y)
        counts.append((comm.get_comm_counts(), comm.get_comm_bytes(), float(loss), grads))
    (c0, b0, l0, g0), (c1, b1, l1, g1) = counts
    far = [k for k in g0 if np.abs(host(g0[k]) - host(g1[k])).max()
           > 1e-12 * max(1.0, np.abs(host(g0[k])).max())]
    assert_all_ranks(c0 == c1 and b0 == b1 and abs(l0 - l1) <= 1e-13 * abs(l0) and not far,
                     f"{c0} vs {c1}, {b0} vs {b1}, {l0} vs {l1}, far {far}")


def test_explain_reports_each_pass(mesh):
    """A loss that computes ``np.exp(x)`` twice (merged: the first is still read) and whose
    backward starts from a constant seed (folded); the table shows both."""
    def loss(w, x):
        return (np.exp(x) * w * np.exp(x)).sum()

    rep = [mt.Replicate()] * mesh.ndim
    w, x = (mt.distribute_tensor(np.linspace(0, 1, 24).reshape(4, 6) + k, mesh, rep)
            for k in range(2))
    step = mt.compile(mt.value_and_grad(loss))
    step(w, x)
    text = str(step.explain())
    reports = {r.name: r for r in step.traced.passes}
    host = mesh.device_type == "cpu"       # the fake GPU's seed is no private constant
    ok = (list(reports) == ["fold", "simplify", "cse", "dce", "fuse", "inplace"]
          and (reports["fold"].counts.get("folded", 0) > 0 or not host)
          and reports["cse"].counts.get("merged", 0) > 0
          and reports["cse"].nodes_after < reports["cse"].nodes_before
          and "graph passes" in text and "merged" in text and ("folded" in text or not host))
    assert_all_ranks(ok, text[-2000:])
    off = mt.compile(mt.value_and_grad(loss), passes=None)
    off(w, x)
    assert_all_ranks("graph passes: none" in str(off.explain()), "no passes reported")


def test_the_fuse_pass_fuses_the_gpt_on_gpu_meshes_only(mesh):
    grid = _grid(mesh)
    params, (x, y) = _setup(grid)
    step = mt.compile(mt.value_and_grad(lm.loss))
    step(params, x, y)
    fused = {r.name: r for r in step.traced.passes}["fuse"].counts.get("kernels", 0)
    assert_all_ranks(fused > 0 if mesh.device_type == "cuda" else fused == 0, f"{fused}")


def test_a_bad_passes_argument_is_refused(mesh):
    assert_each_raises({
        "unknown": (lambda: mt.compile(lm.loss, passes=("cse", "vectorise")), ValueError,
                    "unknown passes ['vectorise']"),
        "mode": (lambda: mt.compile(lm.loss, passes="fastest"), ValueError, "\"exact\""),
    })
