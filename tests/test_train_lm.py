"""examples/train_lm.py as a user runs it: one loss curve on every mesh, eager and compiled,
starting at numpy's loss; the held-out target reached with the defaults; bad flags refused."""
import functools
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


# --- the layers in pipeline stages (--pp): the one-rank unpipelined curve, every mesh -------

PIPE = [*SMALL, "--layers", "4", "--sample", "0"]
PIPE_RUNS = [  # (ranks, flags): 2, 4 and 8 ranks, GPipe and 1F1B, eager and compiled
    (2, ("--pp", "2")),
    (2, ("--pp", "2", "--pp-schedule", "gpipe", "--microbatches", "4", "--compile")),
    (2, ("--pp", "2", "--compile")),
    (2, ("--pp", "2", "--pp-schedule", "gpipe")),
    (4, ("--pp", "2", "--mesh", "1x2")),
    (4, ("--pp", "2", "--mesh", "1x2", "--pp-schedule", "gpipe", "--compile")),
    (4, ("--pp", "4", "--pp-schedule", "gpipe")),
    (4, ("--pp", "4", "--microbatches", "2", "--compile", "--remat")),
    (8, ("--pp", "2", "--mesh", "2x2", "--compile")),
    (8, ("--pp", "2", "--mesh", "2x2", "--pp-schedule", "gpipe")),
    (8, ("--pp", "4", "--mesh", "1x2", "--compile", "--pp-schedule", "gpipe")),
]


@functools.lru_cache(maxsize=None)
def _unpipelined(*args):
    return _run(1, *args)


def _checksum(stdout):
    return float(next(ln for ln in stdout.splitlines() if ln.startswith("checksum")).split()[1])


@pytest.mark.parametrize("n, flags", PIPE_RUNS, ids=lambda v: " ".join(v) if
                         isinstance(v, tuple) else str(v))
def test_pipelined_runs_print_the_one_rank_checksum(n, flags):
    """The layers split into stages: every step's loss and the checksum within 1e-10
    (relative) of the one-process run without a pipeline."""
    reference = _unpipelined(*PIPE)
    out = _run(n, *PIPE, *flags)
    got, want = _losses(out), _losses(reference)
    assert len(got) == len(want) and np.allclose(got, want, rtol=1e-10, atol=0), (got, want)
    assert _checksum(out) == pytest.approx(_checksum(reference), rel=1e-10)
    assert "(pp x dp x tp)" in out and "bits per byte" in out, out


def test_a_checkpoint_saved_at_pp_2_resumes_at_pp_1_and_pp_4(tmp_path):
    """Saved after step 2 of a pp=2 run (1F1B, compiled, AdamW with clipping); resumed with
    one stage on one rank and with four stages on four: steps 3 and 4 take the
    uninterrupted run's losses."""
    flags = [*PIPE, "--steps", "4", "--optimizer", "adamw", "--clip", "1.0"]
    saved = _losses(_run(2, *flags, "--pp", "2", "--compile", "--save-every", "2",
                         "--save-dir", str(tmp_path)))
    assert len(saved) == 4
    for n, pp in [(1, "1"), (4, "4")]:
        got = _losses(_run(n, *flags, "--pp", pp, "--resume", str(tmp_path / "step-00002")))
        assert np.allclose(got, saved[2:], rtol=1e-10, atol=0), (pp, got, saved)
