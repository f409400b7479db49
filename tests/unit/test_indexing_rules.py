"""The indexing rules (getitem, index_put, take, take_along_axis) simulated in one process:
for every choice a rule lists, each simulated rank runs the bound kernel on its block
(np.array_split pieces of a whole numpy array; Partial inputs as random terms) and the
blocks, reassembled by the output layout, must equal numpy on the whole arrays."""
from types import SimpleNamespace

import numpy as np
import pytest

from mtensor.ops import RULES, OpCall, Operand
from mtensor.ops.plans.indexing import normalize_index
from mtensor.placement import Partial, Replicate, Shard, local_shape, local_slices, mesh_coords

R = Replicate()
COMBINE = {"sum": lambda t: np.add.reduce(t, axis=0), "avg": lambda t: np.add.reduce(t, axis=0)
           / len(t), "max": lambda t: np.maximum.reduce(t, axis=0),
           "min": lambda t: np.minimum.reduce(t, axis=0)}


def terms(value, op, n, rng):
    """``n`` terms whose reduction by ``op`` is ``value`` (exact: small integers)."""
    noise = [rng.integers(1, 4, value.shape).astype(value.dtype) for _ in range(n - 1)]
    if op == "max":
        return [value] + [value - k for k in noise]
    if op == "min":
        return [value] + [value + k for k in noise]
    first = value * (n if op == "avg" else 1) - sum(noise, np.zeros_like(value))
    return [first] + noise


def blocks_of(value, layout, mesh_shape, rng):
    """Each mesh coordinate's block of ``value`` in ``layout`` (at most one Partial mesh dim)."""
    out = {c: value[local_slices(value.shape, mesh_shape, layout, c)]
           for c in mesh_coords(mesh_shape)}
    for m, p in enumerate(layout):
        if isinstance(p, Partial):
            for c in mesh_coords(mesh_shape):
                if c[m] == 0:
                    group = [c[:m] + (k,) + c[m + 1:] for k in range(mesh_shape[m])]
                    out.update(zip(group, terms(out[c], p.reduce_op, len(group), rng)))
    return out


def assemble(blocks, shape, layout, mesh_shape):
    """The whole array from the output blocks: Partial mesh dims reduced, Replicate copies
    checked equal, every element covered."""
    full, covered = np.zeros(shape), np.zeros(shape, bool)
    ops = [(m, p.reduce_op) for m, p in enumerate(layout) if isinstance(p, Partial)]
    for c in mesh_coords(mesh_shape):
        if any(c[m] for m, _ in ops):
            continue
        value = np.asarray(blocks[c], float)
        for m, op in ops:
            value = COMBINE[op](np.stack([np.asarray(blocks[c[:m] + (k,) + c[m + 1:]], float)
                                          for k in range(mesh_shape[m])]))
        where = local_slices(shape, mesh_shape, layout, c)
        if covered[where].any():
            np.testing.assert_array_equal(full[where], value, f"copies differ under {layout}")
        full[where], covered[where] = value, True
    assert covered.all(), f"{layout} leaves elements unheld"
    return full


def run_choice(strategy, values, in_layouts, out_layout, mesh_shape):
    rng = np.random.default_rng(0)
    blocks = [blocks_of(v, lay, mesh_shape, rng) for v, lay in zip(values, in_layouts)]
    outs = {}
    for c in mesh_coords(mesh_shape):
        kernel = strategy.bind(in_layouts, out_layout,
                               SimpleNamespace(shape=mesh_shape, coordinate=c))
        outs[c] = kernel(*(b[c] for b in blocks))
        want = local_shape(strategy.out_shape, mesh_shape, out_layout, c)
        assert outs[c].shape == want, f"{out_layout} at {c}: {outs[c].shape}, not {want}"
        assert outs[c].dtype == values[0].dtype
    return assemble(outs, strategy.out_shape, out_layout, mesh_shape)


def check_every_choice(name, values, params, expected, mesh_sizes=(2, 3)):
    """Each 1-mesh-dim choice on meshes of ``mesh_sizes`` ranks, and on a 2-D mesh each pair
    of choices that shard (the chooser applies choices per mesh dim).  Bool data skips
    Partial inputs (no terms to make up)."""
    call = OpCall(name, tuple(Operand(v.shape, v.dtype, (R,)) for v in values), params, (2,))
    strategy = RULES[name](call)
    assert strategy.out_shape == expected.shape
    for choice in strategy.choices:
        assert len(choice.inputs) == len(values), f"{choice}: one placement per operand"
        if values[0].dtype == bool and isinstance(choice.inputs[0], Partial):
            continue    # bool arrays carry no reduction terms to simulate
        for n in mesh_sizes:
            got = run_choice(strategy, values, tuple((p,) for p in choice.inputs),
                             (choice.output,), (n,))
            np.testing.assert_array_equal(got, expected, f"{name} {choice} on ({n},)")
    sharding = [c for c in strategy.choices if isinstance(c.output, Shard)
                or any(isinstance(p, Shard) for p in c.inputs)]
    for a in sharding:
        for b in sharding:
            if isinstance(a.output, Partial) and isinstance(b.output, Partial):
                continue
            got = run_choice(strategy, values, tuple(zip(a.inputs, b.inputs)),
                             (a.output, b.output), (2, 2))
            np.testing.assert_array_equal(got, expected, f"{name} {a}, {b} on (2, 2)")
    return strategy.choices


