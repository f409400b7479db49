"""np.diff, np.ediff1d, np.gradient and cumsum on DTensors of many layouts (split along the
differenced axis included, uneven and empty shards, Partial), compared with numpy on the
whole arrays; the halo exchange checked to move only edge slices; a hypothesis property
of the scans along a split axis."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mpi_helpers import assert_all_ranks, host, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

M = random_array((7, 5), seed=1)            # uneven on every mesh
SMALL = random_array((3, 2), seed=2)        # smaller than the mesh: empty shards
V = random_array((11,), seed=3)
E = np.zeros((0, 3))
I8 = random_array((7, 5), np.int8, seed=4)
U8 = random_array((9,), np.uint8, seed=5)
B = M > 0
C = M + 1j * random_array((7, 5), seed=6)
KERNEL = np.array([0.25, -0.5, 1.0, 2.0])
I3 = np.array([1, 2, 1])
W3 = random_array((3,), seed=7)                # shorter than the kernels: empty shards too
NAN = M.copy()
NAN[2, 1], NAN[4, 3], NAN[5, 0] = np.nan, np.inf, -np.inf
X7 = np.array([0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 7.5])   # uneven spacing, even in stretches
X5 = np.arange(5) * 2
ROW = random_array((1, 5), seed=7)

CASES = {
    "convolve": (lambda x: tuple(np.convolve(x, w, mode) for w in (KERNEL, KERNEL[:1], I3)
                                 for mode in ("full", "same", "valid")), V),
    "convolve_small_and_long_kernel": (lambda x: (np.convolve(x, KERNEL), np.convolve(V, x),
                                                  np.convolve(x, V, "same")), W3),
    "convolve_int": (lambda x: (np.convolve(x, I3, "valid"), np.convolve(I3, x)), U8),
    "diff": (lambda x: (np.diff(x), np.diff(x, axis=0), np.diff(x, 2, axis=0)), M),
    "diff_high_order": (lambda x: (np.diff(x, 5, axis=0), np.diff(x, 9, axis=0)), M),
    "diff_1d": (lambda x: (np.diff(x), np.diff(x, 3)), V),
    "diff_small": (lambda x: (np.diff(x, axis=0), np.diff(x, axis=1)), SMALL),
    "diff_empty": (lambda x: np.diff(x, axis=0), E),
    "diff_int8": (lambda x: (np.diff(x, axis=0), np.diff(x, 2)), I8),
    "diff_uint8": (lambda x: np.diff(x, 2), U8),
    "diff_bool": (lambda x: (np.diff(x, axis=0), np.diff(x, 2, axis=1)), B),
    "diff_complex": (lambda x: np.diff(x, axis=0), C),
    "diff_nan_inf": (lambda x: (np.diff(x, axis=0), np.diff(x, 2, axis=1)), NAN),
    "diff_prepend": (lambda x: (np.diff(x, axis=0, prepend=0.5),
                                np.diff(x, 2, axis=0, append=ROW),
                                np.diff(x, 3, axis=0, prepend=ROW, append=np.ones((4, 5))),
                                np.diff(x, axis=1, prepend=7)), M),
    "diff_prepend_dtensor": (lambda x, r: np.diff(x, 2, axis=0, prepend=r, append=r), M, ROW),
    "diff_prepend_promotes": (lambda x: np.diff(x, prepend=1.5), V.astype(np.int64)),
    "ediff1d": (lambda x: (np.ediff1d(x), np.ediff1d(x, to_begin=[1, 2], to_end=-1)), M),
    "gradient": (lambda x: np.gradient(x), M),
    "gradient_order2": (lambda x: np.gradient(x, 0.5, edge_order=2), M),
    "gradient_coords": (lambda x: np.gradient(x, X7, X5, edge_order=2), M),
    "gradient_coords_1": (lambda x: np.gradient(x, X7, axis=0), M),
    "gradient_int": (lambda x: np.gradient(x, axis=0), I8),
    "gradient_complex": (lambda x: np.gradient(x, 2.0, 3, edge_order=1), C),
    "gradient_1d": (lambda x: (np.gradient(x), np.gradient(x, edge_order=2)), V),
    "gradient_small": (lambda x: np.gradient(x, axis=0, edge_order=2), SMALL),
    "cumsum": (lambda x: (np.cumsum(x, axis=0), np.cumsum(x), np.cumprod(x, axis=1)), M),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    wrapped = lambda *a: (lambda r: tuple(r) if isinstance(r, (list, tuple)) else r)(fn(*a))
    assert_matches_numpy(mesh, name, wrapped, *arrays, limit=6)


@pytest.mark.mpi
def test_gradient_coordinates_as_dtensor(mesh):
    x = mt.distribute_tensor(M, mesh, [mt.Shard(0)] + [mt.Replicate()] * (mesh.ndim - 1))
    coords = mt.distribute_tensor(X7, mesh, [mt.Shard(0)] * mesh.ndim)
    got = np.gradient(x, coords, axis=0, edge_order=2)
    ok = np.allclose(host(got), np.gradient(M, X7, axis=0, edge_order=2), rtol=1e-12)
    assert_all_ranks(ok and got.placements == x.placements, f"gradient: {got.placements}")


@pytest.mark.mpi
@pytest.mark.parametrize("nested", [False, True])
def test_halo_moves_edges_only(mesh, nested):
    """diff, gradient and convolve along an axis split by one mesh dim exchange halos of a
    few rows with the neighbours (never the blocks), bit for bit; split by two mesh dims
    (nested blocks, which a window does not plan) they gather the axis instead."""
    if nested and mesh.ndim == 1:
        pytest.skip("nested blocks need a 2-D mesh")
    n = 64 * mesh.size()
    full = random_array((n, 3), seed=9)
    layout = [mt.Shard(0)] * mesh.ndim if nested else [mt.Shard(0)] + [mt.Replicate()] * (
        mesh.ndim - 1)
    x = mt.distribute_tensor(full, mesh, layout)
    v = mt.distribute_tensor(full[:, 0], mesh, layout)
    with mt.CommDebugMode() as comm:
        d = np.diff(x, axis=0)
        g = np.gradient(x, axis=0, edge_order=2)
        c = np.convolve(v, KERNEL, "same")
        p = np.diff(x, 2, axis=0, prepend=0.0, append=full[-2:])
    counts = comm.get_comm_counts()
    moved = comm.get_total_bytes()
    if nested and all(n > 1 for n in mesh.shape):
        ok = set(counts) <= {"all_gather"}
    else:
        ok = set(counts) <= {"halo"} and moved < full.nbytes / 16
    ok = ok and c.placements == v.placements
    ok = ok and np.array_equal(host(c), np.convolve(full[:, 0], KERNEL, "same"))
    ok = ok and d.placements == x.placements and g.placements == x.placements
    ok = ok and np.array_equal(host(d), np.diff(full, axis=0))
    ok = ok and np.array_equal(host(g), np.gradient(full, axis=0, edge_order=2))
    ok = ok and np.array_equal(host(p), np.diff(full, 2, axis=0, prepend=0.0, append=full[-2:]))
    assert_all_ranks(ok, f"halo: {counts}, {moved} bytes of {full.nbytes}")


@pytest.mark.mpi
def test_errors_match_numpy(mesh):
    x = mt.distribute_tensor(M, mesh, [mt.Shard(0)] * mesh.ndim)
    checks = [
        (lambda a: np.diff(a, -1), ValueError),
        (lambda a: np.diff(a, axis=0, prepend=np.ones((2, 4))), ValueError),
        (lambda a: np.gradient(a[:1], axis=0), ValueError),
        (lambda a: np.gradient(a, edge_order=3), ValueError),
        (lambda a: np.gradient(a, X7[:3], axis=0), ValueError),
        (lambda a: np.gradient(a, 1.0, 2.0, 3.0), TypeError),
        (lambda a: np.ediff1d(a > 0), TypeError),
        (lambda a: np.convolve(a, KERNEL), ValueError),
        (lambda a: np.convolve(a[:, 0], []), ValueError),
        (lambda a: np.convolve(a[:, 0], KERNEL, "middle"), ValueError),
    ]
    for fn, error in checks:
        with pytest.raises(error):
            fn(M)
        with pytest.raises(error):
            fn(x)
    assert np.diff(x, 0) is x


def _layout(draw, mesh, ndim, axis):
    """Placements that split ``axis`` on at least one mesh dim."""
    options = [mt.Replicate(), mt.Partial()] + [mt.Shard(d) for d in range(ndim)]
    out = [draw(st.sampled_from(options)) for _ in range(mesh.ndim)]
    out[draw(st.integers(0, mesh.ndim - 1))] = mt.Shard(axis)
    return out


@pytest.mark.mpi
@settings(max_examples=12, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck), print_blob=False)
@given(data=st.data())
def test_scans_along_split_axis_property(mesh, data):
    shape = tuple(data.draw(st.lists(st.integers(0, 9), min_size=1, max_size=2)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = data.draw(st.integers(1, 4))
    prepend = data.draw(st.sampled_from([np._NoValue, 2.0]))
    full = random_array(shape, seed=len(shape) * 10 + n)
    x = mt.distribute_tensor(full, mesh, _layout(data.draw, mesh, len(shape), axis),
                             src_data_rank=None)
    got_sum = host(np.cumsum(x, axis=axis))
    got_diff = host(np.diff(x, n, axis=axis, prepend=prepend))
    ok = np.array_equal(got_sum, np.cumsum(full, axis=axis))
    ok = ok and np.array_equal(got_diff, np.diff(full, n, axis=axis, prepend=prepend))
    assert_all_ranks(ok, f"shape {shape}, axis {axis}, n {n}, {x.placements}")
