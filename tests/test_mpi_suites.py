"""Launches the MPI suites (tests/mpi) under mpiexec at 1, 2, 3, 4 and 8 ranks.

Each launch has a wall-clock limit: a deadlock fails this test in minutes (the whole process
group is killed) instead of stalling CI; inside it, MTENSOR_TIMEOUT (default 120 s here)
aborts the job at the first collective that hangs and names it.  Set MTENSOR_MPIEXEC to use another launcher
(e.g. a cluster's ``mpiexec``); MTENSOR_MPI_SIZES=2,4 runs a subset.
"""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIZES = [int(n) for n in os.environ.get("MTENSOR_MPI_SIZES", "1,2,3,4,8").split(",")]
LAUNCH_TIMEOUT_S = int(os.environ.get("MTENSOR_LAUNCH_TIMEOUT", "480"))


def mpiexec() -> str:
    if os.environ.get("MTENSOR_MPIEXEC"):
        return os.environ["MTENSOR_MPIEXEC"]
    beside_python = Path(sys.executable).parent / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if not found:
        pytest.fail("no mpiexec found: pip install '.[mpich]' or set MTENSOR_MPIEXEC")
    return found


def run_under_mpi(n: int, args, timeout: int = LAUNCH_TIMEOUT_S,
                  merge_stderr: bool = True, env=None) -> subprocess.CompletedProcess:
    """Run ``python args...`` on ``n`` ranks; kill the whole job if it outlives ``timeout``.
    ``merge_stderr=False`` keeps stderr apart, so a progress bar on stderr cannot split the
    lines a test reads from stdout (mpiexec interleaves the two streams byte by byte).
    ``env``: extra environment variables."""
    env = dict(os.environ, MTENSOR_MPI_SUITE="1", PYTHONUNBUFFERED="1", **(env or {}))
    env.setdefault("MTENSOR_TIMEOUT", "120")
    proc = subprocess.Popen(
        [mpiexec(), "-n", str(n), sys.executable, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, text=True,
        start_new_session=True,
    )
    out, err = finish(proc, timeout, f"{n} ranks")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def finish(proc: subprocess.Popen, timeout: int, what: str):
    """``proc``'s (stdout, stderr); past ``timeout`` its whole process group (started with
    ``start_new_session=True``) is killed and the test fails, naming ``what``."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{what}: no result after {timeout} s (deadlock?)\n{out[-20000:]}"
                    f"{err or ''}")


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
