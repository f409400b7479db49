"""ufunc methods on DTensors: outer, reduce of any binary ufunc, accumulate (a distributed
scan along a split axis), cumsum/cumprod, compared with numpy on uneven shapes.

Integer results must match numpy bit for bit; float scans along a split axis re-associate
(block totals combined after the local scans), so floats compare with allclose, rtol 1e-12.
"""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, dtensor_of, host, random_array

import mtensor as mt
from mtensor.placement import Partial, Replicate, Shard

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

R, S0, S1, P = Replicate(), Shard(0), Shard(1), Partial()
SHAPES = [(7, 5), (3, 2)]


def _layouts(mesh):
    """S(0), S(1), R, P on mesh dim 0; other mesh dims alternate S(1)/S(0)/R."""
    out = []
    for first in (S0, S1, R, P):
        rest = [S1 if first == S0 else S0 if first == S1 else R for _ in range(mesh.ndim - 1)]
        out.append([first] + rest)
    return out


def _same(got, want, exact):
    got = mt.asnumpy(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if exact:
        return np.array_equal(got, want)
    return np.allclose(got, want, rtol=1e-12, atol=0, equal_nan=True)


def _check(mesh, fn, full, exact=True):
    want = fn(full)
    bad = []
    for placements in _layouts(mesh):
        if full.dtype == bool and P in placements:
            continue   # bools have no sum terms
        got = fn(dtensor_of(full, mesh, placements))
        if not _same(got, want, exact):
            bad.append(placements)
    assert_all_ranks(not bad, f"{bad} differ from numpy")


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
def test_outer(mesh, shape):
    a = random_array(shape, np.int64, seed=1)
    b = random_array((4,), np.int64, seed=2)
    for ufunc in (np.add, np.subtract, np.multiply, np.maximum, np.greater):
        _check(mesh, lambda x: ufunc.outer(x, b), a)
        _check(mesh, lambda x: ufunc.outer(b, x), a)
    x = dtensor_of(a, mesh, [S0] * mesh.ndim)
    y = mt.distribute_tensor(b, mesh, [S0] + [R] * (mesh.ndim - 1))
    assert np.array_equal(host(np.subtract.outer(x, y)), np.subtract.outer(a, b))


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
def test_reduce_any_binary_ufunc(mesh, shape):
    i = random_array(shape, np.int64, seed=3)
    f = random_array(shape, np.float64, seed=4) / 4
    for axis in (0, 1, -1):
        for keepdims in (False, True):
            kw = dict(axis=axis, keepdims=keepdims)
            _check(mesh, lambda x: np.subtract.reduce(x, **kw), i)
            _check(mesh, lambda x: np.bitwise_and.reduce(x, **kw), i)
            _check(mesh, lambda x: np.power.reduce(x, **kw), np.abs(i) % 3)
            _check(mesh, lambda x: np.logaddexp.reduce(x, **kw), f, exact=False)
            _check(mesh, lambda x: np.add.reduce(x, **kw), i)      # the table path
    _check(mesh, lambda x: np.bitwise_or.reduce(x, axis=None), i)
    _check(mesh, lambda x: np.bitwise_xor.reduce(x, axis=(0, 1), keepdims=True), i)
    _check(mesh, lambda x: np.subtract.reduce(x, axis=0, dtype=np.int8), i)


@pytest.mark.mpi
def test_reduce_follows_numpy_errors_and_refuses_initial_where(mesh):
    x = dtensor_of(random_array((3, 2), np.int64), mesh, [S0] * mesh.ndim)
    with pytest.raises(ValueError, match="not reorderable"):
        np.subtract.reduce(x, axis=None)
    with pytest.raises(TypeError, match="initial"):
        np.subtract.reduce(x, axis=0, initial=3)
    with pytest.raises(TypeError, match="where"):
        np.subtract.reduce(x, axis=0, where=np.ones((3, 2), bool))
    with pytest.raises(IndexError, match="out-of-bounds"):
        np.add.reduceat(x, [0, 5])
    with pytest.raises(TypeError, match="initial"):
        np.maximum.reduce(x, axis=0, initial=3)


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
def test_reduceat(mesh, shape):
    full = random_array(shape, np.int64, seed=10)
    for axis in (0, 1):
        idx = [0, 2, 1] if shape[axis] > 2 else [1, 0]
        _check(mesh, lambda x: np.add.reduceat(x, idx, axis=axis), full)
        _check(mesh, lambda x: np.subtract.reduceat(x, np.array(idx), axis=axis), full)
        _check(mesh, lambda x: np.maximum.reduceat(x, idx, axis=axis, dtype=np.int32), full)


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.float64])
def test_accumulate_and_cumsum(mesh, shape, dtype):
    full = random_array(shape, dtype, seed=5)
    exact = np.dtype(dtype).kind != "f"
    small = (np.abs(full) % 3 + 1).astype(dtype)
    for axis in (0, 1, -1):
        for ufunc in (np.add, np.maximum, np.minimum):
            _check(mesh, lambda x: ufunc.accumulate(x, axis=axis), full, exact)
        _check(mesh, lambda x: np.multiply.accumulate(x, axis=axis), small, exact)
        _check(mesh, lambda x: np.subtract.accumulate(x, axis=axis), full, exact)  # gathered
        _check(mesh, lambda x: np.cumsum(x, axis=axis), full, exact)
        _check(mesh, lambda x: np.cumprod(x, axis=axis), small, exact)
        _check(mesh, lambda x: np.add.accumulate(x, axis=axis, dtype=np.int16), full)
    _check(mesh, lambda x: np.cumsum(x), full, exact)
    b = full > 0
    for axis in (0, 1):
        _check(mesh, lambda x: np.logical_and.accumulate(x, axis=axis), b)
        _check(mesh, lambda x: np.logical_or.accumulate(x, axis=axis), b)
        _check(mesh, lambda x: np.cumsum(x, axis=axis), b)


