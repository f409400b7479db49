"""The FFT's pure parts, without MPI: the stages ``next_stage`` picks and the layouts it runs
them in (the all-to-alls that ``mtensor/numpy/fft.py`` documents, counted as the mesh dims
whose placement changes), and each stage's transpose (``adjoint``) checked against the
transform itself: Re<adjoint(g), dx> = Re<g, transform(dx)> for every kind, norm and
length (the pairing without conjugation: JAX's convention)."""
import itertools

import numpy as np
import pytest

from mtensor.ops import fft as plan
from mtensor.placement import Partial, Replicate, Shard

S, R = Shard, Replicate


def stages(kind, axes, shape, placements, mesh_shape):
    """The whole sequence: (stage kind, axes, moves into its layout), and the final layout."""
    out, remaining, shape = [], tuple(axes), tuple(shape)
    placements = tuple(placements)
    while remaining:
        stage, on, pending, layout = plan.next_stage(kind, remaining, shape, placements,
                                                     mesh_shape)
        moved = sum(a != b and n > 1 for a, b, n in zip(placements, layout, mesh_shape))
        out.append((stage, on, moved))
        placements, remaining = layout, pending
        kind = "fft" if stage == "rfft" else kind
    return out, placements


@pytest.mark.parametrize("kind, axes, shape, src, mesh, dst, moves", [
    ("fft", (0, 1), (16, 12), [S(0)], (4,), (S(1),), [0, 1]),        # fft2: transposed out
    ("rfft", (0, 1), (16, 12), [S(0)], (4,), (S(1),), [0, 1]),
    ("irfft", (0, 1), (16, 12), [S(1)], (4,), (S(0),), [0, 1]),      # rfft2's output back
    ("irfft", (0, 1), (16, 12), [S(0)], (4,), (S(0),), [1, 1]),
    ("rfft", (0, 1), (16, 12), [S(1)], (4,), (S(1),), [1, 1]),
    ("fft", (1,), (16, 12), [S(0)], (4,), (S(0),), [0]),             # along an unsplit axis
    ("fft", (0, 1, 2), (8, 8, 8), [S(0)], (4,), (S(1),), [0, 1]),
    ("irfft", (0, 1, 2), (8, 8, 8), [S(0)], (4,), (S(1),), [0, 1]),
    ("fft", (0, 1, 2), (8, 8, 8), [S(0), S(1)], (2, 2), (S(2), S(2)), [0, 2]),  # pencil
    ("fft", (0, 1, 2), (8, 8, 8), [S(2), S(2)], (2, 2), (S(0), S(1)), [0, 2]),
    ("fft", (0,), (16,), [S(0)], (4,), (R(),), [1]),                 # a 1-D array: gathered
    ("fft", (0, 1), (8, 6), [Partial()], (4,), (R(),), [1]),         # terms reduced first
])
def test_stages_and_all_to_alls(kind, axes, shape, src, mesh, dst, moves):
    steps, final = stages(kind, axes, shape, src, mesh)
    assert final == dst and [m for *_, m in steps] == moves
    assert sorted(a for _, on, _ in steps for a in on) == sorted(axes)


def test_real_transforms_keep_numpys_order():
    """rfftn's last axis goes in its first stage, irfftn's in its last; the stages between
    are complex."""
    for src in itertools.product([R(), S(0), S(1), S(2)], repeat=2):
        first, *rest = stages("rfft", (0, 1, 2), (5, 6, 7), src, (2, 3))[0]
        assert first[0] == "rfft" and 2 in first[1] and all(k == "fft" for k, *_ in rest)
        *before, last = stages("irfft", (0, 1, 2), (5, 6, 7), src, (2, 3))[0]
        assert last[0] == "irfft" and 2 in last[1] and all(k == "ifft" for k, *_ in before)


def test_split_moves_to_a_dim_no_later_stage_transforms():
    layout = plan.stage_layout((8, 8, 8), (S(0),), (4,), (0,), pending=(1,))
    assert layout == (S(2),)
    assert plan.stage_layout((8, 8, 8), (S(0),), (4,), (0,), pending=(1, 2)) == (S(1),)
    assert plan.targets((3, 9, 5), (0,), ()) == [1, 2]


def test_hermitian_weights():
    assert plan.hermitian_weights(1).tolist() == [1.0]
    assert plan.hermitian_weights(6).tolist() == [1.0, 2.0, 2.0, 1.0]
    assert plan.hermitian_weights(7).tolist() == [1.0, 2.0, 2.0, 2.0]


def _pairing(u, v):
    return np.real(np.sum(u * v))


@pytest.mark.parametrize("kind", plan.KINDS)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
def test_adjoint_is_the_transpose_of_the_stage(kind, norm):
    rng = np.random.default_rng(0)
    shape, axes = (4, 5, 3), (2, 0)
    for lengths in [(3, 4), (5, 7), (2, 6)]:
        for real in (True, False) if kind in ("fft", "ifft", "irfft") else (True,):
            x = rng.standard_normal(shape)
            if not real:
                x = x + 1j * rng.standard_normal(shape)
            y = plan.transform(kind, axes, lengths, norm, x)
            g = rng.standard_normal(y.shape)
            if y.dtype.kind == "c":
                g = g + 1j * rng.standard_normal(y.shape)
            ct = plan.adjoint(kind, axes, lengths, norm, [shape[a] for a in axes], real, g)
            assert ct.shape == x.shape and (ct.dtype.kind == "c") == (not real)
            assert np.isclose(_pairing(ct, x), _pairing(g, y))
