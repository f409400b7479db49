"""The ufunc-method rules on one process (no MPI): the three steps of a distributed scan run
for every mesh coordinate on blocks cut from a numpy array must give numpy's accumulate;
``ufunc_reduce`` never splits a reduced dim; block bounds follow the layout's nesting."""
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from mtensor.ops import RULES, OpCall, Operand, choose
from mtensor.ops.ufunc_methods import axis_blocks, gathered
from mtensor.placement import Replicate, Shard, local_bounds, local_slices, mesh_coords
from mtensor.redistribute.cost import CostModel

R, S0, S1 = Replicate(), Shard(0), Shard(1)
MODEL = CostModel()


def _call(name, arrays_and_layouts, params, mesh_shape):
    ops = tuple(Operand(a.shape, a.dtype, tuple(p)) for a, p in arrays_and_layouts)
    return OpCall(name, ops, params, tuple(mesh_shape))


def _run(name, arrays_and_layouts, params, mesh_shape, full_inputs):
    """Choose, run the kernel at every coordinate, reassemble; the chosen layouts too."""
    call = _call(name, arrays_and_layouts, params, mesh_shape)
    strategy = RULES[name](call)
    ins, out_layout, _ = choose(call, strategy.choices, MODEL)
    out = None
    for coord in mesh_coords(mesh_shape):
        mesh = SimpleNamespace(shape=tuple(mesh_shape), coordinate=coord)
        blocks = [f[local_slices(f.shape, mesh_shape, lay, coord)]
                  for f, lay in zip(full_inputs, ins)]
        result = strategy.bind(ins, out_layout, mesh)(*blocks)
        if out is None:
            out = np.zeros(strategy.out_shape, result.dtype)
        out[local_slices(strategy.out_shape, mesh_shape, out_layout, coord)] = result
    return out, ins, out_layout


def _blockwise_scans(full, mesh_shape, layout, axis):
    """What each rank's local scan holds, laid side by side (not numpy's scan)."""
    out = np.empty_like(full)
    for coord in mesh_coords(mesh_shape):
        idx = local_slices(full.shape, mesh_shape, layout, coord)
        out[idx] = np.add.accumulate(full[idx], axis=axis) if full[idx].size else full[idx]
    return out


LAYOUTS = {(3,): [(S0,), (S1,), (R,)], (2, 2): [(S0, S0), (S0, S1), (S1, S0), (R, S0)],
           (2, 4): [(S0, S0), (S1, S1), (S0, R)], (2, 2, 2): [(S0, S0, S0), (S0, S1, S0)]}


@pytest.mark.parametrize("shape", [(7, 5), (3, 2), (1, 9)])
@pytest.mark.parametrize("mesh_shape,layout",
                         [(m, l) for m, ls in LAYOUTS.items() for l in ls])
@pytest.mark.parametrize("name", ["add", "maximum", "multiply", "bitwise_xor"])
def test_three_step_scan_matches_numpy(shape, mesh_shape, layout, name):
    full = np.random.default_rng(0).integers(-3, 4, shape).astype(np.int64)
    ufunc = getattr(np, name)
    for axis in (0, 1):
        local, ins, lay = _run("ufunc_accumulate", [(full, layout)], (name, axis, None),
                               mesh_shape, [full])
        assert ins == (tuple(layout),) and lay == tuple(layout)   # kept split: no gather
        totals, _, tlay = _run("scan_totals", [(local, lay)], (axis,), mesh_shape, [local])
        assert tlay == lay
        g = gathered(tlay, axis)
        got, ins, out_lay = _run("scan_apply", [(local, lay), (totals, g)], (name, axis),
                                 mesh_shape, [local, totals])
        assert ins == (lay, g) and out_lay == lay
        assert np.array_equal(got, ufunc.accumulate(full, axis=axis)), (axis, lay)


def test_local_scan_alone_is_blockwise():
    full = np.arange(12).reshape(6, 2)
    local, _, lay = _run("ufunc_accumulate", [(full, (S0,))], ("add", 0, None), (3,), [full])
    assert np.array_equal(local, _blockwise_scans(full, (3,), lay, 0))


def test_non_associative_scan_gathers_the_axis():
    full = np.arange(12).reshape(6, 2)
    got, ins, lay = _run("ufunc_accumulate", [(full, (S0,))], ("subtract", 0, None), (3,),
                         [full])
    assert lay == (S1,) or lay == (R,)
    assert np.array_equal(got, np.subtract.accumulate(full, axis=0))


@pytest.mark.parametrize("length", [0, 1, 3, 7, 16])
@pytest.mark.parametrize("sizes", [(1,), (3,), (2, 2), (2, 4), (2, 2, 2), (3, 1)])
def test_axis_blocks_follow_the_nested_layout(length, sizes):
    blocks = axis_blocks(length, sizes)
    for k, coord in enumerate(itertools.product(*(range(n) for n in sizes))):
        assert blocks[k] == local_bounds((length,), sizes, (S0,) * len(sizes), coord)[0]


@pytest.mark.parametrize("axis", [0, 1, (0, 1), None])
def test_ufunc_reduce_never_splits_a_reduced_dim(axis):
    a = np.zeros((7, 5), np.int64)
    call = _call("ufunc_reduce", [(a, (S0,))], ("bitwise_and", axis, False, None), (4,))
    strategy = RULES["ufunc_reduce"](call)
    reduced = {0, 1} if axis is None else set(np.atleast_1d(axis).tolist())
    for choice in strategy.choices:
        assert not (isinstance(choice.inputs[0], Shard) and choice.inputs[0].dim in reduced)


def test_ufunc_reduce_raises_numpys_errors():
    a = np.zeros((7, 5), np.int64)
    with pytest.raises(ValueError, match="not reorderable"):
        RULES["ufunc_reduce"](_call("ufunc_reduce", [(a, (S0,))],
                                    ("subtract", None, False, None), (2,)))
    empty = np.zeros((0, 5))
    with pytest.raises(ValueError, match="identity"):
        RULES["ufunc_reduce"](_call("ufunc_reduce", [(empty, (S1,))],
                                    ("subtract", 0, False, None), (2,)))
