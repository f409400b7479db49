"""Data safety over real MPI: NaN and inf travel through every collective and reduction as
numpy would carry them, and no op or collective changes a dtype behind the user's back."""
import numpy as np
import pytest
from mpi_helpers import assert_all_ranks, dtensor_of, host, layouts, random_array, share, thin

import mtensor as mt
from mtensor import Partial, Replicate, Shard

SPECIAL = np.array([[np.nan, 1.0, -np.inf, 2.0],
                    [3.0, np.inf, 4.0, np.nan],
                    [-1.0, 0.0, np.nan, np.inf],
                    [5.0, -2.0, 6.0, -np.inf],
                    [np.inf, np.nan, 7.0, 8.0]])
NAN_OPS = ["sum", "max", "min"]


def _same(got, want):
    got = mt.asnumpy(got)
    return got.dtype == want.dtype and got.shape == want.shape and np.array_equal(
        got, want, equal_nan=True)


@pytest.mark.mpi
@pytest.mark.parametrize("op", NAN_OPS)
def test_nan_and_inf_survive_every_redistribution(mesh, op):
    """Every layout pair (on a 3-D mesh, the ops share them: mpi_helpers.share)."""
    failures, i = [], -1
    k, n = share(mesh, NAN_OPS.index(op), len(NAN_OPS))
    for src in layouts(mesh.ndim, 2, (op,)):
        x = dtensor_of(SPECIAL, mesh, src)
        for dst in layouts(mesh.ndim, 2, ()):
            i += 1
            if i % n != k:
                continue
            if not _same(host(x.redistribute(mesh, dst)), SPECIAL):
                failures.append((src, dst))
    assert_all_ranks(not failures, f"{failures[:3]}")


# The Partial each reduction gets its inputs in: terms with NaN and inf in one of them.
INPUT_PARTIAL = {"sum": "sum", "mean": "avg", "max": "max", "min": "min", "prod": "sum",
                 "argmax": "min"}


@pytest.mark.mpi
@pytest.mark.parametrize("reduction", list(INPUT_PARTIAL))
def test_reductions_carry_nan_like_numpy(mesh, reduction):
    """Every layout (on a 3-D mesh, half of them: mpi_helpers.share)."""
    failures = []
    k, n = share(mesh, list(INPUT_PARTIAL).index(reduction) % 2, 2)
    for placements in layouts(mesh.ndim, 2, (INPUT_PARTIAL[reduction],))[k::n]:
        x = dtensor_of(SPECIAL, mesh, placements)
        for axis in (None, 0, 1):
            with np.errstate(invalid="ignore"):
                got = host(getattr(np, reduction)(x, axis=axis))
                want = np.asarray(getattr(np, reduction)(SPECIAL, axis=axis))
            if not _same(got, want):
                failures.append((placements, axis))
    assert_all_ranks(not failures, f"{reduction}: {failures[:3]}")


@pytest.mark.mpi
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int8, np.uint16, np.complex64, bool])
def test_dtypes_are_kept_through_ops_and_collectives(mesh, dtype):
    data = random_array((7, 5)).astype(dtype)
    failures = []
    for placements in thin(layouts(mesh.ndim, 2, ("sum",) if dtype is not bool else ()), mesh):
        x = dtensor_of(data, mesh, placements)
        results = {
            "full": (host(x), data),
            "add": (host(x + x), data + data),
            "scalar": (host(x * 2), data * 2),
            "sum0": (host(x.sum(axis=0)), data.sum(axis=0)),
            "mean": (host(x.mean()), np.asarray(data.mean())),
            "max1": (host(x.max(axis=1)), data.max(axis=1)),
            "T": (host(x.T.redistribute(mesh, [Replicate()] * mesh.ndim).to_local()), data.T),
        }
        if dtype is not bool:
            results["matmul"] = (host(x.T @ x), data.T @ data)
        for name, (got, want) in results.items():
            close = np.allclose(got, want, rtol=1e-5) if want.dtype.kind in "fc" else np.array_equal(got, want)
            if got.dtype != want.dtype or not close:
                failures.append((name, placements, got.dtype, want.dtype))
    assert_all_ranks(not failures, f"{failures[:3]}")


@pytest.mark.mpi
def test_empty_shards_everywhere(mesh):
    tiny = random_array((1, 3))
    x = mt.distribute_tensor(tiny, mesh, [Shard(0)] * mesh.ndim)
    outs = [x.max(axis=0), x.argmax(axis=1), x.mean(axis=0), x @ tiny.T, x + 1, x[0],
            x.reshape(3), np.concatenate([x, x], axis=1)]
    wants = [tiny.max(axis=0), tiny.argmax(axis=1), tiny.mean(axis=0), tiny @ tiny.T, tiny + 1,
             tiny[0], tiny.reshape(3), np.concatenate([tiny, tiny], axis=1)]
    bad = [k for k, (o, w) in enumerate(zip(outs, wants)) if not _same(host(o), w)]
    assert_all_ranks(not bad, f"ops {bad} differ on a 1-row tensor")
    assert x.sum().placements[0] in (Partial(), Replicate())
