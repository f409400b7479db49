"""Guards around every collective: the divergence check and the collective timeout.

Both are off by default and cost nothing then beyond one flag test per collective.

- Check mode (``MTENSOR_CHECK=1`` or ``mt.set_checks(True)``): before each collective every
  rank of the mesh contributes a fingerprint of what it is about to run (collective, mesh
  dim, global shape, dtype, op) to one small all-reduce; if they differ, every rank raises
  ``CollectiveMismatchError`` naming the divergent ranks and their calls, instead of
  deadlocking or mixing buffers.
- Timeout (``MTENSOR_TIMEOUT=seconds`` or ``mt.set_timeout(s)``): a watchdog thread aborts the
  job (``MPI_Abort``) when a collective has not completed in time, after printing which
  collective, on which mesh dim, from which op.  The collective itself stays the blocking
  MPI call; the watchdog only reads a deadline the caller sets around it.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from functools import lru_cache
from typing import Optional

import numpy as np

from .abort import abort_job


class CollectiveMismatchError(RuntimeError):
    """Ranks of one mesh were about to run different collectives."""


class _State:
    active = False       # checks or timeout on: the executors call before()/after()
    checks = False
    timeout: Optional[float] = None
    op = "an op"         # what dispatch is running (names the collectives it causes)
    pending = ()         # (kind, mesh dim, shape, dtype, op) of the collective in flight
    deadline = 0.0       # monotonic time the collective in flight must end by (0: none)
    context = ""         # what runs around the ops (e.g. a test), named in the timeout message
    stream = None        # where the timeout message goes (None: sys.stderr)


state = _State()
_watchdog: Optional[threading.Thread] = None


def set_checks(enabled: bool) -> None:
    """Agree on every collective before running it (every rank must set the same)."""
    state.checks = bool(enabled)
    state.active = state.checks or state.timeout is not None


def set_timeout(seconds: Optional[float]) -> None:
    """Abort the job when a collective takes longer than ``seconds`` (None: never)."""
    global _watchdog
    state.timeout = None if seconds is None or seconds <= 0 else float(seconds)
    state.active = state.checks or state.timeout is not None
    if state.timeout is not None and _watchdog is None:
        _watchdog = threading.Thread(target=_watch, name="mtensor-timeout", daemon=True)
        _watchdog.start()


def set_context(label: str, stream=None) -> None:
    """Name what runs now (e.g. a test) in the timeout message, and send that message to
    ``stream`` instead of sys.stderr (a test runner that captures stderr passes the terminal)."""
    state.context = label
    state.stream = stream


@lru_cache(maxsize=1024)
def describe(pending) -> str:
    kind, mesh_dim, shape, dtype, op = pending
    where = "the whole mesh" if mesh_dim < 0 else f"mesh dim {mesh_dim}"
    return f"{kind} on {where} of global shape {tuple(shape)} {np.dtype(dtype)} for {op}"


def before(kind: str, mesh_dim: int, shape, dtype, comm, agree: bool = True) -> None:
    """Called right before a collective over ``comm`` (the mesh's communicator), or before
    waiting for a started one (``agree=False``: it was checked when it started); the text
    describing it is only built when it is needed (a timeout, a mismatch, a new call)."""
    state.pending = (kind, mesh_dim, shape, dtype, state.op)
    if state.timeout is not None:
        state.deadline = time.monotonic() + state.timeout
    if state.checks and agree:
        try:
            _agree(comm, state.pending)
        except CollectiveMismatchError:
            after()
            raise


def after() -> None:
    state.deadline = 0.0


@lru_cache(maxsize=1024)
def _fingerprint(pending) -> int:
    """A hash every rank computes alike (Python's ``hash`` of strings is salted per process)."""
    text = describe(pending).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=7).digest(), "little")


def _agree(comm, pending) -> None:
    from mpi4py import MPI  # loaded by then: agreement runs around a mesh's collectives
    mine = _fingerprint(pending)
    label = describe(pending)
    seen = np.array([mine, -mine], np.int64)
    comm.Allreduce(MPI.IN_PLACE, seen, MPI.MAX)
    if seen[0] == mine and -seen[1] == mine:
        return
    labels = comm.allgather(label)
    groups = {}
    for rank, text in enumerate(labels):
        groups.setdefault(text, []).append(rank)
    calls = "; ".join(f"ranks {ranks} run {text}" for text, ranks in groups.items())
    raise CollectiveMismatchError(
        f"collectives diverge across the mesh: {calls}; every rank must run the same ops on "
        f"the same DTensors in the same order (look for rank-dependent branches)")


def _watch() -> None:
    while True:
        timeout = state.timeout
        time.sleep(0.5 if timeout is None else min(timeout / 10, 0.5))
        deadline = state.deadline
        if deadline and time.monotonic() > deadline:
            from mpi4py import MPI  # loaded by then: deadlines are set around collectives
            rank = MPI.COMM_WORLD.Get_rank()
            where = f" in {state.context}" if state.context else ""
            out = state.stream or sys.stderr
            out.write(
                f"[rank {rank}] mtensor: {describe(state.pending)}{where} did not complete "
                f"within {state.timeout:g} s (MTENSOR_TIMEOUT); every rank that reached it prints "
                f"this line, a rank that prints none waits elsewhere (outside mtensor or in "
                f"another call); aborting the job\n")
            out.flush()
            abort_job(3)


# On by default, as NCCL's watchdog: a collective some rank never joins ends the job
# instead of hanging it (MTENSOR_TIMEOUT=seconds changes it, 0 turns it off).
DEFAULT_TIMEOUT_S = 600.0


def configure_from_env() -> None:
    if os.environ.get("MTENSOR_CHECK", "0") not in ("", "0"):
        set_checks(True)
    set_timeout(float(os.environ.get("MTENSOR_TIMEOUT") or DEFAULT_TIMEOUT_S))
