"""The index planner against numpy itself: region shapes, and blocks that partition the
region exactly (every element once, in numpy's order), for random keys and splits."""
import re

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mtensor.ops.plans.indexing import (
    block_plan,
    check_value_shape,
    is_advanced,
    normalize_index,
    plain_key,
    region_index,
    region_layout,
    value_placements,
)
from mtensor.placement import Partial, Replicate, Shard, local_bounds, mesh_coords

shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)


@st.composite
def keys(draw, shape):
    key = []
    for size in shape:
        kind = draw(st.sampled_from(["slice", "int", "array", "whole", "none", "mask"]))
        if kind == "slice":
            key.append(slice(draw(st.integers(-size - 1, size + 1)),
                             draw(st.integers(-size - 1, size + 1)),
                             draw(st.sampled_from([1, 2, -1, -2, 3]))))
        elif kind == "int":
            key.append(draw(st.integers(-size, size - 1)))
        elif kind == "array":
            key.append(np.array(draw(st.lists(st.integers(-size, size - 1), min_size=0,
                                              max_size=4)), dtype=np.int64))
        elif kind == "mask":
            key.append(np.array(draw(st.lists(st.booleans(), min_size=size, max_size=size))))
        elif kind == "none":
            key.extend([None, slice(None)])
        else:
            key.append(slice(None))
    arrays = [k for k in key if isinstance(k, np.ndarray) and k.dtype != bool]
    if len({a.shape for a in arrays}) > 1:   # keep array indices broadcastable
        key = [k[:0] if isinstance(k, np.ndarray) and k.dtype != bool else k for k in key]
    return tuple(key)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_blocks_partition_the_region_as_numpy_orders_it(data):
    shape = data.draw(shapes)
    key = data.draw(keys(shape))
    full = np.arange(int(np.prod(shape))).reshape(shape)
    try:
        want = full[key]
    except IndexError:      # index arrays (masks included) that do not broadcast
        assume(False)
    entries = normalize_index(key, shape)
    region, _, _ = region_layout(entries, shape)
    assert region == want.shape
    mesh_shape = (data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2)))
    placements = tuple(data.draw(st.sampled_from([Replicate()] +
                                                  [Shard(d) for d in range(len(shape))]))
                       for _ in mesh_shape)
    seen = np.zeros(region, int)
    distinct = {tuple(local_bounds(shape, mesh_shape, placements, c))
                for c in mesh_coords(mesh_shape)}
    for bounds in distinct:
        plan = block_plan(entries, shape, bounds)
        if plan is None:
            continue
        block_key, region_key = plan
        block = full[tuple(slice(lo, hi) for lo, hi in bounds)]
        np.testing.assert_array_equal(block[block_key], want[region_index(region_key)])
        np.add.at(seen, region_index(region_key), 1)
    # a repeated array index names one region element per repeat: each is held once
    assert (seen == 1).all() or want.size == 0


def test_numpy_rule_for_where_array_dims_go():
    x = np.zeros((3, 3, 4, 5))
    i, j = np.array([0, 1]), np.array([2, 0, 1])   # j's length tells where its dims went
    for key in [(i, None, i), (slice(None), i, None, i), (i, slice(None), i),
                (0, slice(None), i), (Ellipsis, i, None), (None, i, i),
                (slice(None), j, None, j), (slice(None), j, j, None), (j, None, j),
                (0, j, None), (Ellipsis, j, None, 0)]:
        assert region_layout(normalize_index(key, x.shape), x.shape)[0] == x[key].shape


def test_bad_keys_raise_index_error_like_numpy():
    with pytest.raises(IndexError, match="out of bounds"):
        normalize_index(np.array([0, 5]), (5,))
    with pytest.raises(IndexError, match="out of bounds"):
        normalize_index((0, 7), (2, 3))
    with pytest.raises(IndexError, match="boolean index"):
        normalize_index(np.ones(4, bool), (5,))
    with pytest.raises(IndexError, match="too many"):
        normalize_index((0, 0, 0), (2, 3))
    with pytest.raises(IndexError, match="only integers"):
        normalize_index(np.array([1.5]), (3,))


def test_value_layout_follows_the_target_along_whole_dims():
    entries = normalize_index((slice(None), 3), (8, 6))
    assert value_placements(entries, (8, 6), (Shard(0), Shard(1))) == (Shard(0), Replicate())
    assert value_placements(entries, (8, 6), (Partial("sum"),)) == (Partial("sum"),)
    entries = normalize_index((slice(1, -1), slice(None)), (8, 6))
    assert value_placements(entries, (8, 6), (Shard(0), Shard(1))) == (Replicate(), Shard(1))


