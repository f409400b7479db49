"""View rules simulated rank by rank on one process (no MPI): for every combination of the
choices a rule lists, blocks are cut from whole numpy arrays by ``np.array_split`` (Partial mesh
dims hold random terms), the kernel runs at each mesh coordinate, and the output blocks,
reassembled by the output layout, must equal numpy's result.  Also the order of the listed
choices, which splits survive a reshape, and the error messages."""
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from mtensor.ops import RULES, OpCall, Operand
from mtensor.ops.views import dim_map_choices, passthrough, reshape_groups
from mtensor.placement import Partial, Replicate, Shard, mesh_coords

R, S0, S1, S2 = Replicate(), Shard(0), Shard(1), Shard(2)
COMBINE = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum}


def split_block(full, mesh_shape, layout, coord):
    """The block at ``coord``, cut with np.array_split mesh dim by mesh dim (mesh dim 0 first)."""
    index = [np.arange(s) for s in full.shape]
    for i, p in enumerate(layout):
        if isinstance(p, Shard):
            index[p.dim] = np.array_split(index[p.dim], mesh_shape[i])[coord[i]]
    return full[np.ix_(*index)] if full.ndim else full


def _partial_op(layout):
    ops = {p.reduce_op for p in layout if isinstance(p, Partial)}
    assert len(ops) <= 1
    return ops.pop() if ops else None


def _group_key(coord, layout):
    return tuple(x for x, p in zip(coord, layout) if not isinstance(p, Partial))


def term_blocks(full, mesh_shape, layout, rng):
    """Each coordinate's block; coordinates that differ only on Partial mesh dims hold terms
    whose reduction is the block (sum/avg: random integers and a balancing first term; max/min:
    the block at the first coordinate, smaller values elsewhere)."""
    op, blocks, groups = _partial_op(layout), {}, {}
    for c in mesh_coords(mesh_shape):
        groups.setdefault(_group_key(c, layout), []).append(c)
    for group in groups.values():
        block = split_block(full, mesh_shape, layout, group[0])
        n = len(group)
        if op is None:
            blocks.update(dict.fromkeys(group, block))
            continue
        noise = [rng.integers(1, 4, block.shape).astype(full.dtype) for _ in group[1:]]
        if op in ("max", "min"):
            sign = -1 if op == "max" else 1
            rest = [block + sign * x for x in noise]
            first = block
        else:
            rest = noise
            first = block * (n if op == "avg" else 1) - sum(noise, np.zeros_like(block))
        blocks.update(zip(group, [first] + rest))
    return blocks


def assemble(outs, shape, layout, mesh_shape, dtype):
    """The whole result from the output blocks (Partial terms reduced, replicas equal)."""
    op, groups = _partial_op(layout), {}
    for c in mesh_coords(mesh_shape):
        groups.setdefault(_group_key(c, layout), []).append(c)
    full, seen = np.zeros(shape, dtype), np.zeros(shape, int)
    for group in groups.values():
        value = outs[group[0]]
        for c in group[1:]:
            value = COMBINE[op](value, outs[c])
        if op == "avg":
            value = value / len(group)
        index = [np.arange(s) for s in shape]
        for i, p in enumerate(layout):
            if isinstance(p, Shard):
                index[p.dim] = np.array_split(index[p.dim], mesh_shape[i])[group[0][i]]
        where = np.ix_(*index) if len(shape) else ()
        held = seen[where] > 0
        assert np.array_equal(full[where][held], np.asarray(value)[held]), "replicas differ"
        full[where] = value
        seen[where] += 1
    assert seen.all(), f"{layout} leaves elements unheld"
    return full


def rule_for(name, fulls, in_layouts, params, mesh_shape):
    """The strategy of rule ``name`` for operands like ``fulls`` held in ``in_layouts``."""
    call = OpCall(name, tuple(Operand(f.shape, f.dtype, tuple(lay))
                              for f, lay in zip(fulls, in_layouts)), params, tuple(mesh_shape))
    return RULES[name](call)


