"""numpy 2's functions added for the array API and the coverage table, swept over input
layouts (R, S(d), P(sum)) on the 1-D and 2-D meshes against numpy: the splits, unique_*,
cumulative_*, norms, vecdot, multi_dot, polynomials, lexsort, select, rot90, nan_to_num,
the index routines, emath, and the rest of the table's newer rows.
"""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt

MESH_NDIM_MAX = 2

M = random_array((7, 6), seed=1)
T = random_array((5, 4, 3), seed=2)
V = random_array((9,), seed=3)
SPECIAL = np.array([1.0, np.nan, -np.inf, 2.5, np.inf, -0.0, 3.0])
KEYS = (np.array([2, 0, 1, 2, 0, 1, 1]), np.array([1, 1, 0, 0, 1, 0, 1]))

CASES = {
    "array_split": (lambda x: np.array_split(x, 3), M),
    "array_split_1": (lambda x: np.array_split(x, [2, 5], axis=1), M),
    "split": (lambda x: np.split(x, 2, axis=1), M),
    "hsplit": (lambda x: np.hsplit(x, 3), M),
    "vsplit": (lambda x: np.vsplit(x, [3]), M),
    "dsplit": (lambda x: np.dsplit(x, [1]), T),
    "broadcast_arrays": (lambda x, v: np.broadcast_arrays(x, v[:6]), M, V),
    "matrix_transpose": (np.matrix_transpose, T),
    "unstack": (lambda x: np.unstack(x, axis=1), M),
    "cumulative_sum": (lambda x: np.cumulative_sum(x, axis=0, include_initial=True), M),
    "cumulative_prod": (lambda x: np.cumulative_prod(x / 4, axis=1), M),
    "var_correction": (lambda x: np.var(x, axis=0, correction=1), M),
    "std_correction": (lambda x: np.std(x, correction=2), M),
    "vecdot": (lambda x: np.vecdot(x, x, axis=0), M),
    "linalg.vecdot": (lambda x: np.linalg.vecdot(x, x), M),
    "vector_norm": (lambda x: np.linalg.vector_norm(x, axis=(0, 2), ord=1), T),
    "matrix_norm": (lambda x: np.linalg.matrix_norm(x, ord=np.inf), M),
    "linalg.diagonal": (lambda x: np.linalg.diagonal(x, offset=1), M),
    "linalg.trace": (lambda x: np.linalg.trace(x, offset=-1), M),
    "multi_dot": (lambda x: np.linalg.multi_dot([x, x.T, x]), M),
    "linalg.matmul": (lambda x: np.linalg.matmul(x, x.T), M),
    "linalg.tensordot": (lambda x: np.linalg.tensordot(x, x, axes=2), M),
    "diagflat": (lambda v: np.diagflat(v, 1), V),
    "polyval": (lambda x: np.polyval([0.5, -1.0, 2.0], x), M),
    "vander": (lambda v: np.vander(v, 4), V),
    "rot90": (lambda x: np.rot90(x, 1, axes=(1, 0)), M),
    "rot90_3": (lambda x: np.rot90(x, 3), M),
    "rollaxis": (lambda x: np.rollaxis(x, 2), T),
    "select": (lambda x: np.select([x > 2, x < -2], [x, -x], 0.5), M),
    "piecewise": (lambda x: np.piecewise(x, [x < 0, x > 3], [lambda y: -y, 7.0, 1.0]), M),
    "choose": (lambda x: np.choose((np.abs(x) % 3).astype(int), [x, 2 * x, -x]), M),
    "nan_to_num": (lambda x: np.nan_to_num(x, nan=-1.0, posinf=9.0), SPECIAL),
    "isposinf": (np.isposinf, SPECIAL),
    "isneginf": (np.isneginf, SPECIAL),
    "fix": (lambda x: np.fix(x / 4), M),
    "sinc": (lambda x: np.sinc(x / 3), M),
    "i0": (lambda x: np.i0(x / 3), M),
    "trapezoid": (lambda x: np.trapezoid(x, dx=0.5, axis=0), M),
    "correlate": (lambda v: np.correlate(v, np.array([1.0, -2.0, 0.5]), mode="same"), V),
    "resize": (lambda x: np.resize(x, (5, 10)), M),
    "setxor1d": (lambda v: np.setxor1d(v, v[:4] + 1), V),
    "sort_complex": (np.sort_complex, V),
    "repeat_counts": (lambda x: np.repeat(x, np.arange(6) % 3, axis=1), M),
    "emath.sqrt": (np.emath.sqrt, V),
    "emath.log": (lambda v: np.emath.log(v + 0.5), V),
    "emath.arcsin": (lambda v: np.emath.arcsin(v / 4), V),
    "emath.power": (lambda v: np.emath.power(v, 0.5), V),
    "unravel_index": (lambda v: np.unravel_index((np.abs(v) * 3).astype(int), (4, 7)), V),
    "ravel_multi_index": (lambda v: np.ravel_multi_index(
        ((np.abs(v) % 4).astype(int), (np.abs(v) % 5).astype(int)), (4, 5)), V),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    with np.errstate(all="ignore"):
        assert_matches_numpy(mesh, name, fn, *arrays, limit=12)


def _canon(res):
    """unique_* results ordered by value (numpy 2.4 may not sort them)."""
    d = {k: host(v) if isinstance(v, mt.DTensor) else v for k, v in
         (res._asdict() if hasattr(res, "_asdict") else {"values": res}).items()}
    order = np.argsort(d["values"], kind="stable")
    return {k: v if k == "inverse_indices" else v[order] for k, v in d.items()}, d


@pytest.mark.mpi
@pytest.mark.parametrize("fn", [np.unique_values, np.unique_counts, np.unique_inverse,
                                np.unique_all], ids=lambda f: f.__name__)
@pytest.mark.parametrize("data", [SPECIAL, np.array([2, 1, 2, 5, 1, 1]), np.full(5, np.nan),
                                  np.array([[1.0, 2.0], [2.0, np.nan]]), np.zeros(0)],
                         ids=["special", "ints", "all-nan", "2d", "empty"])
def test_unique_functions_keep_nans_distinct(mesh, fn, data):
    ok = []
    for placements in ([mt.Replicate()] * mesh.ndim, [mt.Shard(0)] * mesh.ndim):
        x = mt.distribute_tensor(data, mesh, placements)
        (got, raw), (want, _) = _canon(fn(x)), _canon(fn(data))
        same = all(got[k].shape == want[k].shape and np.array_equal(got[k], want[k], equal_nan=True)
                   for k in want if k != "inverse_indices")
        if "inverse_indices" in raw:
            same = same and np.array_equal(raw["values"][raw["inverse_indices"]], data,
                                           equal_nan=True)
        ok.append(same)
    assert_all_ranks(all(ok), f"{fn.__name__} of {data}")


@pytest.mark.mpi
def test_sorting_searching_and_fitting(mesh):
    split = [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1)
    k0, k1 = (mt.distribute_tensor(k, mesh, split) for k in KEYS)
    x = np.linspace(-1, 1, 13)
    y = 3 * x ** 2 - x + 0.5 + 0.01 * np.cos(7 * x)
    xd, yd = (mt.distribute_tensor(a, mesh, split) for a in (x, y))
    s = mt.distribute_tensor(np.sort(V), mesh, split)
    order = np.argsort(V)
    checks = {
        "lexsort": (np.lexsort((k0, k1)), np.lexsort(KEYS)),
        "polyfit": (np.polyfit(xd, yd, 2), np.polyfit(x, y, 2)),
        "searchsorted sorter": (np.searchsorted(mt.distribute_tensor(V, mesh, split), s,
                                                sorter=mt.distribute_tensor(order, mesh, split)),
                                np.searchsorted(V, np.sort(V), sorter=order)),
        "trim_zeros": (np.trim_zeros(mt.distribute_tensor(np.array([0, 0, 3., 0, 2, 0]), mesh,
                                                          split)), np.array([3., 0, 2])),
        "zeros like=": (np.zeros((2, 3), like=xd), np.zeros((2, 3))),
        "logspace": (np.logspace(xd[0], xd[-1], 5), np.logspace(x[0], x[-1], 5)),
        "cond": (np.linalg.cond(mt.distribute_tensor(M[:6], mesh, split)), np.linalg.cond(M[:6])),
        "tensorinv": (np.linalg.tensorinv(mt.distribute_tensor(M[:6].reshape(6, 2, 3), mesh,
                                                               split), ind=1),
                      np.linalg.tensorinv(M[:6].reshape(6, 2, 3), ind=1)),
    }
    bad = [name for name, (got, want) in checks.items()
           if not np.allclose(host(got), want, rtol=1e-9, atol=1e-9)]
    assert_all_ranks(not bad, f"differ from numpy: {bad}")


@pytest.mark.mpi
def test_inspection_and_hashing(mesh):
    x = mt.distribute_tensor(M, mesh, [mt.Shard(0)] * mesh.ndim)
    v = mt.distribute_tensor(np.array([3, 1, 3, 2]), mesh, [mt.Replicate()] * mesh.ndim)
    ok = (np.array_str(x) == np.array_str(M) and np.array_repr(x) == np.array_repr(M)
          and np.iscomplexobj(x) is False and np.isrealobj(x)
          and np.min_scalar_type(x) == M.dtype and np.common_type(x) == np.float64
          and np.shares_memory(x, x) and not np.may_share_memory(x, x.copy())
          and set(v) == {1, 2, 3} and hash(v[0]) == hash(3))
    with pytest.raises(TypeError, match="unhashable"):
        hash(x)
    with pytest.raises(TypeError, match="numpy.packbits"):
        np.packbits(x)
    assert_all_ranks(ok, "inspection functions or hashing differ from numpy's")
