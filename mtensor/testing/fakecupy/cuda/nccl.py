"""The fake ``cupy.cuda.nccl``: NCCL's interface and rules, carried out over mpi4py.

Buffers are raw device pointers (``fake_array.data.ptr``), read and written in place.  What
NCCL does differently from MPI is kept, so code written against the fake holds on a GPU:
a communicator is built from a unique id by a bootstrap among exactly its members (here:
files in the temp folder, then ``COMM_WORLD.Create_group``) and refuses two ranks on one
GPU; datatypes exclude bool, int16 and complex; float max/min drop NaN; a send outside a
group waits for its receive (so unordered send/recv pairs deadlock as they would on a GPU);
calls between ``groupStart``/``groupEnd`` run together at ``groupEnd``.  Every call first
runs the fake's deferred host-to-device copies (NCCL is ordered after earlier device work)
and stamps what it writes as a device write (readable by MPI only after a synchronise).
"""
import ctypes
import hashlib
import json
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections import namedtuple
from pathlib import Path

import numpy as np
from mpi4py import MPI

from . import mark_written, runtime, timeline

NCCL_INT8 = NCCL_CHAR = 0
NCCL_UINT8 = 1
NCCL_INT32 = NCCL_INT = 2
NCCL_UINT32 = 3
NCCL_INT64 = 4
NCCL_UINT64 = 5
NCCL_FLOAT16 = NCCL_HALF = 6
NCCL_FLOAT32 = NCCL_FLOAT = 7
NCCL_FLOAT64 = NCCL_DOUBLE = 8
NCCL_BFLOAT16 = 9
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = range(5)

# bfloat16 travels as its raw 16 bits (numpy has no bfloat16): data movement only
_DTYPES = {NCCL_INT8: np.int8, NCCL_UINT8: np.uint8, NCCL_INT32: np.int32,
           NCCL_UINT32: np.uint32, NCCL_INT64: np.int64, NCCL_UINT64: np.uint64,
           NCCL_FLOAT16: np.float16, NCCL_FLOAT32: np.float32, NCCL_FLOAT64: np.float64,
           NCCL_BFLOAT16: np.uint16}
# max/min as NCCL computes them on floats: NaN is dropped (fmax/fmin)
_OPS = {NCCL_SUM: np.add, NCCL_PROD: np.multiply, NCCL_MAX: np.fmax, NCCL_MIN: np.fmin,
        NCCL_AVG: np.add}
_ERRORS = {2: "NCCL_ERROR_SYSTEM_ERROR", 4: "NCCL_ERROR_INVALID_ARGUMENT",
           5: "NCCL_ERROR_INVALID_USAGE"}
RENDEZVOUS_TIMEOUT_S = 60.0


class NcclError(RuntimeError):
    """CuPy's NCCL error: ``status`` is the ncclResult_t."""

    def __init__(self, status: int, detail: str):
        self.status = status
        super().__init__(f"{_ERRORS[status]}: {detail}")


def get_version() -> int:
    return 22005


def get_unique_id() -> tuple:
    """128 random signed bytes, as CuPy (< 14) returns an ncclUniqueId."""
    return tuple(b - 256 if b > 127 else b for b in secrets.token_bytes(128))


# --- groups --------------------------------------------------------------------------------

# one queued call: start() runs it (collectives) or posts it (p2p: returns its request);
# written is the device range it writes, stamped when it is done
_Call = namedtuple("_Call", "start p2p written")
_group = {"depth": 0, "calls": []}


def groupStart() -> None:
    _group["depth"] += 1


def groupEnd() -> None:
    if _group["depth"] == 0:
        raise NcclError(5, "groupEnd without groupStart")
    _group["depth"] -= 1
    if _group["depth"] == 0:
        calls, _group["calls"] = _group["calls"], []
        _execute(calls)


def _issue(call: _Call) -> None:
    if _group["depth"]:
        _group["calls"].append(call)
    else:
        _execute([call])


