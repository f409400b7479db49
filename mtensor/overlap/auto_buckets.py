"""``bucket_cap_mb="auto"``: bucket boundaries chosen from the compute times and the cost model.

A fixed cap is a guess: on the 1 Gbit test bed a 25 MB cap left 24 MiB of gradients in one
bucket that started after nearly all the backward pass and hid ~20%, where one bucket per
gradient hid ~50%.  Here each chain of collectives that may share a bucket (same key, see
``bucketing``) is split where the step waits least.  The model is a link that serves buckets
in the order they start (the order every rank starts them): a bucket can start when its last
member's input exists and moves after everything started before it, so

    finish(bucket a..b) = max(ready(b), finish(bucket before)) + cost(a..b)
    late(bucket a..b)   = finish(a..b) - needed(a..b)

where ``ready(b)`` is the compute time before member b (timed while tracing, agreed across
ranks), ``needed`` the compute time before the first node that reads a member's result (the
optimizer, for gradients; the next layer, for a parameter's gather) and ``cost`` the cost
model's alpha + bytes / beta plus the CPU cost of the start and, for a fused bucket, of
packing.  The split minimises the largest lateness, which is what the step waits when the
reads come in bucket order; for gradients, all read at the end, that is the last bucket's
finish.  A dynamic program over the chain with the Pareto front of (finish, lateness) per
prefix finds it exactly (brute force agrees in the unit tests): small buckets where compute
is left to hide them, fused ones where the per-call cost dominates (tiny tensors) or
nothing is left to overlap.  On a link that moves nothing behind compute (a rate of 0:
shared memory, the default model) every bucket moves once the step waits for it, so all
are taken as made and needed at once and the split minimises the summed cost: tiny tensors
fuse, large ones skip the packing copy.
Members that cannot share a bucket (a reader or an in-place effect between them) are never
joined, exactly as with a fixed cap.
"""
from __future__ import annotations

from itertools import accumulate
from typing import Dict, List, Sequence, Tuple

from ..cost.model import bus_bytes
from ..cost.timeline import bucket_cost
from ..step_kinds import FUSIBLE, STEP_KINDS
from .bucketing import bucket_key, first_reads


def compute_clock(nodes, seconds: Sequence[float]) -> List[float]:
    """Per node, the compute time that runs before it (collectives take no compute), and
    last the step's whole compute time."""
    out, now = [], 0.0
    for node, s in zip(nodes, seconds):
        out.append(now)
        if node.kind != "collective":
            now += s
    return out + [now]


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


def feasible_starts(nodes, members: Sequence[int], reads: Sequence[int]) -> List[int]:
    """Per member b, the first member a such that members a..b may share one bucket: nothing
    between them reads a member's result (``reads``: ``bucketing.first_reads``) or is an
    in-place effect."""
    effects_before = list(accumulate((n.kind == "effect" for n in nodes), initial=0))
    read_at = [reads[m] for m in members]
    out = []
    for b, idx in enumerate(members):
        a, soonest = b, len(nodes)
        while a > 0:
            soonest = min(soonest, read_at[a - 1])
            if soonest <= idx or effects_before[idx] > effects_before[members[a - 1]]:
                break
            a -= 1
        out.append(a)
    return out


class _Chain:
    """One chain's members, with prefix sums of their bytes to price any run of them, when
    each can move and when the step first needs each."""

    def __init__(self, nodes, clock, members, model, reads):
        first = nodes[members[0]].fn
        self.kind, self.mesh_dim, self.n, self.model = first.kind, first.mesh_dim, first.n, model
        self.bus = list(accumulate((_bus_bytes(nodes[m].fn) for m in members), initial=0))
        self.send = list(accumulate((nodes[m].fn.bucket_bytes for m in members), initial=0))
        behind_compute = model.rate(self.mesh_dim) > 0
        # a link that moves nothing behind compute moves every bucket once the step waits
        # for it: as if all were made at once and needed at once
        self.ready = [clock[m] if behind_compute else 0.0 for m in members]
        self.needed = [clock[reads[m]] if behind_compute else 0.0 for m in members]

    def cost(self, a: int, b: int) -> float:
        """Seconds a bucket of members a..b holds the link, plus the CPU cost to start it."""
        c = bucket_cost(self.kind, self.mesh_dim, self.n, self.bus[b + 1] - self.bus[a],
                        self.send[b + 1] - self.send[a], b > a, self.model)
        return c.seconds + c.start_s


