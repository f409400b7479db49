"""The examples and the benchmarks' quick modes run as a user would run them."""
import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest
from launcher import ROOT, run_under_mpi


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


@pytest.mark.parametrize("n", [1, 4])
def test_lm_benchmark_hand_written_side_is_the_model(n):
    """benchmarks/lm_handwritten.py's Megatron GPT (forward and backward by hand) against
    numpy's loss and mtensor's gradients on every (dp, tp) grid of n ranks, with splits
    that leave some ranks no heads or no batch rows."""
    result = run_under_mpi(n, ["benchmarks/lm_handwritten.py", "--check"], timeout=120)
    assert result.returncode == 0 and "check passed" in result.stdout, result.stdout


def test_compile_passes_benchmark_runs():
    """benchmarks/compile_passes.py at a tiny size: every side's loss is the hand-written
    step's (each pass switched off, none, fast, composites unfused, eager)."""
    result = run_under_mpi(2, ["benchmarks/compile_passes.py", "--reps", "1", "--layers", "1",
                               "--d-model", "16", "--heads", "2", "--seq", "8", "--batch", "4"],
                           timeout=180)
    assert result.returncode == 0, result.stdout
    rows = [ln for ln in result.stdout.splitlines() if ln.startswith("| compiled")]
    assert len(rows) == 10, result.stdout
    assert all(abs(float(r.split("|")[4])) < 1e-12 for r in rows), rows


def test_compile_benchmark_runs():
    result = run_under_mpi(2, ["benchmarks/compile_dp.py", "--params", "12", "--size", "16",
                               "--reps", "2"], timeout=120)
    assert result.returncode == 0, result.stdout
    assert "| eager | 12 |" in result.stdout and "| compiled | 1 |" in result.stdout


def test_pipeline_benchmark_runs():
    """benchmarks/pipeline.py at tiny sizes: a row per schedule and micro-batch count, every
    bubble a share, the closed form (p - 1) / (m + p - 1)."""
    result = run_under_mpi(2, ["benchmarks/pipeline.py", "--d", "16", "--batch", "32",
                               "--microbatches", "2,4", "--reps", "1"], timeout=120)
    assert result.returncode == 0, result.stdout
    rows = [[v.strip() for v in ln.split("|")[1:-1]] for ln in result.stdout.splitlines()
            if ln.startswith("| eager |") or ln.startswith("| compiled |")]
    assert [tuple(r[:3]) for r in rows] == [
        (mode, name, m) for mode in ("eager", "compiled") for name in ("1f1b", "gpipe")
        for m in ("2", "4")], result.stdout
    for r in rows:
        assert all(0 <= float(v.rstrip("%")) <= 100 for v in r[4:9]), r
    assert [r[5] for r in rows] == ["33.3%", "20.0%"] * 4


TRAIN_ARGS = ["--steps", "6", "--hidden", "32"]


def _train(n, *args, env=None):
    result = run_under_mpi(n, ["examples/train.py", *TRAIN_ARGS, *args],
                           timeout=180, merge_stderr=False, env=env)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    lines = result.stdout.splitlines()
    summary = next(ln for ln in lines if ln.startswith("mesh "))
    assert "held-out accuracy" in summary
    return next(ln for ln in lines if ln.startswith("checksum")), result.stdout


