"""numpy's joins, flips, rolls, repeats, tiling, meshgrid, pad and the diagonal family on
DTensors of many layouts, compared bit for bit with numpy on the whole arrays; a few layouts
checked to stay split without communication."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, host, random_array
from op_sweep import assert_matches_numpy

import mtensor as mt

MESH_NDIM_MAX = 2   # 1-D and 2-D meshes (see conftest.mesh)

M = random_array((7, 5), seed=1)          # uneven on every mesh
M2 = random_array((7, 5), seed=2)
N = random_array((7, 2), seed=3)
SMALL = random_array((3, 2), seed=4)      # smaller than the mesh
V = random_array((7,), seed=5)
W = random_array((3,), seed=6)
CUBE = random_array((3, 4, 2), seed=7)
I = random_array((7, 5), np.int64, seed=8)
B = M > 0

CASES = {
    "vstack": (lambda x, y: np.vstack([x, y]), M, M2),
    "vstack_1d": (lambda x, y: np.vstack((x, y)), V, V),
    "vstack_small": (lambda x: np.vstack([x, SMALL]), SMALL),
    "hstack": (lambda x, y: np.hstack([x, y]), M, N),
    "hstack_1d": (lambda x, y: np.hstack([x, y]), V, W),
    "dstack": (lambda x, y: np.dstack([x, y]), M, M2),
    "dstack_1d": (lambda x: np.dstack([x, x]), V),
    "column_stack": (lambda x, y: np.column_stack([x, y]), V, N),
    "atleast": (lambda x: np.atleast_3d(np.atleast_2d(np.atleast_1d(x))) + 0, V),
    "atleast_3d": (lambda x: np.atleast_3d(x) * 1, M),
    "append": (lambda x, y: np.append(x, y), M, SMALL),
    "append_axis": (lambda x, y: np.append(x, y, axis=1), M, N),
    "flip": (lambda x: np.flip(x), M),
    "flip_0": (lambda x: np.flip(x, 0), M),
    "flip_cube": (lambda x: np.flip(x, (0, -1)), CUBE),
    "fliplr": (np.fliplr, SMALL),
    "flipud": (np.flipud, I),
    "flip_bool": (np.flipud, B),
    "roll": (lambda x: np.roll(x, 3), M),
    "roll_axes": (lambda x: np.roll(x, (2, -1), axis=(0, 1)), M),
    "roll_1d": (lambda x: np.roll(x, 9), V),
    "roll_small": (lambda x: np.roll(x, 1, axis=0), SMALL),
    "diagonal": (np.diagonal, M),
    "diagonal_offset": (lambda x: np.diagonal(x, 2), M),
    "diagonal_cube": (lambda x: np.diagonal(x, -1, 2, 1), CUBE),
    "trace": (np.trace, M),
    "trace_cube": (lambda x: np.trace(x, 1, 0, 2), CUBE),
    "trace_int": (np.trace, I),
    "diag_vector": (np.diag, V),
    "diag_vector_k": (lambda x: np.diag(x, 2), W),
    "diag_vector_negk": (lambda x: np.diag(x, -1), V),
    "diag_matrix": (lambda x: np.diag(x, -2), M),
    "diag_small": (np.diag, SMALL),
    "tril": (np.tril, M),
    "triu": (lambda x: np.triu(x, 1), M),
    "tril_cube": (lambda x: np.tril(x, -1), CUBE),
    "triu_int": (np.triu, I),
    "repeat": (lambda x: np.repeat(x, 2), M),
    "repeat_0": (lambda x: np.repeat(x, 3, axis=0), M),
    "repeat_1": (lambda x: np.repeat(x, 2, axis=-1), SMALL),
    "repeat_counts": (lambda x: np.repeat(x, np.arange(7) % 3, axis=0), M),
    "repeat_counts_flat": (lambda x: np.repeat(x, np.arange(35) % 2), M),
    "tile": (lambda x: np.tile(x, 2), M),
    "tile_2d": (lambda x: np.tile(x, (2, 1)), SMALL),
    "tile_grow": (lambda x: np.tile(x, (2, 1, 2)), V),
    "meshgrid": (lambda x, y: np.meshgrid(x, y), V, W),
    "meshgrid_ij": (lambda x, y: np.meshgrid(x, y, np.arange(2.0), indexing="ij")[:2], V, W),
    "meshgrid_sparse": (lambda x, y: np.meshgrid(x, y, sparse=True), V, W),
    "pad": (lambda x: np.pad(x, 1), M),
    "pad_values": (lambda x: np.pad(x, ((1, 0), (0, 2)), constant_values=((7, 8), (9, 6))), M),
    "pad_1d": (lambda x: np.pad(x, (2, 3), constant_values=-1.5), V),
    "pad_int": (lambda x: np.pad(x, {1: (0, 2)}, constant_values=4.7), I),
    "pad_small": (lambda x: np.pad(x, 2), SMALL),
    "pad_edge": (lambda x: (np.pad(x, ((2, 1), (0, 3)), mode="edge"), np.pad(x, 9, "edge")), M),
    "pad_wrap": (lambda x: (np.pad(x, ((1, 3), (2, 0)), mode="wrap"), np.pad(x, 8, "wrap")), M),
    "pad_edge_wrap_small": (lambda x: (np.pad(x, 2, "edge"), np.pad(x, (0, 4), "wrap")), SMALL),
    "pad_wrap_1d_int": (lambda x: np.pad(x, (5, 1), "wrap"), I[:, 0]),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_numpy(mesh, name):
    fn, *arrays = CASES[name]
    # limit=5: a step of 3 over 16 two-operand combos, so both operands' layouts vary
    assert_matches_numpy(mesh, name, fn, *arrays, limit=5)


def _split(mesh, dim):
    return [mt.Shard(dim)] + [mt.Replicate()] * (mesh.ndim - 1)


def _check_layout(mesh, name, fn, arrays, dims, out_dim, want, comms=()):
    """``fn`` on ``arrays`` split on ``dims`` (mesh dim 0) gives ``S(out_dim)`` there (None:
    any), moves only ``comms`` and equals numpy's ``want``."""
    ins = [mt.distribute_tensor(a, mesh, _split(mesh, d)) for a, d in zip(arrays, dims)]
    with mt.CommDebugMode() as comm:
        out = fn(*ins)
    counts = comm.get_comm_counts()
    ok = set(counts) <= set(comms)
    ok = ok and (out_dim is None or out.placements[0] == mt.Shard(out_dim))
    ok = ok and np.array_equal(host(out), want)
    assert_all_ranks(ok, f"{name}: placements {out.placements}, comms {counts}")


