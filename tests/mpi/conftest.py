"""Fixtures for tests that run on every rank under mpiexec."""
import pytest

import mtensor as mt
from mpi_helpers import mesh_shapes


@pytest.fixture(params=mesh_shapes(), ids=lambda s: "x".join(map(str, s)))
def mesh(request):
    return mt.init_device_mesh(request.param)
