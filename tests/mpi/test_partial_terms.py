"""The test helper that builds Partial inputs (mpi_helpers.dtensor_of): its terms differ on
the ranks of every Partial mesh dim, and mtensor's reduction of them is exactly the data,
for each reduce op, on every mesh, with NaN, inf, integers and empty shards."""
import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, dtensor_of, host, layouts, random_array, share

from mtensor import Partial

SPECIAL = np.array([[np.nan, 1.0, -np.inf, 2.0],
                    [3.0, np.inf, 4.0, np.nan],
                    [-1.0, 0.0, np.nan, np.inf]])
DATA = {
    "float": random_array((6, 5)),
    "nan_inf": SPECIAL,
    "empty_shards": random_array((1, 3)),
    "int32": random_array((5, 3), np.int32),
    "scalar": random_array(()),
}
OPS = ["sum", "avg", "max", "min"]


def _distinct_on_partial_dims(mesh, placements, local) -> bool:
    """Whether this rank's terms differ from those of every rank that differs from it only
    on one Partial mesh dim (same block, different term); blocks of under 4 elements may
    match by chance and are not compared."""
    seen = WORLD.allgather((mesh.coordinate, local))
    if local.size < 4:
        return True
    for i, p in enumerate(placements):
        if not isinstance(p, Partial):
            continue
        for coord, other in seen:
            others_same = all(c == m for k, (c, m) in enumerate(zip(coord, mesh.coordinate)) if k != i)
            if others_same and coord[i] != mesh.coordinate[i] and np.array_equal(other, local, equal_nan=True):
                return False
    return True


@pytest.mark.mpi
@pytest.mark.parametrize("op", OPS)
def test_terms_reduce_to_the_data_and_differ_across_ranks(mesh, op):
    """Every layout (on a 3-D mesh, the ops share them: mpi_helpers.share)."""
    failures = []
    k, n = share(mesh, OPS.index(op), len(OPS))
    for name, full in DATA.items():
        for placements in layouts(mesh.ndim, full.ndim, (op,))[k::n]:
            x = dtensor_of(full, mesh, placements, seed=7)
            got = host(x)
            if got.dtype != full.dtype or not np.array_equal(got, full, equal_nan=True):
                failures.append((name, placements, "value"))
            if not _distinct_on_partial_dims(mesh, placements, x.to_local()):
                failures.append((name, placements, "copies"))
    assert_all_ranks(not failures, f"{op}: {failures[:3]} ({len(failures)} bad)")


@pytest.mark.mpi
def test_terms_are_genuine(mesh):
    """Sum terms include negatives and no rank holds the whole value; max terms fall below
    the value somewhere; a NaN or inf sits in one term, finite numbers in the others."""
    full = random_array((6, 5))
    placements = [Partial("sum")] * mesh.ndim
    sums = np.array(WORLD.allgather(host(dtensor_of(full, mesh, placements).to_local())))
    maxes = np.array(WORLD.allgather(
        host(dtensor_of(full, mesh, [Partial("max")] * mesh.ndim).to_local())))
    nans = np.array(WORLD.allgather(host(dtensor_of(SPECIAL, mesh, placements).to_local())))
    ok = np.array_equal(sums.sum(axis=0), full) and np.array_equal(maxes.max(axis=0), full)
    if WORLD.size > 1:
        ok &= bool((sums < 0).any()) and not any(np.array_equal(s, full) for s in sums)
        ok &= bool((maxes < full).any())
        ok &= bool((np.isnan(nans).sum(axis=0) == np.isnan(SPECIAL)).all())
        ok &= bool((~np.isfinite(nans)).sum(axis=0).max() == 1)
    assert_all_ranks(ok, f"terms on mesh {mesh.shape}: sums {sums[:, 0, 0]}, maxes {maxes[:, 0, 0]}")


@pytest.mark.mpi
def test_mixed_reduce_ops_reduce_later_mesh_dims_first(mesh):
    """(P(sum), P(max)) is the sum over mesh dim 0 of the max over mesh dim 1, whatever layout
    it is redistributed to (the planner once reduced mesh dim 0 first for some targets)."""
    full = random_array((6, 5))
    targets = layouts(mesh.ndim, 2, ())
    targets = targets[::max(1, len(targets) // 9)]
    failures = []
    cycles = [tuple(OPS[(s + d) % len(OPS)] for d in range(mesh.ndim)) for s in range(len(OPS))]
    for ops in cycles + [c[::-1] for c in cycles]:
        x = dtensor_of(full, mesh, [Partial(op) for op in ops], seed=3)
        for dst in targets:
            if not np.array_equal(host(x.redistribute(mesh, dst)), full):
                failures.append((ops, dst))
    assert_all_ranks(not failures, f"{failures[:3]} ({len(failures)} bad)")