def _bus_bytes(c) -> int:
    """The bytes a rank moves for collective ``c``, from its largest block (the same on every
    rank: the ranks must split alike, and uneven shards make the local sizes differ)."""
    full = c.bucket_bytes * (c.n if STEP_KINDS[c.kind].sized_after else 1)
    return bus_bytes(c.kind, c.n, full)


def lateness(nodes, clock, groups: Sequence[Sequence[int]], model) -> float:
    """How late the latest of ``groups`` (consecutive buckets of one chain, as node indices)
    arrives against the compute time of its first reader: the objective ``split_chain``
    minimises, written out plainly."""
    members = [m for g in groups for m in g]
    chain = _Chain(nodes, clock, members, model, first_reads(nodes))
    done, late, a = 0.0, float("-inf"), 0
    for g in groups:
        b = a + len(g) - 1
        done = max(chain.ready[b], done) + chain.cost(a, b)
        late = max(late, done - min(chain.needed[a:b + 1]))
        a = b + 1
    return late


def split_chain(nodes, clock, members: Sequence[int], model,
                reads: Sequence[int]) -> List[Tuple[int, ...]]:
    """The split of one chain into buckets whose latest one is least late (ties: the one
    that finishes earlier, then, of the splits the fronts keep, fewer buckets).  A prefix's
    state is (finish, lateness so far); the Pareto front of those per prefix is exact, since
    a later bucket's lateness only grows with both.  A prefix that finishes later at the
    same lateness is dropped even with fewer buckets (a front over the count as well costs
    several times the time on hundreds of gradients).  Fronts are kept to ``FRONT`` entries
    (the least late)."""
    starts = feasible_starts(nodes, members, reads)
    chain = _Chain(nodes, clock, members, model, reads)
    fronts = [[(0.0, float("-inf"), 0, None)]]     # (finish, late, buckets, (a, entry))
    for b in range(len(members)):
        options = []
        for a in range(starts[b], b + 1):
            cost, needed = chain.cost(a, b), min(chain.needed[a:b + 1])
            for i, (finish, late, count, _) in enumerate(fronts[a]):
                done = max(chain.ready[b], finish) + cost
                options.append((done, max(late, done - needed), count + 1, (a, i)))
        fronts.append(_pareto(options))
    i = 0                     # a front is sorted: least late, then earliest finish, first
    groups, b = [], len(members)
    while b > 0:
        a, next_i = fronts[b][i][3]
        groups.append(tuple(members[a:b]))
        b, i = a, next_i
    return groups[::-1]


FRONT = 16


def _key(entry, *fields):
    return tuple(round(entry[f], 12) for f in fields)      # a count rounds to itself


def _pareto(options):
    """The entries no other beats on both finish and lateness (ties: fewer buckets)."""
    kept, least_late = [], float("inf")
    for entry in sorted(options, key=lambda e: _key(e, 0, 1, 2)):
        if round(entry[1], 12) < least_late:
            kept.append(entry)
            least_late = round(entry[1], 12)
    return sorted(kept, key=lambda e: _key(e, 1, 0, 2))[:FRONT]


def choose_buckets(nodes, seconds: Sequence[float], model) -> List[Tuple[int, ...]]:
    """Buckets of collective node indices, in the order they run (as ``plan_buckets``)."""
    clock, reads = compute_clock(nodes, seconds), first_reads(nodes)
    keyed, alone = chains(nodes)
    buckets = [(i,) for i in alone]
    for members in keyed.values():
        buckets += split_chain(nodes, clock, members, model, reads)
    return sorted(buckets, key=lambda b: b[-1])
