"""The array API's ``fft`` extension on DTensors: numpy 2's ``np.fft`` transforms and
shifts, whose signatures are the standard's, each reaching the distributed FFT
(``numpy/fft.py``: the layouts it returns are documented there) through
``__array_function__``; ``fftfreq`` and ``rfftfreq`` take the standard's ``dtype=`` and
``device=`` (a mesh) and give DTensors laid out as the creation functions lay out values
every rank holds.
"""
from __future__ import annotations

import numpy as np

from .creation import asarray

__all__ = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft",
           "irfft", "irfftn", "rfft", "rfftfreq", "rfftn"]

fft = np.fft.fft
ifft = np.fft.ifft
fftn = np.fft.fftn
ifftn = np.fft.ifftn
rfft = np.fft.rfft
irfft = np.fft.irfft
rfftn = np.fft.rfftn
irfftn = np.fft.irfftn
hfft = np.fft.hfft
ihfft = np.fft.ihfft
fftshift = np.fft.fftshift
ifftshift = np.fft.ifftshift


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point transform, on ``device`` (default: the
    default device), in ``dtype`` (default float64)."""
    return asarray(np.fft.fftfreq(n, d), dtype=dtype or np.float64, device=device)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    """The sample frequencies of an ``n``-point real transform (``rfft``'s output length)."""
    return asarray(np.fft.rfftfreq(n, d), dtype=dtype or np.float64, device=device)
