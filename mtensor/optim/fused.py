"""The Adam/AdamW update of one parameter block, fused: on the host, numpy calls writing into
two scratch buffers (where the plain expression makes eight temporaries); on a GPU, one
generated kernel reading the gradient and updating the parameter and both moments in place
(one launch where the expression makes twelve).  Both run the plain expression's operations
in its order, so the bits are the plain update's (the kernel with FMA contraction off); the
strict fake CuPy checks the kernel's source, and only a GPU run shows nvcc compiling it and
the time saved.

    m = b1 m + (1 - b1) g
    v = b2 v + (1 - b2) g g
    p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)        (Adam)
    p -= lr (m / (1 - b1^t) / (sqrt(...) + eps) + decay p)          (AdamW)
"""
from __future__ import annotations

import numpy as np

from ..device import arrays as device
from ..device.kernels import InPlace

_C_TYPES = {np.dtype(np.float64): "double", np.dtype(np.float32): "float"}
_SCALARS = ("b1", "one_minus_b1", "b2", "one_minus_b2", "bc1", "bc2", "eps", "rate", "decay")


def adam_update(p, g, m, v, t: int, rate: float, b1, b2, eps, decay) -> None:
    """One Adam(W) step on the blocks ``p``, ``m``, ``v`` in place, from gradient ``g`` at
    step ``t`` with learning rate ``rate``."""
    scalars = (b1, 1 - b1, b2, 1 - b2, 1 - b1 ** t, 1 - b2 ** t, eps, rate, decay)
    if device.on_device(p) and p.dtype in _C_TYPES:
        _kernel(p.dtype, bool(decay))(g, *(p.dtype.type(s) for s in scalars), p, m, v)
        return
    _host_update(p, g, m, v, *scalars)


def _host_update(p, g, m, v, b1, one_minus_b1, b2, one_minus_b2, bc1, bc2, eps, rate, decay):
    first = device.empty(g.shape, np.result_type(g, one_minus_b1), like=g)
    second = device.empty(v.shape, np.result_type(v, bc2), like=v)
    np.multiply(one_minus_b1, g, out=first)
    m *= b1
    m += first
    np.multiply(one_minus_b2, g, out=first)
    first *= g
    v *= b2
    v += first
    np.divide(m, bc1, out=first)                        # the moment
    np.divide(v, bc2, out=second)
    np.sqrt(second, out=second)
    second += eps                                       # the scale
    if decay:
        first /= second
        np.multiply(decay, p, out=second)
        first += second
        first *= rate
    else:
        np.multiply(rate, first, out=first)
        first /= second
    p -= first


_KERNELS: dict = {}


def _kernel(dtype, decay: bool) -> InPlace:
    """The generated in-place kernel for ``dtype`` blocks, with the decay term or not."""
    key = (dtype, decay)
    if key not in _KERNELS:
        c = _C_TYPES[dtype]
        step = ("p = p - rate * ((moment / scale) + (decay * p));" if decay else
                "p = p - ((rate * moment) / scale);")
        body = (f"m = (m * b1) + (one_minus_b1 * g); v = (v * b2) + ((one_minus_b2 * g) * g); "
                f"{c} moment = m / bc1; {c} scale = sqrt(v / bc2) + eps; {step}")
        _KERNELS[key] = InPlace(", ".join(f"{c} {name}" for name in ("g",) + _SCALARS),
                                f"{c} p, {c} m, {c} v", body, "mtensor_adam",
                                ("--fmad=false",))
    return _KERNELS[key]
