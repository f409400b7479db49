"""Which node each rank of a new mesh sits on, and what follows from it: the warning for a
heavy mesh dim that spans nodes, and the two-level collectives of a dim spread over nodes.

``mesh.py`` builds the mesh; the arithmetic on node labels is ``topology.py``'s.
"""
from __future__ import annotations

import os
import warnings

from . import topology
from .redistribute.cost import for_links, get_cost_model, hierarchical_crossover

# MTENSOR_NODE_OF_RANK="0,0,1,1": the node of each rank of the communicator, instead of
# asking MPI (tests and the two-node bed tell ranks they sit on other nodes)
FAKE_NODES = "MTENSOR_NODE_OF_RANK"


def node_labels(comm) -> tuple:
    """The node of each rank of ``comm`` (the same tuple on every rank): its hostname, from
    an MPI ``COMM_TYPE_SHARED`` split (a host with several shared-memory domains counts each)."""
    fake = os.environ.get(FAKE_NODES)
    if fake:
        labels = tuple(f"node{v.strip()}" for v in fake.split(","))
        if len(labels) != comm.size:
            raise ValueError(f"init_device_mesh: {FAKE_NODES}={fake!r} names {len(labels)} "
                             f"ranks but the communicator has {comm.size}; give one node per "
                             f"rank")
        return labels
    from mpi4py import MPI
    shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
    leader = shared.allreduce(comm.rank, op=MPI.MIN)
    shared.Free()
    seen = comm.allgather((MPI.Get_processor_name(), leader))
    hosts = {}
    for host, lead in seen:
        hosts.setdefault(host, set()).add(lead)
    return tuple(host if len(hosts[host]) == 1 else f"{host}#{lead}" for host, lead in seen)


_warned: set = set()


def warn_heavy(mesh, heavy) -> None:
    """Say once (rank 0) when a heavy mesh dim (``tp`` by default) spans nodes."""
    names = mesh.mesh_dim_names or ()
    for name, inside in zip(names, mesh.intra_node):
        if name in heavy and not inside and name not in _warned and len(set(mesh.nodes)) > 1:
            _warned.add(name)
            if mesh.comm.rank == 0:
                warnings.warn(
                    f"init_device_mesh: mesh dim {name!r} of {mesh!r} spans nodes: its "
                    f"collectives (every layer's, for tensor parallelism) cross the slow "
                    f"inter-node link; make it the innermost mesh dim with a size that "
                    f"divides the ranks per node (layout='node' does the rest), or pass "
                    f"heavy=() if that is meant", stacklevel=4)


def two_level(name, raw, device_type, shape, nodes, coordinate, dim):
    """(backend name, Communicator) with two-level collectives (``comm.hierarchical``, where
    the cost model says they win) for a host mesh dim spread evenly over several nodes with
    several ranks on each; None for any other dim."""
    group = topology.group_nodes(shape, nodes, coordinate, dim)
    per_node = topology.even_split(group)
    if name != "mpi" or device_type != "cpu" or per_node < 2:
        return None
    from .comm.hierarchical import Hierarchical
    model = for_links(get_cost_model(), topology.intra_node(shape, nodes))
    crossovers = {kind: hierarchical_crossover(model, dim, per_node, len(group) // per_node,
                                               kind)
                  for kind in ("all_reduce", "all_gather", "reduce_scatter")}
    return Hierarchical.name, Hierarchical(raw, group, crossovers)
