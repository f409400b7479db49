"""The fake ``cupy.cuda``: devices, streams, events and pinned memory over one host timeline.

A real GPU runs device work asynchronously; a host thread sees its results only after a
synchronise.  The fake runs kernels eagerly but keeps that contract observable: ``timeline``
numbers every device write (an epoch), holds asynchronous copies back until a synchronise
(device-to-host) or the next device operation (host-to-device), and remembers the epoch of
the last synchronise, so an array handed to MPI before its producer was synchronised is
caught (see ``fakecupy.ndarray.__cuda_array_interface__``).  All streams share the one
timeline: synchronising any stream synchronises everything, a leniency of the fake.

Devices are numbered ``0 .. MTENSOR_FAKE_GPUS - 1`` (default 1); arrays remember the device
current when they were made.  ``nccl`` is imported on first use (it loads MPI).
"""
import importlib
import itertools
import os
import types
import weakref

import numpy as np

# counters that tests read: what the code under test asked of the "GPU"
stats = types.SimpleNamespace(synchronizes=0, kernels=0, host_to_device=0,
                               device_to_host=0, pinned_allocs=0)

# the arrays owning device memory (fakecupy arrays with ``_a`` and ``_epoch``), so that a
# write through a raw pointer (NCCL) can be charged to its array; keyed by id (arrays
# are unhashable)
_allocations = weakref.WeakValueDictionary()


class _Timeline:
    """Device work in issue order: a clock of write epochs, the last synchronised epoch, and
    the copies still deferred (``"upload"``: host to device, ``"download"``: device to host)."""

    def __init__(self):
        self.now = 0
        self.synced = 0
        self.pending = []           # (epoch, kind, copy) in issue order

    def tick(self) -> int:
        self.now += 1
        return self.now

    def defer(self, kind: str, copy) -> int:
        epoch = self.tick()
        self.pending.append((epoch, kind, copy))
        return epoch

    def flush_uploads(self) -> None:
        """Run the deferred host-to-device copies: device work after them reads their data."""
        self._run(lambda epoch, kind: kind == "upload")

    def synchronize(self, upto=None) -> None:
        """Finish the work issued up to epoch ``upto`` (default: all of it)."""
        upto = self.now if upto is None else upto
        self._run(lambda epoch, kind: epoch <= upto)
        self.synced = max(self.synced, upto)
        stats.synchronizes += 1

    def _run(self, due) -> None:
        waiting = []
        for epoch, kind, copy in self.pending:
            if due(epoch, kind):
                copy()
            else:
                waiting.append((epoch, kind, copy))
        self.pending = waiting


timeline = _Timeline()


def mark_written(ptr: int, nbytes: int) -> None:
    """Stamp a new epoch on every array whose memory overlaps ``[ptr, ptr + nbytes)``."""
    for owner in list(_allocations.values()):
        start = owner._a.__array_interface__["data"][0]
        if start < ptr + nbytes and ptr < start + owner._a.nbytes:
            owner._epoch = timeline.tick()


# --- runtime -------------------------------------------------------------------------------

class CUDARuntimeError(RuntimeError):
    """CuPy's error for a failed CUDA runtime call (``status``: the cudaError_t)."""

    _NAMES = {101: "cudaErrorInvalidDevice: invalid device ordinal"}

    def __init__(self, status: int):
        self.status = status
        super().__init__(self._NAMES.get(status, f"cudaError {status}"))


_current_device = [0]


def _device_count() -> int:
    return int(os.environ.get("MTENSOR_FAKE_GPUS", "1"))


def _set_device(device: int) -> None:
    if not 0 <= device < _device_count():
        raise CUDARuntimeError(101)
    _current_device[0] = device


runtime = types.SimpleNamespace(
    getDeviceCount=_device_count,
    getDevice=lambda: _current_device[0],
    setDevice=_set_device,
    deviceSynchronize=lambda: timeline.synchronize(),
    runtimeGetVersion=lambda: 12040,
    CUDARuntimeError=CUDARuntimeError,
    is_hip=False,
)


class Device:
    """A fake GPU: ``Device()`` is the current one; ``with Device(1):`` makes 1 current."""

    def __init__(self, device=None):
        self.id = _current_device[0] if device is None else int(device)
        self._previous = []

    def use(self) -> None:
        _set_device(self.id)

    def synchronize(self) -> None:
        timeline.synchronize()

    @property
    def pci_bus_id(self) -> str:
        return f"0000:{self.id:02x}:00.0"

    def __enter__(self):
        self._previous.append(_current_device[0])
        self.use()
        return self

    def __exit__(self, *exc):
        _current_device[0] = self._previous.pop()

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


# --- streams and events --------------------------------------------------------------------

_stream_ptrs = itertools.count(0x7F0000001000, 0x100)


class Stream:
    """A fake CUDA stream (``ptr`` 0 for the null stream); ``with stream:`` makes it current."""

    null = None     # the null stream, set below

    def __init__(self, null=False, non_blocking=False, ptr=0):
        self.ptr = 0 if null else (ptr or next(_stream_ptrs))

    def synchronize(self) -> None:
        timeline.synchronize()

    def record(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event) -> None:
        """Nothing to do: the fake runs all streams' work in issue order."""

    @property
    def done(self) -> bool:
        """True, as the work is finished by the time it answers (a query that says so)."""
        self.synchronize()
        return True

    def use(self):
        _current_streams[-1] = self
        return self

    def __enter__(self):
        _current_streams.append(self)
        return self

    def __exit__(self, *exc):
        _current_streams.pop()

    def __repr__(self):
        return f"<fakecupy.cuda.Stream {self.ptr:#x}>"


Stream.null = Stream(null=True)
_current_streams = [Stream.null]


def get_current_stream(device_id=-1) -> Stream:
    return _current_streams[-1]


class Event:
    """A fake CUDA event: synchronising it finishes the work issued before its ``record``."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self._epoch = None

    def record(self, stream=None) -> None:
        self._epoch = timeline.now

    def synchronize(self) -> None:
        if self._epoch is not None:
            timeline.synchronize(self._epoch)

    @property
    def done(self) -> bool:
        self.synchronize()
        return True


# --- pinned host memory --------------------------------------------------------------------

class PinnedMemoryPointer(bytearray):
    """Page-locked host memory: a writable buffer (``np.frombuffer(mem, dtype, count)``)."""

    @property
    def ptr(self) -> int:
        return np.frombuffer(self, np.uint8).ctypes.data if len(self) else 0

    @property
    def size(self) -> int:
        return len(self)


def alloc_pinned_memory(nbytes: int) -> PinnedMemoryPointer:
    stats.pinned_allocs += 1
    return PinnedMemoryPointer(nbytes)


def __getattr__(name):
    if name == "nccl":      # loads MPI: only when asked for
        return importlib.import_module(".nccl", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
