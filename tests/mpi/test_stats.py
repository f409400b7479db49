"""numpy's comparisons, statistics and NaN-skipping reductions on DTensors of many layouts
(uneven and empty shards, Partial, NaN and inf, int/float/complex), compared with numpy on
the whole arrays; the Python-bool answers checked to agree on every rank."""
import warnings

import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, host, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

M = random_array((7, 5), seed=1)            # uneven on every mesh
M2 = random_array((7, 5), seed=2)
SMALL = random_array((3, 2), seed=3)        # smaller than the mesh: empty shards
V = random_array((7,), seed=4)
V2 = random_array((7,), seed=5)
I = random_array((7, 5), np.int64, seed=6)
F32 = random_array((7, 5), np.float32, seed=7)
C = M + 1j * M2
NAN = M.copy()
NAN[3] = np.nan                             # an all-NaN row
NAN[1, 2], NAN[5, 4], NAN[0, 0] = np.nan, np.inf, -np.inf
NAN2 = NAN + np.where(M2 > 0, 1e-9, 0.5)
CNAN = NAN + 1j * M2
W7 = np.arange(1.0, 8.0)
XP = np.linspace(-10, 10, 9)
FP = XP ** 2


def _flat(*outs):
    """Tuples of results, nested ones flattened (average's (avg, scale))."""
    flat = []
    for o in outs:
        flat.extend(o if isinstance(o, tuple) else (o,))
    return tuple(flat)


