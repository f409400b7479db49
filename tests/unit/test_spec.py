"""Spec metadata and validation (mtensor.spec) against brute force over small shapes and
meshes: global shapes recovered from every rank's array_split block, the checks' exact errors
(type, and a message naming the op, shapes and placements)."""
import re
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.placement import Partial, Replicate, Shard, local_shape, mesh_coords
from mtensor.spec import (
    DTensorSpec,
    check_local_shapes,
    check_no_partial_target,
    check_placements,
    check_same_mesh,
    check_shape,
    infer_global_shape,
)

R, S0, S1, S2 = Replicate(), Shard(0), Shard(1), Shard(2)


@dataclass(frozen=True)
class Mesh:
    """What the spec functions read of a DeviceMesh: its shape and device type."""
    shape: tuple
    device_type: str = "cpu"


CPU = Mesh((2, 3))


def test_spec_hashes_its_fields_once_and_shows_placements_shape_dtype():
    mesh = ("mesh", 4)      # any hashable mesh stands in
    spec = DTensorSpec(mesh, (S0, R), (4, 6), np.dtype("f4"))
    assert hash(spec) == hash((mesh, (S0, R), (4, 6), np.dtype("f4")))
    twin = DTensorSpec(mesh, (S0, R), (4, 6), np.dtype("f4"))
    assert spec == twin and hash(spec) == hash(twin)
    assert hash(spec) != hash(DTensorSpec(mesh, (S1, R), (4, 6), np.dtype("f4")))
    assert repr(spec) == "Spec([S(0), R], shape=(4, 6), dtype=float32)"
    assert DTensorSpec(CPU, (R, R), (), np.dtype("i8")).device == "cpu"


def test_check_placements_normalizes_negative_dims_and_returns_a_tuple():
    got = check_placements("redistribute", [Shard(-1), Partial("max")], CPU, [4, 5, 6])
    assert got == (S2, Partial("max")) and isinstance(got, tuple)
    assert check_placements("x", (R, Shard(-3)), CPU, (4, 5, 6)) == (R, S0)


@pytest.mark.parametrize("placements, shape, err, msg", [
    ((S0, "S1"), (4, 5), TypeError,
     "op1: placements must be Shard(dim), Replicate() or Partial(op); got 'S1'"),
    ((S0,), (4, 5), ValueError,
     "op1: placements [S(0)] have 1 entries but the mesh (2, 3) has 2 dims; give one "
     "placement per mesh dim"),
    ((R, Shard(2)), (4, 5), ValueError,
     "op1: placements [R, S(2)] shard tensor dim 2 but the tensor has shape (4, 5) (2 dims); "
     "shard a dim in range(-2, 2) or use Replicate()"),
    ((Shard(-3), R), (4, 5), ValueError, "shard tensor dim -3 but the tensor has shape"),
])
def test_check_placements_errors(placements, shape, err, msg):
    with pytest.raises(err, match=re.escape(msg)):
        check_placements("op1", list(placements), CPU, list(shape))


def test_check_shape_takes_ints_and_sizes_at_least_zero():
    got = check_shape("zeros", [np.int64(3), 0, 2.0], 3)
    assert got == (3, 0, 2) and all(type(s) is int for s in got)
    msg = "zeros: shape {} does not fit a {}-D local block; give {} sizes >= 0"
    with pytest.raises(ValueError, match=re.escape(msg.format((3, -1), 2, 2))):
        check_shape("zeros", (3, -1), 2)
    with pytest.raises(ValueError, match=re.escape(msg.format((3, 1), 3, 3))):
        check_shape("zeros", (3, 1), 3)


def test_check_same_mesh_names_both_meshes_and_differing_devices():
    same = Mesh((2, 3))
    assert check_same_mesh("add", CPU, same) is None
    other = Mesh((3, 2))
    with pytest.raises(ValueError, match=re.escape(
            f"add: operands live on different meshes ({CPU} and {other}); redistribute one "
            f"onto the other's mesh first")):
        check_same_mesh("add", CPU, other)
    gpu = Mesh((2, 3), "cuda")
    with pytest.raises(ValueError, match=re.escape(
            f"add: operands live on different meshes ({CPU} and {gpu}) and devices (cpu and "
            f"cuda); redistribute")):
        check_same_mesh("add", CPU, gpu)


def test_check_no_partial_target():
    assert check_no_partial_target("redistribute", (S0, R)) is None
    with pytest.raises(ValueError, match=re.escape(
            "redistribute: target placements [R, P(avg)] contain Partial; a Partial layout can "
            "only come out of an op, redistribute to Replicate() or Shard(dim) instead")):
        check_no_partial_target("redistribute", (R, Partial("avg")))


