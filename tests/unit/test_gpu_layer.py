"""The GPU layer's pure parts, without MPI: the device helpers on the strict fake CuPy, NCCL's
dtype and op mapping, the pinned pool, and how ``auto`` picks a backend from what the ranks
report (the gathering itself is collective and runs under mpiexec in tests/mpi)."""
import numpy as np
import pytest

from mtensor.comm import nccl, select
from mtensor.comm.staged import PinnedPool
from mtensor.device import arrays as device
from mtensor.testing import fakecupy


def test_host_and_device_cross_only_explicitly():
    host = np.arange(6.0).reshape(2, 3)
    device.set_module("cuda", "mtensor.testing.fakecupy")
    moved = device.to_device(host, "cuda")
    assert type(moved) is fakecupy.ndarray and device.on_device(moved)
    assert device.to_device(moved, "cuda") is moved
    np.testing.assert_array_equal(device.to_host(moved), host)
    assert type(device.to_device(moved, "cpu")) is np.ndarray
    assert type(device.like(host, moved)) is fakecupy.ndarray
    assert device.like(host, host) is host
    assert type(device.as_block(np.float64(2.0))) is np.ndarray
    assert device.as_block(moved) is moved
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(moved)


def test_through_host_and_ufunc_at_run_what_cupy_lacks():
    device.set_module("cuda", "mtensor.testing.fakecupy")
    block = device.to_device(np.array([3.0, 1.0, 2.0]), "cuda")
    with pytest.raises(NotImplementedError):
        np.maximum.accumulate(block)
    scan = device.through_host(np.maximum.accumulate)(block)
    assert type(scan) is fakecupy.ndarray
    np.testing.assert_array_equal(device.to_host(scan), [3.0, 3.0, 3.0])
    device.ufunc_at(np.multiply, block, np.array([0, 0]), 2.0)
    np.testing.assert_array_equal(device.to_host(block), [12.0, 1.0, 2.0])
    device.ufunc_at(np.add, block, np.array([1]), 5.0)
    np.testing.assert_array_equal(device.to_host(block), [12.0, 6.0, 2.0])


@pytest.mark.parametrize("dtype,op,want", [
    (np.float32, "sum", ("float32", "NCCL_FLOAT32", "NCCL_SUM")),
    (np.float64, "avg", ("float64", "NCCL_FLOAT64", "NCCL_SUM")),   # divided after, as on MPI
    (np.int64, "min", ("int64", "NCCL_INT64", "NCCL_MIN")),
    (np.bool_, "sum", ("uint8", "NCCL_UINT8", "NCCL_MAX")),         # logical or
    (np.bool_, "min", ("uint8", "NCCL_UINT8", "NCCL_MIN")),         # logical and
    (np.complex128, "sum", ("float64", "NCCL_FLOAT64", "NCCL_SUM")),
    (np.complex64, "max", None), (np.int16, "sum", None), (np.float16, "max",
                                                           ("float16", "NCCL_FLOAT16",
                                                            "NCCL_MAX")),
])
def test_nccl_maps_what_it_lacks_or_stages_it(dtype, op, want):
    got = nccl._reduction(np.dtype(dtype), op)
    assert (None if got is None else (got[0].name, got[1], got[2])) == want


def test_pinned_buffers_are_kept_per_size_class():
    device.set_module("cuda", "mtensor.testing.fakecupy")
    like = device.to_device(np.zeros(1), "cuda")
    pool = PinnedPool()
    before = fakecupy.stats.pinned_allocs
    a = pool.take(like, 100, np.float64)
    assert a.shape == (100,) and a.dtype == np.float64
    pool.give(a)
    b = pool.take(like, 120, np.float64)        # 960 bytes: the same 1 KiB class
    assert fakecupy.stats.pinned_allocs == before + 1
    c = pool.take(like, 120, np.float64)        # the first is taken: a second one
    assert fakecupy.stats.pinned_allocs == before + 2
    pool.give(b, c)


@pytest.mark.parametrize("reports,want", [
    ([("a", 0, True, False), ("a", 1, True, False)], "nccl"),
    ([("a", 0, True, False), ("b", 0, True, False)], "nccl"),       # same id, other node
    ([("a", 0, True, False), ("a", 0, True, False)], "staged"),     # two ranks on one GPU
    ([("a", 0, True, True), ("a", 0, True, True)], "cuda-aware"),
    ([("a", 0, False, True), ("a", 1, True, True)], "cuda-aware"),  # NCCL missing on one
    ([("a", 0, True, True), ("a", 0, True, False)], "staged"),      # one MPI not CUDA-aware
])
def test_auto_picks_nccl_then_cuda_aware_then_staged(reports, want):
    assert select.decide(reports) == want


def test_the_environment_names_the_default(monkeypatch):
    assert select.default_backend("cpu") == "mpi"
    monkeypatch.delenv("MTENSOR_GPU_COMM", raising=False)
    assert select.default_backend("cuda") == "auto"
    monkeypatch.setenv("MTENSOR_GPU_COMM", "staged")
    assert select.default_backend("cuda") == "staged"
    monkeypatch.setenv("MTENSOR_GPU_COMM", "fast")
    with pytest.raises(ValueError, match="MTENSOR_GPU_COMM='fast'"):
        select.default_backend("cuda")
