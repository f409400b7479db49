"""Where a mesh's ranks sit: which node each one is on, the order that keeps the innermost
mesh dims inside a node, and whether each mesh dim's groups stay inside one node.

Pure arithmetic on node labels (no MPI): ``device_mesh.py`` gathers the labels (an MPI
``COMM_TYPE_SHARED`` split and the hostnames, agreed over the communicator) and applies the
order.  The classic failure this exists for: a tensor-parallel dim, whose all-reduces are in
every layer, laid across the slow inter-node link while the data-parallel dim, reduced once
per step, stays inside a node.
"""
from __future__ import annotations

import itertools
import math
from typing import Sequence, Tuple


def node_order(nodes: Sequence) -> Tuple[int, ...]:
    """Ranks sorted by node (nodes in order of first appearance), rank order within a node:
    laid row-major over the mesh in this order, consecutive positions share a node, so the
    innermost mesh dims stay inside one when their sizes divide the node's."""
    first = {}
    for label in nodes:
        first.setdefault(label, len(first))
    return tuple(sorted(range(len(nodes)), key=lambda r: (first[nodes[r]], r)))


def intra_node(shape: Sequence[int], nodes_by_position: Sequence) -> Tuple[bool, ...]:
    """Per mesh dim: whether every group along it (the ranks that differ only in that
    coordinate) sits on one node.  ``nodes_by_position``: the node of each mesh position,
    row-major."""
    out = []
    for d in range(len(shape)):
        stride = math.prod(shape[d + 1:])
        inside = True
        for position, label in enumerate(nodes_by_position):
            if (position // stride) % shape[d]:        # compare each group with its first
                continue
            group = [nodes_by_position[position + k * stride] for k in range(shape[d])]
            inside = inside and len(set(group)) == 1
        out.append(inside)
    return tuple(out)


def group_nodes(shape, nodes_by_position, coordinate, dim: int) -> Tuple:
    """The node of each rank of this rank's group along mesh dim ``dim``, in group order."""
    stride = math.prod(shape[dim + 1:])
    first = sum(c * math.prod(shape[d + 1:]) for d, c in enumerate(coordinate) if d != dim)
    return tuple(nodes_by_position[first + k * stride] for k in range(shape[dim]))


def sub_nodes(shape, nodes_by_position, coordinate, dims) -> Tuple:
    """The node of each position of this rank's sub-mesh over mesh dims ``dims`` (the other
    coordinates fixed at this rank's), row-major over the sub-mesh."""
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    base = sum(c * strides[d] for d, c in enumerate(coordinate) if d not in dims)
    out = []
    for index in itertools.product(*(range(shape[d]) for d in dims)):
        out.append(nodes_by_position[base + sum(i * strides[d] for i, d in zip(index, dims))])
    return tuple(out)


def even_split(group) -> int:
    """Ranks per node of a group spread evenly over two or more nodes, else 0."""
    per_node = {label: group.count(label) for label in group}
    counts = set(per_node.values())
    return counts.pop() if len(per_node) > 1 and len(counts) == 1 else 0


def uniform_split(shape: Sequence[int], nodes_by_position: Sequence, dim: int) -> Tuple[int, ...]:
    """(ranks per node, nodes) when every group along mesh dim ``dim`` is spread evenly over
    the same number of nodes, with the same two or more ranks on each; else ().  Only such a
    dim is priced in two levels: every rank must price it alike, or their plans differ."""
    stride = math.prod(shape[dim + 1:])
    splits = set()
    for position in range(len(nodes_by_position)):
        if (position // stride) % shape[dim]:        # each group once, from its first rank
            continue
        group = [nodes_by_position[position + k * stride] for k in range(shape[dim])]
        per_node = even_split(group)
        splits.add((per_node, len(group) // per_node) if per_node >= 2 else ())
    return splits.pop() if len(splits) == 1 else ()


def describe(names, intra: Sequence[bool], nnodes: int) -> str:
    """``repr(mesh)``'s words for the layout: which mesh dims stay inside a node."""
    if nnodes <= 1:
        return ""
    labels = [str(n) for n in names] if names else [f"dim {d}" for d in range(len(intra))]
    inside = [n for n, i in zip(labels, intra) if i]
    across = [n for n, i in zip(labels, intra) if not i]
    words = f"{nnodes} nodes"
    if inside:
        words += f", {'/'.join(inside)} inside a node"
    if across:
        words += f", {'/'.join(across)} across nodes"
    return words
