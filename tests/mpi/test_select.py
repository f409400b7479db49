"""numpy's selection functions on DTensors (take, take_along_axis, put_along_axis, nonzero,
argwhere, flatnonzero, one-argument where, compress, extract, insert, delete) and indexing
with index arrays, masks and DTensor keys, compared with numpy on sampled layouts of every
operand (Partial included); results of data-dependent length checked to come back in
balanced Shard(0) blocks without gathering their input."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi_helpers import assert_all_ranks, assert_each_raises, host, layouts, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt
from mtensor.placement import Partial, Replicate, Shard, local_shape

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

M = random_array((7, 5), seed=1)          # uneven on every mesh
V = random_array((7,), seed=2)
SMALL = random_array((3, 2), seed=3)      # fewer rows than ranks: empty shards
CUBE = random_array((3, 4, 2), seed=4)
I = random_array((7, 5), np.int64, seed=5)
NONE = np.zeros((7, 5))
ALL = np.ones((7, 5), np.int32)
FIRST = np.zeros((9, 4))                  # hits in the first block of any split only
FIRST[:2, 0] = (3, 1)
LAST = np.zeros((9, 4), bool)             # one hit, in the last block of any split
LAST[-1, -1] = True
IDX = np.array([[3, -1], [0, 6]])
PICK = np.array([0, 4, 2, 1, 1, 3, 0])
ORDER = np.argsort(M, axis=1, kind="stable")

CASES = {
    "take_flat": (lambda x: np.take(x, [3, -1, 0, 34]), M),
    "take_axis1": (lambda x: np.take(x, IDX % 5, axis=1), M),
    "take_index_dtensor": (lambda x, i: np.take(x, i, axis=0), M, IDX),
    "take_wrap": (lambda x, i: np.take(x, i, axis=1, mode="wrap"), I, IDX * 4),
    "take_clip": (lambda x: np.take(x, [-3, 2, 11], axis=0, mode="clip"), M),
    "take_scalar": (lambda x: np.take(x, 4, axis=1), M),
    "take_cube": (lambda x, i: np.take(x, i, axis=1), CUBE, IDX % 4),
    "take_small": (lambda x: np.take(x, [2, 2, 0], axis=0), SMALL),
    "take_along_axis": (lambda x, i: np.take_along_axis(x, i, axis=1), M, ORDER),
    "take_along_axis_0": (lambda x, i: np.take_along_axis(x, i, axis=0), M,
                          np.argsort(M, axis=0)[:3]),
    "take_along_broadcast": (lambda x, i: np.take_along_axis(x, i, axis=0), M,
                             np.array([[1], [-2]])),
    "take_along_none": (lambda x: np.take_along_axis(x, np.array([3, 0, 34]), axis=None), M),
    "nonzero": (np.nonzero, M),
    "nonzero_1d": (np.nonzero, V),
    "nonzero_cube": (np.nonzero, CUBE),
    "nonzero_no_hits": (np.nonzero, NONE),
    "nonzero_all_hits": (np.nonzero, ALL),
    "nonzero_first_block": (np.nonzero, FIRST),
    "nonzero_last_block": (np.nonzero, LAST),
    "nonzero_small": (np.nonzero, SMALL),
    "argwhere": (np.argwhere, M),
    "argwhere_cube": (np.argwhere, CUBE),
    "argwhere_0d": (np.argwhere, np.array(2.0)),
    "flatnonzero": (np.flatnonzero, FIRST),
    "flatnonzero_0d": (np.flatnonzero, np.array(0)),
    "where_one_argument": (lambda x: np.where(x > 2), M),
    "extract": (np.extract, M > 0, M),
    "extract_numpy_condition": (lambda x: np.extract(M > 3, x), I),
    "extract_flat_condition": (lambda x: np.extract((M > 0).ravel(), x), M),
    "extract_short_condition": (lambda x: np.extract([True, False, True], x), M),
    "extract_no_hits": (lambda x: np.extract(x > 100, x), M),
    "compress": (lambda x: np.compress([1, 0, 1, 1], x, axis=0), M),
    "compress_axis1": (lambda x: np.compress([False, True, True], x, axis=1), M),
    "compress_flat": (lambda x: np.compress(M.ravel() > 0, x), M),
    "compress_dtensor": (lambda c, x: np.compress(c, x, axis=0), V > 0, M),
    "delete": (lambda x: np.delete(x, [0, 3], axis=0), M),
    "delete_slice": (lambda x: np.delete(x, slice(1, None, 2), axis=1), M),
    "delete_flat": (lambda x: np.delete(x, [2, -1]), M),
    "delete_mask": (lambda x: np.delete(x, V > 0, axis=0), M),
    "insert_scalar": (lambda x: np.insert(x, 2, 7.9, axis=1), I),
    "insert_list": (lambda x: np.insert(x, [1, 1, 5], np.arange(7.0)[:, None], axis=1), M),
    "insert_flat": (lambda x: np.insert(x, 3, [1, 2]), M),
    "insert_rows": (lambda x: np.insert(x, 1, [[1, 2], [3, 4]], axis=0), SMALL),
    "insert_dtensor": (lambda x, v: np.insert(x, [0, 7], v, axis=0), M, M[:2] + 100),
    "getitem_int_array": (lambda x: x[np.array([3, 0, 6, 6])], M),
    "getitem_mask": (lambda x: x[x > 2], M),
    "getitem_dtensor_mask": (lambda x, m: x[m], M, M > 0),
    "getitem_dtensor_row_mask": (lambda x, m: x[m], M, V > 0),
    "getitem_dtensor_index": (lambda x, i: x[i], M, IDX),
    "getitem_pick": (lambda x, y: x[np.arange(7), y], M, PICK),
    "getitem_argmin": (lambda x: x.ravel()[x.argmin()], M),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    # limit=5 with two operands: a step of 2 or 3 over their combos, so both layouts vary
    limit = 4 if len(arrays) == 1 else 5
    assert_matches_numpy(mesh, name, fn, *arrays, limit=limit)


@pytest.mark.mpi
def test_0d_dtensor_index(mesh):
    """A 0-d int DTensor indexes like an int, whole or as partial terms."""
    bad = []
    for placements in layouts(mesh.ndim, 1, ("sum",)):
        x = mt.distribute_tensor(V, mesh, placements, src_data_rank=None)
        for p in ([Replicate()] * mesh.ndim, [Partial()] * mesh.ndim):
            i = mt.distribute_tensor(np.array(3), mesh, p)
            if not np.array_equal(host(x[i]), V[3]):
                bad.append((placements, p))
    assert_all_ranks(not bad, f"{bad}")


def _balanced(out, mesh, split) -> bool:
    """1-D ``out`` split Shard(0) over the mesh dims that split the input, in the block
    array_split gives this rank."""
    want = tuple(Shard(0) if isinstance(p, Shard) else Replicate() for p in split)
    block = local_shape(out.shape, mesh.shape, want, mesh.coordinate)
    return tuple(out.placements) == want and out.to_local().shape[:1] == block


@pytest.mark.mpi
def test_hits_are_balanced_and_never_gathered(mesh):
    bad = []
    for full in (M, FIRST, LAST):
        for placements in layouts(mesh.ndim, 2, ()):
            x = mt.distribute_tensor(full, mesh, placements)
            with mt.CommDebugMode() as comm:
                flat = np.flatnonzero(x)
                picked = np.extract(x > 0, x)
            moved = set(comm.get_comm_counts())
            ok = moved <= {"all_reduce", "all_to_all"}
            ok = ok and _balanced(flat, mesh, placements) and _balanced(picked, mesh, placements)
            ok = ok and np.array_equal(host(flat), np.flatnonzero(full))
            ok = ok and np.array_equal(host(picked), np.extract(full > 0, full))
            if not ok:
                bad.append((full.shape, placements, moved, flat.placements))
    assert_all_ranks(not bad, f"{bad[:3]}")


@settings(derandomize=True, max_examples=10, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(0, 6), min_size=1, max_size=3),
       density=st.sampled_from([0.0, 0.2, 0.7, 1.0]), pick=st.integers(0, 10 ** 6))
@pytest.mark.mpi
def test_hits_property(mesh, shape, density, pick):
    """nonzero and extract of random masks on a drawn layout equal numpy's (every rank draws
    the same examples: derandomized)."""
    rng = np.random.default_rng(pick)
    full = np.where(rng.random(shape) < density, rng.integers(1, 9, shape), 0)
    options = layouts(mesh.ndim, len(shape), ("sum",))
    placements = options[pick % len(options)]
    x = mt.distribute_tensor(full, mesh, placements, src_data_rank=None)
    got = np.nonzero(x)
    values = np.extract(x > 4, x)
    ok = all(np.array_equal(host(g), w) for g, w in zip(got, np.nonzero(full)))
    ok = ok and np.array_equal(host(values), np.extract(full > 4, full))
    assert_all_ranks(ok, f"shape {shape}, {placements}")


def _split(mesh, dim):
    return [Shard(dim)] + [Replicate()] * (mesh.ndim - 1)


@pytest.mark.mpi
def test_take_keeps_splits(mesh):
    """Split indices split the result and a whole picked axis is read in place: no
    gather of the table, the index or the result."""
    table = mt.distribute_tensor(M, mesh, [Replicate()] * mesh.ndim)
    ids = mt.distribute_tensor(np.arange(14).reshape(7, 2) % 7, mesh, _split(mesh, 0))
    cols = mt.distribute_tensor(M, mesh, _split(mesh, 1))
    rows = mt.distribute_tensor(M, mesh, _split(mesh, 0))
    order = mt.distribute_tensor(ORDER, mesh, _split(mesh, 0))
    checks = [
        ("R table, S(0) ids", lambda: np.take(table, ids, axis=0, mode="wrap"), 0,
         np.take(M, np.arange(14).reshape(7, 2) % 7, axis=0)),
        ("S(1) table, numpy ids", lambda: np.take(cols, [4, 0, 4], axis=0), 1,
         np.take(M, [4, 0, 4], axis=0)),
        ("delete rows of S(1)", lambda: np.delete(cols, [1, 2], axis=0), 1,
         np.delete(M, [1, 2], axis=0)),
        ("insert a row into S(1)", lambda: np.insert(cols, 3, -1.0, axis=0), 1,
         np.insert(M, 3, -1.0, axis=0)),
        ("take_along_axis 1 of S(0)", lambda: np.take_along_axis(rows, order, axis=1), 0,
         np.take_along_axis(M, ORDER, axis=1)),
    ]
    bad = []
    for name, fn, dim, want in checks:
        with mt.CommDebugMode() as comm:
            out = fn()
        moved = comm.get_comm_bytes()
        ok = set(moved) <= {"all_reduce"} and moved.get("all_reduce", 0) <= 8
        ok = ok and out.placements[0] == Shard(dim) and np.array_equal(host(out), want)
        if not ok:
            bad.append((name, out.placements, moved))
    assert_all_ranks(not bad, f"{bad}")


@pytest.mark.mpi
def test_put_along_axis(mesh):
    bad = []
    for placements in layouts(mesh.ndim, 2, ("sum",))[::2]:
        x = mt.distribute_tensor(M, mesh, placements, src_data_rank=None)
        values = mt.distribute_tensor(-M[:, :2], mesh, [Replicate()] * mesh.ndim)
        np.put_along_axis(x, ORDER[:, :2], values, axis=1)
        np.put_along_axis(x, np.array([0, 34]), 99.0, axis=None)
        want = M.copy()
        np.put_along_axis(want, ORDER[:, :2], -M[:, :2], axis=1)
        np.put_along_axis(want, np.array([0, 34]), 99.0, axis=None)
        if not np.array_equal(host(x), want) or x.placements != tuple(placements):
            bad.append(placements)
    assert_all_ranks(not bad, f"put_along_axis: {bad}")


@pytest.mark.mpi
def test_refusals_and_errors(mesh):
    x = mt.distribute_tensor(M, mesh, _split(mesh, 0))
    ids = mt.distribute_tensor(IDX, mesh, _split(mesh, 0))
    calls = {
        "take out of bounds": (lambda: np.take(x, [7], axis=0), IndexError, "out of bounds"),
        "take DTensor ids out of bounds": (lambda: np.take(x, ids + 5, axis=1), IndexError,
                                           "index 11 is out of bounds"),
        "take mode": (lambda: np.take(x, [1], mode="nearest"), ValueError, "mode"),
        "take_along_axis dims": (lambda: np.take_along_axis(x, np.array([1]), axis=0),
                                 ValueError, "same number of dimensions"),
        "nonzero 0-d": (lambda: np.nonzero(x.sum()), ValueError, "0d"),
        "where x only": (lambda: np.where(x > 0, x), ValueError, "both or neither"),
        "compress 2-d": (lambda: np.compress(M > 0, x), ValueError, "1-d"),
        "nonzero traced": (lambda: mt.compile(lambda a: np.nonzero(a)[0])(x), TypeError,
                           "mt.compile: np.nonzero reads DTensor values"),
        "take raise traced": (lambda: mt.compile(lambda a, i: np.take(a, i, axis=0))(x, ids),
                              TypeError, "mode='wrap' or 'clip'"),
        "extract differentiated": (
            lambda: mt.value_and_grad(lambda a: np.extract(a > 0, a).sum())(x), TypeError,
            "np.extract has no gradient"),
    }
    assert_each_raises(calls)


@pytest.mark.mpi
def test_take_wrap_compiles(mesh):
    """mode='wrap' reads no index values: a compiled step replays it like eager."""
    table = mt.distribute_tensor(M, mesh, _split(mesh, 1))
    ids = mt.distribute_tensor(IDX, mesh, _split(mesh, 0))
    step = mt.compile(lambda t, i: np.take(t, i, axis=0, mode="wrap") * 2)
    outs = [host(step(table, ids)) for _ in range(2)]
    want = np.take(M, IDX, axis=0, mode="wrap") * 2
    assert_all_ranks(all(np.array_equal(o, want) for o in outs), "compiled take differs")
