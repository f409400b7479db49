"""Views, joins, indexing, creation and random over real MPI, compared with numpy."""
import numpy as np
import pytest
from mpi4py import MPI
from mpi_helpers import WORLD, assert_all_ranks, host, layouts, random_array
from op_sweep import sweep

import mtensor as mt

X = random_array((7, 6), seed=1)
EVEN = random_array((8, 6), seed=2)
CUBE = random_array((3, 4, 2), seed=3)

VIEWS = {
    "transpose": (lambda x: x.T, X),
    "transpose_axes": (lambda x: np.transpose(x, (2, 0, 1)), CUBE),
    "swapaxes": (lambda x: x.swapaxes(0, 2), CUBE),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), CUBE),
    "merge_even": (lambda x: x.reshape(48), EVEN),
    "merge_uneven": (lambda x: x.reshape(-1), X),
    "split": (lambda x: x.reshape(24, 2).reshape(8, 3, 2), EVEN),
    "split_last": (lambda x: x.reshape(7, 2, 3), X),
    "ravel": (lambda x: np.ravel(x), CUBE),
    "expand_squeeze": (lambda x: np.squeeze(np.expand_dims(x, 1), axis=1), X),
    "broadcast_to": (lambda x: np.broadcast_to(x[:, :1], (7, 6)) + 0, X),
    "concatenate": (lambda x, y: np.concatenate([x, y], axis=1), X, X * 2),
    "concatenate_rows": (lambda x, y: np.concatenate([x, y]), X, X * 2),
    "stack": (lambda x, y: np.stack([x, y], axis=1), X, X * 2),
    "getitem_rows": (lambda x: x[2:5], X),
    "getitem_step": (lambda x: x[::-2, 1::2], X),
    "getitem_int": (lambda x: x[3], X),
    "getitem_col": (lambda x: x[:, 4], X),
    "getitem_mixed": (lambda x: x[None, 1:, ..., 1], CUBE),
    "copy": (lambda x: x.copy(), X),
}


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views(mesh, name):
    fn, *arrays = VIEWS[name]
    failures = sweep(mesh, fn, *arrays, partial_ops=("sum", "max"))
    assert_all_ranks(not failures, f"{name}: {failures[:3]} ({len(failures)} layouts fail)")


@pytest.mark.mpi
def test_creation_matches_numpy(mesh):
    failures = []
    for placements in layouts(mesh.ndim, 1, ()):
        made = {
            "zeros": (mt.zeros(7, mesh=mesh, placements=placements), np.zeros(7)),
            "ones": (mt.ones((7,), np.int32, mesh=mesh, placements=placements), np.ones(7, np.int32)),
            "full": (mt.full(7, 2.5, mesh=mesh, placements=placements), np.full(7, 2.5)),
            "arange": (mt.arange(3, 17, 2, mesh=mesh, placements=placements), np.arange(3, 17, 2)),
            "arange_f": (mt.arange(0.5, 3.0, 0.25, mesh=mesh, placements=placements),
                         np.arange(0.5, 3.0, 0.25)),
        }
        for name, (got, want) in made.items():
            full = host(got)
            if full.dtype != want.dtype or not np.allclose(full, want):
                failures.append((name, placements))
        like = np.ones_like(mt.distribute_tensor(X, mesh, [mt.Partial()] * mesh.ndim))
        if not np.array_equal(host(like), np.ones_like(X)):
            failures.append(("ones_like of Partial", placements))
    assert_all_ranks(not failures, f"{failures[:3]}")


@pytest.mark.mpi
@pytest.mark.parametrize("draw", ["random", "standard_normal", "uniform", "integers", "normal"])
def test_random_same_values_on_any_mesh(mesh, draw):
    """Values depend on (seed, draw, global position) only: every layout on this mesh and a
    one-rank mesh of COMM_SELF give the same tensor."""
    alone = mt.init_device_mesh((1,), comm=MPI.COMM_SELF)
    args = {"integers": (0, 100, (7, 5)), "uniform": (-1.0, 2.0, (7, 5)),
            "normal": (1.0, 3.0, (7, 5))}.get(draw, ((7, 5),))
    reference = host(getattr(mt.random.default_rng(42), draw)(*args, mesh=alone))
    failures = []
    for placements in layouts(mesh.ndim, 2, ()):
        rng = mt.random.default_rng(42)
        got = host(getattr(rng, draw)(*args, mesh=mesh, placements=placements))
        second = host(getattr(rng, draw)(*args, mesh=mesh, placements=placements))
        if not np.array_equal(got, reference) or np.array_equal(second, got):
            failures.append(placements)
    assert_all_ranks(not failures, f"{draw}: {failures[:3]}")
    assert reference.std() > 0


@pytest.mark.mpi
def test_random_statistics():
    mesh = mt.init_device_mesh((WORLD.size,))
    rng = mt.random.default_rng(7)
    z = host(rng.standard_normal((4000,), mesh=mesh, placements=[mt.Shard(0)]))
    u = host(rng.random((4000,), mesh=mesh, placements=[mt.Shard(0)]))
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1) < 0.05
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.03
