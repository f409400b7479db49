"""Launches the MPI suites (tests/mpi) under mpiexec at 1, 2, 3, 4 and 8 ranks, each with a
wall-clock limit (``launcher.run_under_mpi``), on host meshes and on the fake GPU's."""
import pytest
from launcher import SIZES, run_under_mpi


@pytest.mark.parametrize("n", SIZES)
def test_mpi_suite(n):
    result = run_under_mpi(
        n, ["-m", "pytest", "tests/mpi", "--with-mpi", "-q", "-p", "no:cacheprovider",
            "-p", "no:randomly", "--tb=short", "-W", "ignore::DeprecationWarning"],
    )
    assert result.returncode == 0, f"{n} ranks failed:\n{result.stdout[-20000:]}"
    assert " passed" in result.stdout, result.stdout[-5000:]


# The whole of tests/mpi again with the ``mesh`` fixture on "cuda" meshes of the strict fake
# CuPy (tests/mpi/device_legs.py; every test compares through ``host``/``mt.asnumpy``): every
# op family, redistribution, gradients, compile, checkpoints and auto_shard on device blocks,
# through the backend ``auto`` picks (NCCL: one fake GPU per rank).
@pytest.mark.parametrize("n", [n for n in SIZES if n in (2, 3, 4)])
def test_mpi_suite_on_the_fake_gpu(n):
    result = run_under_mpi(
        n, ["-m", "pytest", "tests/mpi", "--with-mpi", "-q", "-p", "no:cacheprovider",
            "-p", "no:randomly", "--tb=short", "-W", "ignore::DeprecationWarning"],
        env={"MTENSOR_TEST_DEVICE": "fake"},
    )
    assert result.returncode == 0, f"{n} ranks failed:\n{result.stdout[-20000:]}"
    assert " passed" in result.stdout, result.stdout[-5000:]