def test_value_shapes_broadcast_as_numpy_assigns():
    assert check_value_shape("setitem", (1, 1, 3), (3,)) == (3,)
    assert check_value_shape("setitem", (2, 1), (2, 5)) == (2, 1)
    with pytest.raises(ValueError, match=r"from shape \(4,\) into shape \(3,\)"):
        check_value_shape("setitem", (4,), (3,))


def all_slices(size):
    """Slices of a dim of ``size`` (steps +-1..3), one per distinct ``range`` they pick."""
    bounds = list(range(-size - 2, size + 3)) + [None]
    out = {slice(a, b, s).indices(size): slice(a, b, s) for a in bounds for b in bounds
           for s in (1, 2, 3, -1, -2, -3)}
    return [out[k] for k in sorted(out)]


def check_plans(key, shape, blocks):
    """``block_plan`` of ``key`` for the blocks at ``blocks`` (global bounds) against numpy:
    each block's picked elements, in order, are the region's elements its plan names; returns
    how many each block holds."""
    full = np.arange(int(np.prod(shape))).reshape(shape)
    entries = normalize_index(key, shape)
    region = full[key]
    coords = [c[key] for c in np.indices(shape)]
    counts = []
    for bounds in blocks:
        block = full[tuple(slice(lo, hi) for lo, hi in bounds)]
        inside = np.ones(region.shape, bool)
        for coord, (lo, hi) in zip(coords, bounds):
            inside &= (coord >= lo) & (coord < hi)
        plan = block_plan(entries, shape, bounds)
        counts.append(int(inside.sum()))
        if plan is None:
            assert not inside.any(), f"{key} at {bounds}: the block holds {region[inside]}"
            continue
        block_key, region_key = plan
        np.testing.assert_array_equal(block[block_key], region[region_index(region_key)])
        held = np.zeros(region.shape, bool)
        held[region_index(region_key)] = True
        np.testing.assert_array_equal(held, inside, f"{key} at {bounds}")
    return counts


def test_every_slice_of_small_dims_in_every_block():
    for size in range(6):
        blocks = [((lo, hi),) for lo in range(size + 1) for hi in range(lo, size + 1)]
        for key in all_slices(size):
            picked = range(size)[key]
            assert check_plans(key, (size,), blocks) == [
                len([i for i in picked if lo <= i < hi]) for ((lo, hi),) in blocks]


KEYS_2D = [
    (1,), (-1, 2), (slice(None), -3), (None, 2, None), (Ellipsis, 1), (Ellipsis, None),
    (np.int32(2), slice(3, None, -2)), (slice(4, 0, -2), slice(1, 3)),
    ([3, 0, 3],), ([[0, 4], [2, 2]], slice(None, None, -1)), (slice(None), [1, 0]),
    ([4, -5], [-1, 0]), ([[1], [3]], [0, 2, 3]), (2, [3, 0]), ([1, 2], 0),
    ([0, 2], None, [1, 1]), (None, [0, 2], [3, 1]), ([4, 1], slice(2, None)),
    (np.array([True, False, True, True, False]),), (slice(None), np.array([0, 1, 1, 0])),
    (np.array([[True, False, False, True]] * 5),), (Ellipsis, [2, 2, 2]), ([],),
    (slice(1, 1), [2, 0]), ([0, 3], slice(3, 1)), (0, None, 3),
    (np.array(3), 1), (np.array(4), slice(1, 3)), (slice(None), np.array(-1)),
    (None, np.array(2), None, np.array(0)),
]


@pytest.mark.parametrize("key", KEYS_2D)
def test_block_plans_against_numpy_for_every_block_of_small_meshes(key):
    shape = (5, 4)
    full = np.zeros(shape)
    assert region_layout(normalize_index(key, shape), shape)[0] == full[key].shape
    blocks = {tuple(local_bounds(shape, mesh, placements, c))
              for mesh, placements in [((2,), (Shard(0),)), ((3,), (Shard(1),)),
                                       ((2, 3), (Shard(0), Shard(1))),
                                       ((3, 2), (Shard(1), Shard(1))), ((4,), (Shard(0),))]
              for c in mesh_coords(mesh)}
    blocks.add(((0, 5), (0, 4)))
    check_plans(key, shape, sorted(blocks))


