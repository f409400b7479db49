"""Pytrees: nested dicts, lists and tuples of leaves (parameters, gradients, arguments)."""
from __future__ import annotations


def flatten(tree):
    """Leaves of nested dicts (in sorted key order), lists and tuples, and a function that
    rebuilds the tree from new leaves."""
    if isinstance(tree, dict):
        keys = sorted(tree)
        parts = [flatten(tree[k]) for k in keys]
    elif isinstance(tree, (list, tuple)):
        keys, parts = None, [flatten(v) for v in tree]
    else:
        return [tree], lambda leaves: leaves[0]
    sizes = [len(leaves) for leaves, _ in parts]

    def rebuild(leaves):
        out, at = [], 0
        for (_, build), n in zip(parts, sizes):
            out.append(build(leaves[at:at + n]))
            at += n
        if keys is not None:
            return dict(zip(keys, out))
        return type(tree)(out)
    return [leaf for leaves, _ in parts for leaf in leaves], rebuild


def structure(tree, leaf_key):
    """A hashable description of the tree with each leaf replaced by ``leaf_key(leaf)``."""
    if isinstance(tree, dict):
        return dict, tuple((k, structure(tree[k], leaf_key)) for k in sorted(tree))
    if isinstance(tree, (list, tuple)):
        return type(tree), tuple(structure(v, leaf_key) for v in tree)
    return leaf_key(tree)
