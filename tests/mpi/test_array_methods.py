"""numpy's array attributes, conversions and methods on DTensors of many layouts (split,
replicated, Partial; uneven and empty shards), compared with numpy on the whole arrays; the
in-place methods checked to change the DTensor and the views of it as numpy's do."""
import copy
import operator

import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host, layouts, random_array
from op_sweep import assert_matches_numpy, sample

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

M = random_array((7, 5), seed=1)            # uneven on every mesh
N = random_array((5, 2), seed=2)
SMALL = random_array((3, 2), seed=3)        # smaller than the mesh: empty shards
V = random_array((7,), seed=4)
CUBE = random_array((3, 4, 2), seed=5)
I = random_array((7, 5), np.int64, seed=6)  # holds zeros
P = np.random.default_rng(7).permutation(35).reshape(7, 5) - 17.0   # no ties: one argsort
SORTED = np.sort(V)
Z = M + 1j * random_array((7, 5), seed=8)
EMPTY = np.zeros((0, 3))


def _ptp(x, **kw):
    """numpy 2 dropped ``ndarray.ptp``; DTensors keep the method."""
    return x.ptp(**kw) if isinstance(x, mt.DTensor) else np.ptp(x, **kw)


def _reductions(x):
    """The methods DTensors had before, as methods (np.sum and the rest test the math)."""
    return (x.sum(0), x.mean(1), x.var(ddof=1), x.prod(0), x.max(1), x.argmin(0),
            (x > 0).any(0))


