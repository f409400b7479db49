"""The examples and the benchmarks' quick modes run as a user would run them."""
import subprocess
import sys

import pytest

from test_mpi_suites import ROOT, run_under_mpi


@pytest.mark.parametrize("n", [1, 4])
def test_quickstart_runs_one_all_reduce(n):
    result = run_under_mpi(n, ["examples/quickstart.py"], timeout=120)
    assert result.returncode == 0, result.stdout
    assert "matches numpy: True" in result.stdout
    expected = "{'all_reduce': 1}" if n > 1 else "{}"
    assert f"collectives: {expected}" in result.stdout


def test_dispatch_benchmark_runs():
    result = run_under_mpi(2, ["benchmarks/dispatch_vs_torch.py", "--quick"], timeout=180)
    assert result.returncode == 0, result.stdout
    assert "| x + y |" in result.stdout and "first call on a new shape" in result.stdout


def test_train_step_benchmark_runs():
    result = run_under_mpi(2, ["benchmarks/train_step_vs_handwritten.py", "--batch", "16",
                               "--d", "8", "--reps", "2"], timeout=120)
    assert result.returncode == 0, result.stdout
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith("loss:")]
    mt_loss, hand_loss = (float(w) for w in lines[0].split()[2::2])
    assert abs(mt_loss - hand_loss) < 1e-12 and "ratio" in result.stdout
    compiled = [ln for ln in result.stdout.splitlines() if ln.startswith("compiled:")]
    assert abs(float(compiled[0].split()[2]) - mt_loss) < 1e-12


def test_compile_benchmark_runs():
    result = run_under_mpi(2, ["benchmarks/compile_dp.py", "--params", "12", "--size", "16",
                               "--reps", "2"], timeout=120)
    assert result.returncode == 0, result.stdout
    assert "| eager | 12 |" in result.stdout and "| compiled | 1 |" in result.stdout


def _train(n, *args):
    result = run_under_mpi(n, ["examples/train.py", "--steps", "6", "--hidden", "32", *args],
                           timeout=180, merge_stderr=False)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    lines = result.stdout.splitlines()
    summary = next(ln for ln in lines if ln.startswith("mesh "))
    assert "held-out accuracy" in summary
    return next(ln for ln in lines if ln.startswith("checksum")), result.stdout


def test_train_follows_one_loss_curve_on_every_mesh():
    """The same losses (to float rounding) at 1, 2 and 4 ranks, on 2-D and 1-D meshes, eager
    and compiled: the checksum's printed digits (12 significant) are equal."""
    reference, _ = _train(1)
    runs = [(2, ()), (4, ()), (4, ("--mesh", "4x1")), (4, ("--compile",))]
    for n, args in runs:
        checksum, out = _train(n, *args)
        assert checksum == reference, (n, args, reference, out[-2000:])
        if "--compile" in args:
            assert "collectives in" in out and "bucket" in out


def _totals(stdout):
    return next(ln for ln in stdout.splitlines() if ln.startswith("totals:"))


@pytest.mark.parametrize("n", [2, 4])
def test_propagator_dry_run_prices_what_a_real_run_does(n):
    totals = {}
    for annotation in ("good", "bad"):
        args = ["--d", "64", "--annotation", annotation, "--mesh-size", str(n)]
        dry = subprocess.run([sys.executable, "examples/propagator.py", "--dry-run", *args],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert dry.returncode == 0, dry.stderr
        real = run_under_mpi(n, ["examples/propagator.py", *args], timeout=120)
        assert real.returncode == 0, real.stdout
        assert _totals(dry.stdout) == _totals(real.stdout), (dry.stdout, real.stdout)
        totals[annotation] = [int(w) for w in _totals(real.stdout).split()[2::2]]
    assert totals["good"][0] == 1 and "all_reduce" in dry.stdout
    assert totals["bad"][0] == 3 and totals["bad"][1] > 3 * totals["good"][1]


def test_propagator_dry_run_needs_no_ranks_for_a_big_model():
    out = subprocess.run([sys.executable, "examples/propagator.py", "--dry-run", "--mesh-size",
                          "8", "--d", "8192"], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert _totals(out.stdout) == "totals: collectives 1 bytes 917504"


@pytest.mark.parametrize("n", [1, 3])
def test_gray_scott_numpy_code_writes_through_views(n):
    result = run_under_mpi(n, ["examples/gray_scott.py", "--size", "32", "--steps", "20"],
                           timeout=120)
    assert result.returncode == 0, result.stdout
    assert "matches numpy: True" in result.stdout, result.stdout