def check_all_choices(name, fulls, params, mesh_shape, expected, seed=0):
    """Every combination (one listed choice per mesh dim) must reproduce ``expected``."""
    mesh_shape = tuple(mesh_shape)
    plain = tuple((R,) * len(mesh_shape) for _ in fulls)
    strategy = rule_for(name, fulls, plain, params, mesh_shape)
    assert strategy.out_shape == expected.shape
    rng = np.random.default_rng(seed)
    tried = 0
    for combo in itertools.product(strategy.choices, repeat=len(mesh_shape)):
        ins = tuple(tuple(ch.inputs[j] for ch in combo) for j in range(len(fulls)))
        out_layout = tuple(ch.output for ch in combo)
        if len({p.reduce_op for ch in combo for p in ch.inputs + (ch.output,)
                if isinstance(p, Partial)}) > 1:
            continue
        blocks = [term_blocks(f, mesh_shape, lay, rng) for f, lay in zip(fulls, ins)]
        outs = {}
        for c in mesh_coords(mesh_shape):
            mesh = SimpleNamespace(shape=mesh_shape, coordinate=c)
            outs[c] = np.asarray(strategy.bind(ins, out_layout, mesh)(*(b[c] for b in blocks)))
            assert outs[c].shape == split_block(expected, mesh_shape, out_layout, c).shape
        got = assemble(outs, expected.shape, out_layout, mesh_shape, expected.dtype)
        np.testing.assert_array_equal(got, expected, err_msg=f"{name} {ins} -> {out_layout}")
        tried += 1
    return strategy, tried


def A(*shape):
    return np.random.default_rng(sum(shape) + len(shape)).integers(-5, 6, shape).astype(float)


MESHES = [(2,), (3,), (2, 2)]


def shard_pairs(strategy):
    """{input dim: output dim} of the one-operand Shard choices."""
    return {ch.inputs[0].dim: ch.output.dim for ch in strategy.choices
            if isinstance(ch.inputs[0], Shard)}


def test_choice_lists_are_r_then_shards_then_every_partial():
    assert [(c.inputs, c.output) for c in passthrough(2)] == [
        ((Partial(op),) * 2, Partial(op)) for op in ("sum", "avg", "max", "min")]
    assert passthrough()[0].inputs == (Partial("sum"),)
    got = [(c.inputs, c.output) for c in dim_map_choices([2, None, 0], 2)]
    assert got == [((R, R), R), ((S0, S0), S2), ((S2, S2), S0)] + [
        ((Partial(op),) * 2, Partial(op)) for op in ("sum", "avg", "max", "min")]
    assert len(dim_map_choices([0])) == 1 + 1 + 4


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("shape, axes", [
    ((4, 3, 2), None), ((4, 3, 2), (1, 0, 2)), ((4, 3, 2), (-1, 0, -2)), ((5, 3), (-1, 0)),
    ((3,), (0,)), ((3,), None),
])
def test_transpose_all_choices(mesh, shape, axes):
    a = A(*shape)
    strategy, tried = check_all_choices("transpose", [a], (axes,), mesh, np.transpose(a, axes))
    perm = tuple(range(len(shape)))[::-1] if axes is None else tuple(x % len(shape) for x in axes)
    assert shard_pairs(strategy) == {d: perm.index(d) for d in range(len(shape))}
    assert tried == (1 + len(shape) + 4) ** len(mesh) - (12 if len(mesh) == 2 else 0)


@pytest.mark.parametrize("axes, shown", [((0, 0, -2), "(0, 0, 1)"), ((0, 1), "(0, 1)"),
                                         ((0, 1, 3), "(0, 1, 3)"), ((0, 1, -4), "(0, 1, -4)")])
