"""What follows from the nodes a new mesh's ranks sit on: the warning for a heavy mesh dim
that spans nodes, and the two-level collectives of a dim spread over nodes.

``device_mesh.py`` builds the mesh and asks MPI for the nodes; the arithmetic on node labels is
``topology.py``'s.
"""
from __future__ import annotations

import warnings

from ..cost.model import for_links, get_cost_model, hierarchical_crossover
from . import topology

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
    from ..comm.hierarchical import Hierarchical
    model = for_links(get_cost_model(), topology.intra_node(shape, nodes))
    crossovers = {kind: hierarchical_crossover(model, dim, per_node, len(group) // per_node,
                                               kind)
                  for kind in ("all_reduce", "all_gather", "reduce_scatter")}
    return Hierarchical.name, Hierarchical(raw, group, crossovers)