def test_whole_dims_map_to_the_region_dim_that_runs_along_them():
    shape = (3, 4, 2)
    for key in [(slice(None), 1), (None, Ellipsis, 0), ([0, 2], slice(None), [1, 0]),
                (slice(None), [1, 3], [0, 1]), (1, slice(None), slice(None, None, -1)),
                (slice(None), None, [[0], [1]], slice(0, 2))]:
        entries = normalize_index(key, shape)
        region, whole_to, fancy = region_layout(entries, shape)
        assert fancy == np.broadcast_shapes(*[np.shape(k) for k in key
                                              if isinstance(k, list)])
        for d, e in enumerate(e for e in entries if e[0] != "n"):
            assert (whole_to[d] is None) == (e[:1] + e[1:] != ("s", 0, shape[d], 1))
            if whole_to[d] is not None:
                coord = np.indices(shape)[d][key]
                for i in range(shape[d]):
                    assert (np.take(coord, i, axis=whole_to[d]) == i).all(), (key, d)


def test_value_placements_give_each_rank_the_part_it_writes():
    shape = (6, 5, 4)
    meshes = [((2, 3), (Shard(0), Shard(1))), ((3, 2), (Shard(2), Shard(0))),
              ((2, 2), (Shard(1), Partial("max"))), ((2,), (Replicate(),))]
    for key in [(slice(None), 2), (slice(1, 5), slice(None), [0, 3]),
                (None, slice(None), [1, 1], slice(None)), ([0, 5], slice(None), [1, 2]),
                (Ellipsis, slice(None, None, -1)), (slice(None), slice(None), 3)]:
        entries = normalize_index(key, shape)
        region = region_layout(entries, shape)[0]
        for mesh, placements in meshes:
            vp = value_placements(entries, shape, placements)
            assert [isinstance(p, Partial) for p in vp] == [
                isinstance(p, Partial) for p in placements]
            assert [p for p in vp if isinstance(p, Partial)] == [
                p for p in placements if isinstance(p, Partial)]
            for c in mesh_coords(mesh):
                plan = block_plan(entries, shape, local_bounds(shape, mesh, placements, c))
                if plan is None:
                    continue
                have = local_bounds(region, mesh, vp, c)
                for r, span in enumerate(plan[1]):
                    if not isinstance(span, tuple):
                        continue        # broadcast array dims: the value is whole there
                    assert have[r][0] <= span[0] and span[1] <= have[r][1], (key, placements)
                    if Shard(r) in vp:  # split alike: the rank holds exactly what it writes
                        assert have[r] == span, (key, placements, c)


def test_region_index_shifts_pairs_by_offsets_and_keeps_arrays():
    arr = np.array([2, 0])
    assert region_index(((1, 4), arr, (0, 2))) == (slice(1, 4), arr, slice(0, 2))
    got = region_index(((3, 5), arr, (2, 6)), [3, 9, 1])
    assert got[0] == slice(0, 2) and got[1] is arr and got[2] == slice(1, 5)


def test_index_error_messages_name_the_op_key_and_shape():
    msgs = [
        ((np.array([0, -4]),), (3,), "setitem: index -4 is out of bounds for dim 0 of shape "
                                     "(3,) (size 3)"),
        ((np.array([5, -1]),), (3,), "setitem: index 5 is out of bounds for dim 0 of shape "
                                     "(3,) (size 3)"),
        ((np.array([-3, 3]),), (3,), "setitem: index 3 is out of bounds for dim 0 of shape "
                                     "(3,) (size 3)"),
        ((1, np.array([3, 0])), (4, 3), "setitem: index 3 is out of bounds for dim 1 of shape "
                                        "(4, 3) (size 3)"),
        ((0, -3), (4, 2), "setitem: index -3 is out of bounds for dim 1 of shape (4, 2) "
                          "(size 2)"),
        ((4,), (4, 2), "setitem: index 4 is out of bounds for dim 0 of shape (4, 2) (size 4)"),
        ((True,), (3,), "setitem: a bare bool index (True) is not supported on DTensors; index "
                        "with a boolean array of the indexed dims' shape"),
        ((0, np.False_), (3, 2), "setitem: a bare bool index (np.False_) is not supported"),
        ((Ellipsis, 0, Ellipsis), (3,), "setitem: an index can only have a single ellipsis "
                                        "('...')"),
        ((0, 0, None, 0), (2, 3), "setitem: index (0, 0, None, 0) has too many entries for "
                                  "shape (2, 3)"),
        ((0, np.ones((3, 2), bool)), (2, 3), "setitem: index (0, array("),
        ((np.ones((2, 2), bool),), (2, 3), "setitem: boolean index of shape (2, 2) does not "
                                           "match dims 0..1 of shape (2, 3)"),
        ((0, np.ones(2, bool)), (2, 3, 4), "setitem: boolean index of shape (2,) does not "
                                           "match dims 1..1 of shape (2, 3, 4)"),
        ((["a"],), (3,), "setitem: only integers, slices, None, ..., and integer or boolean "
                         "arrays are valid indices; got list of dtype <U1"),
        ((np.array([], float),), (3,), "setitem: only integers, slices, None, ..., and "
                                       "integer or boolean arrays are valid indices; got "
                                       "ndarray of dtype float64"),
        (([2.0],), (3,), "setitem: only integers, slices, None, ..., and integer or "
                         "boolean arrays are valid indices; got list of dtype float64"),
        (([0, None],), (3,), "setitem: only integers, slices, None, ..., and integer or "
                             "boolean arrays are valid indices; got list of dtype object"),
    ]
    for key, shape, msg in msgs:
        with pytest.raises(IndexError, match=f"^{re.escape(msg)}"):
            normalize_index(key, shape, "setitem")
    with pytest.raises(IndexError, match=f"^{re.escape('getitem: index 7 is out')}"):
        normalize_index(7, (3,))