def numpy_train_losses(steps=6, batch=256, blocks=2, hidden=32, lr=1e-2):
    """train.py's model, data and Adam in one process of plain numpy, gradients by hand: the
    reference loss curve."""
    sys.path.insert(0, str(ROOT / "examples"))          # train.py imports training.py
    spec = importlib.util.spec_from_file_location("train_example", ROOT / "examples/train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    features, onehot, _ = train.spiral()
    rng = np.random.default_rng(1)
    f = train.FEATURES
    params = {"head": rng.normal(0, f ** -0.5, (f, train.CLASSES))}
    for i in range(blocks):
        params[f"a{i}"] = rng.normal(0, f ** -0.5, (f, hidden))
        params[f"b{i}"] = rng.normal(0, hidden ** -0.5 / blocks, (hidden, f))
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(w) for k, w in params.items()}
    starts = list(range(0, train.TRAIN - batch + 1, batch))
    losses = []
    for t in range(1, steps + 1):
        x = features[starts[(t - 1) % len(starts)]:][:batch]
        y = onehot[starts[(t - 1) % len(starts)]:][:batch]
        hs, us, h = [], [], x
        for i in range(blocks):
            u = np.tanh(h @ params[f"a{i}"])
            hs.append(h)
            us.append(u)
            h = h + u @ params[f"b{i}"]
        z = h @ params["head"]
        top = z.max(axis=1, keepdims=True)
        log_sum = np.log(np.exp(z - top).sum(axis=1)) + top[:, 0]
        losses.append((log_sum - (z * y).sum(axis=1)).mean())
        dz = (np.exp(z - log_sum[:, None]) - y) / len(x)
        grads = {"head": h.T @ dz}
        dh = dz @ params["head"].T
        for i in reversed(range(blocks)):
            grads[f"b{i}"] = us[i].T @ dh
            dpre = (dh @ params[f"b{i}"].T) * (1 - us[i] ** 2)
            grads[f"a{i}"] = hs[i].T @ dpre
            dh = dh + dpre @ params[f"a{i}"].T
        for k, g in grads.items():
            m[k] = 0.9 * m[k] + 0.1 * g
            v[k] = 0.999 * v[k] + 0.001 * g ** 2
            params[k] = params[k] - lr * (m[k] / (1 - 0.9 ** t)) / (
                np.sqrt(v[k] / (1 - 0.999 ** t)) + 1e-8)
    return losses


def test_train_loss_curve_is_numpys():
    """At 1 rank every step's loss equals the numpy reference's to 1e-12."""
    want = numpy_train_losses()
    _, out = _train(1, "--print-losses")
    got = [float(ln.split()[2]) for ln in out.splitlines() if ln.startswith("loss ")]
    assert np.allclose(got, want, rtol=1e-12, atol=0), (got, want)


def test_train_follows_one_loss_curve_on_every_mesh():
    """numpy's losses at 1, 2 and 4 ranks, on 2-D and 1-D meshes, eager and compiled: the
    checksum's printed digits (12 significant) equal the numpy reference's."""
    reference = f"checksum {sum(numpy_train_losses()):.11e}"
    runs = [(1, ()), (2, ()), (4, ()), (4, ("--mesh", "4x1")), (4, ("--compile",))]
    for n, args in runs:
        checksum, out = _train(n, *args)
        assert checksum == reference, (n, args, reference, out[-2000:])
        if "--compile" in args:
            assert "collectives in" in out and "bucket" in out


def test_train_accumulating_microbatches_follows_the_full_batch_curve():
    """--accumulate 4 (four microbatches of 64, the dp sums pending until the update) gives
    the losses of the 256 batch, eager, compiled and with each block rematerialised; the
    training loop's other flags run and learn."""
    _, whole = _train(2, "--print-losses")
    want = [float(ln.split()[2]) for ln in whole.splitlines() if ln.startswith("loss ")]
    for extra in [(), ("--compile",), ("--remat",)]:
        _, out = _train(4, "--print-losses", "--accumulate", "4", "--mesh", "2x2", *extra)
        got = [float(ln.split()[2]) for ln in out.splitlines() if ln.startswith("loss ")]
        assert np.allclose(got, want, rtol=1e-11, atol=0), (extra, got, want)
    _, out = _train(2, "--print-losses", "--optimizer", "adamw", "--schedule", "warmup_cosine",
                    "--clip", "0.5", "--compile")
    got = [float(ln.split()[2]) for ln in out.splitlines() if ln.startswith("loss ")]
    assert got[-1] < got[0] and not np.allclose(got, want), got


@pytest.mark.parametrize("gpus,backend", [("4", "nccl"), ("1", "staged")])
def test_train_on_the_fake_gpu_follows_numpys_curve(gpus, backend):
    """``--device cuda`` on the strict fake CuPy (one fake GPU per rank: NCCL; one shared by
    all: staged), eager and compiled: numpy's loss curve, digit for digit."""
    reference = f"checksum {sum(numpy_train_losses()):.11e}"
    env = {"MTENSOR_CUDA_MODULE": "mtensor.testing.fakecupy", "MTENSOR_FAKE_GPUS": gpus}
    for args in [(), ("--compile",)]:
        checksum, out = _train(4, "--device", "cuda", *args, env=env)
        assert checksum == reference, (args, reference, out[-2000:])
        assert f"on cuda ({backend}/{backend})" in out


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


