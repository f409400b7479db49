"""numpy's sorting, set and counting family on DTensors of many layouts (Partial included),
compared with numpy on the whole arrays: NaNs, duplicates, ints, uneven and empty shards."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi_helpers import assert_all_ranks, assert_each_raises, host, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

V = random_array((11,), seed=1)                       # duplicates (values in -9..9)
VN = V.copy()
VN[[2, 7, 8]] = np.nan                                # NaNs sort last, unique keeps one
VI = random_array((13,), np.int64, seed=2)
TINY = random_array((2,), seed=3)                     # smaller than the mesh: empty shards
EMPTY = np.zeros((0,))
M = random_array((7, 5), seed=4)
MI = random_array((5, 6), np.int32, seed=5)
COUNTS = np.random.default_rng(6).integers(0, 6, size=12)
SORTED = np.sort(random_array((9,), seed=7))
W12 = random_array((12,), seed=8)
SMALL2D = random_array((2, 5), seed=9)                # 2 rows: empty row blocks from 3 ranks


def _tuple(fn):
    return lambda *a: tuple(fn(*a))


CASES = {
    # ranks with empty blocks: numpy's dtype from the other ranks' (nan* quantiles answer an
    # empty array with nanmean's), numpy's errors on every rank, any kth of an empty array
    "empty_block_dtypes": (lambda x: (np.nanquantile(x, [0.5], axis=1),
                                      np.nanpercentile(x.astype(np.float32), [10, 50], axis=1),
                                      np.nanquantile(x.astype(np.int64), 0.5, axis=1,
                                                     method="lower"),
                                      np.partition(x[:0], 3, axis=0)), SMALL2D),
    "sort_1d_nan": (np.sort, VN),
    "sort_1d_int": (np.sort, VI),
    "sort_tiny": (np.sort, TINY),
    "sort_empty": (np.sort, EMPTY),
    "sort_axis0": (lambda x: np.sort(x, axis=0), M),
    "sort_axis1": (np.sort, MI),
    "sort_flat": (lambda x: np.sort(x, axis=None), M),
    "argsort_1d": (lambda x: np.argsort(x, kind="stable"), VN),
    "argsort_int": (lambda x: np.argsort(x, stable=True), VI),
    "argsort_axis0": (lambda x: np.argsort(x, axis=0, kind="stable"), MI),
    "argsort_flat": (lambda x: np.argsort(x, axis=None, kind="stable"), M),
    "unique_nan": (_tuple(lambda x: np.unique(x, True, True, True)), VN),
    "unique_2d": (_tuple(lambda x: np.unique(x, return_inverse=True, return_counts=True)), MI),
    "unique_tiny": (lambda x: np.unique(x), TINY),
    "unique_empty": (_tuple(lambda x: np.unique(x, True, True, True)), EMPTY),
    "searchsorted": (lambda a, v: np.searchsorted(a, v), SORTED, V),
    "searchsorted_right": (lambda a: np.searchsorted(a, [-3.0, 0.0, 4.0], "right"), SORTED),
    "searchsorted_np": (lambda v: np.searchsorted(SORTED, v), M),
    "bincount": (lambda x: np.bincount(x, minlength=3), COUNTS),
    "bincount_weights": (lambda x, w: np.bincount(x, w, minlength=9), COUNTS, W12),
    "histogram": (_tuple(lambda x: np.histogram(x, 4)), M),
    "histogram_int": (_tuple(lambda x: np.histogram(x, 3, weights=np.ones((5, 6)))), MI),
    "histogram_edges": (_tuple(lambda x: np.histogram(x, [-9, -2, 0, 3, 9], density=True)), V),
    "histogram_range": (_tuple(lambda x: np.histogram(x, 5, range=(-3, 4))), VI),
    "quantile": (lambda x: np.quantile(x, [0.1, 0.5, 0.75]), V),
    "quantile_axis": (lambda x: np.quantile(x, 0.3, axis=0, keepdims=True), M),
    "percentile_axis1": (lambda x: np.percentile(x, [25, 90], axis=1, method="nearest"), MI),
    "median": (lambda x: np.median(x, axis=1), M),
    "median_flat": (np.median, MI),
    "nanmedian": (np.nanmedian, VN),
    "nanquantile": (lambda x: np.nanquantile(x, [0.2, 0.8]), VN),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    assert_matches_numpy(mesh, name, fn, *arrays, limit=4)


def _split(mesh, dim=0):
    return [mt.Shard(dim)] + [mt.Replicate()] * (mesh.ndim - 1)


def _is_partition(part, values, k) -> bool:
    """``part`` is a permutation of ``values`` partitioned at ``k`` (NaNs last)."""
    want = np.sort(values)
    pivot = want[k]
    ok = np.array_equal(np.sort(part), want, equal_nan=True)
    ok = ok and (np.isnan(pivot) and np.isnan(part[k]) or part[k] == pivot)
    if not np.isnan(pivot):
        ok = ok and bool(np.all(part[:k] <= pivot))
        ok = ok and bool(np.all((part[k + 1:] >= pivot) | np.isnan(part[k + 1:])))
    return ok


@pytest.mark.mpi
def test_partition_property(mesh):
    x = mt.distribute_tensor(VN, mesh, _split(mesh))
    m = mt.distribute_tensor(M, mesh, _split(mesh, 1))
    bad = []
    for k in (0, 4, -1):
        part = host(np.partition(x, k))
        index = host(np.argpartition(x, k))
        if not _is_partition(part, VN, k % len(VN)):
            bad.append(f"partition kth={k}: {part}")
        if not (np.array_equal(np.sort(index), np.arange(len(VN)))
                and _is_partition(VN[index], VN, k % len(VN))):
            bad.append(f"argpartition kth={k}: {index}")
    rows = host(np.partition(m, (1, 3), axis=1))
    if not np.array_equal(rows, np.partition(M, (1, 3), axis=1)):
        bad.append("partition of a split axis of a 2-D array")
    assert_all_ranks(not bad, "; ".join(bad))


@pytest.mark.mpi
def test_layouts_and_communication(mesh):
    """A whole axis sorts without communication; a split 1-D array moves data only with
    all-to-alls (no gather of it) and keeps its layout."""
    m = mt.distribute_tensor(M, mesh, _split(mesh))
    v = mt.distribute_tensor(VN, mesh, [mt.Shard(0)] * mesh.ndim)
    with mt.CommDebugMode() as comm:
        rows = np.sort(m, axis=1)
    ok = not comm.get_comm_counts() and rows.placements == m.placements
    with mt.CommDebugMode() as comm:
        out = np.sort(v)
    kinds = set(comm.get_comm_counts())
    ok = ok and kinds <= {"all_gather", "all_reduce", "all_to_all"}
    ok = ok and out.placements == v.placements
    ok = ok and (mesh.size() == 1 or "all_to_all" in kinds)
    u = np.unique(v)
    ok = ok and (mesh.size() == 1 or u.placements == (mt.Shard(0),) * mesh.ndim)
    ok = ok and np.array_equal(np.sort(host(rows)), np.sort(M))
    assert_all_ranks(ok, f"rows {rows.placements}, sort {out.placements} {kinds}, "
                         f"unique {u.placements}")


@pytest.mark.mpi
def test_refusals(mesh):
    x = mt.distribute_tensor(V, mesh, _split(mesh))
    i = mt.distribute_tensor(VI, mesh, _split(mesh))
    t = mt.distribute_tensor(np.array([1, 0]), mesh, _split(mesh))   # empty blocks from 3 ranks
    cases = {
        "sort order": (lambda: np.sort(x, order="a"), TypeError, "order"),
        "unique axis": (lambda: np.unique(x, axis=0), TypeError, "axis"),
        "histogram bins": (lambda: np.histogram(x, "auto"), TypeError, "bins"),
        "quantile weights": (lambda: np.quantile(x, 0.5, weights=V), TypeError, "weights"),
        "partition kth": (lambda: np.partition(x, 11), ValueError, "kth"),
        "bincount negative": (lambda: np.bincount(i), ValueError, "negative"),
        "bincount float": (lambda: np.bincount(x), TypeError, "cast"),
        "compile": (lambda: mt.compile(np.sort)(x), TypeError, "np.sort"),
        # numpy raises these only on a non-empty block: every rank must raise, none wait
        "bincount complex weights": (lambda: np.bincount(t, t * 1j), TypeError, "cast"),
        "histogram bool weights": (lambda: np.histogram(t, [0, 1, 2.5], weights=t > 0),
                                   TypeError, "Cannot cast"),
    }
    assert_each_raises(cases)


_values = st.lists(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 3.0, np.nan]), max_size=23)


@pytest.mark.mpi
@settings(derandomize=True, max_examples=12, deadline=None, database=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(values=_values, as_int=st.booleans(), spread=st.booleans())
def test_sample_sort_properties(mesh, values, as_int, spread):
    """Sort, stable argsort and unique of drawn arrays (many ties) equal numpy's."""
    a = np.array(values, dtype=float)
    if as_int:
        a = np.nan_to_num(a, nan=7.0).astype(np.int16)
    placements = [mt.Shard(0)] * mesh.ndim if spread else _split(mesh)
    x = mt.distribute_tensor(a, mesh, placements)
    got = [np.sort(x), np.argsort(x, kind="stable"), *np.unique(x, True, True, True)]
    want = [np.sort(a), np.argsort(a, kind="stable"), *np.unique(a, True, True, True)]
    ok = all(g.dtype == w.dtype and np.array_equal(host(g), w, equal_nan=True)
             for g, w in zip(got, want))
    assert_all_ranks(ok, f"{a.tolist()} on {placements}")