@st.composite
def layouts(draw):
    shape = tuple(draw(st.lists(st.integers(0, 7), min_size=1, max_size=3)))
    mesh_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    options = [R, Partial("sum")] + [Shard(d) for d in range(len(shape))]
    placements = tuple(draw(st.sampled_from(options)) for _ in mesh_shape)
    return shape, mesh_shape, placements


def array_split_blocks(shape, mesh_shape, placements, dtype="f8"):
    """Each rank's (block shape, dtype), brute force: np.array_split applied mesh dim by mesh
    dim to an index array of ``shape`` (the layout the spec functions must agree with)."""
    out = []
    for c in mesh_coords(mesh_shape):
        block = np.zeros(shape)
        for m, p in enumerate(placements):
            if isinstance(p, Shard):
                block = np.array_split(block, mesh_shape[m], axis=p.dim)[c[m]]
        out.append((block.shape, np.dtype(dtype)))
    return out


@settings(max_examples=60, deadline=None, derandomize=True)
@given(layouts())
def test_global_shape_is_recovered_from_every_ranks_block(layout):
    shape, mesh_shape, placements = layout
    blocks = array_split_blocks(shape, mesh_shape, placements)
    assert [b for b, _ in blocks] == [local_shape(shape, mesh_shape, placements, c)
                                      for c in mesh_coords(mesh_shape)]
    assert infer_global_shape(blocks, mesh_shape, placements) == shape
    assert check_local_shapes(blocks, mesh_shape, placements, shape) is None


def test_global_shape_hand_worked():
    # mesh (2, 2), dim 0 split by both mesh dims: 7 -> 4 + 3 -> (2, 2) and (2, 1)
    blocks = [((2, 5), "f4"), ((2, 5), "f4"), ((2, 5), "f4"), ((1, 5), "f4")]
    assert infer_global_shape(blocks, (2, 2), (S0, S0)) == (7, 5)
    # dim 1 split by mesh dim 1 only: the ranks at mesh-dim-0 coordinate 0 hold 3 + 2
    blocks = [((4, 3), "f4"), ((4, 2), "f4"), ((4, 3), "f4"), ((4, 2), "f4")]
    assert infer_global_shape(blocks, (2, 2), (R, S1)) == (4, 5)
    # a rank whose block lacks the sharded dim adds nothing to it (check_local_shapes then
    # reports that rank)
    blocks = [((3, 1), "f4"), ((3,), "f4")]
    assert infer_global_shape(blocks, (2,), (S1,)) == (3, 1)
    with pytest.raises(ValueError, match=re.escape("rank 1 (mesh coordinate [1]) holds a block "
                                                   "of shape (3,)")):
        check_local_shapes(blocks, (2,), (S1,), (3, 1))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(layouts(), st.data())
def test_a_block_off_the_array_split_layout_is_named(layout, data):
    shape, mesh_shape, placements = layout
    blocks = array_split_blocks(shape, mesh_shape, placements)
    rank = data.draw(st.integers(0, len(blocks) - 1))
    dim = data.draw(st.integers(0, len(shape) - 1))
    bad = list(blocks[rank][0])
    bad[dim] += data.draw(st.sampled_from([1, 2]))
    blocks[rank] = (tuple(bad), blocks[rank][1])
    c = mesh_coords(mesh_shape)[rank]
    want = local_shape(shape, mesh_shape, placements, c)
    placed = "[" + ", ".join(map(repr, placements)) + "]"
    with pytest.raises(ValueError, match=re.escape(
            f"from_local: rank {rank} (mesh coordinate {list(c)}) holds a block of shape "
            f"{tuple(bad)} but placements {placed} of global shape {shape} give it {want} "
            f"(numpy.array_split layout); pass blocks split that way, or the right shape=")):
        check_local_shapes(blocks, mesh_shape, placements, shape)


def test_first_rank_off_the_layout_is_reported():
    blocks = [((3,), "f8"), ((9,), "f8"), ((9,), "f8")]
    with pytest.raises(ValueError, match=r"^from_local: rank 1 \(mesh coordinate \[1\]\)"):
        check_local_shapes(blocks, (3,), (S0,), (9,))


def test_blocks_of_mixed_dtypes_are_refused():
    blocks = [((2, 3), "f4"), ((2, 3), "f8"), ((2, 3), "i4"), ((2, 3), "f4")]
    with pytest.raises(ValueError, match=re.escape(
            "from_local: rank 1 holds dtype float64 but rank 0 holds float32; every rank must "
            "pass blocks of one dtype")):
        check_local_shapes(blocks, (2, 2), (R, R), (2, 3))
    # dtypes given as names or types compare as numpy dtypes
    assert check_local_shapes([((2,), "f4"), ((2,), np.float32)], (2,), (R,), (2,)) is None
