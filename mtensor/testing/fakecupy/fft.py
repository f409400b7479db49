"""The fake's ``cupy.fft``: numpy's transforms and shifts under CuPy's rules (device arrays
in and out, a numpy operand refused); the frequencies are device arrays, as CuPy's are."""
import functools

import numpy as np

from .core import from_host, run_kernel

TRANSFORMS = ("fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
              "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "fftshift", "ifftshift")


def _kernel(func):
    @functools.wraps(func)
    def call(*args, **kwargs):
        return run_kernel(func, args, kwargs)
    return call


for _name in TRANSFORMS:
    globals()[_name] = _kernel(getattr(np.fft, _name))


def fftfreq(n, d=1.0):
    return from_host(np.fft.fftfreq(n, d))


def rfftfreq(n, d=1.0):
    return from_host(np.fft.rfftfreq(n, d))
