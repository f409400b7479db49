"""The byte-level GPT of examples/train_lm.py on a (dp, tp) mesh: Megatron's collectives
block by block (counted with CommDebugMode's regions), numpy's loss, and gradients that
match finite differences of the numpy model."""
import sys

import numpy as np
import pytest
from launcher import ROOT
from mpi_helpers import WORLD, assert_all_ranks, host

import mtensor as mt

sys.path.insert(0, str(ROOT / "examples"))
import lm_model as lm  # noqa: E402  (from examples/, put on the path above)

LAYERS, D, HEADS, SEQ, BATCH = 2, 16, 4, 32, 8   # B * SEQ > 130: see the test of the bill


def _mesh():
    n = WORLD.size
    return mt.init_device_mesh((2, n // 2), mesh_dim_names=("dp", "tp"))


def _data(seed=0):
    return lm.one_hot(np.random.default_rng(seed).integers(0, lm.VOCAB, (BATCH, SEQ + 1)))


def _distributed(mesh, x, y):
    return (lm.init_params(mesh, LAYERS, D, HEADS, SEQ), *lm.distribute((x, y), mesh))


@pytest.mark.mpi
def test_each_block_runs_one_all_reduce_on_tp_forward_and_backward():
    """Per attention and per MLP block: one all-reduce on tp in the forward and one in the
    backward (the all-reduce that completes a block's output runs where the next block's
    layer norm first reads it whole); the loss: two all-reduces of one value per token
    (the row maximum and the sum of exponentials); on dp: one all-reduce per gradient."""
    if WORLD.size not in (4, 8):
        pytest.skip("a (2, n/2) dp x tp mesh needs 4 or 8 ranks")
    mesh = _mesh()
    params, x, y = _distributed(mesh, *_data())
    with mt.CommDebugMode() as comm:
        mt.value_and_grad(lm.loss)(params, x, y)
    by_region = comm.get_counts_by_region()
    tp, dp = ("all_reduce", 1), ("all_reduce", 0)
    for i in range(LAYERS):
        for part, params_in in (("attention", 6), ("mlp", 6)):
            region = f"block{i}/{part}"
            assert by_region[(region, "forward")] == {tp: 1}, (region, by_region)
            assert by_region[(region, "backward")] == {tp: 1, dp: params_in}, (region, by_region)
    assert by_region[("head", "forward")] == {tp: 1}
    assert by_region[("head", "backward")] == {tp: 1, dp: 3}     # lnf_g, lnf_b, head
    assert by_region[("embedding", "backward")] == {dp: 2}        # wte, wpe
    assert by_region[("loss", "forward")] == {tp: 2}
    assert not [r for r in comm.log if r.region == "loss" and r.phase == "backward"]
    per_token = [r.shape for r in comm.log if r.region == "loss"]
    assert per_token == [(BATCH // 2, SEQ, 1)] * 2
    # nothing else: from 130 tokens on, the default cost model once priced gathering the
    # one-hot targets over dp below cutting the loss's replicated cotangent
    assert {r.collective for r in comm.log} == {"all_reduce"}


@pytest.mark.mpi
def test_loss_is_numpys_and_gradients_match_finite_differences():
    if WORLD.size not in (4, 8):
        pytest.skip("a (2, n/2) dp x tp mesh needs 4 or 8 ranks")
    mesh = _mesh()
    x, y = _data(seed=1)
    reference = lm.init_params(None, LAYERS, D, HEADS, SEQ)
    params, xs, ys = _distributed(mesh, x, y)
    value, grads = mt.value_and_grad(lm.loss)(params, xs, ys)
    assert_all_ranks(abs(float(value) - lm.loss(reference, x, y)) < 1e-12, "loss")
    rng, eps = np.random.default_rng(2), 1e-5
    for name in ("wte", "wpe", "wq0", "wo1", "w11", "b10", "ln2_g1", "lnf_b", "head"):
        v = rng.standard_normal(reference[name].shape)
        shifted = [dict(reference, **{name: reference[name] + s * eps * v}) for s in (1, -1)]
        numeric = (lm.loss(shifted[0], x, y) - lm.loss(shifted[1], x, y)) / (2 * eps)
        exact = float(np.sum(host(grads[name]) * v))
        assert grads[name].placements == params[name].placements
        assert_all_ranks(abs(exact - numeric) < 1e-7 * max(1.0, abs(numeric)), name)


@pytest.mark.mpi
def test_a_compiled_step_bills_the_same_blocks_and_fuses_the_gradient_reductions():
    """The replay reports each collective in the region and phase it was traced in: the tp
    all-reduces block by block as eager runs them; the dp gradient all-reduces fused into
    buckets (each billed to its first member's region), the same bytes in fewer calls."""
    if WORLD.size not in (4, 8):
        pytest.skip("a (2, n/2) dp x tp mesh needs 4 or 8 ranks")
    params, x, y = _distributed(_mesh(), *_data())
    eager, step = mt.value_and_grad(lm.loss), mt.compile(mt.value_and_grad(lm.loss))
    step(params, x, y)
    logs = []
    for run in (eager, step):
        with mt.CommDebugMode() as comm:
            run(params, x, y)
        logs.append(comm.log)
    tp = [[(r.region, r.phase, r.collective) for r in log if r.mesh_dim == 1] for log in logs]
    assert tp[0] == tp[1]
    dp = [[r for r in log if r.mesh_dim == 0] for log in logs]
    assert all(r.phase == "backward" for r in dp[1]) and 0 < len(dp[1]) < len(dp[0])
    assert sum(r.bytes for r in dp[1]) == sum(r.bytes for r in dp[0])