def test_propagator_x_only_lets_auto_shard_find_the_good_annotation_and_blame_a_bad_pin():
    out = subprocess.run([sys.executable, "examples/propagator.py", "--annotate", "x-only",
                          "--dry-run", "--mesh-size", "8", "--d", "8192"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "the search chose A [S(1)], B [S(0)]" in out.stdout
    assert _totals(out.stdout) == "totals: collectives 1 bytes 917504"    # the good one's
    ratio = re.search(r"ratio with / without: comm ([0-9.]+)x", out.stdout)
    assert float(ratio[1]) >= 3 and "change the pin of" in out.stdout, out.stdout


def test_propagator_x_only_runs_the_plan_it_prices():
    result = run_under_mpi(4, ["examples/propagator.py", "--annotate", "x-only", "--d", "64"],
                           timeout=120)
    assert result.returncode == 0, result.stdout
    assert "run: all_reduce (mesh dim 0), 6,144 B per rank" in result.stdout, result.stdout


@pytest.mark.parametrize("n", [1, 3])
def test_local_map_kernel_example_trains_like_numpy(n):
    """examples/local_map_kernel.py: a numpy kernel on the blocks inside a training step,
    eager and compiled, numpy's losses; at 3 ranks (203 rows: uneven) two all-reduces per
    step, the loss's and the weight gradient's."""
    for extra in ([], ["--compile"]):
        result = run_under_mpi(n, ["examples/local_map_kernel.py", "--steps", "5", *extra],
                               timeout=120)
        assert result.returncode == 0 and "matches numpy: True" in result.stdout, result.stdout
        assert f"collectives per step: {2 if n > 1 else 0} " in result.stdout, result.stdout


def test_local_map_benchmark_runs():
    """benchmarks/local_map.py checks every step against the hand-written one first."""
    result = run_under_mpi(2, ["benchmarks/local_map.py", "--batch", "64", "--d", "8",
                               "--classes", "4", "--reps", "2"], timeout=120)
    assert result.returncode == 0 and "| mt.local_map, compiled |" in result.stdout, result.stdout


@pytest.mark.parametrize("n", [1, 3])
def test_register_sharding_example_teaches_unwrap(n):
    result = run_under_mpi(n, ["examples/register_sharding.py"], timeout=120)
    assert result.returncode == 0, result.stdout
    assert "caught the wrong rule: check_rule: np.unwrap choice [S(1)] -> S(1)" in result.stdout
    assert "along the rows: [S(0)], collectives {}" in result.stdout
    assert "matches numpy: True" in result.stdout, result.stdout


@pytest.mark.parametrize("n", [3, 8])
def test_sklearn_example_fits_pca_and_ridge_like_numpy(n):
    """examples/sklearn_pca.py: scikit-learn's PCA and Ridge, unchanged, on row-split
    DTensors; the projections and predictions stay split by rows."""
    result = run_under_mpi(n, ["examples/sklearn_pca.py", "--rows", "4000", "--cols", "12"],
                           timeout=300)
    assert result.returncode == 0, result.stdout
    assert result.stdout.count("matches scikit-learn on numpy: True") == 2, result.stdout
    assert "transform [S(0)]" in result.stdout and "predict [S(0)]" in result.stdout


@pytest.mark.parametrize("n", [1, 3])
def test_spectral_heat_solver_matches_numpy(n):
    """examples/spectral.py: fft2, a multiplier and ifft2 on a row-split field, one
    all-to-all each way per step (at 3 ranks), the field split by rows again."""
    result = run_under_mpi(n, ["examples/spectral.py", "--size", "33", "--steps", "10"],
                           timeout=120)
    assert result.returncode == 0, result.stdout
    assert "matches numpy: True" in result.stdout, result.stdout
    if n > 1:
        assert "collectives per step: {'all_to_all': 2}" in result.stdout, result.stdout
        assert "field [S(0)]" in result.stdout, result.stdout
