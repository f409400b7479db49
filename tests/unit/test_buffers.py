"""The buffer pool reuses memory only once nothing refers to it (no MPI)."""
import numpy as np

from mtensor.device import buffers

BIG = buffers.MIN_BYTES // 8  # float64 elements in the smallest pooled size


def address(a):
    return a.__array_interface__["data"][0]


def test_freed_buffer_is_reused():
    a = buffers.empty((BIG,), np.float64)
    where = address(a)
    del a
    assert address(buffers.empty((BIG,), np.float64)) == where


def test_live_views_keep_their_buffer():
    a = buffers.empty((BIG // 4, 4), np.float64)
    a[...] = 7.0
    view_of_view = a[1:].T[::2]
    mv = memoryview(a)
    del a
    b = buffers.empty((BIG // 4, 4), np.float64)
    b[...] = -1.0
    assert (view_of_view == 7.0).all() and mv.obj is not b.base
    del view_of_view, mv
    c = buffers.empty((BIG // 4, 4), np.float64)
    assert address(c) != address(b)  # b is still alive: c gets the other buffer


def test_same_bytes_other_dtype_and_shape():
    a = buffers.empty((BIG,), np.float64)
    where = address(a)
    del a
    b = buffers.empty((2, BIG), np.float32)
    assert address(b) == where and b.dtype == np.float32 and b.flags.c_contiguous


def test_small_buffers_are_not_pooled():
    a = buffers.empty((8,), np.float64)
    assert a.base is None


def test_empty_cache_releases_only_unused():
    held = buffers.empty((BIG * 2,), np.float64)
    buffers.empty((BIG * 2,), np.float64)  # dropped at once
    released = buffers.empty_cache()
    assert released >= BIG * 2 * 8
    assert address(buffers.empty((BIG * 2,), np.float64)) != address(held)


def test_a_full_pool_makes_room_for_a_new_size(monkeypatch):
    monkeypatch.setattr(buffers, "_cap", buffers._pooled_bytes[0] + BIG * 8 * 3)
    held = buffers.empty((BIG,), np.float64)
    buffers.empty((BIG * 2,), np.float64)            # pooled, unused at once
    new = buffers.empty((BIG * 3,), np.float64)      # over the cap: the unused one goes
    assert buffers._pooled_bytes[0] <= buffers._cap
    assert any(raw is new.base for raw in buffers._pools[BIG * 3 * 8])
    assert any(raw is held.base for raw in buffers._pools[BIG * 8])


def test_owns_memory_tells_a_view_of_an_unheld_array_from_a_shared_one():
    """A result may be written into a block that owns its memory, or into a contiguous,
    writeable view of an array nothing else holds; never into a view whose base a name
    holds, a broadcast (its elements share memory), a read-only or a strided view."""
    from mtensor.device.arrays import owns_memory

    held = np.empty(12)
    alone = np.empty(12).reshape(3, 4)      # (a name here: pytest's assert keeps its parts)
    read_only = np.empty(12).reshape(3, 4)
    read_only.flags.writeable = False
    assert owns_memory(np.empty(12))
    assert owns_memory(alone)
    assert not owns_memory(held.reshape(3, 4))
    assert not owns_memory(np.broadcast_to(np.empty(4), (3, 4)))
    assert not owns_memory(read_only)
    assert not owns_memory(np.empty((4, 3)).T)
    assert not owns_memory(np.empty((3, 8))[:, ::2])
