"""numpy's set functions, ``digitize``, ``block`` and ``linspace`` of DTensor bounds, against
numpy on DTensors of many layouts (uneven and empty shards, Partial inputs)."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, assert_each_raises, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

V = random_array((13,), np.int64, seed=1)           # duplicates, uneven on every mesh
W = random_array((7,), np.int64, seed=2)
SMALL = random_array((2,), np.int64, seed=3)        # smaller than the mesh: empty shards
F = random_array((7, 5), seed=4) / 3
M, N = random_array((3, 2), seed=5), random_array((3, 4), seed=6)
BINS = np.array([-6.0, -1.5, 0.0, 2.0, 2.5])

CASES = {
    "isin": (lambda x, y: np.isin(x, y), V, W),
    "isin_invert_numpy_tests": (lambda x: np.isin(x, [0, 3, -9], invert=True), V),
    "isin_2d_empty_tests": (lambda x: np.isin(x, np.array([], np.int64)), F),
    "intersect1d": (lambda x, y: np.intersect1d(x, y), V, W),
    "intersect1d_small": (lambda x, y: np.intersect1d(x, y), SMALL, V),
    "intersect1d_unique": (lambda x: np.intersect1d(np.unique(x), W, assume_unique=True), V),
    "union1d": (lambda x, y: np.union1d(x, y), V, W),
    "setdiff1d": (lambda x, y: np.setdiff1d(x, y), V, W),
    "setdiff1d_numpy": (lambda x: np.setdiff1d(x, [1, 2, 3]), F),
    "digitize": (lambda x: np.digitize(x, BINS), F),
    "digitize_right_decreasing": (lambda x: np.digitize(x, BINS[::-1], right=True), F),
    "block_2x2": (lambda a, b: np.block([[a, b], [b, a]]), M, N[:, :2]),
    "block_rows": (lambda a, b: np.block([a, b]), M, N),
    "block_grow": (lambda v: np.block([[v], [np.ones(13, np.int64)]]), V),
    "linspace": (lambda x: np.linspace(x.min(), x.max(), 9), F),
    "linspace_retstep": (lambda x: np.linspace(0, x.max(), 4, endpoint=False, retstep=True)[0],
                         F),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    assert_matches_numpy(mesh, name, fn, *arrays, limit=4)


@pytest.mark.mpi
def test_isin_and_digitize_keep_the_layout_and_gather_nothing_of_x(mesh):
    split = [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1)
    x = mt.distribute_tensor(F, mesh, split)
    with mt.CommDebugMode() as comm:
        got = [np.isin(x, [1.0, 2.0]), np.digitize(x, BINS)]
    ok = comm.get_total_counts() == 0 and all(g.placements == x.placements for g in got)
    assert_all_ranks(ok, f"{comm.get_comm_counts()}, {[g.placements for g in got]}")


@pytest.mark.mpi
def test_refusals_match_numpy(mesh):
    x = mt.distribute_tensor(F, mesh, [mt.Replicate()] * mesh.ndim)
    assert_each_raises({
        "digitize 2-D bins": (lambda: np.digitize(x, np.ones((2, 2))), ValueError, "deep"),
        "digitize unordered": (lambda: np.digitize(x, [1, 0, 2]), ValueError, "monotonically"),
        "block ragged": (lambda: np.block([[x], x]), ValueError, "depths are mismatched"),
        "block tuple": (lambda: np.block((x, x)), TypeError, "tuple"),
        "block empty": (lambda: np.block([x, []]), ValueError, "cannot be empty"),
        "intersect1d indices": (lambda: np.intersect1d(x, x, return_indices=True), TypeError,
                                "full_tensor"),
    })