@pytest.mark.mpi
def test_layouts_stay_split(mesh):
    checks = [
        ("vstack S(1)", lambda x, y: np.vstack([x, y]), (M, M2), (1, 1), 1,
         np.vstack([M, M2])),
        ("hstack S(0)", lambda x, y: np.hstack([x, y]), (M, N), (0, 0), 0, np.hstack([M, N])),
        ("dstack S(1)", lambda x, y: np.dstack([x, y]), (M, M2), (1, 1), 1, np.dstack([M, M2])),
        ("column_stack S(0)", lambda x, y: np.column_stack([x, y]), (V, N), (0, 0), 0,
         np.column_stack([V, N])),
        ("flip axis 1 of S(0)", lambda x: np.flip(x, 1), (M,), (0,), 0, np.flip(M, 1)),
        ("roll axis 1 of S(0)", lambda x: np.roll(x, 2, axis=1), (M,), (0,), 0,
         np.roll(M, 2, axis=1)),
        ("pad axis 1 of S(0)", lambda x: np.pad(x, ((0, 0), (1, 2))), (M,), (0,), 0,
         np.pad(M, ((0, 0), (1, 2)))),
        ("repeat axis 1 of S(0)", lambda x: np.repeat(x, 3, axis=1), (M,), (0,), 0,
         np.repeat(M, 3, axis=1)),
        ("tile columns of S(0)", lambda x: np.tile(x, (1, 2)), (M,), (0,), 0, np.tile(M, (1, 2))),
        ("tril S(0)", np.tril, (M,), (0,), 0, np.tril(M)),
        ("triu S(1)", np.triu, (M,), (1,), 1, np.triu(M)),
        ("diag of S(0) vector", np.diag, (V,), (0,), 0, np.diag(V)),
        ("diagonal keeps the batch split", lambda x: np.diagonal(x, 0, 1, 2), (CUBE,), (0,), 0,
         np.diagonal(CUBE, 0, 1, 2)),
    ]
    for name, fn, arrays, dims, out_dim, want in checks:
        _check_layout(mesh, name, fn, arrays, dims, out_dim, want)
    # a reversed split dim: the cost model may leave it as partial terms, but never gathers
    _check_layout(mesh, "flip axis 0 of S(0)", lambda x: np.flip(x, 0), (M,), (0,), None,
                  np.flip(M, 0), comms=("all_reduce", "reduce_scatter"))


@pytest.mark.mpi
def test_meshgrid_keeps_splits(mesh):
    x = mt.distribute_tensor(V, mesh, _split(mesh, 0))
    y = mt.distribute_tensor(W, mesh, [mt.Replicate()] * mesh.ndim)
    with mt.CommDebugMode() as comm:
        gx, gy = np.meshgrid(x, y, indexing="ij")
    want = np.meshgrid(V, W, indexing="ij")
    ok = not comm.get_comm_counts() and gx.placements[0] == mt.Shard(0)
    ok = ok and np.array_equal(host(gx), want[0]) and np.array_equal(host(gy),
                                                                            want[1])
    assert_all_ranks(ok, f"meshgrid: {gx.placements}, {comm.get_comm_counts()}")


@pytest.mark.mpi
def test_results_are_fresh(mesh):
    """repeat/tile/roll/pad return new arrays (as numpy): writing them leaves the input."""
    x = mt.distribute_tensor(M, mesh, _split(mesh, 0))
    for out in (np.repeat(x, 1, axis=0), np.tile(x, 1), np.roll(x, 0), np.pad(x, 0),
                np.repeat(x[:1], 4, axis=0), np.tile(x[:, :1], (1, 3))):
        out[...] = 100
    assert_all_ranks(np.array_equal(host(x), M), "an input changed")


@pytest.mark.mpi
def test_refusals(mesh):
    x = mt.distribute_tensor(M, mesh, _split(mesh, 0))
    v = mt.distribute_tensor(V, mesh, _split(mesh, 0))
    refused = {
        "pad": (lambda: np.pad(x, 1, mode="reflect"), "mode"),
        "vstack": (lambda: np.vstack([x, x], dtype=np.float32), "dtype"),
        "hstack": (lambda: np.hstack([x, x], casting="unsafe"), "casting"),
        "roll": (lambda: np.roll(x, v[:1]), "shift"),
        "diag": (lambda: np.diag(v, k=v[0]), "k"),
    }
    bad = []
    for name, (call, arg) in refused.items():
        try:
            call()
            bad.append(f"{name}: no error")
        except TypeError as e:
            if name not in str(e) or arg not in str(e):
                bad.append(f"{name}: {e}")
    assert_all_ranks(not bad, "; ".join(bad))