CASES = {
    "isclose": (lambda x, y: _flat(np.isclose(x, y), np.isclose(x, y, 0.1, 1, True)),
                NAN, NAN2),
    "isclose_mixed": (lambda x: _flat(np.isclose(x, NAN2), np.isclose(M2, x, equal_nan=True),
                                      np.isclose(x, 3)), NAN),
    "isclose_int_complex": (lambda x, z: _flat(np.isclose(x, x + 1, atol=1), np.isclose(z, z)),
                            I, C),
    "round": (lambda x: _flat(np.round(x / 3, 2), np.around(x * 7, -1), np.round(x)), M),
    "round_int": (lambda x: _flat(np.round(x * 37, -1), np.around(x, 1)), I),
    "complex_parts": (lambda z: _flat(np.real(z), np.imag(z), np.angle(z),
                                      np.angle(z, deg=True), np.conj(z), np.sign(z)), C),
    "real_parts": (lambda x: _flat(np.real(x) + 0, np.imag(x), np.angle(x), np.sign(x)), M),
    "count_nonzero": (lambda x: _flat(np.count_nonzero(x, axis=0), np.count_nonzero(x),
                                      np.count_nonzero(x, axis=1, keepdims=True)), I),
    "count_nonzero_nan": (lambda x: np.count_nonzero(x, axis=(0, 1)), NAN),
    "ptp": (lambda x: _flat(np.ptp(x), np.ptp(x, axis=0), np.ptp(x, 1, keepdims=True)), I),
    "ptp_small": (lambda x: np.ptp(x, axis=0), SMALL),
    "average": (lambda x: _flat(np.average(x), np.average(x, axis=0, weights=W7),
                                np.average(x, axis=1, returned=True),
                                np.average(x, 0, W7, True, keepdims=True)), M),
    "average_weights": (lambda x, w: _flat(np.average(x, weights=w, returned=True),
                                           np.average(x, axis=(0, 1), weights=w)),
                        I, np.abs(M2) + 1),
    "cov": (lambda x: _flat(np.cov(x), np.cov(x, rowvar=False, bias=True),
                            np.cov(x, ddof=3, fweights=[1, 2, 0, 1, 3],
                                   aweights=[0.5, 1, 2, 1, 0.25])), M),
    "cov_xy": (lambda x, y: _flat(np.cov(x, y), np.cov(x, y, dtype=np.complex128)), V, V2),
    "cov_complex": (lambda z: np.cov(z, rowvar=False), C),
    "corrcoef": (lambda x: _flat(np.corrcoef(x), np.corrcoef(x, rowvar=False),
                                 np.corrcoef(x[0], x[1])), M),
    "corrcoef_complex": (lambda z: np.corrcoef(z), C),
    "interp": (lambda x: _flat(np.interp(x, XP, FP), np.interp(x / 4, XP, FP + 1j, 0, 1),
                               np.interp(x, XP, FP, period=7)), M),
    "interp_dtensors": (lambda x, xp, fp: np.interp(x, xp, fp), V, XP, FP),
    "nansum_nanprod": (lambda x: _flat(np.nansum(x), np.nansum(x, 0), np.nanprod(x, 1),
                                       np.nansum(x, axis=1, keepdims=True)), NAN),
    "nanmean": (lambda x: _flat(np.nanmean(x), np.nanmean(x, 0), np.nanmean(x, 1),
                                np.nanmean(x, 1, keepdims=True)), NAN),
    "nanmax_nanmin": (lambda x: _flat(np.nanmax(x), np.nanmax(x, 0), np.nanmin(x, 1),
                                      np.nanmin(x, 0, keepdims=True)), NAN),
    "nanargmax": (lambda x: _flat(np.nanargmax(x), np.nanargmax(x, 0), np.nanargmin(x, 0),
                                  np.nanargmin(x, 0, keepdims=True)), NAN),
    "nanvar_nanstd": (lambda x: _flat(np.nanvar(x), np.nanvar(x, 0, ddof=1),
                                      np.nanstd(x, 1, ddof=4, keepdims=True),
                                      np.nanvar(x, 1, ddof=5), np.nanstd(x)), NAN),
    "nan_float32": (lambda x: _flat(np.nanmean(x, 0), np.nanmax(x, 1), np.nansum(x)), F32),
    "nan_complex": (lambda z: _flat(np.nansum(z, 0), np.nanmean(z, 1), np.nanvar(z, 0),
                                    np.nanmax(z, 1)), CNAN),
    "nan_int": (lambda x: _flat(np.nansum(x, 0), np.nanmean(x), np.nanmax(x, 1),
                                np.nanargmin(x, 0), np.nanvar(x, 0), np.nanstd(x)), I),
    "nan_small": (lambda x: _flat(np.nanmean(x, 0), np.nanmax(x, 1), np.nanvar(x, 0)), SMALL),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # numpy's, on its all-NaN slices
        assert_matches_numpy(mesh, name, fn, *arrays, limit=4)


def _bool_cases():
    other = M.copy()
    other[6, 4] += 1e-3
    return [
        (np.allclose, (M, M + 1e-9), {}),
        (np.allclose, (M, other), {}),
        (np.allclose, (NAN, NAN), {}),
        (np.allclose, (NAN, NAN), {"equal_nan": True}),
        (np.allclose, (M, other), {"atol": 1e-2}),
        (np.array_equal, (M, M), {}),
        (np.array_equal, (M, other), {}),
        (np.array_equal, (NAN, NAN), {"equal_nan": True}),
        (np.array_equal, (NAN, NAN), {}),
        (np.array_equal, (CNAN, CNAN), {"equal_nan": True}),
        (np.array_equal, (I, I.astype(float)), {}),
        (np.array_equal, (M, M[:3]), {}),
        (np.array_equiv, (M, np.tile(M[0], (7, 1))), {}),
        (np.array_equiv, (np.tile(M[0], (7, 1)), M[0]), {}),
        (np.array_equiv, (M, M[:, :2]), {}),
    ]


@pytest.mark.mpi
def test_bool_answers_agree(mesh):
    """Python bools, numpy's, on every rank, for every operand laid out several ways."""
    layouts = [[mt.Shard(0)] * mesh.ndim, [mt.Replicate()] * mesh.ndim,
               [mt.Partial()] + [mt.Shard(1)] * (mesh.ndim - 1)]
    wrong = []
    for k, (fn, (a, b), kwargs) in enumerate(_bool_cases()):
        want = fn(a, b, **kwargs)
        for j, layout in enumerate(layouts):
            x = mt.distribute_tensor(a, mesh, layout, src_data_rank=None)
            y = mt.distribute_tensor(b, mesh, layouts[(j + 1) % 3][:mesh.ndim],
                                     src_data_rank=None) if b.ndim == 2 else b
            for got in (fn(x, y, **kwargs), fn(x, b, **kwargs)):
                if type(got) is not bool or got != want:
                    wrong.append((k, j, got, want))
        answers = WORLD.allgather(want)
        if len(set(answers)) != 1:
            wrong.append((k, "ranks disagree", answers))
    assert_all_ranks(not wrong, f"bool answers: {wrong[:4]}")


@pytest.mark.mpi
def test_allclose_is_one_all_reduce(mesh):
    x = mt.distribute_tensor(M, mesh, [mt.Shard(0)] + [mt.Shard(1)] * (mesh.ndim - 1))
    y = mt.distribute_tensor(M2, mesh, [mt.Shard(0)] + [mt.Shard(1)] * (mesh.ndim - 1))
    with mt.CommDebugMode() as comm:
        same = np.allclose(x, y)
        summed = np.nansum(x, axis=1)
    counts = comm.get_comm_counts()
    ok = not same and set(counts) <= {"all_reduce"}
    ok = ok and counts.get("all_reduce", 0) <= (mesh.ndim if mesh.size() > 1 else 0)
    ok = ok and np.array_equal(host(summed), np.nansum(M, axis=1))
    assert_all_ranks(ok, f"allclose: {counts}")


@pytest.mark.mpi
def test_errors_match_numpy(mesh):
    x = mt.distribute_tensor(NAN, mesh, [mt.Shard(0)] * mesh.ndim)
    zero = np.zeros(7)
    checks = [
        (lambda a: np.nanargmax(a, axis=1), ValueError),
        (lambda a: np.nanargmin(a[3]), ValueError),
        (lambda a: np.average(a, axis=0, weights=zero), ZeroDivisionError),
        (lambda a: np.average(a, weights=zero), TypeError),
        (lambda a: np.average(a, axis=0, weights=np.ones(3)), ValueError),
        (lambda a: np.cov(a, ddof=1.5), ValueError),
        (lambda a: np.cov(a, fweights=[1, 2, 0.5, 1, 3]), TypeError),
        (lambda a: np.cov(a, aweights=[1, 2, -1, 1, 3]), ValueError),
        (lambda a: np.nanmean(a, dtype=np.int64), TypeError),
        (lambda a: np.interp(a, XP, FP[:3]), ValueError),
    ]
    for fn, error in checks:
        with pytest.raises(error):
            fn(NAN)
        with pytest.raises(error):
            fn(x)