def test_transpose_rejects_non_permutations(axes, shown):
    call = OpCall("transpose", (Operand((2, 3, 4), np.dtype("f8"), (S1,)),), (axes,), (2,))
    with pytest.raises(ValueError) as info:
        RULES["transpose"](call)
    assert str(info.value) == (f"transpose of (2, 3, 4) [S(1)]: axes {shown} are not a "
                               "permutation of 3 dims; pass each of range(3) once")


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("shape, axis", [((5, 3), 0), ((5, 3), -1), ((5, 3), (0, 2)),
                                         ((4,), (-1, 0)), ((2, 3), 1)])
def test_expand_dims_all_choices(mesh, shape, axis):
    a = A(*shape)
    strategy, _ = check_all_choices("expand_dims", [a], (axis,), mesh, np.expand_dims(a, axis))
    out = np.expand_dims(np.zeros(shape), axis).shape
    new = [d for d in range(len(out))
           if d in {x % len(out) for x in np.atleast_1d(axis).tolist()}]
    kept = [d for d in range(len(out)) if d not in new]
    assert shard_pairs(strategy) == dict(enumerate(kept))


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("shape, axis", [((5, 1, 3), None), ((1, 4), (0,)), ((1, 4, 1), -1),
                                         ((1, 1), None), ((3, 1, 1, 2), (1, 2))])
def test_squeeze_all_choices(mesh, shape, axis):
    a = A(*shape)
    strategy, _ = check_all_choices("squeeze", [a], (axis,), mesh, np.squeeze(a, axis))
    gone = [d for d, s in enumerate(shape) if s == 1] if axis is None else \
        [x % len(shape) for x in np.atleast_1d(axis).tolist()]
    kept = [d for d in range(len(shape)) if d not in gone]
    assert shard_pairs(strategy) == {d: kept.index(d) for d in kept}


def test_squeeze_of_a_longer_dim_names_it():
    call = OpCall("squeeze", (Operand((2, 1, 3), np.dtype("f8"), (S0,)),), ((0, 1),), (2,))
    with pytest.raises(ValueError) as info:
        RULES["squeeze"](call)
    assert str(info.value) == ("squeeze of (2, 1, 3) [S(0)]: cannot squeeze axis (0, 1): its "
                               "size is not 1; squeeze only dims of size 1")


@pytest.mark.parametrize("mesh", MESHES)
@pytest.mark.parametrize("src, dst", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((2, 3), (2, 3)),
                                      ((1, 3), (5, 3)), ((), (2, 3)), ((4, 1), (1, 4, 5))])
def test_broadcast_to_all_choices(mesh, src, dst):
    a = A(*src) if src else np.float64(3.0) * np.ones(())
    strategy, _ = check_all_choices("broadcast_to", [a], (dst,), mesh, np.broadcast_to(a, dst))
    lead = len(dst) - len(src)
    assert shard_pairs(strategy) == {d: lead + d for d, s in enumerate(src) if s == dst[lead + d]}


@pytest.mark.parametrize("src, dst", [((3, 2), (3, 4)), ((3,), (4,)), ((2, 3), (3,)),
                                      ((2, 1), (3, 3, 2))])
def test_broadcast_to_rejects_mismatches(src, dst):
    call = OpCall("broadcast_to", (Operand(src, np.dtype("f8"), (R,)),), (dst,), (2,))
    with pytest.raises(ValueError) as info:
        RULES["broadcast_to"](call)
    with pytest.raises(ValueError):
        np.broadcast_to(np.zeros(src), dst)
    assert str(info.value) == (f"broadcast_to of {src} [R]: cannot broadcast {src} to {dst}; "
                               "make trailing dims equal or 1")


@pytest.mark.parametrize("src, dst, groups", [
    ((2, 3, 4), (6, 4), [([0, 1], [0]), ([2], [1])]),
    ((6, 4), (2, 3, 4), [([0], [0, 1]), ([1], [2])]),
    ((4, 6), (8, 3), [([0, 1], [0, 1])]),          # 4 < 8: 4*6 = 24 = 8*3
    ((3, 1, 1), (3,), [([0], [0]), ([1], []), ([2], [])]),
    ((5,), (5, 1), [([0], [0]), ([], [1])]),
    ((2, 2), (4,), [([0, 1], [0])]),
])
def test_reshape_groups_pair_equal_products(src, dst, groups):
    assert reshape_groups(src, dst) == groups


