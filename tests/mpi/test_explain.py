"""mt.explain's comm bill against what CommDebugMode counts, and mt.visualize_sharding's
grid against the blocks each rank really holds."""
import re

import numpy as np
import pytest
from mpi_helpers import WORLD

import mtensor as mt
from mtensor import Partial, Replicate, Shard
from mtensor.placement import local_bounds

R = Replicate()


def _megatron(mesh):
    rest = [R] * (mesh.ndim - 1)
    rng = mt.random.default_rng(0)
    x = rng.standard_normal((8, 12), mesh=mesh, placements=[R] + rest)
    a = rng.standard_normal((12, 16), mesh=mesh, placements=[Shard(1)] + rest)
    b = rng.standard_normal((16, 12), mesh=mesh, placements=[Shard(0)] + rest)
    return x, a, b


def _block(x, a, b):
    return (np.tanh(x @ a) @ b).redistribute(x.device_mesh, [R] * x.device_mesh.ndim)


@pytest.mark.mpi
def test_explain_lists_strategies_and_the_collectives_that_ran(mesh):
    x, a, b = _megatron(mesh)
    with mt.CommDebugMode() as comm:
        _block(x, a, b)
    report = mt.explain(_block, x, a, b)
    text = str(report)
    counted = {k: (comm.get_comm_counts()[k], comm.get_comm_bytes()[k])
               for k in comm.get_comm_counts()}
    assert report.totals == counted
    assert "matmul" in text and "x [S(0)" in text and "memory per rank: arguments" in text
    if mesh.shape[0] > 1:
        assert counted == {"all_reduce": (1, counted["all_reduce"][1])}
        assert re.search(r"<- all_reduce\s+mesh dim 0 \(for the result\)", text), text
    else:
        assert "totals: no collectives" in text


@pytest.mark.mpi
def test_explain_of_a_compiled_step_runs_nothing_again(mesh):
    x, a, b = _megatron(mesh)
    step = mt.compile(_block)
    step(x, a, b)
    with mt.CommDebugMode() as comm:
        report = mt.explain(step, x, a, b)
    assert comm.get_total_counts() == 0
    assert report.summary.startswith("_block: ")


@pytest.mark.mpi
def test_visualize_sharding_draws_every_rank_where_its_block_is(mesh):
    placements = [Shard(0)] + [Shard(1)] * (mesh.ndim > 1) + [R] * (mesh.ndim - 2)
    x = mt.distribute_tensor(np.zeros((7, 5)), mesh, placements)
    text = mt.visualize_sharding(x)
    assert text.startswith(f"DTensor (7, 5) float64 {list(x.placements)}")
    (r0, r1), (c0, c1) = local_bounds(x.shape, mesh.shape, x.placements, mesh.get_coordinate())
    lines = text.splitlines()
    header = lines[1]
    row = next(ln for ln in lines if ln.startswith(f"rows {r0}:{r1}|"))
    column = header.index(f"cols {c0}:{c1}")
    cell = row[row.rfind("|", 0, column + 1) + 1:row.find("|", column)]
    assert re.search(rf"ranks? (\d+,)*{WORLD.rank}\b", cell), (cell, text)
    p = mt.DTensor.from_local(np.zeros(4), mesh, [Partial()] + [R] * (mesh.ndim - 1))
    assert "partial terms: sum over mesh dim 0" in mt.visualize_sharding(p)
    with pytest.raises(ValueError, match="1-D and 2-D"):
        mt.visualize_sharding(mt.distribute_tensor(np.zeros((2, 2, 2)), mesh, [R] * mesh.ndim))
