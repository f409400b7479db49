"""The index planner against numpy itself: region shapes, and blocks that partition the
region exactly (every element once, in numpy's order), for random keys and splits."""
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from mtensor.ops.index_plan import (
    block_plan, check_value_shape, normalize_index, region_index, region_layout,
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
