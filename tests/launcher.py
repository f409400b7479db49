"""How tests launch programs under MPI: the ``mpiexec`` to use and a run with a wall-clock
limit that kills the whole job, so a deadlock fails its test in minutes instead of stalling
CI (inside the job, MTENSOR_TIMEOUT, 120 s here by default, aborts at the first collective
that hangs and names it).  Set MTENSOR_MPIEXEC to use another launcher (e.g. a cluster's
``mpiexec``); MTENSOR_MPI_SIZES=2,4 runs a subset of the sizes the suites take.
The limit (MTENSOR_LAUNCH_TIMEOUT, 480 s) grows with oversubscription: ranks beyond twice
the cores share them, so 8 ranks on 2 cores get twice as long (the whole MPI suite takes
~440 s there on a quiet machine: the limit catches a stalled job, not a slow one).
"""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIZES = [int(n) for n in os.environ.get("MTENSOR_MPI_SIZES", "1,2,3,4,8").split(",")]
LAUNCH_TIMEOUT_S = int(os.environ.get("MTENSOR_LAUNCH_TIMEOUT", "480"))


def launch_timeout(n: int) -> int:
    """The wall-clock limit of a job of ``n`` ranks on this machine's cores."""
    return int(LAUNCH_TIMEOUT_S * max(1.0, n / (2 * (os.cpu_count() or 1))))


def mpiexec() -> str:
    if os.environ.get("MTENSOR_MPIEXEC"):
        return os.environ["MTENSOR_MPIEXEC"]
    beside_python = Path(sys.executable).parent / "mpiexec"
    found = str(beside_python) if beside_python.exists() else shutil.which("mpiexec")
    if not found:
        pytest.fail("no mpiexec found: pip install '.[mpich]' or set MTENSOR_MPIEXEC")
    return found


def run_under_mpi(n: int, args, timeout: Optional[int] = None,
                  merge_stderr: bool = True, env=None) -> subprocess.CompletedProcess:
    """Run ``python args...`` on ``n`` ranks; kill the whole job if it outlives ``timeout``.
    ``merge_stderr=False`` keeps stderr apart, so a progress bar on stderr cannot split the
    lines a test reads from stdout (mpiexec interleaves the two streams byte by byte).
    ``env``: extra environment variables."""
    env = dict(os.environ, MTENSOR_MPI_SUITE="1", PYTHONUNBUFFERED="1", **(env or {}))
    env.setdefault("MTENSOR_TIMEOUT", "120")
    env.setdefault("PYTHONHASHSEED", "0")    # the same on every rank: lockstep hypothesis draws
    proc = subprocess.Popen(
        [mpiexec(), "-n", str(n), sys.executable, *args],
        cwd=ROOT, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE, text=True,
        start_new_session=True,
    )
    out, err = finish(proc, launch_timeout(n) if timeout is None else timeout, f"{n} ranks")
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
