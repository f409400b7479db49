"""The ``xp`` legs of the device tests: numpy on a CPU mesh; the strict fake CuPy
(``mtensor.testing.fakecupy``: numpy memory behind CuPy's rules, synchronisation checked) on
a "cuda" mesh; real CuPy on a "cuda" mesh, skipped with its reason where no GPU is seen.

What the fake proves: the plumbing (blocks stay device arrays through every layer, constants
and host data are moved explicitly, no implicit host conversion), the backends' logic
(staging, NaN flags, padding, grouped send/recv, selection) and that every MPI access to
device memory is preceded by a synchronise.  What only the cupy leg proves: real kernels,
real copies and streams, real NCCL."""
import os

import numpy as np
import pytest

from mtensor.device import arrays as device

FAKE = "mtensor.testing.fakecupy"


class Leg:
    def __init__(self, name, device_type, module):
        self.name, self.device_type, self.module = name, device_type, module

    def put(self, array):
        """``array`` (numpy) on this leg's device."""
        return device.to_device(np.asarray(array), self.device_type)

    def is_block(self, value) -> bool:
        return type(value) is self.module.ndarray

    def __repr__(self):
        return self.name


def _cupy_missing():
    try:
        import cupy
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:          # no CuPy, no driver, no device: all mean "no GPU here"
        return f"no usable CuPy/GPU ({type(e).__name__}: {e})"
    return None if count > 0 else "CuPy sees no GPU"


def leg(name) -> Leg:
    if name == "numpy":
        return Leg(name, "cpu", np)
    module = FAKE if name == "fake" else "cupy"
    if name == "cupy":
        reason = _cupy_missing()
        if reason:
            pytest.skip(reason)
    if device.DEVICES["cuda"] != module:
        device.set_module("cuda", module)
    os.environ.setdefault("MTENSOR_FAKE_GPUS", "8")    # one fake GPU per rank (NCCL's rule)
    return Leg(name, "cuda", device.array_module("cuda"))
