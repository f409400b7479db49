"""Abort on a dead rank: an uncaught exception on any rank ends the whole job.

Without this, one rank raising while the others wait in a collective leaves them waiting
forever.  The hook prints the traceback with every line prefixed by the rank, waits a short
grace period (so peers that raise the same error print theirs too), then calls
``MPI_Abort``.  On by default when more than one rank runs; ``MTENSOR_ABORT_ON_ERROR=0`` or
``mt.set_abort_on_error(False)`` turns it off.
"""
from __future__ import annotations

import os
import sys
import time
import traceback

from mpi4py import MPI

_previous = sys.excepthook


def _abort_hook(kind, value, tb) -> None:
    rank = MPI.COMM_WORLD.Get_rank()
    text = "".join(traceback.format_exception(kind, value, tb))
    sys.stderr.write("".join(f"[rank {rank}] {line}" for line in text.splitlines(True)))
    sys.stderr.write(f"[rank {rank}] mtensor: uncaught exception, aborting all "
                     f"{MPI.COMM_WORLD.Get_size()} ranks\n")
    sys.stderr.flush()
    time.sleep(float(os.environ.get("MTENSOR_ABORT_GRACE", "0.5")))
    MPI.COMM_WORLD.Abort(1)


def set_abort_on_error(enabled: bool) -> None:
    """Whether an uncaught exception on one rank aborts every rank (the default under MPI)."""
    sys.excepthook = _abort_hook if enabled else _previous


def configure_from_env() -> None:
    if MPI.COMM_WORLD.Get_size() > 1 and os.environ.get("MTENSOR_ABORT_ON_ERROR", "1") != "0":
        set_abort_on_error(True)
