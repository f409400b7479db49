"""A Communicator backend for the tests: counts every call, then delegates to MPIHost.
It is all a new backend needs: one class with the protocol's methods, registered once."""
from collections import Counter

from mtensor.comm.mpi_host import MPIHost
from mtensor.step_kinds import COLLECTIVES

CALLS = Counter()


def _counted(kind):
    def call(self, send, recv, counts, op):
        CALLS[kind] += 1
        getattr(MPIHost, kind)(self, send, recv, counts, op)
    return call


class Counting(MPIHost):
    def start(self, kind, send, recv, counts, op):
        CALLS[f"start {kind}"] += 1
        return super().start(kind, send, recv, counts, op)


for _kind in COLLECTIVES:      # every collective kind of the step table, point to point too
    setattr(Counting, _kind, _counted(_kind))