CASES = {
    "argsort": (lambda x: (x.argsort(axis=0), x.argsort(axis=None)), P),
    "cumsum": (lambda x: (x.cumsum(axis=0), x.cumsum(), x.cumprod(1, dtype=np.float32)), M),
    "cumsum_empty": (lambda x: x.cumsum(axis=1), EMPTY),
    "nonzero": (lambda x: x.nonzero(), I),
    "take": (lambda x: (x.take([0, 3, 6, 3], axis=0), x.take([1, 34, 5])), M),
    "round": (lambda x: (x / 7).round(2), M),
    "clip": (lambda x: (x.clip(-3, 4), x.clip(max=2), x.clip(None, 1)), M),
    "searchsorted": (lambda x: x.searchsorted(np.array([-3.5, 0.0, 4.0, 9.0])), SORTED),
    "ptp": (lambda x: (_ptp(x, axis=0), _ptp(x)), M),
    "repeat_diagonal_trace": (lambda x: (x.repeat(2, axis=1), x.diagonal(1), x.trace()), M),
    "dot": (lambda x, y: x.dot(y), M, N),
    "copies": (lambda x: (x.flatten(), x.copy(), x[:, 1:2].squeeze(axis=1)), SMALL),
    "transposes": (lambda x: (x.swapaxes(0, 2), x.T, x.mT), CUBE),
    "complex": (lambda x: (x.conj(), x.conjugate(), x.real, x.imag), Z),
    "real_of_real": (lambda x: (x.real, x.imag, x.conj()), M),
    "astype": (lambda x: (x.astype(np.int32), x.astype("f4", casting="same_kind")), M),
    "compress": (lambda x: x.compress([True, False, True], axis=1), M),
    "reductions": (_reductions, I),
    "flat_read": (lambda x: (x.flat[7], x.flat[-1], x.flat[3:30:4], x.flat[[0, 34, 2]]), M),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_methods_match_numpy(mesh, name):
    fn, *arrays = CASES[name]
    assert_matches_numpy(mesh, name, fn, *arrays, limit=5)


def _inputs(mesh, full, limit=5):
    """``full`` as DTensors of sampled layouts, Partial ones included."""
    for placements in sample(layouts(mesh.ndim, full.ndim), limit):
        yield placements, mt.distribute_tensor(full, mesh, placements, src_data_rank=None)


@pytest.mark.mpi
def test_item_tolist_and_python_scalars(mesh):
    bad = []
    for placements, x in _inputs(mesh, M):
        i = x.astype(np.int64)
        got = [x.item(7), x.item(-1), x.item(3, 4), x.item((6, 0)), x[2:3, 1:2].item(),
               x.nbytes, x.itemsize, i.itemsize, x.tolist(), x[:0].tolist(), x.tobytes(),
               int(x.max()), float(x[2, 3]), complex(x[1, 1]), bool(x[0:1, 2:3]),
               np.zeros(int(i.max()) + 1).shape, list(range(i.argmax())),
               operator.index(i[4, 0]), [1, 2, 3, 4, 5, 6, 7][i.argmin():],
               [type(x.item(0)), type(i.item(0)), type((x > 0).item(0))],
               len(x.flat), 3.0 in x, 100 in x]
        want = [M.item(7), M.item(-1), M.item(3, 4), M.item((6, 0)), M[2:3, 1:2].item(),
                M.nbytes, M.itemsize, 8, M.tolist(), [], M.tobytes(),
                int(M.max()), float(M[2, 3]), complex(M[1, 1]), bool(M[0, 2]),
                (int(M.max()) + 1,), list(range(M.argmax())),
                int(M[4, 0]), [1, 2, 3, 4, 5, 6, 7][M.argmin():], [float, int, bool],
                M.size, 3.0 in M, 100 in M]
        if got != want:
            bad.append(f"{placements}: {[(g, w) for g, w in zip(got, want) if g != w][:3]}")
    assert_all_ranks(not bad, "; ".join(bad))


@pytest.mark.mpi
def test_conversions_refuse_as_numpy_does(mesh):
    x = mt.distribute_tensor(M, mesh, [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1))
    i = x.astype(np.int64)
    refused = [
        (ValueError, "size 1", lambda: x.item()),
        (IndexError, "out of bounds", lambda: x.item(35)),
        (ValueError, "indices", lambda: x.item(1, 2, 3)),
        (TypeError, "0-dimensional", lambda: int(x[0:1, 0])),
        (TypeError, "0-dimensional", lambda: float(x)),
        (TypeError, "scalar index", lambda: operator.index(x[0, 0])),
        (TypeError, "scalar index", lambda: range(i[0:1, 0])),
        (ValueError, "ambiguous", lambda: bool(x)),
        (ValueError, "ambiguous", lambda: bool(x[:0])),
        (ValueError, "ndim < 2", lambda: x[0].mT),
        (TypeError, "rule 'safe'", lambda: x.astype(np.int64, casting="safe")),
    ]
    for kind, match, call in refused:
        with pytest.raises(kind, match=match):
            call()
    assert x.astype(np.float64, copy=False) is x
    with pytest.raises(TypeError, match="mt.compile: DTensor.item"):
        mt.compile(lambda x: x * x.item(0))(x)


@pytest.mark.mpi
def test_missing_names(mesh):
    """ndarray's names DTensors lack say so as a missing numpy function does; others stay
    AttributeErrors (hasattr, getattr with a default, copy)."""
    x = mt.distribute_tensor(Z, mesh, [mt.Replicate()] * mesh.ndim)
    for name in ("view", "resize", "byteswap", "strides", "tofile", "ctypes"):
        with pytest.raises(TypeError, match=f"ndarray.{name}: mtensor has no sharding rule"):
            getattr(x, name)
    with pytest.raises(AttributeError):
        x.no_such_method()
    assert not hasattr(x, "__array_interface__") and getattr(x, "__setstate_x__", 7) == 7
    assert copy.copy(x).shape == x.shape


def _mutation_sweep(mesh, mutate, full, limit=5):
    """``mutate`` (an in-place method call) on numpy's array and on DTensors of sampled
    layouts, with a view of each made before: the DTensor keeps its layout, returns None, and
    it and the view end as numpy's do.  Returns the failing layouts."""
    want = full.copy()
    want_view = want[1:, ::2] if full.ndim > 1 else want[1:]
    mutate(want)
    bad = []
    for placements, x in _inputs(mesh, full, limit):
        view = x[1:, ::2] if full.ndim > 1 else x[1:]
        returned = mutate(x)
        ok = returned is None and list(x.placements) == list(placements)
        ok = ok and np.array_equal(host(x), want)
        if not (ok and np.array_equal(host(view), want_view)):
            bad.append(placements)
    return bad


IN_PLACE = {
    "sort": (lambda a: a.sort(), P),
    "sort_axis0": (lambda a: a.sort(axis=0), M),
    "sort_1d": (lambda a: a.sort(), V),
    "sort_view": (lambda a: a[1:, 1:].sort(axis=0), P),
    "sort_small": (lambda a: a.sort(0), SMALL),
    "fill": (lambda a: a.fill(2.5), M),
    "fill_int": (lambda a: a.fill(-3.7), I),
    "fill_view": (lambda a: a[:, 1:].fill(0), SMALL),
    "flat_int": (lambda a: a.flat.__setitem__(9, -5), M),
    "flat_slice": (lambda a: a.flat.__setitem__(slice(2, 20, 3), [7, 8]), M),
    "flat_indices": (lambda a: a.flat.__setitem__([0, 34, 3, -2], 1.5), M),
    "flat_mask": (lambda a: a.flat.__setitem__(np.arange(35) % 4 == 1, [4, 5, 6]), M),
    "flat_whole": (lambda a: setattr(a, "flat", [1.0, 2.0]), SMALL),
    "flat_view": (lambda a: a[2:].flat.__setitem__(slice(None), 9), SMALL),
    "put": (lambda a: a.put([0, 5, -1], [10, 20]), M),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_methods_write_the_dtensor_and_its_views(mesh, name):
    mutate, full = IN_PLACE[name]
    bad = _mutation_sweep(mesh, mutate, full, limit=5)
    assert_all_ranks(not bad, f"{name}: {bad[:3]} ({len(bad)} layouts fail)")


@pytest.mark.mpi
def test_partition_in_place(mesh):
    """numpy's partition leaves no unique order: the kth element lands where a sort puts it,
    nothing before it is larger, nothing after it smaller, and the rows hold the same values."""
    bad = []
    for axis, kth in ((0, 3), (-1, 1), (1, -1)):
        ordered = np.sort(P, axis=axis)
        for placements, x in _inputs(mesh, P, 3):
            view = x[1:]
            returned = x.partition(kth, axis=axis)
            got = np.moveaxis(host(x), axis, 0)
            pivot = np.moveaxis(ordered, axis, 0)[kth]
            k = kth % got.shape[0]
            ok = returned is None and np.array_equal(got[k], pivot)
            ok = ok and (got[:k] <= pivot).all() and (got[k + 1:] >= pivot).all()
            ok = ok and np.array_equal(np.sort(host(x), axis=axis), ordered)
            if not (ok and np.array_equal(host(view), host(x)[1:])):
                bad.append((axis, kth, placements))
    assert_all_ranks(not bad, f"partition: {bad[:3]} ({len(bad)} fail)")


@pytest.mark.mpi
def test_flat_reads_are_copies_and_iterate(mesh):
    x = mt.distribute_tensor(M, mesh, [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1))
    part = x.flat[2:9]
    part[...] = 0
    items = list(x.flat)
    ok = np.array_equal(host(x), M) and items == list(M.flat)
    ok = ok and type(items[0]) is np.float64 and x.flat[4].shape == ()
    assert_all_ranks(ok, "flat: a read aliased x, or iteration differs from numpy's")