def ints(*shape, dtype="i8", seed=0):
    return np.random.default_rng(seed).integers(-5, 6, shape).astype(dtype)


GETITEM_KEYS = [
    ((7, 5), (slice(1, 6, 2), 3)),
    ((7, 5), (slice(None, None, -2), slice(None))),
    ((7, 5), (slice(6, 0, -3), None, slice(1, 4))),
    ((5, 4), (np.array([4, 0, 2, 4]), slice(None))),
    ((5, 4, 3), (slice(None), np.array([[1, 3], [0, 0]]), np.array([2, 0]))),
    ((5, 4, 3), (np.array([1, 4]), slice(None), np.array([0, 2]))),
    ((6, 4), (np.array([True, False, True, True, False, True]), 2)),
    ((6, 4), (slice(4, 5), slice(2, 3))),
    ((3, 4), (slice(2, 0, -1), slice(None))),
    ((3,), (slice(0, 0),)),
]


@pytest.mark.parametrize("shape, key", GETITEM_KEYS)
def test_getitem_every_choice_matches_numpy(shape, key):
    x = ints(*shape)
    choices = check_every_choice("getitem", [x], (normalize_index(key, shape),), x[key])
    # a numeric array may stay split along every dim the key picks from: P(sum) terms
    entries = normalize_index(key, shape)
    picked = [d for d, e in enumerate(e for e in entries if e[0] != "n")
              if not (e[0] == "s" and e[1:] == (0, shape[d], 1))]
    for d in picked:
        assert (Shard(d),) in [c.inputs for c in choices if c.output == Partial("sum")]


def test_getitem_of_a_bool_array_gathers_a_picked_dim():
    x = ints(6, 4) > 0
    key = (slice(1, 5), 2)
    choices = check_every_choice("getitem", [x], (normalize_index(key, x.shape),), x[key])
    assert all(not isinstance(c.output, Partial) or isinstance(c.inputs[0], Partial)
               for c in choices)
    assert (R,) in [c.inputs for c in choices]


def test_getitem_fill_of_a_block_holding_nothing_is_zeros_of_its_out_block():
    # Shard(0) of 6 rows on 3 ranks: rank 0 holds rows 0-1, none of rows 3..5 the key takes
    x = ints(6, 2, dtype="f4") + 10
    call = OpCall("getitem", (Operand(x.shape, x.dtype, (R,)),),
                  (normalize_index((slice(3, 6),), x.shape),), (3,))
    strategy = RULES["getitem"](call)
    kernel = strategy.bind(((Shard(0),),), (Shard(1),), SimpleNamespace(shape=(3,),
                                                                        coordinate=(0,)))
    out = kernel(x[0:2])
    assert out.shape == (3, 1) and out.dtype == np.float32 and not out.any()


INDEX_PUT_KEYS = [
    ((6, 4), (slice(1, 5), 2)),
    ((6, 4), (None, slice(None), slice(3, 0, -1))),
    ((5, 3), (4, None, slice(None))),
    ((5, 3), (slice(None), slice(None))),
]


@pytest.mark.parametrize("shape, key", INDEX_PUT_KEYS)
def test_index_put_every_choice_is_zeros_with_the_value_at_key(shape, key):
    entries = normalize_index(key, shape)
    region = np.zeros(shape)[key].shape
    g = ints(*region, dtype="f8", seed=3)
    expected = np.zeros(shape)
    expected[key] = g
    choices = check_every_choice("index_put", [g], (entries, shape), expected)
    assert {c.output for c in choices if isinstance(c.output, Partial)} == {
        Partial("sum"), Partial("avg")}


def inputs_for(choices, output):
    """The input placements of the choices that give ``output``."""
    return [c.inputs for c in choices if c.output == output]


TAKE_CASES = [
    ((6, 4), np.array([5, 0, 3, 3, 1]), 0, "raise"),
    ((6, 4), np.array([[-1, 2], [0, -4]]), 1, "raise"),
    ((4, 5, 3), np.array([7, -9, 2, 0]), 1, "clip"),
    ((4, 5, 3), np.array([[7, -9, 2], [5, 4, 11]]), 1, "wrap"),
    ((4, 1), np.array([3, -2, 0]), 1, "clip"),
    ((4, 1), np.array([3, -2, 0]), 1, "wrap"),
    ((5, 3), np.array(2), 0, "raise"),
]