@pytest.mark.mpi
def test_nancumsum(mesh):
    full = random_array((7, 5), np.float64, seed=6)
    full[full > 5] = np.nan
    _check(mesh, lambda x: np.nancumsum(x, axis=0), full, exact=False)
    _check(mesh, lambda x: np.nancumprod(x, axis=1), full / 4, exact=False)


@pytest.mark.mpi
def test_float_scan_of_a_split_axis_agrees_to_rtol_1e_12(mesh):
    full = np.random.default_rng(7).standard_normal((7, 5))
    _check(mesh, lambda x: np.cumsum(x, axis=0), full, exact=False)
    _check(mesh, lambda x: np.cumprod(x, axis=1), full, exact=False)


@pytest.mark.mpi
def test_cumsum_of_a_split_axis_moves_only_the_block_totals():
    mesh = mt.init_device_mesh((WORLD.size,))
    full = random_array((64, 32), np.int64, seed=8)
    x = mt.distribute_tensor(full, mesh, [S0])
    with mt.CommDebugMode() as comm:
        y = np.cumsum(x, axis=0)
    assert y.placements == (S0,)
    assert np.array_equal(host(y), np.cumsum(full, axis=0))
    if WORLD.size == 1:
        assert comm.get_total_counts() == 0
        return
    assert comm.get_comm_counts() == {"all_gather": 1}
    moved = comm.get_total_bytes()
    totals = WORLD.size * 32 * 8          # one row of totals per rank
    assert moved <= totals < full.nbytes // 2


@pytest.mark.mpi
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("axis", [0, 1])
def test_scan_of_an_axis_split_by_every_mesh_dim(mesh, shape, axis):
    """Nested splits (mesh dim 0 first, then each piece again), empty blocks included."""
    full = random_array(shape, np.int64, seed=9)
    placements = [Shard(axis)] * mesh.ndim
    x = mt.distribute_tensor(full, mesh, placements)
    with mt.CommDebugMode() as comm:
        y = np.cumsum(x, axis=axis)
        z = np.maximum.accumulate(x, axis=axis)
    assert y.placements == tuple(placements) and z.placements == tuple(placements)
    assert set(comm.get_comm_counts()) <= {"all_gather"}
    assert np.array_equal(host(y), np.cumsum(full, axis=axis))
    assert np.array_equal(host(z), np.maximum.accumulate(full, axis=axis))
