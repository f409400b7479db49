"""Helpers for tests that run on every rank under mpiexec."""
import itertools
import os

import numpy as np
from mpi4py import MPI

import mtensor as mt
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


def host(value) -> np.ndarray:
    """A DTensor's whole value, or a block, as a numpy array from any device (the tests
    compare with numpy; on a GPU mesh ``np.asarray`` refuses, as CuPy does)."""
    if isinstance(value, mt.DTensor):
        return mt.asnumpy(value)
    return mt.device.to_host(value) if mt.device.on_device(value) else np.asarray(value)


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


_THINNED = itertools.count()


def thin(combos, mesh, keep=3):
    """Every combination where each rank has a core; where ranks outnumber the cores (3, 4 and
    8 ranks on this 2-core machine: most of the suite's time) every ``keep``-th, from an
    offset that moves on at each call, so the tests of a parametrized family together still
    reach every combination.  Every rank runs the same tests in one order (lockstep.py
    checks it): the offsets agree."""
    combos = list(combos)
    if mesh.size() <= (os.cpu_count() or 1):
        return combos
    return combos[next(_THINNED) % keep::keep]


def random_array(shape, dtype=np.float64, seed=0):
    """Integer-valued data: sums are exact in any order, so results compare bit for bit."""
    return np.random.default_rng(seed).integers(-9, 10, size=shape).astype(dtype)


def expected_block(full, mesh, placements):
    """This rank's block of ``full`` under ``placements`` (Partial read as Replicate)."""
    return full[local_slices(full.shape, mesh.shape, placements, mesh.coordinate)]


def random_terms(full, mesh_shape, placements, seed=0):
    """Random terms of ``full`` over the Partial mesh dims: an array of shape (size of each
    Partial mesh dim, in mesh order, then ``full.shape``) whose reduction is exactly ``full``.

    Consecutive Partial mesh dims of one op share one split of each element into as many
    terms as they have coordinates (they may reduce in any order); each term of a run is
    split again by the next run of another op, as the planner reduces later mesh dims first.
    sum: random numbers, negatives too, the remainder at a random coordinate, all multiples
    of one power of two with every partial sum in the mantissa, so any order of summing is
    exact; avg: the value plus integers of mean zero along each mesh dim (exact for integer
    data in any order); max (min): numbers at or below (above) the value, the value itself at
    a random coordinate.  A NaN or inf sits in one term with finite numbers in the others
    (for max, -inf, which no finite term may pass, is in all of them; for min, inf).  Integer
    terms stay in range for data of small magnitude (random_array).  The same seed gives the
    same terms on every rank.
    """
    full = np.asarray(full)
    partial = [(n, p.reduce_op) for n, p in zip(mesh_shape, placements) if isinstance(p, Partial)]
    rng = np.random.default_rng(seed) if partial else None
    terms = full
    for op, run in itertools.groupby(partial, key=lambda dim: dim[1]):
        sizes = tuple(n for n, _ in run)
        outer = terms.ndim - full.ndim
        if op == "avg":
            split = _split_avg(terms, sizes, outer, rng)
        else:
            split = _split_picked(terms, int(np.prod(sizes)), op, rng).reshape(sizes + terms.shape)
        terms = np.moveaxis(split, tuple(range(len(sizes))), tuple(range(outer, outer + len(sizes))))
    return terms


def _split_picked(terms, n, op, rng):
    """``n`` terms for each element of ``terms``, first axis; the one at a random coordinate
    completes the reduction (sum: the remainder; max, min: the value itself)."""
    dtype, size = terms.dtype, (n,) + terms.shape
    picked = np.arange(n).reshape((n,) + (1,) * terms.ndim) == rng.integers(n, size=terms.shape)
    if op == "sum":
        others = np.where(picked, 0, _sum_noise(terms, n, rng)).astype(dtype)
        last = (terms - others.sum(axis=0, dtype=dtype)).astype(dtype)
        return np.where(picked, last, others)
    noise = rng.integers(0, 10, size=size)
    if dtype.kind in "iu":
        info, wide = np.iinfo(dtype), terms.astype(np.int64)
        noise = np.minimum(noise, wide - info.min if op == "max" else info.max - wide)
    sign = -1 if op == "max" else 1
    bounded = np.isfinite(terms) | (terms == sign * np.inf)
    others = np.where(bounded, terms + sign * noise, sign * noise).astype(dtype)
    return np.where(picked, terms, others)


