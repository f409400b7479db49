"""``np.fft`` on DTensors against numpy: every transform and shift on 1-D to 3-D arrays (odd
sizes, so shards are uneven; at 8 ranks smaller than the mesh, so some are empty), in every
layout (R and S(d) on each mesh dim, P(sum) once), with every norm, ``n``/``s`` padding and
cropping, ``axes`` permuted and repeated, real and complex inputs, double and single
precision; the layouts and all-to-alls that ``mtensor/numpy/fft.py`` documents; gradients
against central finite differences; compiled against eager; the array API's ``fft``."""
import numpy as np
import pytest
from mpi_helpers import (
    assert_all_ranks,
    assert_each_raises,
    dtensor_of,
    host,
    layouts,
    numeric_grads,
    weighted_loss,
)

import mtensor as mt
from mtensor import Replicate, Shard

MESH_NDIM_MAX = 2
RNG = np.random.default_rng(11)
SHAPES = {1: (7,), 2: (5, 3), 3: (3, 4, 5)}
F = np.fft

# ndim -> name: (function, takes a complex input); the same function runs on both
CASES = {
    1: {
        "fft": (F.fft, True), "fft_crop": (lambda x: F.fft(x, n=4, norm="ortho"), True),
        "fft_pad_real": (lambda x: F.fft(x, n=10, norm="forward"), False),
        "ifft": (lambda x: F.ifft(x, norm="forward"), True),
        "rfft": (F.rfft, False), "rfft_pad": (lambda x: F.rfft(x, n=10, norm="ortho"), False),
        "irfft": (F.irfft, True), "irfft_odd": (lambda x: F.irfft(x, n=5), True),
        "hfft": (lambda x: F.hfft(x, n=7, norm="ortho"), True), "ihfft": (F.ihfft, False),
        "fftn": (lambda x: F.fftn(x, s=(9,), axes=(0,)), True),
        "fftshift": (F.fftshift, True), "ifftshift": (F.ifftshift, False),
    },
    2: {
        "fft0": (lambda x: F.fft(x, axis=0), True), "fft1": (lambda x: F.fft(x, n=2), True),
        "fft2": (F.fft2, True), "fft2_s": (lambda x: F.fft2(x, s=(6, 2)), False),
        "ifft2_axes": (lambda x: F.ifft2(x, axes=(1, 0), norm="ortho"), True),
        "fftn_repeat": (lambda x: F.fftn(x, s=(4, 6), axes=(0, 0)), True),
        "rfft2": (F.rfft2, False), "rfft2_axes": (lambda x: F.rfft2(x, axes=(1, 0)), False),
        "rfft2_s": (lambda x: F.rfft2(x, s=(3, 5), norm="forward"), False),
        "irfft2": (F.irfft2, True),
        "irfft2_s": (lambda x: F.irfft2(x, s=(4, 7), axes=(1, 0), norm="ortho"), True),
        "irfftn_repeat": (lambda x: F.irfftn(x, s=(4, 4), axes=(0, 0)), True),
        "rfftn0": (lambda x: F.rfftn(x, axes=(0,)), False), "irfftn": (F.irfftn, True),
        "hfft0": (lambda x: F.hfft(x, axis=0), True), "ihfft0": (lambda x: F.ihfft(x, axis=0), False),
        "fftshift": (F.fftshift, True), "ifftshift0": (lambda x: F.ifftshift(x, axes=0), True),
    },
    3: {
        "fftn": (F.fftn, True), "ifftn_s": (lambda x: F.ifftn(x, s=(4, 2), axes=(2, 0)), True),
        "fft2": (lambda x: F.fft2(x, norm="ortho"), False),
        "fftn01": (lambda x: F.fftn(x, axes=(0, 1), norm="forward"), True),
        "rfftn": (F.rfftn, False), "rfftn_axes": (lambda x: F.rfftn(x, axes=(0, 2, 1)), False),
        "irfftn": (F.irfftn, True),
        "irfftn_s": (lambda x: F.irfftn(x, s=(2, 5, 6), axes=(1, 2, 0)), True),
        "fftshift": (lambda x: F.fftshift(x, axes=(0, 2)), True),
    },
}