@pytest.mark.parametrize("mesh", MESHES + [(4,)])
@pytest.mark.parametrize("src, dst", [
    ((8, 3), (4, 2, 3)), ((8, 3), (2, 4, 3)), ((4, 6), (2, 2, 6)), ((4, 6), (24,)),
    ((6, 4), (3, 8)), ((12,), (3, 4)), ((12,), (-1, 2)), ((1, 6), (6, 1)), ((0, 4), (4, 0)),
    ((5, 2), (10,)), ((6, 1, 4), (6, 4)), ((2, 6), (-1,)), ((4, 4), (4, 2, 2)), ((3, 1), (3, 1)),
])
def test_reshape_all_choices(mesh, src, dst):
    a = A(*src)
    check_all_choices("reshape", [a], (dst,), mesh, a.reshape(dst))


@pytest.mark.parametrize("src, dst, mesh, pairs", [
    # one dim split alike: the split follows it
    ((6, 4), (6, 2, 2), (3,), {0: 0}),
    # 8 rows into 4 x 2 on 2 ranks: 4 and 2 halves line up (both divisible by 2)
    ((8, 3), (4, 2, 3), (2,), {0: 0, 1: 2}),
    # 8 rows into 2 x 4 on 4 ranks: 2 is not divisible by 4, so the dim is gathered
    ((8, 3), (2, 4, 3), (4,), {1: 2}),
    # 4 x 6 into 24 on (2, 2): 4 ranks in all, 4 % 4 == 24 % 4 == 0
    ((4, 6), (24,), (2, 2), {0: 0}),
    ((4, 6), (24,), (3,), {}),
    # a size-1 leading dim: the split follows the first dim holding more than one element
    ((1, 6), (6,), (2,), {1: 0}),
    ((6,), (1, 6), (3,), {0: 1}),
    ((5, 2), (10,), (5,), {0: 0}),
    ((0, 4), (4, 0), (2,), {}),
    ((2, 6), (-1,), (2,), {0: 0}),
    # a group of size-1 dims only: its first dim carries the (empty) split
    ((3, 1), (3, 1), (2,), {0: 0, 1: 1}),
])
def test_reshape_keeps_a_split_only_where_blocks_line_up(src, dst, mesh, pairs):
    call = OpCall("reshape", (Operand(src, np.dtype("f8"), (R,) * len(mesh)),), (dst,), mesh)
    assert shard_pairs(RULES["reshape"](call)) == pairs


@pytest.mark.parametrize("dst, words", [
    ((5, 5), "cannot reshape 24 elements into shape (5, 5); keep the number of elements"),
    ((-1, -1), "reshape to (-1, -1) has more than one -1; give at most one -1"),
    ((5, -1), "cannot reshape 24 elements into shape (5, -1); keep the number of elements"),
    ((0, -1), "cannot reshape 24 elements into shape (0, -1); keep the number of elements"),
    ((-4, -6), "cannot reshape 24 elements into shape (-4, -6); keep the number of elements"),
])
def test_reshape_errors_name_the_shapes(dst, words):
    call = OpCall("reshape", (Operand((4, 6), np.dtype("f8"), (S0,)),), (dst,), (2,))
    with pytest.raises(ValueError) as info:
        RULES["reshape"](call)
    with pytest.raises(ValueError):
        np.zeros((4, 6)).reshape(dst)
    assert str(info.value) == f"reshape of (4, 6) [S(0)]: {words}"


def test_reshape_of_an_empty_array_fills_in_minus_one_like_numpy():
    call = OpCall("reshape", (Operand((0, 4), np.dtype("f8"), (R,)),), ((2, -1),), (2,))
    with pytest.raises(ValueError):
        RULES["reshape"](OpCall("reshape", call.operands, ((0, -1),), (2,)))
    assert RULES["reshape"](call).out_shape == np.zeros((0, 4)).reshape(2, -1).shape
