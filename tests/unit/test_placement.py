"""Layout arithmetic against brute force numpy.array_split (no MPI)."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.placement import (
    REDUCE_OPS,
    Partial,
    Replicate,
    Shard,
    local_bounds,
    local_offset,
    local_shape,
    local_slices,
    max_local_shape,
    mesh_coords,
    reduced,
    shard_bounds,
    shard_counts,
)


@pytest.fixture(autouse=True)
def fresh_block_cache():
    """max_local_shape is cached: start each test empty so that it really computes."""
    max_local_shape.cache_clear()


def test_reprs_and_values():
    assert [repr(p) for p in (Shard(0), Replicate(), Partial(), Partial("max"))] == [
        "S(0)", "R", "P(sum)", "P(max)"]
    assert Shard(1) == Shard(1) and Shard(1) != Shard(0)
    assert len({Shard(0), Shard(0), Replicate(), Replicate(), Partial("sum")}) == 3
    with pytest.raises(AttributeError):
        Shard(0).dim = 1


def test_partial_rejects_unknown_op():
    with pytest.raises(ValueError, match="unknown reduce_op 'prod'"):
        Partial("prod")


@pytest.mark.parametrize("op, dtype, identity", [
    ("sum", np.float32, 0), ("avg", np.int64, 0), ("max", np.float64, -np.inf),
    ("min", np.float64, np.inf), ("max", np.int32, np.iinfo(np.int32).min),
    ("min", np.uint8, 255), ("max", np.bool_, False), ("min", np.bool_, True),
])
def test_reduce_op_identity(op, dtype, identity):
    value = Partial(op).op.identity(dtype)
    assert value == identity
    reduce = Partial(op).op.ufunc
    sample = np.array([3, 1], dtype=dtype)
    assert np.array_equal(reduce(sample, np.asarray(value, dtype=dtype)), sample)


@given(st.integers(0, 40), st.integers(1, 9))
def test_shard_counts_match_array_split(size, n):
    pieces = np.array_split(np.arange(size), n)
    assert shard_counts(size, n) == tuple(len(p) for p in pieces)
    for k, piece in enumerate(pieces):
        lo, hi = shard_bounds(size, n, k)
        assert list(range(lo, hi)) == piece.tolist()


def _brute_block(full, mesh_shape, placements, coord):
    """Cut the block by splitting with numpy.array_split, mesh dim 0 first."""
    index = [np.arange(s) for s in full.shape]
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            index[p.dim] = np.array_split(index[p.dim], mesh_shape[i])[coord[i]]
    return full[np.ix_(*index)]


layouts = st.integers(1, 3).flatmap(
    lambda ndim: st.tuples(
        st.lists(st.integers(0, 9), min_size=ndim, max_size=ndim),
        st.lists(st.integers(1, 4), min_size=1, max_size=3),
    )
).flatmap(
    lambda sm: st.tuples(
        st.just(tuple(sm[0])),
        st.just(tuple(sm[1])),
        st.lists(
            st.one_of(st.just(Replicate()), st.just(Partial()),
                      st.integers(0, len(sm[0]) - 1).map(Shard)),
            min_size=len(sm[1]), max_size=len(sm[1]),
        ),
    )
)


@settings(max_examples=300, deadline=None)
@given(layouts)
def test_local_blocks_match_brute_force(layout):
    shape, mesh_shape, placements = layout
    full = np.arange(int(np.prod(shape))).reshape(shape)
    for coord in itertools.product(*(range(n) for n in mesh_shape)):
        block = full[local_slices(shape, mesh_shape, placements, coord)]
        assert np.array_equal(block, _brute_block(full, mesh_shape, placements, coord))
        assert block.shape == local_shape(shape, mesh_shape, placements, coord)
        if block.size:  # the offset is the global index of the block's first element
            first = np.unravel_index(block.flat[0], shape)
            assert local_offset(shape, mesh_shape, placements, coord) == tuple(first)


@settings(max_examples=200, deadline=None)
@given(layouts)
def test_sharded_blocks_tile_the_tensor(layout):
    shape, mesh_shape, placements = layout
    cover = np.zeros(shape, dtype=int)
    sharding = [i for i, p in enumerate(placements) if isinstance(p, Shard)]
    for sub in itertools.product(*(range(mesh_shape[i]) for i in sharding)):
        coord = [0] * len(mesh_shape)
        for i, c in zip(sharding, sub):
            coord[i] = c
        cover[local_slices(shape, mesh_shape, placements, coord)] += 1
    assert (cover == 1).all()


def test_nested_sharding_splits_mesh_dim_0_first():
    # 7 rows on a (2, 2) mesh as [S(0), S(0)]: mesh dim 0 gives 4 | 3, then 2 2 | 2 1.
    bounds = [local_bounds((7,), (2, 2), (Shard(0), Shard(0)), c)[0]
              for c in [(0, 0), (0, 1), (1, 0), (1, 1)]]
    assert bounds == [(0, 2), (2, 4), (4, 6), (6, 7)]


def test_dim_smaller_than_mesh_gives_empty_shards():
    shapes = [local_shape((3, 2), (4,), (Shard(0),), (c,)) for c in range(4)]
    assert shapes == [(1, 2), (1, 2), (1, 2), (0, 2)]
    assert max_local_shape((3, 2), (4,), (Shard(0),)) == (1, 2)


def test_partial_error_lists_the_known_ops():
    with pytest.raises(ValueError) as info:
        Partial("mean")
    assert str(info.value) == ("Partial: unknown reduce_op 'mean'; "
                               "use one of 'sum', 'avg', 'max', 'min'")
    assert Partial().reduce_op == "sum" and Partial().op is REDUCE_OPS["sum"]


@pytest.mark.parametrize("name, ufunc, linear, idempotent, mpi", [
    ("sum", np.add, True, False, "SUM"),      # x + x != x; sum(k a, k b) = k sum(a, b)
    ("avg", np.add, True, True, "SUM"),       # the mean of equal terms is the term
    ("max", np.maximum, False, True, "MAX"),  # max(x, 1) is not linear in x
    ("min", np.minimum, False, True, "MIN"),
])
def test_reduce_op_table(name, ufunc, linear, idempotent, mpi):
    op = Partial(name).op
    assert (op.name, op.ufunc, op.linear, op.idempotent, op.mpi) == (
        name, ufunc, linear, idempotent, mpi)


@pytest.mark.parametrize("op, dtype", [("sum", np.int8), ("avg", np.complex64), ("max", np.int16),
                                       ("min", np.float32), ("sum", np.bool_)])
def test_identity_has_the_dtype_or_is_a_python_value_numpy_casts_exactly(op, dtype):
    value = Partial(op).op.identity(dtype)
    assert np.asarray(value, dtype=dtype).item() == value
    if op in ("sum", "avg"):
        assert type(value) is np.dtype(dtype).type and value == 0


def test_reduced_makes_every_partial_replicate():
    assert reduced((Shard(1), Partial("max"), Replicate(), Partial())) == (
        Shard(1), Replicate(), Replicate(), Replicate())
    assert reduced(()) == ()


@pytest.mark.parametrize("mesh", [(1,), (3,), (2, 3), (2, 1, 2)])
def test_mesh_coords_in_rank_order(mesh):
    assert mesh_coords(mesh) == tuple(itertools.product(*(range(n) for n in mesh)))


@pytest.mark.parametrize("shape, mesh, placements", [
    ((7, 5), (2, 3), (Shard(0), Shard(1))), ((7, 5), (2, 3), (Shard(1), Shard(1))),
    ((3,), (4,), (Shard(0),)), ((9, 2), (2, 2), (Partial(), Shard(0))),
])
def test_max_local_shape_is_the_largest_block(shape, mesh, placements):
    biggest = max((local_shape(shape, mesh, placements, c) for c in mesh_coords(mesh)),
                  key=lambda s: int(np.prod(s)))
    assert max_local_shape(shape, mesh, placements) == biggest