def _data(shape, complex_input, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    return x + 1j * rng.standard_normal(shape).astype(dtype) if complex_input else x


def _close(got, want, rtol):
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    return (got.shape == want.shape and got.dtype == want.dtype
            and np.allclose(got, want, rtol=rtol, atol=rtol * scale))


def _mismatches(mesh, ndim, cases, dtype=np.float64, rtol=1e-12, partial=False):
    bad = []
    for name, (fn, complex_input) in cases.items():
        a = _data(SHAPES[ndim], complex_input, dtype)
        want = fn(a)
        for layout in layouts(mesh.ndim, ndim, ("sum",) if partial else ()):
            got = fn(dtensor_of(a, mesh, layout))
            if not _close(host(got), want, rtol):
                bad.append((name, layout))
    return bad


@pytest.mark.mpi
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_transforms_match_numpy_in_every_layout(mesh, ndim):
    bad = _mismatches(mesh, ndim, CASES[ndim])
    assert_all_ranks(not bad, f"{len(bad)} differ from numpy: {bad[:4]}")


@pytest.mark.mpi
def test_partial_terms_and_single_precision(mesh):
    """Partial inputs are reduced first; complex64/float32 keep numpy's dtypes and precision."""
    picked = {k: CASES[2][k] for k in ("fft2", "rfft2", "irfft2_s", "fft0")}
    bad = _mismatches(mesh, 2, picked, partial=True)
    bad += _mismatches(mesh, 2, picked, np.float32, rtol=2e-5)
    assert_all_ranks(not bad, f"differ from numpy: {bad[:4]}")


def _moves(fn, x):
    with mt.CommDebugMode() as comm:
        out = fn(x)
    return out.placements, comm.get_comm_counts()


@pytest.mark.mpi
def test_layouts_and_all_to_alls_are_the_documented_ones(mesh):
    """fft2 of a row-split array comes back column-split after one all-to-all (FFTW-MPI's
    "transposed out"), irfft2 of that comes back row-split after one more; a transform
    along an unsplit axis moves nothing; on a 2-D mesh fftn of a pencil moves each mesh
    dim's split once.  (A mesh dim of one rank splits nothing: it is relabelled freely.)"""
    if mesh.size() == 1:
        z = dtensor_of(_data((6, 5), True), mesh, [Shard(0)])
        assert_all_ranks(_moves(F.fft2, z)[1] == {}, "collectives on one rank")
        return
    if mesh.ndim == 1:
        a2a = {"all_to_all": 1}
        z = dtensor_of(_data((16, 12), True), mesh, [Shard(0)])
        r = dtensor_of(_data((16, 12), False), mesh, [Shard(0)])
        got = [_moves(F.fft2, z), _moves(F.rfft2, r), _moves(F.irfft2, F.rfft2(r)),
               _moves(lambda x: F.fft(x, axis=1), z), _moves(lambda x: F.fftn(x), z)]
        want = [((Shard(1),), a2a), ((Shard(1),), a2a), ((Shard(0),), a2a),
                ((Shard(0),), {}), ((Shard(1),), a2a)]
        cube = dtensor_of(_data((8, 6, 4), True), mesh, [Shard(0)])
        got.append(_moves(F.fftn, cube))
        want.append(((Shard(1),), a2a))
    else:
        x = dtensor_of(_data((8, 8, 8), True), mesh, [Shard(0), Shard(1)])
        moved = {"all_to_all": sum(n > 1 for n in mesh.shape)}
        got = [_moves(F.fftn, x), _moves(F.ifftn, F.fftn(x))]
        want = [((Shard(2), Shard(2)), moved), ((Shard(0), Shard(1)), moved)]
        if 1 in mesh.shape:     # a pencil of one slab: only the collectives are the pencil's
            got, want = [c for _, c in got], [c for _, c in want]
    assert_all_ranks(got == want, f"layouts and collectives {got} != {want}")


GRAD_CASES = {
    "fft2_ortho": (lambda x: F.fft2(x, s=(4, 3), norm="ortho"), True),
    "ifft0_real": (lambda x: F.ifft(x, n=7, axis=0), False),
    "fftn_forward": (lambda x: F.fftn(x, norm="forward"), False),
    "rfft2": (lambda x: F.rfft2(x, s=(6, 4)), False),
    "irfft2": (lambda x: F.irfft2(x, s=(4, 5), axes=(1, 0)), True),
    "irfft_even": (lambda x: F.irfft(x, axis=0, norm="forward"), True),
    "hfft_ihfft": (lambda x: F.hfft(F.ihfft(x, axis=0), axis=0), False),
    "fftshift": (lambda x: F.fftshift(x) * x, False),
}


def _real_loss(fn):
    """A real scalar of a maybe complex output: its real part plus 0.7 times its imaginary."""
    def loss(x):
        y = fn(x)
        return np.real(y) + 0.7 * np.imag(y) if np.iscomplexobj(y) else y
    return loss


@pytest.mark.mpi
@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_finite_differences(mesh, name):
    """JAX's convention for a complex input: dL/dx - i dL/dy."""
    fn, complex_input = GRAD_CASES[name]
    loss = _real_loss(fn)
    a = _data((5, 4), complex_input, seed=3)
    if complex_input:
        gx, gy = numeric_grads(lambda x, y: loss(x + 1j * y), [a.real.copy(), a.imag.copy()])
        want = gx - 1j * gy
    else:
        (want,) = numeric_grads(loss, [a])
    bad = []
    for layout in [(Replicate(),) * mesh.ndim, (Shard(0),) + (Shard(1),) * (mesh.ndim - 1),
                   (Shard(1),) + (Replicate(),) * (mesh.ndim - 1)]:
        x = dtensor_of(a, mesh, layout)
        g = mt.grad(lambda x: weighted_loss(loss, [x]))(x)
        if g.placements != x.placements or not np.allclose(host(g), want, rtol=1e-5, atol=1e-6):
            bad.append(layout)
    assert_all_ranks(not bad, f"{name}: gradients differ in {bad}")


@pytest.mark.mpi
def test_compiled_spectral_step_equals_eager(mesh):
    """A heat-equation step (rfft2, a multiplier, irfft2) compiled, replayed, bit for bit."""
    a = _data((9, 6), False, seed=4)
    ky, kx = np.meshgrid(np.fft.fftfreq(9), np.fft.rfftfreq(6), indexing="ij")
    decay = np.exp(-(kx ** 2 + ky ** 2))

    def step(u):
        return F.irfft2(F.rfft2(u) * decay, s=u.shape) + F.fft(u, axis=0).real

    u = dtensor_of(a, mesh, (Shard(0),) + (Replicate(),) * (mesh.ndim - 1))
    eager = host(step(u))
    compiled = mt.compile(step)
    got = [host(compiled(u)) for _ in range(3)]
    want = np.fft.irfft2(np.fft.rfft2(a) * decay, s=a.shape) + np.fft.fft(a, axis=0).real
    assert_all_ranks(all(np.array_equal(g, eager) for g in got) and _close(eager, want, 1e-12),
                     "compiled FFT steps differ from eager or numpy")


@pytest.mark.mpi
def test_array_api_fft_namespace(mesh):
    a = _data((6, 5), True, seed=5)
    x = dtensor_of(a, mesh, (Shard(0),) * mesh.ndim)
    xp = x.__array_namespace__()
    freq = xp.fft.fftfreq(8, d=0.5, device=mesh)
    rfreq = xp.fft.rfftfreq(7, dtype=xp.float32, device=mesh)
    pairs = [(xp.fft.fft(x, n=4, axis=0, norm="ortho"), F.fft(a, n=4, axis=0, norm="ortho")),
             (xp.fft.ifftn(x, s=(3, 5), axes=(1, 0)), F.ifftn(a, s=(3, 5), axes=(1, 0))),
             (xp.fft.irfftn(x), F.irfftn(a)), (xp.fft.hfft(x, axis=0), F.hfft(a, axis=0)),
             (xp.fft.rfftn(xp.real(x)), F.rfftn(a.real)),
             (xp.fft.fftshift(x, axes=(0,)), F.fftshift(a, axes=(0,))),
             (freq, F.fftfreq(8, 0.5)), (rfreq, F.rfftfreq(7).astype(np.float32))]
    ok = all(type(g) is mt.DTensor and _close(host(g), w, 1e-12) for g, w in pairs)
    assert_all_ranks(ok and freq.device == mesh, "array API fft differs from numpy's")


@pytest.mark.mpi
def test_bad_arguments_raise_numpys_errors(mesh):
    x = dtensor_of(_data((5, 3), True), mesh, (Shard(0),) * mesh.ndim)
    assert_each_raises({
        "norm": (lambda: F.fft(x, norm="twice"), ValueError, "Invalid norm value twice"),
        "n": (lambda: F.rfft(x, n=0), ValueError, "Invalid number of FFT data points (0)"),
        "s": (lambda: F.fftn(x, s=(4, -3), axes=(0, 1)), ValueError, "data points (-3)"),
        "lengths": (lambda: F.fftn(x, s=(4,), axes=(0, 1)), ValueError,
                    "Shape and axes have different lengths."),
        "axis": (lambda: F.fft(x, axis=2), np.exceptions.AxisError, "out of bounds"),
    })
