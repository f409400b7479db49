"""The fused Adam(W) update (``optim.fused``) against the plain numpy expression, bit for
bit: on the host (scratch buffers) and as one generated kernel on the strict fake CuPy
(which runs the kernel's source with numpy), float64 and float32, with and without decay."""
import numpy as np
import pytest

from mtensor.device import arrays as device
from mtensor.optim.fused import adam_update
from mtensor.testing import fakecupy


def plain(p, g, m, v, t, rate, b1, b2, eps, decay):
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    moment, scale = m / (1 - b1 ** t), np.sqrt(v / (1 - b2 ** t)) + eps
    if decay:
        p -= rate * (moment / scale + decay * p)
    else:
        p -= rate * moment / scale


def blocks(dtype, seed=0):
    rng = np.random.default_rng(seed)
    p, g, m = (rng.standard_normal((64, 48)).astype(dtype) for _ in range(3))
    return p, g, m, np.abs(rng.standard_normal((64, 48))).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("decay", [0.0, 0.01])
def test_fused_update_keeps_the_plain_updates_bits(dtype, decay):
    want, got = blocks(dtype), blocks(dtype)
    device.set_module("cuda", "mtensor.testing.fakecupy")
    on_gpu = [device.to_device(a, "cuda") for a in blocks(dtype)]
    for t in (1, 2, 3):
        plain(*want, t, 1e-2, 0.9, 0.999, 1e-8, decay)
        adam_update(*got, t, 1e-2, 0.9, 0.999, 1e-8, decay)
        launches = fakecupy.stats.kernels
        adam_update(*on_gpu, t, 1e-2, 0.9, 0.999, 1e-8, decay)
        assert fakecupy.stats.kernels == launches + 1          # one launch per update
    for w, h, d in zip(want, got, on_gpu):
        assert h.dtype == dtype and np.array_equal(w, h)
        assert np.array_equal(w, device.to_host(d))
