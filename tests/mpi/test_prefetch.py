"""Compiled ZeRO-3 steps over real MPI: parameters split over dp, gathered where a matmul
needs them; every prefetch depth and resharding choice gives the eager step's values bit
for bit, resharding gathers again in the backward (counted), and the memory budget decides
it the same way on every rank."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host

import mtensor as mt
from mtensor import Replicate, Shard

RNG = np.random.default_rng(38)
LAYERS, D, BATCH = 3, 16, 512
WEIGHTS = [RNG.standard_normal((D, D)) / 4 for _ in range(LAYERS)]
X = RNG.standard_normal((BATCH, D))


def _loss(p, x):
    h = x
    for i in range(LAYERS):
        h = np.tanh(h @ p[f"w{i}"])
    return (h * h).mean()


def _step(p, x):
    value, g = mt.value_and_grad(_loss)(p, x)
    mt.optim.sgd(p, g, 0.1)
    return value


def _zero3(mesh):
    dp = [Shard(0)] + [Replicate()] * (mesh.ndim - 1)
    return ({f"w{i}": mt.distribute_tensor(w, mesh, dp) for i, w in enumerate(WEIGHTS)},
            mt.distribute_tensor(X, mesh, dp))


OPTIONS = [dict(), dict(prefetch=0), dict(prefetch=2, overlap=True), dict(prefetch=None),
           dict(reshard_after_forward=True, overlap=True),
           dict(reshard_after_forward=True, prefetch=0), dict(memory_budget=1)]


@pytest.mark.mpi
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in
                                                                     o.items()) or "default")
def test_every_prefetch_choice_replays_the_eager_step(mesh, options):
    eager, x = _zero3(mesh)
    compiled, _ = _zero3(mesh)
    step = mt.compile(_step, **options)
    for _ in range(3):
        assert float(_step(eager, x)) == float(step(compiled, x))
    for name in eager:
        assert_all_ranks(np.array_equal(host(eager[name]), host(compiled[name])), name)
    chosen = step.traced.prefetch
    if mesh.shape[0] == 1:
        assert chosen.gathers == 0
        return
    assert chosen.gathers >= LAYERS, str(step.graph)   # the cost model gathered the weights
    resharded = options.get("reshard_after_forward") is True or "memory_budget" in options
    assert chosen.resharded == resharded
    with mt.CommDebugMode() as comm:
        step(compiled, x)
    gathers = [r for r in comm.log if r.collective == "all_gather" and r.mesh_dim == 0]
    backward = [r for r in gathers if r.phase == "backward"]
    assert_all_ranks(bool(backward) == resharded, f"{len(backward)} gathers in the backward")
    assert "parameter gathers" in str(step.explain())


@pytest.mark.mpi
def test_a_budget_that_holds_the_step_keeps_the_gathered_copies(mesh):
    params, x = _zero3(mesh)
    step = mt.compile(_step, memory_budget="1GiB")
    step(params, x)
    assert not step.traced.prefetch.resharded
    assert "within memory_budget" in str(step.traced.prefetch) or mesh.shape[0] == 1


@pytest.mark.parametrize("bad, said", [(dict(prefetch=-1), "prefetch must be"),
                                       (dict(prefetch=True), "prefetch must be"),
                                       (dict(reshard_after_forward="yes"), "reshard_after"),
                                       (dict(memory_budget="4 parsecs"), "not a size")])
def test_bad_options_are_refused_before_anything_runs(bad, said):
    with pytest.raises((TypeError, ValueError), match=said):
        mt.compile(_step, **bad)
