"""The Communicator protocol: what every backend of a mesh dim provides.

A backend is one file with a class that satisfies this protocol, plus one line in
``comm.BACKENDS``.  The five collective kinds of the step table (``steps.STEP_KINDS``) are
methods with one uniform signature, ``(send, recv, counts, op)``, so the executors call
``getattr(communicator, kind)`` and the replay ``communicator.start(kind, ...)``:

- ``counts``: None for ``all_reduce``; the element count of each rank's piece for
  ``all_gather`` and ``reduce_scatter`` (equal counts may take a faster path); the pair
  ``(send_counts, recv_counts)`` for ``all_to_all`` (an ``EvenExchange`` pair when every
  rank of the group sends and receives one equal count to and from each: ``MPI_Alltoall``
  serves it, a plain pair takes the v-variant), and for ``halo``, where each holds two
  counts: (to/from the previous rank, to/from the next rank) of the mesh dim, a ring (the
  previous of rank 0 is the last rank; a count of 0 sends nothing); ``send`` and ``recv``
  hold the two pieces end to end, the previous rank's first; for the point-to-point kinds
  ``send`` and ``recv``, the pair ``(peer, tag)``: the other rank's index on the mesh dim
  and the message's tag (``send`` reads ``send`` only, ``recv`` fills ``recv`` only, the
  other buffer is unused and may be None);
- ``op``: a reduce op name of ``placement.REDUCE_OPS`` for the kinds that reduce, else None.

Buffers are C-contiguous arrays of the mesh's device; ``send is recv`` asks for an in-place
all-reduce.  Requests from ``start`` are completed by the same backend's ``wait`` and
``test_all`` (the replay polls every request in flight with one ``test_all``).  A started
``send`` must not wait for its receiver to post (MPI's ``Isend``): ranks that exchange
messages both ways send before they receive.
"""
from __future__ import annotations

from typing import Any, List, Optional, Protocol, Sequence


class Communicator(Protocol):
    size: int
    rank: int
    raw: Any            # the library's own communicator (an mpi4py Comm for MPI backends)

    def all_reduce(self, send, recv, counts: None, op: str) -> None: ...

    def all_gather(self, send, recv, counts: Sequence[int], op: None) -> None: ...

    def reduce_scatter(self, send, recv, counts: Sequence[int], op: str) -> None: ...

    def all_to_all(self, send, recv, counts, op: None) -> None: ...

    def halo(self, send, recv, counts, op: None) -> None: ...

    def send(self, send, recv: None, counts, op: None) -> None: ...

    def recv(self, send: None, recv, counts, op: None) -> None: ...

    def start(self, kind: str, send, recv, counts, op: Optional[str]) -> Any: ...

    def wait(self, request) -> None: ...

    def test_all(self, requests: List[Any]) -> bool: ...

    def broadcast(self, buf, root: int) -> None: ...

    def scatter(self, send, recv, counts: Sequence[int], root: int) -> None: ...

    def sum_ints(self, values) -> Any: ...

    def allgather_object(self, obj) -> list: ...

    def barrier(self) -> None: ...


class EvenExchange(tuple):
    """``(send_counts, recv_counts)`` of an all-to-all that the planner knows every rank of
    the group makes with one count per peer, the same on every rank (decided from global
    shapes, so alike everywhere: ``MPI_Alltoall`` on some ranks against ``MPI_Alltoallv`` on
    others would hang).  Data-dependent exchanges pass a plain pair."""

    __slots__ = ()
