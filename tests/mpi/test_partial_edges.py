"""Where partial terms must NOT pass through an op (found by review), over real MPI: dtype
changes, integer averages, inf/nan/0 constants, repeated einsum labels."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, host

import mtensor as mt
from mtensor import Partial, Replicate, Shard


def _terms(value, mesh, op="sum"):
    """A Partial DTensor whose terms differ on every rank but reduce to ``value``: integer
    sums that wrap around, integer averages that truncate."""
    value = np.asarray(value)
    k, n = mesh.coordinate[0], mesh.shape[0]
    whole = value.dtype.kind in "iu"
    if op == "avg":
        first = value.astype(np.int64) * n + (n - 1) if whole else value * n
        terms = first if k == 0 else np.zeros_like(value)
    else:
        big, wide = (120, value.astype(np.int64)) if whole else (3, value)
        terms = wide - (n - 1) * big if k == 0 else np.full(value.shape, big)
    return mt.DTensor.from_local(np.asarray(terms).astype(value.dtype), mesh, [Partial(op)])


CASES = {  # name: (function of the DTensor or the numpy value, value, reduce op)
    "int8 wraps, then widens": (lambda x: x.astype(np.int64), np.array([100, -100], np.int8), "sum"),
    "int8 times a float": (lambda x: x * 1.0, np.array([100, 120], np.int8), "sum"),
    "int8 sum promotes": (lambda x: np.sum(x), np.array([100, 120], np.int8), "sum"),
    "float64 narrowed": (lambda x: x.astype(np.float32), np.array([1e30, 1.0]), "sum"),
    "int64 to float64": (lambda x: x.astype(np.float64), np.array([2 ** 53 + 1], np.int64), "sum"),
    "ufunc dtype=": (lambda x: np.negative(x, dtype=np.float16), np.array([1e6, 1.5]), "sum"),
    "int avg doubled": (lambda x: x + x, np.array([1, 3], np.int64), "avg"),
    "divide by zero": (lambda x: x / 0.0, np.array([1.0, -2.0]), "sum"),
    "times inf": (lambda x: x * np.inf, np.array([1.0, -2.0]), "sum"),
    "max plus inf": (lambda x: x + np.inf, np.array([1.0, -2.0]), "max"),
}


def _replicated(value, mesh):
    return mt.DTensor.from_local(np.asarray(value), mesh, [Replicate()] * mesh.ndim)


@pytest.mark.mpi
@pytest.mark.parametrize("mesh_shape", [(WORLD.size,), (1, WORLD.size), (WORLD.size, 1)])
def test_terms_meet_dtensor_values_like_numpy(mesh_shape):
    """A DTensor divisor, scale or shift holding 0 or inf (not only constants): the terms
    reduce first.  The divisor is split on one mesh dim of a 2-D mesh, so the check of its
    values is agreed over the mesh (a rank-local answer would split the ranks' decisions)."""
    mesh = mt.init_device_mesh(mesh_shape)
    x = np.arange(8.0).reshape(4, 2) - 3
    sums = [Shard(0)] * mesh.ndim
    X = mt.DTensor.from_local(x[mt.placement.local_slices(x.shape, mesh.shape, sums,
                                                           mesh.coordinate)], mesh, sums,
                              shape=x.shape)
    divisor = np.array([0.0, 2.0] * 2).reshape(2, 2)
    D = mt.distribute_tensor(divisor, mesh, [Replicate()] * (mesh.ndim - 1) + [Shard(0)])
    y = np.array([1.0])    # fewer rows than ranks: empty shards hold max's identity, -inf
    Y = mt.distribute_tensor(y, mesh, [Shard(0)] * mesh.ndim)
    with np.errstate(all="ignore"):
        cases = {
            "sum / DTensor 0": (X.sum(axis=0) / _replicated(np.zeros(2), mesh),
                                x.sum(axis=0) / np.zeros(2)),
            "sum * DTensor inf": (X.sum(axis=0) * _replicated(np.full(2, np.inf), mesh),
                                  x.sum(axis=0) * np.inf),
            "sum / split DTensor 0": (X.sum(axis=0) / D, x.sum(axis=0) / divisor),
            "max + DTensor inf": (Y.max() + _replicated(np.inf, mesh), y.max() + np.inf),
        }
        for name, (got, want) in cases.items():
            got = host(got)
            assert_all_ranks(np.array_equal(got, want, equal_nan=True),
                             f"{name}: {got} != {want}")


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_terms_reduce_first_where_the_algebra_fails(name):
    fn, value, op = CASES[name]
    mesh = mt.init_device_mesh((WORLD.size,))
    with np.errstate(all="ignore"):
        want = np.asarray(fn(value))
        got = host(fn(_terms(value, mesh, op)))
    ok = got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True)
    assert_all_ranks(ok, f"{name}: {got} != {want}")


@pytest.mark.mpi
def test_var_with_ddof_past_the_count_gives_numpys_inf():
    mesh = mt.init_device_mesh((WORLD.size,))
    c = np.arange(6.0).reshape(3, 2)
    x = mt.distribute_tensor(c, mesh, [Shard(0)])
    with np.errstate(all="ignore"):
        assert np.array_equal(host(np.var(x, axis=0, ddof=3)), np.var(c, axis=0, ddof=3))


@pytest.mark.mpi
def test_repeated_einsum_label_is_never_split():
    mesh = mt.init_device_mesh((WORLD.size,))
    m, v = np.arange(16.0).reshape(4, 4), np.arange(4.0)
    got = np.einsum("ii,i->i", mt.distribute_tensor(m, mesh, [Replicate()]),
                    mt.distribute_tensor(v, mesh, [Shard(0)]))
    assert np.array_equal(host(got), np.einsum("ii,i->i", m, v))


@pytest.mark.mpi
def test_creation_refuses_partial_placements():
    mesh = mt.init_device_mesh((WORLD.size,))
    with pytest.raises(ValueError, match="contain Partial"):
        mt.ones(3, mesh=mesh, placements=[Partial()])
