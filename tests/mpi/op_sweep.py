"""The op sweep: run a function on DTensors of many input layouts and compare with numpy."""
import itertools

import numpy as np
from mpi_helpers import assert_all_ranks, dtensor_of, layouts, thin

import mtensor as mt
from mtensor.placement import local_shape

LIMIT = 40  # layout combinations tried per op and mesh (evenly spread over all of them)


def sample(combos, limit=LIMIT):
    combos = list(combos)
    step = max(1, len(combos) // limit)
    return combos[::step]


def _same(got, want) -> bool:
    got, want = mt.asnumpy(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind in "fc":
        return np.allclose(got, want, rtol=1e-10, atol=1e-12, equal_nan=True)
    return np.array_equal(got, want)


def _block_fits(out, mesh) -> bool:
    want = local_shape(out.shape, mesh.shape, out.placements, mesh.coordinate)
    return out.to_local().shape == want


def _unchanged(x, was) -> bool:
    """Reading an operand never changes it: its placements and its block, bit for bit."""
    placements, block = was
    now = mt.device.to_host(x.to_local())
    return x.placements == placements and now.shape == block.shape and (
        now.tobytes() == block.tobytes())


def sweep(mesh, fn, *arrays, partial_ops=("sum",), limit=LIMIT):
    """``fn`` on DTensors of sampled layout combinations versus ``fn`` on the numpy arrays.

    Inputs are made locally (mpi_helpers.dtensor_of), Partial inputs as random terms that
    differ on every rank, so a wrong Partial rule shows.  Every operand must come out of
    ``fn`` as it went in (placements and block: DTensor's and JAX's contract, reading
    never changes a layout).  Returns the failing layouts (same list on every rank).
    """
    expected = fn(*arrays)
    expected = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    ops = [partial_ops if np.asarray(a).dtype.kind in "iufc" else () for a in arrays]
    combos = itertools.product(*(layouts(mesh.ndim, np.ndim(a), p) for a, p in zip(arrays, ops)))
    failures = []
    for combo in thin(sample(combos, limit), mesh):
        inputs = [dtensor_of(a, mesh, p, seed=k) for k, (a, p) in enumerate(zip(arrays, combo))]
        before = [(x.placements, mt.device.to_host(x.to_local()).copy()) for x in inputs]
        out = fn(*inputs)
        if not all(_unchanged(x, was) for x, was in zip(inputs, before)):
            failures.append((combo, "an operand changed"))
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        for got, want in zip(outs, expected):
            if not isinstance(got, mt.DTensor) or not _block_fits(got, mesh):
                failures.append((combo, "block"))
            elif not _same(got, want):
                failures.append((combo, list(got.placements)))
    return failures


def assert_matches_numpy(mesh, name, fn, *arrays, limit=LIMIT):
    """:func:`sweep`, failing on every rank with the first failing layouts named."""
    failures = sweep(mesh, fn, *arrays, limit=limit)
    assert_all_ranks(not failures, f"{name}: {failures[:3]} ({len(failures)} layouts fail)")