def _execute(calls) -> None:
    """Post the point-to-point calls, run the collectives in order, wait for the posts."""
    timeline.flush_uploads()
    requests = [c.start() for c in calls if c.p2p]
    for call in calls:
        if not call.p2p:
            call.start()
    MPI.Request.Waitall(requests)
    for call in calls:
        if call.written:
            mark_written(*call.written)


# --- buffers and reductions ----------------------------------------------------------------

def _dtype(datatype) -> np.dtype:
    if datatype not in _DTYPES:
        raise NcclError(4, f"datatype {datatype!r} is not an NCCL datatype")
    return np.dtype(_DTYPES[datatype])


def _view(ptr, count, datatype) -> np.ndarray:
    """The ``count`` elements at device address ``ptr``, in place (no copy)."""
    dtype, count = _dtype(datatype), int(count)
    if count == 0:
        return np.empty(0, dtype)
    if not ptr:
        raise NcclError(4, "null buffer pointer")
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(int(ptr))
    return np.frombuffer(raw, dtype, count)


def _span(ptr, count, datatype) -> tuple:
    return int(ptr), int(count) * _dtype(datatype).itemsize


def _reduce(rows: np.ndarray, op, datatype) -> np.ndarray:
    """Reduce the rows (one per rank, in rank order) as NCCL's ``op`` does."""
    if op not in _OPS:
        raise NcclError(4, f"op {op!r} is not an NCCL reduction")
    if datatype == NCCL_BFLOAT16:
        raise NcclError(4, "fakecupy: bfloat16 reductions are not mimicked (no numpy type)")
    n = len(rows)
    if op == NCCL_AVG and rows.dtype.kind == "f":     # NCCL premultiplies floats by 1/n
        rows = rows * rows.dtype.type(1 / n)
    out = rows[0].copy()
    for row in rows[1:]:
        _OPS[op](out, row, out=out)
    if op == NCCL_AVG and rows.dtype.kind != "f":     # integers: sum, then divide (to 0)
        out = np.sign(out) * (np.abs(out) // n)
    return out


def _bytes(a: np.ndarray) -> list:
    return [a, MPI.BYTE]


# --- the communicator ----------------------------------------------------------------------

class NcclCommunicator:
    """``NcclCommunicator(ndev, commId, rank)``: rank ``rank`` of ``ndev`` sharing ``commId``
    (every member calls it; it returns when all have)."""

    def __init__(self, ndev: int, commId, rank: int):
        comm_id = bytes(b % 256 for b in commId)
        if len(comm_id) != 128:
            raise ValueError(f"commId length {len(comm_id)} != 128.")
        if not 0 <= rank < ndev:
            raise NcclError(4, f"rank {rank} is not in [0, {ndev})")
        self._rank, self._device = rank, runtime.getDevice()
        members = _rendezvous(ndev, comm_id, rank, self._device)
        world = MPI.COMM_WORLD
        self._comm = world.Create_group(world.Get_group().Incl([m["world"] for m in members]))
        if rank == 0:       # every member has read the folder before Create_group returns
            shutil.rmtree(_folder(comm_id), ignore_errors=True)
        duplicate = _duplicate_gpu(members)
        if duplicate:
            self.destroy()
            raise NcclError(5, duplicate)

    def _live(self):
        if self._comm is None:
            raise NcclError(4, "the communicator was destroyed or aborted")
        return self._comm

    def rank_id(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._live().Get_size()

    def device_id(self) -> int:
        return self._device

    def destroy(self) -> None:
        if self._comm is not None:
            self._comm.Free()
            self._comm = None

    def abort(self) -> None:
        """Drop the communicator without a word to the others (they may be gone)."""
        self._comm = None

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream) -> None:
        comm = self._live()

        def run():
            rows = np.empty((comm.Get_size(), int(count)), _dtype(datatype))
            comm.Allgather(_bytes(_view(sendbuf, count, datatype).copy()), _bytes(rows))
            _view(recvbuf, count, datatype)[:] = _reduce(rows, op, datatype)
        _issue(_Call(run, False, _span(recvbuf, count, datatype)))

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream) -> None:
        comm = self._live()

        def run():
            n = comm.Get_size()
            blocks = _view(sendbuf, n * int(recvcount), datatype).reshape(n, -1).copy()
            rows = np.empty_like(blocks)
            comm.Alltoall(_bytes(blocks), _bytes(rows))
            _view(recvbuf, recvcount, datatype)[:] = _reduce(rows, op, datatype)
        _issue(_Call(run, False, _span(recvbuf, recvcount, datatype)))

    def allGather(self, sendbuf, recvbuf, count, datatype, stream) -> None:
        comm = self._live()
        n = comm.Get_size()

        def run():
            send = _view(sendbuf, count, datatype).copy()   # may lie inside recvbuf
            comm.Allgather(_bytes(send), _bytes(_view(recvbuf, n * int(count), datatype)))
        _issue(_Call(run, False, _span(recvbuf, n * int(count), datatype)))

    def bcast(self, buff, count, datatype, root, stream) -> None:
        self.broadcast(buff, buff, count, datatype, root, stream)

    def broadcast(self, sendbuf, recvbuf, count, datatype, root, stream) -> None:
        comm = self._live()

        def run():
            recv = _view(recvbuf, count, datatype)
            if comm.Get_rank() == root and sendbuf != recvbuf:
                recv[:] = _view(sendbuf, count, datatype)
            comm.Bcast(_bytes(recv), root=root)
        _issue(_Call(run, False, _span(recvbuf, count, datatype)))

    def send(self, sendbuf, count, datatype, peer, stream) -> None:
        comm = self._live()
        start = lambda: comm.Issend(_bytes(_view(sendbuf, count, datatype)), dest=peer)
        _issue(_Call(start, True, None))

    def recv(self, recvbuf, count, datatype, peer, stream) -> None:
        comm = self._live()
        start = lambda: comm.Irecv(_bytes(_view(recvbuf, count, datatype)), source=peer)
        _issue(_Call(start, True, _span(recvbuf, count, datatype)))


