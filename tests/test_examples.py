"""The example and the dispatch benchmark run as a user would run them, under mpiexec."""
import pytest

from test_mpi_suites import run_under_mpi


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
                           timeout=180)
    assert result.returncode == 0, result.stdout
    lines = result.stdout.splitlines()
    summary = next(ln for ln in lines if ln.startswith("mesh "))
    assert "held-out accuracy" in summary
    return float(next(ln for ln in lines if ln.startswith("checksum")).split()[1]), result.stdout


def test_train_follows_one_loss_curve_on_every_mesh():
    """The same losses (to float rounding) at 1, 2 and 4 ranks, on 2-D and 1-D meshes, eager
    and compiled."""
    reference, _ = _train(1)
    runs = [(2, ()), (4, ()), (4, ("--mesh", "4x1")), (4, ("--compile",))]
    for n, args in runs:
        checksum, out = _train(n, *args)
        assert abs(checksum - reference) <= 1e-9 * abs(reference), (n, args, out[-2000:])
        if "--compile" in args:
            assert "collectives in" in out and "buckets" in out