@pytest.mark.parametrize("shape, idx, axis, mode", TAKE_CASES)
def test_take_every_choice_matches_numpy(shape, idx, axis, mode):
    a = ints(*shape)
    expected = np.take(a, idx, axis, mode=mode)
    choices = check_every_choice("take", [a, idx], (axis, mode), expected)
    assert (Shard(axis), R) in [c.inputs for c in choices if c.output == Partial("sum")]
    # the docstring's promise: a dim of ``a`` other than ``axis`` keeps its split (shifted
    # by the index's dims past ``axis``), a split index splits the dims it makes
    k = idx.ndim
    listed = {(c.inputs, c.output) for c in choices}
    assert ((R, R), R) in listed
    for d in range(a.ndim):
        if d != axis:
            assert ((Shard(d), R), Shard(d if d < axis else d + k - 1)) in listed
    for j in range(k):
        assert ((R, Shard(j)), Shard(axis + j)) in listed
    for op in ("sum", "avg", "max", "min"):
        assert Partial(op) in [c.output for c in choices]


def test_take_from_an_empty_axis_and_of_bools():
    a = np.zeros((3, 0, 2), "f4")
    check_every_choice("take", [a, np.zeros(0, "i8")], (1, "raise"), a[:, []])
    b = ints(5, 3) > 0
    idx = np.array([4, 0, 4])
    choices = check_every_choice("take", [b, idx], (0, "raise"), np.take(b, idx, 0))
    # bool data has no P(sum) terms: a split picked axis is gathered
    assert inputs_for(choices, Partial("sum")) == [(Partial("sum"), R)]


TAKE_ALONG_CASES = [
    ((5, 4), np.array([[4, 0, 1, 1], [2, 3, 0, 4]]), 0),
    ((5, 4), np.array([[3], [0], [1], [-1], [2]]), 1),
    ((4, 6, 3), np.array([[[5, 0, 2]], [[1, 1, 3]], [[0, 4, 5]], [[2, 2, 2]]]), 1),
    ((4, 1, 3), np.array([[[0, 1, 2], [2, 1, 0]]] * 4), 2),
    ((1, 6), np.array([[5, 0], [1, 2], [3, 3]]), 1),
    ((3, 2), np.array([[1, 0], [1, 1], [0, 0]]), 1),
    ((1, 2), np.array([[1, 0, 0, 1], [1, 1, 0, 0], [0, 1, 1, 1]]), 1),
    ((2, 4), np.array([[[0]], [[1]]]).reshape(2, 1), 0),
]


@pytest.mark.parametrize("shape, idx, axis", TAKE_ALONG_CASES)
def test_take_along_axis_every_choice_matches_numpy(shape, idx, axis):
    a = ints(*shape)
    expected = np.take_along_axis(a, idx, axis)
    choices = check_every_choice("take_along_axis", [a, idx], (axis,), expected)
    assert (Shard(axis), R) in inputs_for(choices, Partial("sum"))
    assert (R, R) in inputs_for(choices, R)
    for op in ("sum", "avg", "max", "min"):
        assert (Partial(op), R) in inputs_for(choices, Partial(op))


def test_take_along_axis_split_along_a_dim_both_span():
    # dim 0 is 4 on both: split alike on data and index; dim 1 (axis) picks
    a, idx = ints(4, 5), np.array([[0, 4], [1, 1], [4, 0], [2, 3]])
    choices = check_every_choice("take_along_axis", [a, idx], (1,),
                                 np.take_along_axis(a, idx, 1))
    assert inputs_for(choices, Shard(0)) == [(Shard(0), Shard(0))]
    # the index split along the axis itself, data whole there
    assert (R, Shard(1)) in inputs_for(choices, Shard(1))


class DeviceArray(np.ndarray):
    """Stands in for a device array (CuPy): ``np.zeros(..., like=block)`` gives one back, so
    a kernel that allocates its output without ``like=`` returns a host array instead."""

    def __array_function__(self, func, types, args, kwargs):
        if func is np.zeros:
            return np.zeros(*args, **kwargs).view(DeviceArray)
        return super().__array_function__(func, types, args, kwargs)


def bound(name, values, params, in_layout, out_layout, coord, mesh_shape=(3,)):
    call = OpCall(name, tuple(Operand(v.shape, v.dtype, (R,)) for v in values), params,
                  mesh_shape)
    return RULES[name](call).bind(in_layout, out_layout,
                                  SimpleNamespace(shape=mesh_shape, coordinate=coord))


def test_zero_filled_terms_are_allocated_like_the_block():
    x = ints(6, 2)
    key = normalize_index((slice(3, 6),), x.shape)
    for c, rows in [((0,), slice(0, 2)), ((2,), slice(4, 6))]:   # holds none / some of 3..5
        out = bound("getitem", [x], (key,), ((Shard(0),),), (Partial("sum"),), c)(
            x[rows].view(DeviceArray))
        assert type(out) is DeviceArray, c
    # take along an axis of 2 split 3 ways: rank 2's block is empty
    a, idx = ints(3, 2), np.array([1, 0])
    for name, params, i in [("take", (1, "raise"), idx), ("take_along_axis", (1,),
                                                          np.array([[1], [0], [1]]))]:
        out = bound(name, [a, i], params, ((Shard(1),), (R,)), (Partial("sum"),), (2,))(
            a[:, 2:].view(DeviceArray), i)
        assert type(out) is DeviceArray and not out.any(), name