# --- bootstrap -----------------------------------------------------------------------------

def _folder(comm_id: bytes) -> Path:
    return Path(tempfile.gettempdir()) / f"fakenccl-{hashlib.sha256(comm_id).hexdigest()[:24]}"


def _rendezvous(ndev: int, comm_id: bytes, rank: int, device: int) -> list:
    """Every member's world rank, host and device, in NCCL rank order: each writes its own
    file under the id's folder and waits until all ``ndev`` are there."""
    folder = _folder(comm_id)
    folder.mkdir(exist_ok=True)
    me = {"world": MPI.COMM_WORLD.Get_rank(), "host": socket.gethostname(), "device": device}
    partial = folder / f".{rank}.partial"
    partial.write_text(json.dumps(me))
    os.replace(partial, folder / f"{rank}.json")
    deadline = time.monotonic() + RENDEZVOUS_TIMEOUT_S
    while len(list(folder.glob("*.json"))) < ndev:
        if time.monotonic() > deadline:
            raise NcclError(2, f"bootstrap timed out after {RENDEZVOUS_TIMEOUT_S:g} s: "
                               f"{len(list(folder.glob('*.json')))} of {ndev} ranks joined")
        time.sleep(0.005)
    return [json.loads((folder / f"{r}.json").read_text()) for r in range(ndev)]


def _duplicate_gpu(members: list) -> str:
    """NCCL's refusal of two ranks on one GPU, as text ("" if every GPU is distinct)."""
    seen = {}
    for rank, m in enumerate(members):
        first = seen.setdefault((m["host"], m["device"]), rank)
        if first != rank:
            return (f"duplicate GPU detected: rank {rank} and rank {first} both on CUDA "
                    f"device {m['device']} of host {m['host']}")
    return ""
