"""The pure decisions of the checkpoint format (no MPI, no zarr): chunk grids aligned with
every block, who writes, leaf names, scalars, structure and rotation."""
import collections
import itertools
import math
import sys

import pytest

from mtensor.checkpoint import layout
from mtensor.placement import Partial, Replicate, Shard, local_bounds, mesh_coords


def all_layouts(mesh_ndim, tensor_ndim):
    per_dim = [Replicate(), Partial()] + [Shard(d) for d in range(tensor_ndim)]
    return itertools.product(per_dim, repeat=mesh_ndim)


@pytest.mark.parametrize("mesh_shape", [(1,), (2,), (3,), (4,), (8,), (2, 2), (3, 1), (2, 4),
                                        (2, 2, 2)], ids=str)
@pytest.mark.parametrize("shape", [(7, 5), (12, 8), (2, 3), (0, 4), (9,), ()], ids=str)
def test_every_block_is_whole_chunks(mesh_shape, shape):
    for placements in all_layouts(len(mesh_shape), len(shape)):
        points = layout.split_points(shape, mesh_shape, placements)
        chunks = layout.chunk_shape(shape, 8, points)
        assert len(chunks) == len(shape) and all(c >= 1 for c in chunks)
        for coord in mesh_coords(mesh_shape):
            for (lo, hi), size, c in zip(local_bounds(shape, mesh_shape, placements, coord),
                                         shape, chunks):
                assert lo % c == 0 and (hi % c == 0 or hi == size), (placements, coord)


def test_chunk_examples():
    assert layout.chunk_shape((8, 5), 8, layout.split_points((8, 5), (4,), (Shard(0),))) == (2, 5)
    assert layout.chunk_shape((7, 5), 8, layout.split_points((7, 5), (4,), (Shard(0),))) == (2, 5)
    assert layout.chunk_shape((7, 5), 8, layout.split_points((7, 5), (3,), (Shard(0),))) == (1, 5)
    replicated = layout.split_points((7, 5), (2,), (Replicate(),))
    assert layout.chunk_shape((7, 5), 8, replicated) == (7, 5)
    # two mesh dims on one tensor dim: 16 rows in 2 then 4 pieces of 2
    points = layout.split_points((16, 3), (2, 4), (Shard(0), Shard(0)))
    assert layout.chunk_shape((16, 3), 8, points) == (2, 3)


def test_big_chunks_are_cut_and_stay_aligned():
    shape = (4096, 3000)
    points = layout.split_points(shape, (4,), (Shard(1),))       # splits at 750, 1500, 2250
    chunks = layout.chunk_shape(shape, 8, points, max_bytes=1 << 20)
    assert math.prod(chunks) * 8 <= 1 << 20
    assert 750 % chunks[1] == 0
    unsplit = layout.chunk_shape((10_000,), 4, [[]], max_bytes=4096)
    assert unsplit[0] * 4 <= 4096


def test_writes_block_once_per_replica_group():
    placements = (Shard(0), Replicate())
    writers = [c for c in mesh_coords((2, 3)) if layout.writes_block(placements, c)]
    assert writers == [(0, 0), (1, 0)]
    assert [c for c in mesh_coords((4,)) if layout.writes_block((Partial(),), c)] == [(0,)]
    assert all(layout.writes_block((Shard(1), Shard(0)), c) for c in mesh_coords((2, 2)))


def test_leaf_names():
    assert layout.leaf_name(("opt", 0, "w")) == "opt.0.w"
    assert layout.leaf_name(()) == "_root"
    assert layout.leaf_name(("a.b", "x/y", "__z", "")) == "a%2Eb.x%2Fy.%5F_z.%"
    with pytest.raises(ValueError, match="same stored name"):
        layout.unique_names([(1,), ("1",)])
    assert layout.path_text(("opt", 0)) == "['opt'][0]"


@pytest.mark.parametrize("value", [0, -3, 2 ** 80, 1.5, -0.0, float("inf"), 1e-310, True,
                                   False, None, "", "päth"])
def test_scalars_round_trip_bit_for_bit(value):
    back = layout.decode_scalar(layout.encode_scalar(value))
    assert type(back) is type(value) and repr(back) == repr(value)


def test_nan_round_trips():
    assert math.isnan(layout.decode_scalar(layout.encode_scalar(float("nan"))))


def test_structure_round_trips():
    Pair = collections.namedtuple("Pair", "a b")
    tree = {"b": [1, (2, None)], "a": {"x": 3, 4: Pair(5, 6)}, "d": collections.deque([7])}
    leaves, paths = layout.leaf_paths(tree)
    names = layout.unique_names(paths)
    node = layout.encode_structure(tree, iter(names))
    back = layout.decode_structure(node, dict(zip(names, leaves)))
    assert back == {"b": [1, (2, None)], "a": {"x": 3, 4: (5, 6)}, "d": [7]}


def test_rotation_keeps_the_newest_numbers():
    siblings = ["step-1", "step-2", "step-10", "step-3", "other-5", "step-x", "step-4.tmp-1"]
    assert layout.to_delete("step-10", siblings, 2) == ["step-1", "step-2"]
    assert layout.to_delete("step-2", siblings, 1) == ["step-1", "step-3"]   # never itself
    with pytest.raises(ValueError, match="step number"):
        layout.to_delete("final", siblings, 2)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_publish_replaces_a_directory(tmp_path, monkeypatch, exchange):
    """The commit's rename, with the atomic swap and with the fallback of other systems."""
    from mtensor.checkpoint import store
    if exchange and not sys.platform.startswith("linux"):
        pytest.skip("renameat2 is Linux's")
    if not exchange:
        monkeypatch.setattr(store, "_exchange", lambda a, b: False)
    path, new = tmp_path / "ck", tmp_path / "ck.tmp-1"
    new.mkdir()
    (new / "v").write_text("1")
    assert store.publish(str(new), str(path)) == ""              # nothing to replace
    new.mkdir()
    (new / "v").write_text("2")
    old = store.publish(str(new), str(path))
    assert (path / "v").read_text() == "2" and (tmp_path / old.split("/")[-1] / "v").exists()
    assert old.startswith(str(path) + (".tmp-" if exchange else ".old-"))
