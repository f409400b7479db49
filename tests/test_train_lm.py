"""examples/train_lm.py as a user runs it: one loss curve on every mesh, eager and compiled,
starting at numpy's loss; the held-out target reached with the defaults; bad flags refused."""
import sys

import numpy as np
import pytest
from launcher import ROOT, run_under_mpi

sys.path.insert(0, str(ROOT / "examples"))
import lm_model as lm  # noqa: E402  (from examples/, put on the path above)
import train_lm  # noqa: E402

SMALL = ["--steps", "4", "--layers", "1", "--d-model", "16", "--heads", "4", "--seq", "16",
         "--batch", "4", "--sample", "8", "--print-losses"]


def _run(n, *args, timeout=240):
    result = run_under_mpi(n, ["examples/train_lm.py", *args], timeout=timeout,
                           merge_stderr=False)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    return result.stdout


def _losses(stdout):
    return [float(ln.split()[2]) for ln in stdout.splitlines() if ln.startswith("loss ")]


def _numpy_first_loss():
    """Step 1's loss by plain numpy: the model's functions on numpy arrays, the same batch."""
    data, _ = train_lm.read_corpus()
    ids = train_lm.batch_ids(data, 0, 4, 16)
    return lm.loss(lm.init_params(None, 1, 16, 4, 16), *lm.one_hot(ids))


def test_one_loss_curve_on_every_mesh_eager_and_compiled():
    """1x1, 1x2, 2x1 and 2x2, eager and compiled: every step's loss within 1e-10 of the
    one-process run, whose first loss is numpy's."""
    reference = _losses(_run(1, *SMALL))
    assert len(reference) == 4 and abs(reference[0] - _numpy_first_loss()) < 1e-12
    assert reference[-1] < reference[0]
    for n, args in [(2, ()), (2, ("--mesh", "2x1")), (4, ()), (4, ("--compile",))]:
        out = _run(n, *SMALL, *args)
        got = _losses(out)
        assert np.allclose(got, reference, rtol=0, atol=1e-10), (n, args, got, reference)
        assert "bits per byte" in out and "sample: " in out, out


def test_accumulated_microbatches_follow_the_full_batch_curve():
    """--accumulate 2 on 2x2, eager, compiled and with each block rematerialised: the
    one-process full-batch losses to 1e-10, with AdamW, a warmup-cosine schedule and
    clipping on both sides."""
    flags = ["--optimizer", "adamw", "--schedule", "warmup_cosine", "--clip", "1.0"]
    reference = _losses(_run(1, *SMALL, *flags))
    for extra in [(), ("--compile",), ("--remat", "--compile")]:
        got = _losses(_run(4, *SMALL, *flags, "--accumulate", "2", *extra))
        assert np.allclose(got, reference, rtol=0, atol=1e-10), (extra, got, reference)


def test_explain_bills_one_all_reduce_per_block():
    out = _run(4, *SMALL, "--layers", "2", "--explain", "--steps", "1")
    rows = {tuple(ln.split()[:2]): ln for ln in out.splitlines() if ln.startswith("block")}
    assert len(rows) == 8, out
    for (region, phase), row in rows.items():
        assert "1 x all_reduce@tp" in row and "reduce_scatter" not in row, row
        assert ("all_reduce@dp" in row) == (phase == "backward"), row


def test_default_run_beats_byte_frequencies_on_the_held_out_file():
    """The defaults (200 steps, 2 layers, d 64): held-out bits per byte below 4.0; byte
    frequencies of the training files alone give 4.39 on fractions.py."""
    out = _run(1, "--sample", "0", timeout=600)
    bits = float(next(ln for ln in out.splitlines() if ln.startswith("held-out")).split()[2])
    assert bits < 4.0, out


@pytest.mark.parametrize("args, said", [(("--mesh", "3x1"), "holds 3 ranks but 2"),
                                        (("--d-model", "30"), "not a multiple of --heads 4")])
def test_bad_flags_are_refused_once_by_every_rank(args, said):
    result = run_under_mpi(2, ["examples/train_lm.py", *args], timeout=120)
    assert result.returncode != 0 and result.stdout.count(said) == 1, result.stdout
