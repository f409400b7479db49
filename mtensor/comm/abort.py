"""Abort on a dead rank: an uncaught exception on any rank ends the whole job.

Without this, one rank raising while the others wait in a collective leaves them waiting
forever.  The hook prints the traceback with every line prefixed by the rank, waits a short
grace period (so peers that raise the same error print theirs too), then calls
``MPI_Abort``.  Installed when the first mesh is built (so importing mtensor does not load
MPI), when more than one rank runs; ``MTENSOR_ABORT_ON_ERROR=0`` or
``mt.set_abort_on_error(False)`` turns it off.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback

_previous = sys.excepthook
_previous_thread_hook = threading.excepthook
_chosen = [False]   # set once the hook is installed or the user has chosen


def _grace() -> float:
    try:
        return min(max(float(os.environ.get("MTENSOR_ABORT_GRACE", "0.5")), 0.0), 10.0)
    except ValueError:
        return 0.5


def _abort_hook(kind, value, tb) -> None:
    from mpi4py import MPI  # loaded: the hook is installed when a mesh is built
    try:
        rank = MPI.COMM_WORLD.Get_rank()
        text = "".join(traceback.format_exception(kind, value, tb))
        sys.stderr.write("".join(f"[rank {rank}] {line}" for line in text.splitlines(True)))
        sys.stderr.write(f"[rank {rank}] mtensor: uncaught exception, aborting all "
                         f"{MPI.COMM_WORLD.Get_size()} ranks\n")
        sys.stderr.flush()
    finally:
        abort_job(1)


def abort_job(code: int) -> None:
    """``MPI_Abort`` after the grace period (``MTENSOR_ABORT_GRACE``, default 0.5 s): the
    launcher kills every process at once, and what a rank printed just before reaches the
    terminal only if its proxy had time to forward it."""
    from mpi4py import MPI
    time.sleep(_grace())
    MPI.COMM_WORLD.Abort(code)


def _thread_hook(args) -> None:
    if args.exc_type is SystemExit:
        return
    _abort_hook(args.exc_type, args.exc_value, args.exc_traceback)


def set_abort_on_error(enabled: bool) -> None:
    """Whether an uncaught exception on one rank (in any thread) aborts every rank (the
    default under MPI)."""
    _chosen[0] = True
    sys.excepthook = _abort_hook if enabled else _previous
    threading.excepthook = _thread_hook if enabled else _previous_thread_hook


def install_once() -> None:
    """At the first mesh: abort on error when more than one rank runs, unless turned off
    (by the environment, or by ``set_abort_on_error`` before)."""
    if _chosen[0]:
        return
    from mpi4py import MPI
    _chosen[0] = True
    if MPI.COMM_WORLD.Get_size() > 1 and os.environ.get("MTENSOR_ABORT_ON_ERROR", "1") != "0":
        set_abort_on_error(True)


def abort_with(message: str, code: int = 1) -> None:
    """Print ``message`` (with the traceback being handled, if any), every line prefixed by
    the rank, and abort the job: for an error on one rank while others wait for its
    messages, which no exception can reach (``mt.pipeline``'s stages)."""
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.Get_rank()
    text = traceback.format_exc() if sys.exc_info()[0] is not None else ""
    text += f"{message}; aborting all {MPI.COMM_WORLD.Get_size()} ranks\n"
    sys.stderr.write("".join(f"[rank {rank}] {line}" for line in text.splitlines(True)))
    sys.stderr.flush()
    abort_job(code)
