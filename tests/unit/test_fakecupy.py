"""The strict CuPy fake refuses what CuPy refuses and keeps the GPU's asynchrony observable:
unsynchronised device writes and deferred copies show up as errors or stale data."""
import subprocess
import sys

import numpy as np
import pytest

import mtensor.testing.fakecupy as cp
from mtensor.testing.fakecupy import cuda


@pytest.fixture(autouse=True)
def settled():
    """Each test starts with the device idle and device 0 current."""
    cuda.runtime.deviceSynchronize()
    cuda.Device(0).use()
    yield
    cuda.Device(0).use()


def test_implicit_conversion_to_numpy_is_refused():
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array"):
        np.asarray(cp.arange(3))


@pytest.mark.parametrize("call", [
    lambda a, h: a + h, lambda a, h: h * a, lambda a, h: np.add(a, 1, out=h),
    lambda a, h: np.concatenate([a, h]), lambda a, h: cp.dot(a, h), lambda a, h: a.dot(h),
    lambda a, h: cp.add(h, 1),
])
def test_numpy_operands_are_refused(call):
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        call(cp.arange(3.0), np.ones(3))


def test_host_arrays_cannot_be_assigned_in():
    a = cp.zeros(3)
    with pytest.raises(TypeError, match="host-to-device"):
        a[:] = np.ones(3)
    a[1] = np.float32(2)
    a[cp.asarray([True, False, False])] = 5
    assert a.get().tolist() == [5, 2, 0]


def test_reduce_only_add_and_multiply_without_initial():
    a = cp.arange(1.0, 5.0)
    assert np.add.reduce(a).item() == 10 and np.multiply.accumulate(a).get()[-1] == 24
    with pytest.raises(NotImplementedError, match="cupy_maximum.reduce"):
        np.maximum.reduce(a)
    with pytest.raises(TypeError, match="initial"):
        np.add.reduce(a, initial=1)
    np.add.at(a, np.array([0, 0]), 1)
    assert a.get()[0] == 3


def test_reductions_return_0d_device_arrays():
    a = cp.arange(6.0).reshape(2, 3)
    for total in (a.sum(), np.sum(a), cp.max(a), a[0, 1]):
        assert type(total) is cp.ndarray and total.shape == ()
    assert float(np.sum(a)) == 15


def test_round_trip_and_views():
    host = np.arange(12.0).reshape(3, 4)
    a = cp.asarray(host)
    host[0, 0] = 99                                  # asarray copied
    assert cp.asarray(a) is a and a.T.base is a and a[1:].base is a
    np.testing.assert_array_equal(cp.asnumpy(a.T), np.arange(12.0).reshape(3, 4).T)
    assert cp.get_array_module(a) is cp and cp.get_array_module(host) is np


def test_empty_memory_is_not_zeros():
    assert np.isnan(cp.empty(4).get()).all() and (cp.empty(2, np.int32).get() == -1).all()


def test_nonblocking_get_lands_at_the_next_synchronize():
    a, host = cp.arange(4.0), np.zeros(4)
    a.get(out=host, blocking=False)
    a += 1                                           # stream order: after the copy
    assert (host == 0).all()
    cuda.get_current_stream().synchronize()
    assert host.tolist() == [0, 1, 2, 3]
    cp.asnumpy(a, out=host, blocking=False)
    event = cuda.Stream().record()
    event.synchronize()
    assert host.tolist() == [1, 2, 3, 4]


def test_device_buffers_reach_foreign_code_only_after_a_synchronize():
    a = cp.ones(4) * 2
    with pytest.raises(RuntimeError, match="not synchronised"):
        a.__cuda_array_interface__
    with pytest.raises(RuntimeError, match="not synchronised"):
        a[1:].__dlpack__(stream=-1)
    cuda.Device().synchronize()
    cai = a.__cuda_array_interface__
    assert cai["data"][0] == a.data.ptr and cai["shape"] == (4,) and cai["strides"] is None
    a[0] = 1
    with pytest.raises(RuntimeError, match="not synchronised"):
        a.__cuda_array_interface__


def test_set_reads_the_host_buffer_when_the_device_next_works():
    a, host = cp.zeros(3), np.array([1.0, 2.0, 3.0])
    a.set(host)
    host[:] = 7                                      # overwritten before the copy ran
    assert (a * 1).get().tolist() == [7, 7, 7]
    with pytest.raises(TypeError):
        a.set(host.astype(np.float32))


def test_devices_count_from_the_environment(monkeypatch):
    monkeypatch.setenv("MTENSOR_FAKE_GPUS", "2")
    assert cuda.runtime.getDeviceCount() == 2
    with cuda.Device(1) as device:
        assert cuda.Device().id == 1 and device.pci_bus_id == "0000:01:00.0"
        b = cp.ones(2)
    assert cuda.Device().id == 0 and b.device == cuda.Device(1)
    with pytest.raises(ValueError, match="different from the current device"):
        b + 1
    with pytest.raises(cuda.runtime.CUDARuntimeError, match="invalid device ordinal"):
        cuda.Device(2).use()


def test_pinned_memory_is_a_writable_host_buffer():
    before = cp.stats.pinned_allocs
    mem = cuda.alloc_pinned_memory(32)
    view = np.frombuffer(mem, np.float64, 4)
    view[:] = 1
    assert cp.stats.pinned_allocs == before + 1 and mem.ptr == view.ctypes.data


def test_importing_the_fake_does_not_load_mpi():
    code = ("import sys, mtensor.testing.fakecupy as cp; cp.cuda.Device(); "
            "assert 'mpi4py' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
