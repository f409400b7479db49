"""Checkpoints end to end, launched under mpiexec as a user runs them.

* ``examples/train.py --save-every`` on 4 ranks (2x2), then ``--resume`` from step 10 on other
  rank counts and meshes: the losses of steps 11-20 are the uninterrupted run's.
* ``tests/checkpoint_roundtrip.py``: a tree of uneven DTensors saved on 4 ranks (2x2) loads
  on 1, 2, 3 and 8 ranks, 1-D and 2-D meshes, other placements, bit for bit.
"""
import subprocess
import sys

import pytest
from launcher import ROOT, run_under_mpi

LAUNCH_S = 120          # each launch takes a few seconds; a hang fails in 2 minutes
STEPS, SAVE_AT = 20, 10
# --batch 512: 6 batches an epoch, so the data order wraps around before and after step 10
TRAIN = ["examples/train.py", "--steps", str(STEPS), "--batch", "512", "--hidden", "32",
         "--print-losses"]
# Another mesh splits the batch mean over dp and the matmuls' inner sums over tp at other
# points, so its floating-point sums round in another order: resumed losses then differ from
# the uninterrupted run's in the last bits (about 3e-16 relative was seen), which 10 Adam steps
# may grow a little.  1e-12 leaves room for that, while a wrong restore moves the losses after
# the first resumed step by far more (seen: zeroed m or v, Adam's step count reset, the batch
# order off by one: 30% or more).  On the saving mesh the reductions are the same, so the
# losses are bit for bit the same (tolerance 0).
RTOL_OTHER_MESH = 1e-12


def _launch(n, args):
    result = run_under_mpi(n, args, timeout=LAUNCH_S, merge_stderr=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout


def _losses(stdout):
    """{step: loss} from the ``loss <step> <value>`` lines (rank 0)."""
    return {int(ln.split()[1]): float(ln.split()[2])
            for ln in stdout.splitlines() if ln.startswith("loss ")}


def _checksum(stdout):
    return next(ln for ln in stdout.splitlines() if ln.startswith("checksum"))


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """20 steps on 4 ranks (2x2) that save after steps 10 and 20."""
    run_dir = tmp_path_factory.mktemp("train") / "run"
    out = _launch(4, [*TRAIN, "--mesh", "2x2", "--save-every", str(SAVE_AT),
                      "--save-dir", str(run_dir)])
    losses = _losses(out)
    assert sorted(losses) == list(range(1, STEPS + 1)), out[-3000:]
    assert sorted(p.name for p in run_dir.iterdir()) == ["step-00010", "step-00020"]
    return run_dir, losses, _checksum(out)


@pytest.mark.parametrize("n, mesh, extra", [
    (1, "1x1", ()), (2, "1x2", ()), (2, "2x1", ("--compile",)), (4, "4x1", ()),
    (4, "2x2", ()),
])
def test_resume_on_another_mesh_continues_the_run(uninterrupted, n, mesh, extra):
    run_dir, reference, checksum = uninterrupted
    out = _launch(n, [*TRAIN, "--mesh", mesh, *extra,
                      "--resume", str(run_dir / f"step-{SAVE_AT:05d}")])
    assert f"at step {SAVE_AT}" in out, out[-3000:]
    resumed = _losses(out)
    assert sorted(resumed) == list(range(SAVE_AT + 1, STEPS + 1)), out[-3000:]
    rtol = 0.0 if mesh == "2x2" else RTOL_OTHER_MESH
    for step, loss in resumed.items():
        assert abs(loss - reference[step]) <= rtol * abs(reference[step]), \
            (mesh, step, loss, reference[step])
    # the checksum covers steps 1-10 too: their losses come from the checkpoint
    assert _checksum(out) == checksum


def test_resume_with_other_sizes_is_refused(uninterrupted):
    run_dir = uninterrupted[0]
    result = run_under_mpi(1, [*TRAIN, "--hidden", "16", "--resume",
                               str(run_dir / f"step-{SAVE_AT:05d}")], timeout=LAUNCH_S)
    assert result.returncode != 0
    assert "--hidden 16 (saved: 32)" in result.stdout, result.stdout[-3000:]


@pytest.fixture(scope="module")
def saved_tree(tmp_path_factory):
    path = tmp_path_factory.mktemp("roundtrip") / "ck"
    assert "saved" in _launch(4, ["tests/checkpoint_roundtrip.py", "save", str(path)])
    return path


@pytest.mark.parametrize("n", [1, 2, 3, 8])
def test_tree_saved_on_4_ranks_loads_bit_for_bit_on(saved_tree, n):
    out = _launch(n, ["tests/checkpoint_roundtrip.py", "load", str(saved_tree)])
    assert "roundtrip ok" in out, out[-3000:]


def test_tree_saved_on_4_ranks_loads_in_a_plain_process(saved_tree):
    result = subprocess.run([sys.executable, "tests/checkpoint_roundtrip.py", "plain",
                             str(saved_tree)], cwd=ROOT, capture_output=True, text=True,
                            timeout=LAUNCH_S)
    assert result.returncode == 0 and "roundtrip ok" in result.stdout, result.stderr[-3000:]


def test_int_leaf_loaded_as_partial_reduces(saved_tree):
    """Loaded blocks have the native byte order: zarr's '<i8' made mpi4py refuse the
    all-reduce of an int64 Partial leaf ("mismatch in send and receive MPI datatypes")."""
    result = run_under_mpi(2, ["tests/checkpoint_roundtrip.py", "int-partial",
                               str(saved_tree)], timeout=LAUNCH_S)
    assert result.returncode == 0 and "roundtrip ok" in result.stdout, result.stdout[-3000:]
