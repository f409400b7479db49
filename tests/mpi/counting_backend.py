"""A Communicator backend for the tests: counts every call, then delegates to MPIHost.
It is all a new backend needs: one class with the protocol's methods, registered once."""
from collections import Counter

from mtensor.comm.mpi_host import MPIHost

CALLS = Counter()


class Counting(MPIHost):
    def all_reduce(self, send, recv, counts, op):
        CALLS["all_reduce"] += 1
        super().all_reduce(send, recv, counts, op)

    def all_gather(self, send, recv, counts, op):
        CALLS["all_gather"] += 1
        super().all_gather(send, recv, counts, op)

    def reduce_scatter(self, send, recv, counts, op):
        CALLS["reduce_scatter"] += 1
        super().reduce_scatter(send, recv, counts, op)

    def all_to_all(self, send, recv, counts, op):
        CALLS["all_to_all"] += 1
        super().all_to_all(send, recv, counts, op)

    def start(self, kind, send, recv, counts, op):
        CALLS[f"start {kind}"] += 1
        return super().start(kind, send, recv, counts, op)
