"""``bucket_cap_mb="auto"``: bucket boundaries chosen from the compute times and the cost model.

A fixed cap is a guess: on the 1 Gbit test bed a 25 MB cap left 24 MiB of gradients in one
bucket that started after nearly all the backward pass and hid ~20%, where one bucket per
gradient hid ~50%.  Here each chain of collectives that may share a bucket (same key, see
``bucketing``) is split where it finishes earliest.  The model is a link that serves buckets
in the order they start (the order every rank starts them): a bucket can start when its last
member's input exists and moves after everything started before it, so

    finish(bucket a..b) = max(ready(b), finish(bucket before)) + cost(a..b)

where ``ready(b)`` is the compute time before member b (timed while tracing, agreed across
ranks) and ``cost`` is the cost model's alpha + bytes / beta plus the CPU cost of the start
and, for a fused bucket, of packing.  The earliest finish of the members up to b only
depends on where the last bucket begins, so a dynamic program over the chain finds the best
split exactly (O(m^2) for m members): small buckets where compute is left to hide them,
fused ones where the per-call cost dominates (tiny tensors) or nothing is left to overlap.
On a link that moves nothing behind compute (a window of 0: shared memory, the default
model) every bucket moves at the end whatever its start, so ready times are taken as 0 and
the split minimises the summed cost: tiny tensors fuse, large ones skip the packing copy.
Members that cannot share a bucket (a reader or an in-place effect between them) are never
joined, exactly as with a fixed cap.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Dict, List, Sequence, Tuple

from ..steps import FUSIBLE
from .bucketing import bucket_key, first_readers
from .timeline import bucket_cost


def compute_clock(nodes, seconds: Sequence[float]) -> List[float]:
    """Per node, the compute time that runs before it (collectives take no compute)."""
    out, now = [], 0.0
    for node, s in zip(nodes, seconds):
        out.append(now)
        if node.kind != "collective":
            now += s
    return out


def chains(nodes) -> Tuple[Dict[tuple, List[int]], List[int]]:
    """{bucket key: collective indices in order} for fusible kinds, and the others."""
    keyed: Dict[tuple, List[int]] = {}
    alone = []
    for i, node in enumerate(nodes):
        if node.kind != "collective":
            continue
        if node.fn.kind in FUSIBLE:
            keyed.setdefault(bucket_key(node.fn), []).append(i)
        else:
            alone.append(i)
    return keyed, alone


def feasible_starts(nodes, members: Sequence[int]) -> List[int]:
    """Per member b, the first member a such that members a..b may share one bucket: nothing
    between them reads a member's result or is an in-place effect."""
    readers = first_readers(nodes)
    end = len(nodes)
    effects_before = list(accumulate((n.kind == "effect" for n in nodes), initial=0))
    read_at = [min((readers.get(s, end) for s in nodes[m].outs), default=end) for m in members]
    out = []
    for b, idx in enumerate(members):
        a, soonest = b, end
        while a > 0:
            soonest = min(soonest, read_at[a - 1])
            if soonest <= idx or effects_before[idx] > effects_before[members[a - 1]]:
                break
            a -= 1
        out.append(a)
    return out


class _Chain:
    """One chain's members with prefix sums of their bytes, to price any run of them."""

    def __init__(self, nodes, members, model):
        first = nodes[members[0]].fn
        self.kind, self.mesh_dim, self.n, self.model = first.kind, first.mesh_dim, first.n, model
        self.bus = list(accumulate((nodes[m].fn.nbytes for m in members), initial=0))
        self.send = list(accumulate((nodes[m].fn.bucket_bytes for m in members), initial=0))

    def cost(self, a: int, b: int) -> float:
        """Seconds a bucket of members a..b holds the link, plus the CPU cost to start it."""
        c = bucket_cost(self.kind, self.mesh_dim, self.n, self.bus[b + 1] - self.bus[a],
                        self.send[b + 1] - self.send[a], b > a, self.model)
        return c.seconds + c.start_s


def finish_time(nodes, clock, groups: Sequence[Sequence[int]], model) -> float:
    """When the last of ``groups`` (consecutive buckets of one chain, as node indices)
    leaves the link: the objective ``split_chain`` minimises, written out plainly."""
    done = 0.0
    for g in groups:
        chain = _Chain(nodes, g, model)
        done = max(clock[g[-1]], done) + chain.cost(0, len(g) - 1)
    return done


def split_chain(nodes, clock, members: Sequence[int], model) -> List[Tuple[int, ...]]:
    """The split of one chain into buckets that finishes earliest (ties: fewer buckets)."""
    starts = feasible_starts(nodes, members)
    chain = _Chain(nodes, members, model)
    best = [0.0] * (len(members) + 1)      # best[b + 1]: earliest finish of members 0..b
    cut = [0] * len(members)
    behind_compute = chain.model.window(chain.mesh_dim) > 0
    for b in range(len(members)):
        ready = clock[members[b]] if behind_compute else 0.0
        best[b + 1], cut[b] = min(((max(ready, best[a]) + chain.cost(a, b), a)
                                   for a in range(starts[b], b + 1)),
                                  key=lambda o: (round(o[0], 12), o[1]))
    groups, b = [], len(members) - 1
    while b >= 0:
        groups.append(tuple(members[cut[b]:b + 1]))
        b = cut[b] - 1
    return groups[::-1]


def choose_buckets(nodes, seconds: Sequence[float], model) -> List[Tuple[int, ...]]:
    """Buckets of collective node indices, in the order they run (as ``plan_buckets``)."""
    clock = compute_clock(nodes, seconds)
    keyed, alone = chains(nodes)
    buckets = [(i,) for i in alone]
    for members in keyed.values():
        buckets += split_chain(nodes, clock, members, model)
    return sorted(buckets, key=lambda b: b[-1])