def test_keys_numpy_takes_as_they_are():
    # an empty list picks nothing (numpy reads it as integers), a tuple key is a multi-dim key
    assert normalize_index([], (3,))[0][1].dtype == np.intp
    assert normalize_index((), (3,)) == (("s", 0, 3, 1),)
    entries = normalize_index((np.int64(-1), [True, False, True]), (2, 3))
    assert [e[0] for e in entries] == ["a", "a"]
    assert entries[0][1].shape == () and int(entries[0][1]) == 1
    np.testing.assert_array_equal(entries[1][1], [0, 2])
    assert normalize_index((np.uint8(2), Ellipsis), (3, 2)) == (("i", 2), ("s", 0, 2, 1))
    (kind, arr), = normalize_index(np.array([2, 0], np.uint16), (3,))
    assert kind == "a" and arr.tolist() == [2, 0]
    (kind, arr), = normalize_index(np.array([[2, 0]], np.int8), (3,))
    assert kind == "a" and arr.tolist() == [[2, 0]]
    assert is_advanced(entries) and not is_advanced(normalize_index(1, (2,)))
    assert plain_key(normalize_index((None, 1, slice(2, None, -1)), (3, 4))) == (
        None, 1, slice(2, None, -1))
    assert plain_key(normalize_index(slice(5, 0, -1), (3,))) == (slice(2, 0, -1),)
    assert plain_key(normalize_index(slice(2, 2), (3,))) == (slice(0, 0),)


def test_index_arrays_that_do_not_broadcast():
    with pytest.raises(IndexError, match=re.escape(
            "shape mismatch: indexing arrays could not be broadcast together with shapes "
            "(2,) (3,)")):
        region_layout(normalize_index(([0, 1], [0, 1, 2]), (3, 3)), (3, 3))


def test_value_shapes_numpy_accepts_and_refuses():
    for value, region in [((), (2, 3)), ((1,), (2, 3)), ((3,), (2, 3)), ((1, 1, 2, 3), (2, 3)),
                          ((1, 1, 1), ()), ((2, 1), (2, 3)), ((0,), (0,)), ((1,), (0,))]:
        np.empty(region)[...] = np.zeros(value)      # numpy agrees
        got = check_value_shape("setitem", value, region)
        assert len(got) <= len(region) or all(s == 1 for s in got[:len(got) - len(region)])
        assert np.broadcast_shapes(got, region) == region
    # leading 1s go only while the value has more dims than the region (numpy's rule)
    assert check_value_shape("setitem", [1, 1, 3], (3,)) == (3,)
    assert check_value_shape("setitem", (1, 2, 3), (2, 3)) == (2, 3)
    assert check_value_shape("setitem", (1, 1), (1,)) == (1,)
    assert check_value_shape("setitem", (1,), (2, 3)) == (1,)
    assert check_value_shape("setitem", (1, 3), (2, 3)) == (1, 3)
    for value, region in [((2,), (2, 3)), ((1, 2, 3), (3,)), ((3, 2), (2, 3)), ((2,), ())]:
        with pytest.raises(ValueError):
            np.empty(region)[...] = np.zeros(value)
        with pytest.raises(ValueError, match=re.escape(
                "setitem: could not broadcast input array from shape")):
            check_value_shape("setitem", value, region)
    with pytest.raises(ValueError, match=re.escape(
            "index_put: could not broadcast input array from shape (3, 2) into shape (2, 3)")):
        check_value_shape("index_put", (1, 3, 2), (2, 3))
