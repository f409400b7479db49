"""The lockstep plugin (tests/mpi/lockstep.py) on sample files (tests/lockstep_cases), each
run under ``mpiexec -n 2``: a test that fails on one rank is reported by name on every rank,
within seconds, whether or not the other ranks wait in a collective it left."""
import time
from pathlib import Path

from launcher import run_under_mpi

CASES = Path(__file__).resolve().parent / "lockstep_cases"
PLUGIN_DIR = Path(__file__).resolve().parent / "mpi"


def run_case(monkeypatch, name, timeout_s=120):
    """(completed process, seconds) of the sample ``case_<name>.py`` on 2 ranks."""
    monkeypatch.setenv("PYTHONPATH", str(PLUGIN_DIR))
    monkeypatch.setenv("MTENSOR_TIMEOUT", str(timeout_s))
    start = time.monotonic()
    result = run_under_mpi(2, [
        "-m", "pytest", "-p", "lockstep", str(CASES / f"case_{name}.py"), "--with-mpi",
        "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-W", "ignore::DeprecationWarning",
    ], timeout=150)
    return result, time.monotonic() - start


def test_raise_on_one_rank_while_the_other_gathers_ends_the_job_in_seconds(monkeypatch):
    result, seconds = run_case(monkeypatch, "stuck")
    out = result.stdout
    assert result.returncode != 0, out[-5000:]
    assert ("[rank 1] tests/lockstep_cases/case_stuck.py::test_raises_on_rank_1_then_gathers "
            "FAILED: ValueError: lockstep sample: rank 1 gave up") in out, out[-5000:]
    assert "did not reach its end within 5 s" in out, out[-5000:]
    assert seconds < 60, f"took {seconds:.0f} s (the collective timeout is 120 s)"


def test_failure_on_one_rank_fails_on_every_rank_and_the_rest_stays_as_it_is(monkeypatch):
    result, _ = run_case(monkeypatch, "one_rank")
    out = result.stdout
    assert result.returncode == 1, out[-5000:]
    assert "rank(s) [1] failed this test: AssertionError: lockstep sample: wrong on rank 1" in out
    assert ("rank(s) [1] failed this test: in setup: OSError: lockstep sample: no fixture on "
            "rank 1") in out, out[-5000:]
    assert "2 failed, 4 passed, 1 skipped in" in out, out[-5000:]             # rank 0
    assert "1 failed, 3 passed, 2 skipped, 1 error in" in out, out[-5000:]    # rank 1
    assert out.count("failed on rank(s) [1] of 2") == 2, out[-5000:]


def test_collective_timeout_names_the_test(monkeypatch):
    result, seconds = run_case(monkeypatch, "watchdog", timeout_s=3)
    out = result.stdout
    assert result.returncode != 0, out[-5000:]
    assert ("for full_tensor in test tests/lockstep_cases/case_watchdog.py::"
            "test_gathers_on_rank_0_only did not complete within 3 s") in out, out[-5000:]
    assert seconds < 60, f"took {seconds:.0f} s"


def test_ranks_that_collect_different_tests_stop_before_any_runs(monkeypatch):
    result, _ = run_case(monkeypatch, "collect")
    out = result.stdout
    assert result.returncode == 2, out[-5000:]
    assert out.count("Interrupted: the ranks collected different tests: rank(s) [0]: 1 test(s)") \
        == 2, out[-5000:]
