"""Helpers for tests that run on every rank under mpiexec."""
import itertools

import numpy as np
from mpi4py import MPI

from mtensor.placement import Partial, Replicate, Shard, local_slices

WORLD = MPI.COMM_WORLD

# Mesh shapes tried at each world size: 1-D always, 2-D and 3-D where the size allows, and a
# size-1 mesh dim to exercise the free relabelling of trivial dims.
MESH_SHAPES = {
    1: [(1,)],
    2: [(2,), (1, 2)],
    3: [(3,), (3, 1)],
    4: [(4,), (2, 2)],
    8: [(8,), (2, 4), (2, 2, 2)],
}


def mesh_shapes():
    return MESH_SHAPES.get(WORLD.size, [(WORLD.size,)])


def assert_all_ranks(ok: bool, message: str) -> None:
    """Fail on every rank if the check failed on any, so no rank runs ahead alone."""
    failed = [r for r, flag in enumerate(WORLD.allgather(bool(ok))) if not flag]
    assert not failed, f"ranks {failed}: {message}"


def weighted_loss(fn, arrays):
    """A scalar of ``fn(*arrays)`` that weighs every output element differently."""
    out = fn(*arrays)
    weights = np.linspace(0.5, 1.5, int(np.prod(np.shape(out)))).reshape(np.shape(out))
    return (out * weights).sum()


def numeric_grads(fn, arrays, eps=1e-6):
    """Central finite differences of ``weighted_loss(fn, arrays)`` in numpy."""
    grads = []
    for k, a in enumerate(arrays):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            up, down = [x.copy() for x in arrays], [x.copy() for x in arrays]
            up[k][i] += eps
            down[k][i] -= eps
            g[i] = (weighted_loss(fn, up) - weighted_loss(fn, down)) / (2 * eps)
        grads.append(g)
    return grads


def assert_each_raises(cases) -> None:
    """Each ``name: (call, exception type, text of its message)`` raises so, on every rank."""
    bad = []
    for name, (call, error, text) in cases.items():
        try:
            call()
            bad.append(f"{name}: no error")
        except error as e:
            if text not in str(e):
                bad.append(f"{name}: {e}")
    assert_all_ranks(not bad, "; ".join(bad))


def share(mesh, k, n):
    """Which share of the layout pairs a test runs: all of them on 1-D and 2-D meshes; on a
    3-D mesh (1728 pairs per shape, 8 ranks oversubscribed on 2 cores) pair i where i % n == k, so the
    ``n`` tests of one parametrized family (shapes, reduce ops) cover every pair once."""
    return (0, 1) if mesh.ndim < 3 else (k, n)


def random_array(shape, dtype=np.float64, seed=0):
    """Integer-valued data: sums are exact in any order, so results compare bit for bit."""
    return np.random.default_rng(seed).integers(-9, 10, size=shape).astype(dtype)


def expected_block(full, mesh, placements):
    """This rank's block of ``full`` under ``placements`` (Partial read as Replicate)."""
    return full[local_slices(full.shape, mesh.shape, placements, mesh.coordinate)]


def partial_terms(block, mesh, placements, seed=1):
    """Terms whose reduction over the Partial mesh dims is ``block``, different on each rank.

    sum/avg: telescoping noise N(k) - N(k+1) around the partial coordinates (exact in
    integers); max/min: the block on the first rank, worse values elsewhere.
    """
    dims = [i for i, p in enumerate(placements) if isinstance(p, Partial)]
    if not dims:
        return block
    ops = {placements[i].reduce_op for i in dims}
    assert len(ops) == 1, "one reduce op per test layout"
    op = ops.pop()
    space = list(itertools.product(*(range(mesh.shape[i]) for i in dims)))
    k = space.index(tuple(mesh.coordinate[i] for i in dims))
    noise = [np.random.default_rng((seed, j)).integers(1, 5, size=block.shape)
             for j in range(len(space))]
    if op in ("sum", "avg"):
        scale = len(space) if op == "avg" else 1
        base = block * scale if k == 0 else np.zeros_like(block)
        return (base + noise[k] - noise[(k + 1) % len(space)]).astype(block.dtype)
    worse = -noise[k] if op == "max" else noise[k]
    return block if k == 0 else (block + worse).astype(block.dtype)


def layouts(mesh_ndim, tensor_ndim, partial_ops=("sum",)):
    """Every placements list with R, S(d) for each d, and the given Partials per mesh dim."""
    per_dim = [Replicate()] + [Shard(d) for d in range(tensor_ndim)]
    per_dim += [Partial(op) for op in partial_ops]
    return list(itertools.product(per_dim, repeat=mesh_ndim))
