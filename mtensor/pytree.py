"""Pytrees: nested containers of leaves (parameters, gradients, arguments), through optree.

optree, not a hand-written walk, so that namedtuples, ``OrderedDict``, ``defaultdict``,
``deque``, dicts with keys of mixed types and user containers all flatten and rebuild.

Decisions every caller relies on:

* ``None`` is a leaf (``none_is_leaf=True``).  Argument lists use ``None`` for "no value"
  (``value_and_grad`` returns it as the gradient of a non-DTensor leaf), so it must keep
  its place among the leaves, and ``mt.compile`` must see it in a call's signature.
* Leaf order of a ``dict`` (or ``defaultdict``) follows its sorted keys; keys of mixed types
  that cannot be compared (``{1: a, "x": b}``) sort by their type's qualified name, then by
  key; keys that still cannot be compared keep insertion order (and two such dicts built
  in different orders then have different structures).  ``OrderedDict`` and ``deque`` keep
  insertion order.  ``rebuild`` restores the original key order of every dict.
* Containers are looked up in optree's global registry and in the ``"mtensor"`` namespace.
  To have mtensor walk into a container class of your own, register it there::

      optree.register_pytree_node(
          Pair,
          lambda p: ((p.left, p.right), None, None),   # children, metadata, entries
          lambda metadata, children: Pair(*children),
          namespace="mtensor",
      )

  The metadata becomes part of :func:`structure`, so it must be hashable.
"""
from __future__ import annotations

import optree

NAMESPACE = "mtensor"


def flatten(tree):
    """The leaves of ``tree`` and a function that rebuilds a tree of the same structure from
    as many new leaves."""
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=True, namespace=NAMESPACE)
    return leaves, spec.unflatten


def structure(tree, leaf_key):
    """A hashable description of the tree with each leaf replaced by ``leaf_key(leaf)``: the
    treespec (hashable, compared in C++) and the tuple of leaf keys, cheap enough for every
    compiled call."""
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=True, namespace=NAMESPACE)
    return spec, tuple(leaf_key(leaf) for leaf in leaves)
