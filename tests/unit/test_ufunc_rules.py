"""The ufunc-method rules on one process (no MPI): the three steps of a distributed scan run
for every mesh coordinate on blocks cut from a numpy array must give numpy's accumulate;
``ufunc_reduce`` never splits a reduced dim; block bounds follow the layout's nesting."""
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from mtensor.cost.model import CostModel
from mtensor.ops import RULES, OpCall, Operand, choose
from mtensor.ops.ufunc_methods import axis_blocks, gathered
from mtensor.placement import Replicate, Shard, local_bounds, local_slices, mesh_coords

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


@pytest.mark.parametrize("mesh_shape, layout", [((3,), (S0,)), ((2, 2), (S1, S0)), ((4,), (R,)),
                                                ((2, 3), (S0, S1))])
@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1), None, np.int64(-2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_ufunc_reduce_matches_numpy(mesh_shape, layout, axis, keepdims):
    full = np.random.default_rng(1).integers(0, 9, (7, 5)).astype(np.int64)
    params = ("bitwise_or", axis, keepdims, None)
    got, ins, out_lay = _run("ufunc_reduce", [(full, layout)], params, mesh_shape, [full])
    want = np.bitwise_or.reduce(full, axis=axis, keepdims=keepdims)
    assert got.shape == want.shape and np.array_equal(got, want)
    call = _call("ufunc_reduce", [(full, layout)], params, mesh_shape)
    kd = np.bitwise_or.reduce(full, axis=axis, keepdims=True).shape   # reduced dims are 1
    kept = [d for d in range(2) if kd[d] != 1]
    shards = {c.inputs[0].dim: c.output.dim for c in RULES["ufunc_reduce"](call).choices
              if isinstance(c.inputs[0], Shard)}
    # a kept dim stays split, in place with keepdims, else renumbered past the reduced ones
    assert shards == {d: d if keepdims else kept.index(d) for d in kept}


def test_ufunc_reduce_with_a_dtype():
    full = np.arange(12, dtype=np.int8).reshape(4, 3) * 20
    got, _, _ = _run("ufunc_reduce", [(full, (S1,))], ("add", 0, False, np.int64), (3,), [full])
    assert got.dtype == np.int64 and np.array_equal(got, np.add.reduce(full, 0, dtype=np.int64))


@pytest.mark.parametrize("mesh_shape, layout", [((3,), (S0,)), ((2, 2), (S1, S0)),
                                                ((2,), (S1,))])
@pytest.mark.parametrize("axis, indices", [(0, (0, 2, 5)), (1, (1, 3)), (-1, (0, 4, 1)),
                                           (-2, (6, 0))])
def test_ufunc_reduceat_matches_numpy(mesh_shape, layout, axis, indices):
    full = np.random.default_rng(2).integers(0, 9, (7, 5)).astype(np.int64)
    params = ("add", indices, axis, None)
    got, ins, _ = _run("ufunc_reduceat", [(full, layout)], params, mesh_shape, [full])
    assert np.array_equal(got, np.add.reduceat(full, list(indices), axis=axis))
    assert all(p != Shard(axis % 2) for p in ins[0])      # the axis is whole
    call = _call("ufunc_reduceat", [(full, layout)], params, mesh_shape)
    shards = [c.inputs[0] for c in RULES["ufunc_reduceat"](call).choices
              if isinstance(c.inputs[0], Shard)]
    assert shards == [Shard(1 - axis % 2)]


def test_ufunc_reduceat_raises_numpys_errors():
    a = np.zeros((7, 5), np.int64)
    with pytest.raises(IndexError):
        RULES["ufunc_reduceat"](_call("ufunc_reduceat", [(a, (S0,))], ("add", (0, 7), 0, None),
                                      (2,)))
    with pytest.raises(np.exceptions.AxisError):
        RULES["ufunc_reduceat"](_call("ufunc_reduceat", [(a, (S0,))], ("add", (0,), 2, None),
                                      (2,)))


@pytest.mark.parametrize("name, dtype, split", [
    ("add", np.int64, True), ("add", np.bool_, True), ("logical_and", np.bool_, True),
    ("multiply", np.float32, True), ("subtract", np.int64, False), ("add", np.object_, False),
    ("maximum", np.complex64, True), ("logical_or", np.int64, True), ("minimum", "m8[s]", False),
    ("bitwise_xor", np.uint16, True),
])
def test_which_scans_stay_split(name, dtype, split):
    # associative ufuncs on numbers and bools (logical_or of int64 scans into bool) stay split;
    # subtract is not associative; objects and timedeltas are not numbers
    a = np.ones((6, 2), dtype)
    call = _call("ufunc_accumulate", [(a, (S0,))], (name, 0, None), (3,))
    dims = [c.inputs[0].dim for c in RULES["ufunc_accumulate"](call).choices
            if isinstance(c.inputs[0], Shard)]
    assert dims == ([0, 1] if split else [1])


def test_scan_totals_of_empty_blocks():
    full = np.arange(2 * 3).reshape(2, 3)
    # 2 rows on 4 ranks: blocks of 1, 1, 0, 0 rows; the totals are one row per block
    call = _call("scan_totals", [(full, (S0,))], (0,), (4,))
    strategy = RULES["scan_totals"](call)
    assert strategy.out_shape == (4, 3)
    empty = full[2:]
    assert strategy.kernel(empty).shape == (1, 3) and not strategy.kernel(empty).any()
    assert np.array_equal(strategy.kernel(full[:1]), full[:1])


def test_stand_in_and_reduced_axes():
    from mtensor.ops.ufunc_methods import reduced_axes, stand_in
    s = stand_in((0, 5, 1), np.float32)
    assert s.shape == (0, 1, 1) and s.dtype == np.float32
    assert np.array_equal(stand_in((3, 2), np.int8), np.ones((1, 1), np.int8))
    assert reduced_axes(None, 3) == (0, 1, 2) and reduced_axes(-1, 3) == (2,)
    assert reduced_axes(np.int64(1), 3) == (1,) and reduced_axes((2, -3), 3) == (0, 2)


def test_scan_dtype_honours_dtype_and_axis():
    a = np.ones((6, 2), np.int64)
    # accumulating int64 into objects: no blockwise prefix, the axis is gathered
    call = _call("ufunc_accumulate", [(a, (S0,))], ("add", 0, np.object_), (3,))
    assert [c.inputs[0] for c in RULES["ufunc_accumulate"](call).choices] == [R, S1]
    call = _call("ufunc_accumulate", [(a, (S0,))], ("add", -1, np.float32), (3,))
    assert [c.inputs[0] for c in RULES["ufunc_accumulate"](call).choices] == [R, S0, S1]
    with pytest.raises(np.exceptions.AxisError):
        RULES["ufunc_accumulate"](_call("ufunc_accumulate", [(a, (S0,))], ("add", 2, None),
                                        (3,)))
