"""Helper of tests/test_checkpoint_resume.py: save a tree of uneven DTensors on one mesh, load
it on another rank count, mesh and placements, and check every leaf bit for bit.

    mpiexec -n 4 python tests/checkpoint_roundtrip.py save DIR   # on a (2, 2) mesh
    mpiexec -n N python tests/checkpoint_roundtrip.py load DIR   # any N: 1-D and 2-D meshes
    python tests/checkpoint_roundtrip.py plain DIR                # no template, no MPI
    mpiexec -n 2 python tests/checkpoint_roundtrip.py int-partial DIR   # int64 loaded as Partial

``save`` writes leaves of known values (``expected()``: seeded, so every process knows them):
(7, 5) float64 S(0) on dp, (5, 3) float32 S(1) on tp, (6,) replicated, (3, 5) float64
Partial(sum) on dp and S(1) on tp whose terms are not the value itself (the save must reduce
them), (9, 4) int64 sharded on both mesh dims, a numpy array and scalars.  ``load`` loads
them on every mesh the rank count allows, once per set of target placements (other Shard
dims, Replicate, Shard on the other mesh dim, Partial; the int64 leaf never as Partial: see
``target``), and compares each leaf's full value and local block with ``expected()`` as raw
bytes.  Rank 0 prints "roundtrip ok" at the end.
"""
import sys

import numpy as np

import mtensor as mt
from mtensor import Partial, Replicate, Shard
from mtensor.placement import local_slices

SCALARS = {"step": 7, "name": "roundtrip", "scale": 0.5, "flag": True, "nothing": None}


def expected():
    """The full value of every array leaf."""
    rng = np.random.default_rng(1234)
    return {"a": rng.standard_normal((7, 5)),
            "b": rng.standard_normal((5, 3)).astype(np.float32),
            "c": rng.standard_normal(6),
            "d": rng.integers(-1000, 1000, (3, 5)).astype(np.float64) / 8,   # exact sums
            "e": np.arange(36, dtype=np.int64).reshape(9, 4) * 7 - 100,
            "table": np.arange(10, dtype=np.int32)}


def partial_terms(full, mesh, placements):
    """This rank's term of a Partial(sum) on mesh dim 0 holding ``full``: the block plus a
    multiple of 1/4 that the terms of that mesh dim cancel exactly (float64 sums of such
    numbers are exact), so the saved value is right only if the save reduces the terms."""
    block = full[local_slices(full.shape, mesh.shape, [Replicate()] + list(placements[1:]),
                              mesh.coordinate)]
    n, c = mesh.shape[0], mesh.coordinate[0]
    return block + 0.25 * (n - 1) if c == 0 else np.full_like(block, -0.25)


def save(path):
    mesh = mt.init_device_mesh((2, 2), mesh_dim_names=("dp", "tp"))
    full = expected()
    d_placements = [Partial(), Shard(1)]
    state = {
        "a": mt.distribute_tensor(full["a"], mesh, [Shard(0), Replicate()]),
        "b": mt.distribute_tensor(full["b"], mesh, [Replicate(), Shard(1)]),
        "c": mt.distribute_tensor(full["c"], mesh, [Replicate(), Replicate()]),
        "d": mt.DTensor.from_local(partial_terms(full["d"], mesh, d_placements), mesh,
                                   d_placements, shape=full["d"].shape),
        "e": mt.distribute_tensor(full["e"], mesh, [Shard(0), Shard(1)]),
        "nested": {"table": full["table"], **SCALARS},
    }
    assert np.array_equal(state["d"].full_tensor(), full["d"])      # the terms sum exactly
    mt.save(path, state)
    if mesh.comm.rank == 0:
        print("saved")


