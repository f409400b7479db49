"""``bucket_cap_mb="auto"``'s choice (pure: no MPI): on small chains the dynamic program's
split is the best of every feasible split by brute force, and on the shapes that matter it
makes the buckets the network test bed showed to be right."""
from itertools import combinations
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings, strategies as st

from mtensor.overlap.auto_buckets import (choose_buckets, compute_clock, feasible_starts,
                                          lateness, split_chain)
from mtensor.overlap.bucketing import first_reads
from mtensor.redistribute.cost import CostModel
from mtensor.trace_compile.graph import Node

MESH = object()
MIB = 1 << 20
BED = CostModel(alpha=12e-6, beta=119.5e6, overlap_rate=0.4)   # the 1 Gbit test bed
SHM = CostModel()                                                 # the default: no overlap


def coll(nbytes):
    return SimpleNamespace(kind="all_reduce", mesh=MESH, mesh_dim=0, dtype=np.dtype("f4"),
                           op="sum", n=2, nbytes=nbytes, bucket_bytes=nbytes)


class G:
    def __init__(self):
        self.nodes, self.seconds, self.next = [], [], 1

    def _out(self):
        self.next += 1
        return self.next - 1

    def compute(self, seconds, *ins):
        out = self._out()
        self.nodes.append(Node("compute", "f", None, ins or (0,), (out,), seconds))
        self.seconds.append(seconds)
        return out

    def collective(self, src, nbytes):
        out = self._out()
        self.nodes.append(Node("collective", "all_reduce", coll(nbytes), (src,), (out,), 0.0))
        self.seconds.append(0.0)
        return out

    def effect(self, *ins):
        self.nodes.append(Node("effect", "sgd", None, ins, (), 1e-4))
        self.seconds.append(1e-4)


def backward(sizes, gap_s):
    """A data-parallel backward pass: each gradient after ``gap_s`` of compute, then
    all-reduced; the optimizer reads them all at the end."""
    g = G()
    outs = [g.collective(g.compute(gap_s), n) for n in sizes]
    for r in outs:
        g.effect(r)
    return g


def buckets_bytes(g, model):
    return [sum(g.nodes[m].fn.nbytes for m in b) // MIB
            for b in choose_buckets(g.nodes, g.seconds, model)]


def test_on_the_bed_each_gradient_is_its_own_bucket():
    """8 x 4 MiB, 25 ms of backward compute per layer: the link is the bottleneck, so every
    gradient should leave as soon as it exists (the 25 MB cap's 4+24+4 hid ~20%)."""
    assert buckets_bytes(backward([4 * MIB] * 8, 25e-3), BED) == [4] * 8


def test_small_gradients_ready_together_share_one_bucket_and_large_ones_do_not():
    """Ready at once, a bucket saves a call's alpha per member and costs a packing copy."""
    for nbytes, want in ((16 << 10, 1), (4 * MIB, 4)):
        g = G()
        grads = [g.compute(1e-3) for _ in range(4)]
        outs = [g.collective(s, nbytes) for s in grads]
        g.compute(1e-3, *outs)
        assert len(choose_buckets(g.nodes, g.seconds, BED)) == want, nbytes


def test_tiny_gradients_fuse_where_the_call_costs_more_than_the_bytes():
    sizes = [4096] * 100
    for model in (BED, SHM):
        chosen = choose_buckets(*(lambda g: (g.nodes, g.seconds))(backward(sizes, 2e-6)), model)
        assert len(chosen) < 10, (model, chosen)


def test_without_overlap_large_gradients_skip_the_packing_copy():
    """Shared memory (rate 0): nothing moves behind compute, so fusing 4 MiB gradients
    only adds the pack and unpack copies."""
    assert buckets_bytes(backward([4 * MIB] * 8, 25e-3), SHM) == [4] * 8


def test_parameter_gathers_needed_layer_by_layer_leave_one_by_one():
    """FSDP-style gathers, all ready at the start and each needed by its layer: one fused
    gather would make the first layer wait for every parameter."""
    g = G()
    outs = [g.collective(0, 4 * MIB) for _ in range(4)]
    for r in outs:
        g.compute(25e-3, r)
    assert len(choose_buckets(g.nodes, g.seconds, BED)) == 4


def test_a_reader_in_between_keeps_collectives_apart():
    g = G()
    a = g.collective(g.compute(1e-3), 4096)
    b = g.collective(g.compute(1e-3, a), 4096)     # its input needs a's result
    g.compute(1e-3, b)
    assert choose_buckets(g.nodes, g.seconds, SHM) == [(1,), (3,)]


def _splits(members, starts):
    """Every split of ``members`` into consecutive groups that ``starts`` allows."""
    m = len(members)
    for k in range(m):
        for cuts in combinations(range(1, m), k):
            bounds = [0, *cuts, m]
            groups = [members[a:b] for a, b in zip(bounds, bounds[1:])]
            if all(bounds[i] >= starts[bounds[i + 1] - 1] for i in range(len(groups))):
                yield groups


@st.composite
def chains(draw):
    g = G()
    outs = []
    for _ in range(draw(st.integers(1, 7))):
        src = g.compute(draw(st.sampled_from([0.0, 1e-5, 1e-3, 2e-2])))
        if outs and draw(st.integers(0, 4)) == 0:
            g.compute(1e-4, outs[-1])          # a reader in between
        if draw(st.integers(0, 6)) == 0:
            g.effect(src)
        outs.append(g.collective(src, draw(st.sampled_from([64, 4096, MIB, 4 * MIB]))))
    for r in draw(st.permutations(outs)):          # results needed at different times
        g.compute(draw(st.sampled_from([0.0, 1e-3, 2e-2])), r)
    model = CostModel(alpha=draw(st.sampled_from([5e-6, 1e-3])),
                      beta=draw(st.sampled_from([1e8, 4e9])),
                      overlap_rate=draw(st.sampled_from([0.0, 0.4, 1.0])))
    return g, model


@settings(max_examples=300, deadline=None)
@given(chains())
def test_the_split_is_the_best_feasible_one_by_brute_force(case):
    g, model = case
    clock = compute_clock(g.nodes, g.seconds)
    members = [i for i, n in enumerate(g.nodes) if n.kind == "collective"]
    reads = first_reads(g.nodes)
    starts = feasible_starts(g.nodes, members, reads)
    chosen = split_chain(g.nodes, clock, members, model, reads)
    assert [list(b) for b in chosen] in [[list(x) for x in s] for s in _splits(members, starts)]
    best = min(lateness(g.nodes, clock, s, model) for s in _splits(members, starts))
    assert lateness(g.nodes, clock, chosen, model) <= best + 1e-9 * abs(best) + 1e-15
