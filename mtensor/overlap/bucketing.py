"""Bucketing pass: fuse collectives that share (kind, mesh, mesh dim, dtype, reduce op) into
one call, as DDP does for gradients (a small first bucket, then ``cap``-sized ones) and
XLA's combiner and Inductor's bucketing do in a compiler.

A collective joins the open bucket of its key only if nothing since the bucket's first member
read a member's result: the fused call runs once every member's input exists, so an earlier
reader would wait on a later input.  An in-place effect (an optimizer update) closes every
open bucket, since a member before it and one after it would read different versions.
Sizes are the largest block's (``bucket_bytes``), the same on every rank, and buckets are
ordered by their last member; so every rank forms the same buckets in the same order.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

from ..step_kinds import FUSIBLE


def first_readers(nodes) -> dict:
    """slot -> index of the first node that reads it."""
    readers: dict = {}
    for i, node in enumerate(nodes):
        for s in node.ins:
            readers.setdefault(s, i)
    return readers


def first_reads(nodes) -> List[int]:
    """Per node, the index of the first node that reads one of its results (``len(nodes)``:
    none does)."""
    readers, end = first_readers(nodes), len(nodes)
    return [min((readers.get(s, end) for s in node.outs), default=end) for node in nodes]


def bucket_key(collective):
    c = collective
    return (c.kind, id(c.mesh), c.mesh_dim, c.dtype, c.op)


def plan_buckets(nodes: Sequence, cap_bytes: int, first_cap_bytes: int) -> List[Tuple[int, ...]]:
    """Buckets of collective node indices, in the order they run.  The first bucket made is
    capped at ``first_cap_bytes`` (so communication starts early), the others at ``cap_bytes``."""
    reads = first_reads(nodes)
    open_buckets: dict = {}   # key -> _Open
    done: List[List[int]] = []
    for i, node in enumerate(nodes):
        if node.kind == "effect":          # it may write a member's input: no bucket spans it
            done.extend(b.members for b in open_buckets.values())
            open_buckets.clear()
        if node.kind != "collective":
            continue
        c = node.fn
        read_at = reads[i]
        if c.kind not in FUSIBLE:
            done.append([i])
            continue
        key = bucket_key(c)
        bucket = open_buckets.get(key)
        if bucket is not None and bucket.read_at > i and bucket.nbytes + c.bucket_bytes <= bucket.cap:
            bucket.add(i, c.bucket_bytes, read_at)
            continue
        if bucket is not None:
            done.append(bucket.members)
        first = not done and not open_buckets
        open_buckets[key] = _Open(first_cap_bytes if first else cap_bytes)
        open_buckets[key].add(i, c.bucket_bytes, read_at)
    done.extend(b.members for b in open_buckets.values())
    return sorted((tuple(b) for b in done), key=lambda b: b[-1])


class _Open:
    """A bucket still taking members: their indices, bytes, and the first read of a result."""

    def __init__(self, cap: int):
        self.cap, self.members, self.nbytes, self.read_at = cap, [], 0, 1 << 62

    def add(self, index: int, nbytes: int, read_at: int) -> None:
        self.members.append(index)
        self.nbytes += nbytes
        self.read_at = min(self.read_at, read_at)