def placement_sets(ndim_mesh):
    """Target placements per leaf (by the leaf's rank), one dict per load."""
    if ndim_mesh == 1:
        return [{1: [Replicate()], 2: [Shard(1)]},
                {1: [Shard(0)], 2: [Shard(0)]},
                {1: [Partial()], 2: [Replicate()]},
                {1: [Replicate()], 2: [Partial()]}]
    return [{1: [Replicate(), Shard(0)], 2: [Shard(1), Replicate()]},       # other dims
            {1: [Shard(0), Replicate()], 2: [Replicate(), Shard(0)]},       # S(0) on tp
            {1: [Replicate(), Replicate()], 2: [Shard(1), Shard(0)]},       # swapped
            {1: [Shard(0), Partial()], 2: [Partial(), Replicate()]}]        # Partial


def int_partial(path):
    """The int64 leaf loaded as Partial(sum) on a 1-D mesh, then reduced."""
    from mpi4py import MPI
    mesh, want = mt.init_device_mesh((MPI.COMM_WORLD.size,)), expected()["e"]
    got = mt.load(path, like={"e": mt.distribute_tensor(np.zeros_like(want), mesh,
                                                        [Partial()])})
    assert same_bits(got["e"].full_tensor(), want)
    if MPI.COMM_WORLD.rank == 0:
        print("roundtrip ok")


def same_bits(got, want):
    got = np.ascontiguousarray(got)
    return got.dtype == want.dtype and got.shape == want.shape and \
        got.tobytes() == np.ascontiguousarray(want).tobytes()


def check_leaf(name, leaf, want, mesh_shape):
    assert isinstance(leaf, mt.DTensor), (name, type(leaf))
    where = f"{name} on mesh {mesh_shape} {list(leaf.placements)}"
    assert same_bits(leaf.full_tensor(), want), where
    mesh = leaf.device_mesh
    if not any(isinstance(p, Partial) for p in leaf.placements):
        block = want[local_slices(want.shape, mesh.shape, leaf.placements, mesh.coordinate)]
        assert same_bits(leaf.to_local(), block), f"local block of {where}"


def check_numpy_and_scalars(nested, full):
    assert same_bits(nested["table"], full["table"]), nested["table"]
    for k, v in SCALARS.items():
        assert nested[k] == v and type(nested[k]) is type(v), (k, nested[k])


def load(path):
    from mpi4py import MPI
    n, full = MPI.COMM_WORLD.size, expected()
    two_d = {(k, n // k) for k in range(2, n) if n % k == 0} or {(n, 1), (1, n)}
    shapes = [(n,)] + sorted(two_d)             # 8: (8,), (2, 4), (4, 2); 3: (3,), (1, 3), (3, 1)
    loads = 0
    for shape in shapes:
        mesh = mt.init_device_mesh(shape)
        for targets in placement_sets(len(shape)):
            template = {k: mt.distribute_tensor(np.zeros_like(full[k]), mesh,
                                                targets[full[k].ndim]) for k in "abcde"}
            template["nested"] = {"table": np.zeros_like(full["table"]),
                                  **{k: None for k in SCALARS}}
            got = mt.load(path, like=template)
            for k in "abcde":
                check_leaf(k, got[k], full[k], shape)
            check_numpy_and_scalars(got["nested"], full)
            loads += 1
        partial = mt.load(path, like={"e": mt.distribute_tensor(                # a subset
            np.zeros_like(full["e"]), mesh, [Shard(1)] + [Shard(0)] * (len(shape) - 1))})
        check_leaf("e", partial["e"], full["e"], shape)
    if MPI.COMM_WORLD.rank == 0:
        print(f"{loads} loads on meshes {shapes}")
        print("roundtrip ok")


def plain(path):
    got, full = mt.load(path), expected()
    for k in "abcde":
        assert same_bits(got[k], full[k]), k
    check_numpy_and_scalars(got["nested"], full)
    assert "mpi4py.MPI" not in sys.modules
    print("roundtrip ok")


if __name__ == "__main__":
    mode, path = sys.argv[1:3]
    {"save": save, "load": load, "plain": plain, "int-partial": int_partial}[mode](path)
