"""Saves that do not stop training: ``save(path, state, blocking=False)`` returns a handle.

The main thread runs every collective part of the save, as a blocking save does (describe
and agree on the leaves, create the arrays' metadata, reduce Partial leaves), then copies
the blocks this rank writes into staging buffers, so the caller may update its arrays in
place at once.  A thread then writes this rank's chunks, fsyncs them and leaves its record
(the chunks' digests, or its error) as a file in the temp directory; rank 0's thread waits
for every rank's file and commits as a blocking save does.  The threads call no MPI: the
ranks meet only through the file system until ``wait()``, which is collective and raises
any rank's error on every rank.

``Job`` is what a save is once its collective part is done; a blocking save runs the same
job's two shares inline, pooling the records with ``agree`` instead of files.
"""
from __future__ import annotations

import atexit
import os
import shutil
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from . import store
from .agree import CheckpointError, Group, attempt, raise_if_any

DEFAULT_TIMEOUT_S = 600.0   # rank 0's wait for the others' records, without MTENSOR_TIMEOUT
POLL_S = 0.005
_pending: list = []         # background saves not yet waited for, oldest first
_UNSETTLED = object()


@dataclass
class Job:
    """One save after its collective part: ``write`` writes this rank's chunks and returns
    their record ``{leaf: {chunk key: digest}}``; ``commit`` (rank 0) takes every rank's
    record and publishes the checkpoint; ``error``: this rank failed before writing."""
    group: Group
    path: str
    tmp: str
    write: Callable[[], dict]
    commit: Callable[[list], None]
    error: Optional[str] = None

    def write_share(self):
        """``(record, error)`` of this rank's writes (the error text, or None)."""
        record = {}
        return record, self.error or attempt(lambda: record.update(self.write()))

    def commit_share(self, records) -> Optional[str]:
        """Rank 0: commit with every rank's record; the error text, or None."""
        error = attempt(lambda: self.commit(records))
        return error and f"{error} (the written data stays in {self.tmp})"


class SaveHandle:
    """A save running in the background (``save(..., blocking=False)``).

    ``wait()`` (collective: every rank of the save calls it) returns once the checkpoint is
    committed, or raises ``CheckpointError`` on every rank, naming the path and the ranks
    that failed; the checkpoint committed before stays.  ``done()``: whether this rank's
    part has finished (on rank 0: the commit too), without waiting or communicating.
    """

    def __init__(self, job: Job):
        self.path, self._tmp, self._group = job.path, job.tmp, job.group
        self._write_error = self._commit_error = None
        self._failure = _UNSETTLED
        self._wrote, self._abort = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, args=(job,), daemon=True,
                                        name=f"mtensor save {os.path.basename(job.path)}")
        _pending.append(self)
        self._thread.start()

    def __repr__(self) -> str:
        state = "running" if self._thread.is_alive() else "finished"
        return f"SaveHandle({self.path!r}, {state})"

    def done(self) -> bool:
        """Whether this rank's part has finished (local: no wait, no collective)."""
        return not self._thread.is_alive()

    def join(self) -> None:
        """Wait for this rank's thread only (no collective, nothing raised)."""
        self._thread.join()

    def wait(self) -> None:
        """Collective: None once committed, else the ``CheckpointError`` on every rank (a
        later call gives the same answer without communicating)."""
        if self._failure is _UNSETTLED:
            self._failure = self._agree()
            if self in _pending:
                _pending.remove(self)
        if self._failure is not None:
            raise self._failure

    def _agree(self) -> Optional[CheckpointError]:
        """Two small allgathers: every rank's write outcome (a failure stops rank 0 waiting
        for records that will not come), then rank 0's commit outcome."""
        self._wrote.wait()
        errors = self._group.allgather(self._write_error)
        if any(errors):
            self._abort.set()
        self._thread.join()
        if not any(errors):
            errors = self._group.allgather(self._commit_error)
        elif self._group.rank == 0:
            shutil.rmtree(self._tmp, ignore_errors=True)
        try:
            raise_if_any("save", [e and f"{e} (background save of {self.path})"
                                  for e in errors])
        except CheckpointError as e:
            return e
        return None

    def _run(self, job: Job) -> None:
        try:
            record, self._write_error = job.write_share()
            outcome = {"error": self._write_error} if self._write_error else {"chunks": record}
            self._write_error = self._write_error or attempt(
                lambda: store.write_record(job.tmp, job.group.rank, outcome))
            self._wrote.set()
            if job.group.rank == 0 and not self._write_error:
                self._commit_error = self._commit(job)
        except BaseException as e:          # never let the thread die without an outcome
            self._commit_error = f"{type(e).__name__}: {e}"
        finally:
            self._wrote.set()

    def _commit(self, job: Job) -> Optional[str]:
        """Rank 0's thread: poll for every rank's record file, then commit (no MPI)."""
        timeout = float(os.environ.get("MTENSOR_TIMEOUT") or DEFAULT_TIMEOUT_S)
        deadline = time.monotonic() + timeout
        while True:
            missing = store.missing_records(job.tmp, job.group.size)
            if not missing:
                break
            if self._abort.is_set():        # a rank failed: wait() reports it
                return None
            if timeout > 0 and time.monotonic() > deadline:
                return (f"TimeoutError: rank{'s' * (len(missing) > 1)} "
                        f"{', '.join(map(str, missing))} left no record of their chunks in "
                        f"{job.tmp} within {timeout:g} s (MTENSOR_TIMEOUT); nothing committed")
            time.sleep(POLL_S)
        records = []
        error = attempt(lambda: records.extend(store.take_records(job.tmp, job.group.size)))
        if error or any("error" in r for r in records):
            return error                    # a rank's own error: that rank reports it
        return job.commit_share([r["chunks"] for r in records])


def _ranks(group: Optional[Group]):
    return None if group is None or group.mesh is None else tuple(group.mesh.world_ranks)


def settle(group: Optional[Group], path: Optional[str] = None) -> None:
    """Before a save or load on ``group``'s ranks: finish the pending background saves (of
    ``path`` only, when given).  One that ran on the same ranks is waited for (collective;
    its error is raised here); any other (or all, for ``group=None``: a one-process load)
    is only joined on this rank, and keeps its outcome for its own ``wait()``."""
    for handle in list(_pending):
        if path is None or handle.path == path:
            if group is not None and _ranks(handle._group) == _ranks(group):
                handle.wait()
            else:
                handle.join()


def join_pending() -> None:
    """At exit: let every save in flight finish its files (no collective here)."""
    for handle in list(_pending):
        handle.join()


# When the interpreter exits, Python first runs threading's own exit hooks (newest first),
# one of which makes every ThreadPoolExecutor refuse work, and zarr's writes and our
# fsyncs run on such pools; only then the atexit handlers.  So the join is hooked in there,
# after concurrent.futures (imported by store), where the writes can still finish; atexit
# where that hook does not exist (before Python 3.9).
getattr(threading, "_register_atexit", atexit.register)(join_pending)