def _sum_noise(terms, n, rng):
    """``n`` random numbers per element whose sums with the element, in any order and any
    subset, are exact: integers in [-9, 9] for integer values (unsigned: in [0, value / n]);
    for floats with few significant bits, such integers times the element's lowest set bit
    (so terms of two such operands still add exactly); for other floats, multiples of the
    element's ulp that keep every partial sum within the mantissa (the real part of complex
    numbers)."""
    size = (n,) + terms.shape
    if terms.dtype.kind == "u":
        return rng.integers(0, terms.astype(np.int64) // n + 1, size=size)
    if terms.dtype.kind in "ib":
        return rng.integers(-9, 10, size=size)
    real = terms.real
    digits = np.finfo(real.dtype).nmant + 1
    with np.errstate(invalid="ignore"):
        grain = _lowest_bit(real, digits)
        few = ~np.isfinite(real) | (abs(real) / grain < 2.0 ** (digits - 8))
        step = np.where(few, grain, np.spacing(abs(real)))
        room = np.where(few, 9 * n, 2.0 ** digits - 1 - abs(real) / step) // n
    bound = room.astype(np.int64)
    return rng.integers(-bound, bound + 1, size=size) * step


def _lowest_bit(real, digits):
    """The value of each finite element's lowest set bit (1 for zero and non-finite)."""
    finite = np.isfinite(real)
    mantissa, exponent = np.frexp(np.where(finite, real, 0))
    whole = np.abs(np.ldexp(mantissa, digits)).astype(np.int64)
    low = whole & -whole
    return np.where(finite & (whole != 0), np.ldexp(low.astype(real.dtype), exponent - digits), 1)


def _split_avg(terms, sizes, outer, rng):
    """Terms along the mesh dims ``sizes`` (first axes) of mean ``terms``: integers of mean
    zero along each mesh dim added, one draw per element of the data shared by the ``outer``
    leading axes; non-finite values split as for sum.  Unsigned data get copies (a negative
    offset would wrap)."""
    inner = terms.shape[outer:]
    offsets = np.zeros(sizes + (1,) * outer + inner, np.int64)
    for d, n in enumerate(sizes):
        draw = rng.integers(-9, 10, size=(n,) + inner)
        draw[-1] = -draw[:-1].sum(axis=0)
        offsets += draw.reshape((1,) * d + (n,) + (1,) * (len(sizes) - d - 1 + outer) + inner)
    if terms.dtype.kind == "u":
        offsets[:] = 0
    spread = (terms + offsets).astype(terms.dtype)
    count = int(np.prod(sizes))
    odd = _split_picked(terms, count, "sum", rng).reshape(sizes + terms.shape)
    return np.where(np.isfinite(terms), spread, odd)


def dtensor_of(full, mesh, placements, seed=0):
    """The DTensor of ``full`` under ``placements``, built locally on every rank: this rank's
    block, and on Partial mesh dims this rank's term of :func:`random_terms`."""
    full = np.asarray(full)
    terms = random_terms(full, mesh.shape, placements, seed)
    coord = tuple(c for c, p in zip(mesh.coordinate, placements) if isinstance(p, Partial))
    local = terms[coord][local_slices(full.shape, mesh.shape, placements, mesh.coordinate)].copy()
    return mt.DTensor.from_local(local, mesh, placements, shape=full.shape)


def layouts(mesh_ndim, tensor_ndim, partial_ops=("sum",)):
    """Every placements list with R, S(d) for each d, and the given Partials per mesh dim."""
    per_dim = [Replicate()] + [Shard(d) for d in range(tensor_ndim)]
    per_dim += [Partial(op) for op in partial_ops]
    return list(itertools.product(per_dim, repeat=mesh_ndim))
