"""Lockstep failures: a test that fails on one rank fails, by name, on every rank, within seconds.

Under mpiexec every rank runs its own pytest.  A test that raises on one rank while the others
go on into a collective would leave them waiting, and pytest's capture would swallow whatever
the collective timeout printed.  This plugin makes the ranks agree before anything else
communicates:

- after each test's call (or its setup, when that did not pass) and after its teardown: one
  nonblocking all-reduce of a failed flag per rank, on a communicator of its own.  When some
  ranks failed, the others' reports fail too, naming those ranks and their exception.
- A rank that raised and whose peers have not ended the test within ``MTENSOR_LOCKSTEP_TIMEOUT``
  seconds (default 5: they wait in a collective it left) prints the test and its exception and
  aborts the job.  A rank that passed keeps waiting; past ``MTENSOR_TIMEOUT`` it aborts too,
  naming the test.
- Before any test runs the ranks agree on the test ids they collected.
- mtensor's collective timeout names the running test and prints to the terminal.

Registered by tests/mpi/conftest.py; ``-p lockstep`` (with tests/mpi on the path) elsewhere.
Cost: two agreements per test, about 0.5 ms each at 4 ranks on 2 shared cores.
"""
import hashlib
import os
import time

import numpy as np
import pytest
from mpi4py import MPI

from mtensor.comm import guard
from mtensor.comm.abort import abort_job

PATIENCE_S = float(os.environ.get("MTENSOR_LOCKSTEP_TIMEOUT", "5"))


def install(config) -> None:
    config.pluginmanager.register(Lockstep(), "lockstep-agreement")


def pytest_configure(config):
    install(config)


def headline(report) -> str:
    """The first line of what ended ``report``'s phase (its exception, or a skip's reason)."""
    longrepr = report.longrepr
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        text = crash.message
    elif isinstance(longrepr, tuple):
        text = longrepr[2]
    else:
        text = str(longrepr or "")
    return (text.strip().splitlines() or [report.outcome])[0]


def by_text(ranks, texts) -> str:
    """``texts[r]`` of each rank in ``ranks``, ranks that say the same grouped."""
    groups = {}
    for r in ranks:
        groups.setdefault(texts[r], []).append(r)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"rank(s) {group}: {text}" for text, group in groups.items())


class Lockstep:
    """The plugin: one per rank, registered as ``lockstep-agreement`` (``-p
    no:lockstep-agreement`` turns it off)."""

    def __init__(self):
        world = MPI.COMM_WORLD
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.comm = world.Dup() if self.size > 1 else None
        # pytest captures fd 2 while a test runs; this copy of it reaches the terminal
        self.err = os.fdopen(os.dup(2), "w", buffering=1)
        self.problem = None

    def pytest_runtest_logstart(self, nodeid):
        guard.set_context(f"test {nodeid}", self.err)

    def pytest_runtest_logfinish(self, nodeid):
        guard.set_context("", self.err)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        if self.comm is None or (call.when == "setup" and report.passed):
            return report
        flags = np.zeros(self.size, np.int64)
        flags[self.rank] = report.failed
        left = call.excinfo is not None
        status = f"{report.outcome.upper()}: {headline(report)}" if left else None
        flags = self._wait(flags, MPI.SUM, item.nodeid, status)
        failed = np.flatnonzero(flags).tolist()
        if not failed or len(failed) == self.size:
            return report
        phase = "" if call.when == "call" else f"in {call.when}: "
        texts = self.comm.allgather(phase + headline(report) if report.failed else None)
        if report.failed:
            report.sections.append(("lockstep", f"failed on rank(s) {failed} of {self.size}"))
            return report
        try:
            pytest.fail(f"rank(s) {failed} failed this test: {by_text(failed, texts)}",
                        pytrace=False)
        except pytest.fail.Exception:
            report.longrepr = item.repr_failure(pytest.ExceptionInfo.from_current())
        report.outcome = "failed"
        if hasattr(report, "wasxfail"):
            del report.wasxfail
        return report

    def pytest_collection_finish(self, session):
        if self.comm is None:
            return
        ids = "\n".join(item.nodeid for item in session.items).encode()
        digest = int.from_bytes(hashlib.blake2b(ids, digest_size=7).digest(), "little")
        errors = session.testsfailed
        seen = self._wait(np.array([digest, -digest, errors, -errors], np.int64), MPI.MAX,
                          "collection")
        if seen[0] == -seen[1] and seen[2] == -seen[3]:
            return
        views = self.comm.allgather((len(session.items), errors, f"{digest:014x}"))
        groups = {}
        for r, view in enumerate(views):
            groups.setdefault(view, []).append(r)
        self.problem = "the ranks collected different tests: " + "; ".join(
            f"rank(s) {ranks}: {n} test(s) (ids {h}), {e} collection error(s)"
            for (n, e, h), ranks in groups.items())

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        if self.problem:
            raise session.Interrupted(self.problem)

    def _wait(self, mine, op, what, status=None):
        """All-reduce ``mine``; a rank that left ``what`` with ``status`` gives up after
        PATIENCE_S, any rank after the collective timeout.  It sleeps between polls, briefly
        at first: ranks on shared cores then hand each other the CPU (a blocking all-reduce
        spins, and costs some ten times more when ranks outnumber cores)."""
        result = np.empty_like(mine)
        request = self.comm.Iallreduce(mine, result, op)
        start, pause, noticed = time.monotonic(), 5e-5, False
        while not request.Test():
            waited = time.monotonic() - start
            if status is not None and waited > PATIENCE_S:
                self._abort(f"{what} {status}; the other ranks did not reach its end within "
                            f"{PATIENCE_S:g} s (MTENSOR_LOCKSTEP_TIMEOUT): aborting the job")
            if guard.state.timeout is not None and waited > guard.state.timeout:
                self._abort(f"{what}: ended here, but the other ranks did not end it within "
                            f"{guard.state.timeout:g} s (MTENSOR_TIMEOUT): aborting the job")
            if not noticed and waited > 6 * PATIENCE_S:
                noticed = True
                self.err.write(f"\n[rank {self.rank}] {what}: ended here; still waiting for "
                               f"the other ranks to end it\n")
            time.sleep(pause)
            if waited > 0.05:
                pause = min(2 * pause, 1e-3)
        return result

    def _abort(self, line):
        self.err.write(f"\n[rank {self.rank}] {line}\n")
        self.err.flush()
        abort_job(1)
