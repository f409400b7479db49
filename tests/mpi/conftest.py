"""Fixtures for tests that run on every rank under mpiexec, and the lockstep plugin (a test
that fails on one rank fails on every rank, by name: see lockstep.py)."""
import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")   # before SciPy loads: test_sklearn.py needs it
import shutil
import tempfile

import device_legs
import lockstep
import pytest
from mpi_helpers import WORLD, mesh_shapes

import mtensor as mt

# MTENSOR_TEST_DEVICE=fake (or cupy): the ``mesh`` fixture builds "cuda" meshes on that leg,
# so the op sweeps (op_sweep.py) run every op family on device blocks.
SWEEP_DEVICE = os.environ.get("MTENSOR_TEST_DEVICE")


def pytest_configure(config):
    lockstep.install(config)


@pytest.fixture(params=mesh_shapes(), ids=lambda s: "x".join(map(str, s)))
def mesh(request):
    """Every mesh shape of this world size; a module that sets ``MESH_NDIM_MAX`` skips the
    deeper ones (numpy's function families: their rules act per mesh dim, and the 3-D mesh
    at 8 ranks, oversubscribed on 2 cores, is the suite's slowest launch)."""
    deepest = getattr(request.module, "MESH_NDIM_MAX", len(request.param))
    if len(request.param) > deepest:
        pytest.skip(f"{request.module.__name__} runs on meshes of up to {deepest} dims")
    if SWEEP_DEVICE:
        device_legs.leg(SWEEP_DEVICE)
        return mt.init_device_mesh(request.param, device_type="cuda")
    return mt.init_device_mesh(request.param)


@pytest.fixture(params=["numpy", "fake", "cupy"])
def xp(request):
    """Where blocks live: numpy (CPU mesh), the strict fake CuPy, real CuPy (skipped without
    a GPU); see device_legs.py for what each leg proves."""
    return device_legs.leg(request.param)


@pytest.fixture
def ckdir():
    """One directory every rank agrees on (rank 0 makes it), removed at the end."""
    path = WORLD.bcast(tempfile.mkdtemp(prefix="mtensor-ckpt-") if WORLD.rank == 0 else None)
    yield path
    WORLD.Barrier()
    if WORLD.rank == 0:
        shutil.rmtree(path, ignore_errors=True)
