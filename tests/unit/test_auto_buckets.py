"""``bucket_cap_mb="auto"``'s choice (pure: no MPI): on small chains the dynamic program's
split is the best of every feasible split by brute force, and on the shapes that matter it
makes the buckets the network test bed showed to be right."""
from itertools import combinations
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.cost.model import CostModel
from mtensor.overlap.auto_buckets import chains as auto_chains
from mtensor.overlap.auto_buckets import (
    choose_buckets,
    compute_clock,
    feasible_starts,
    lateness,
    split_chain,
)
from mtensor.overlap.bucketing import first_reads
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


@settings(max_examples=100, deadline=None, derandomize=True)
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


# An oracle written out apart from the module: the clock, the first reads, the bytes on the
# bus and the cost of a bucket from the cost model's fields, and the link serving buckets in
# order.  The dynamic program's split must be feasible and the best of every feasible split
# (least late, then earliest finish) by this independent pricing.

BUS_FACTOR = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}


def _clock(nodes, seconds):
    return [sum(s for n, s in zip(nodes[:i], seconds) if n.kind != "collective")
            for i in range(len(nodes) + 1)]


def _first_read(nodes, m):
    return next((j for j in range(m + 1, len(nodes)) if set(nodes[m].outs) & set(nodes[j].ins)),
                len(nodes))


def _feasible(nodes, group):
    """Nothing between a group's first and last member reads a member or is an effect."""
    last = group[-1]
    return (all(_first_read(nodes, m) > last for m in group[:-1])
            and not any(nodes[j].kind == "effect" for j in range(group[0], last)))


def _bus(fn):
    full = fn.bucket_bytes * (fn.n if fn.kind == "all_gather" else 1)
    return BUS_FACTOR[fn.kind] * (fn.n - 1) * full // fn.n


def _price(nodes, seconds, groups, model):
    """(lateness, finish) of consecutive buckets ``groups`` of one chain."""
    clock = _clock(nodes, seconds)
    dim = nodes[groups[0][0]].fn.mesh_dim
    alpha, beta = model.link(dim)
    behind = model.rate(dim) > 0
    done, late = 0.0, float("-inf")
    for grp in groups:
        fns = [nodes[m].fn for m in grp]
        pack = 2 * sum(f.bucket_bytes for f in fns) / model.copy_beta if len(grp) > 1 else 0.0
        cost = alpha + sum(_bus(f) for f in fns) / beta + 20e-6 + pack
        ready = clock[grp[-1]] if behind else 0.0
        needed = min(clock[_first_read(nodes, m)] for m in grp) if behind else 0.0
        done = max(ready, done) + cost
        late = max(late, done - needed)
    return late, done


def _all_splits(members):
    m = len(members)
    for k in range(m):
        for cuts in combinations(range(1, m), k):
            bounds = [0, *cuts, m]
            yield [tuple(members[a:b]) for a, b in zip(bounds, bounds[1:])]


def _assert_best(nodes, seconds, members, chosen, model):
    assert [m for grp in chosen for m in grp] == list(members)
    assert all(_feasible(nodes, grp) for grp in chosen), chosen
    feasible = [s for s in _all_splits(members) if all(_feasible(nodes, grp) for grp in s)]
    best = min(_rank(nodes, seconds, s, model) for s in feasible)
    assert _rank(nodes, seconds, chosen, model) == best, (chosen, best)


def _rank(nodes, seconds, groups, model):
    """Least late first, then earliest finish (to 1e-12 s, as chosen)."""
    late, finish = _price(nodes, seconds, groups, model)
    return round(late, 12), round(finish, 12)


def kinded(kind, nbytes, n, dim):
    return SimpleNamespace(kind=kind, mesh=MESH, mesh_dim=dim, dtype=np.dtype("f4"), op="sum",
                           n=n, nbytes=nbytes, bucket_bytes=nbytes)


@st.composite
def kinded_chains(draw):
    """One chain of collectives of a drawn kind, rank count and mesh dim, on a model with a
    link and a rate per mesh dim (mesh dim 1's differ from mesh dim 0's and the defaults)."""
    kind, n, dim = (draw(st.sampled_from(sorted(BUS_FACTOR))), draw(st.integers(2, 5)),
                    draw(st.integers(0, 1)))
    g = G()
    outs = []
    for _ in range(draw(st.integers(1, 6))):
        src = g.compute(draw(st.sampled_from([0.0, 1e-5, 1e-3, 2e-2])))
        if outs and draw(st.integers(0, 4)) == 0:
            g.compute(1e-4, outs[-1])
        if draw(st.integers(0, 6)) == 0:
            g.effect(src)
        out = g._out()
        fn = kinded(kind, draw(st.sampled_from([64, 4096, 99_999, MIB, 4 * MIB])), n, dim)
        g.nodes.append(Node("collective", kind, fn, (src,), (out,), 0.0))
        g.seconds.append(0.0)
        outs.append(out)
    for r in draw(st.permutations(outs)):
        g.compute(draw(st.sampled_from([0.0, 1e-3, 2e-2])), r)
    rates = draw(st.sampled_from([(0.0, 0.4), (0.4, 0.0), (1.0, 0.3)]))
    model = CostModel(alpha=7e-6, beta=2e9, copy_beta=draw(st.sampled_from([1e10, 1e8])),
                      per_dim=((draw(st.sampled_from([5e-6, 1e-3])),
                                draw(st.sampled_from([1e8, 4e9]))), (3e-4, 5e8)),
                      rate_per_dim=rates)
    return g, model


@settings(max_examples=80, deadline=None, derandomize=True)
@given(kinded_chains())
def test_the_split_is_the_best_by_an_independent_pricing(case):
    g, model = case
    members = [i for i, n in enumerate(g.nodes) if n.kind == "collective"]
    chosen = choose_buckets(g.nodes, g.seconds, model)
    _assert_best(g.nodes, g.seconds, members, chosen, model)
    clock = compute_clock(g.nodes, g.seconds)
    for split in _all_splits(members):
        assert lateness(g.nodes, clock, split, model) == \
            pytest.approx(_price(g.nodes, g.seconds, split, model)[0], rel=1e-12, abs=1e-15)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(chains())
def test_feasible_starts_are_the_earliest_feasible_member(case):
    g, _ = case
    members = [i for i, n in enumerate(g.nodes) if n.kind == "collective"]
    starts = feasible_starts(g.nodes, members, first_reads(g.nodes))
    for b in range(len(members)):
        ok = [a for a in range(b + 1) if _feasible(g.nodes, members[a:b + 1])]
        assert starts[b] == min(ok) and ok == list(range(starts[b], b + 1))


def test_compute_clock_counts_only_compute_and_effects():
    g = G()
    r = g.collective(g.compute(1.0), 64)      # nodes 0 (1 s), 1 (collective)
    g.compute(2.0, r)                         # node 2
    g.effect(r)                               # node 3 (1e-4 s)
    g.seconds[1] = 5.0                        # a collective's own time is not compute
    assert compute_clock(g.nodes, g.seconds) == [0.0, 1.0, 1.0, 3.0, 3.0 + 1e-4]


def test_chains_group_fusible_collectives_by_key_and_leave_the_others_alone():
    g = G()
    nodes = g.nodes
    for i, (kind, dim) in enumerate([("all_reduce", 0), ("all_to_all", 0), ("all_reduce", 1),
                                     ("all_reduce", 0), ("all_to_all", 0)]):
        nodes.append(Node("collective", kind, kinded(kind, 64, 2, dim), (g.compute(1e-3),),
                          (100 + i,), 0.0))
        g.seconds.append(0.0)
    g.compute(1e-3, *range(100, 105))
    keyed, alone = auto_chains(nodes)
    assert sorted(keyed.values()) == [[1, 7], [5]] and alone == [3, 9]
    # ready one after another and read at the end, under shared memory the tiny all-reduces
    # of mesh dim 0 fuse; the others are each alone; listed by their last member
    assert choose_buckets(nodes, g.seconds, SHM) == [(3,), (5,), (1, 7), (9,)]


def test_buckets_run_in_order_of_their_last_member_across_chains():
    """Two chains (mesh dims 0 and 1) ready at once and read at the end under shared
    memory: each fuses (tiny tensors), and the buckets are listed by their last member."""
    g = G()
    nodes = g.nodes
    srcs = [g.compute(1e-3) for _ in range(4)]
    for i, dim in enumerate([0, 1, 1, 0]):
        nodes.append(Node("collective", "all_reduce", kinded("all_reduce", 64, 2, dim),
                          (srcs[i],), (100 + i,), 0.0))
        g.seconds.append(0.0)
    g.compute(1e-3, 100, 101, 102, 103)
    assert choose_buckets(nodes, g.seconds, SHM) == [(5, 6), (4, 7)]


@pytest.mark.parametrize("nbytes,want", [(62_499, 1), (62_500, 1), (62_501, 2)])
def test_at_equal_cost_fewer_buckets_win(nbytes, want):
    """Shared memory (all moved once the step waits): two members cost 2 x (5 + 20) us of
    calls + 2 x nbytes / 4e9 apart, and 5 + 20 us + 2 x nbytes / 4e9 + a pack and unpack of
    2 x 2 x nbytes / 1e10 fused: equal at 62 500 bytes, where the single bucket wins."""
    g = G()
    outs = [g.collective(g.compute(1e-3), nbytes) for _ in range(2)]
    g.compute(1e-3, *outs)
    assert len(choose_buckets(g.nodes, g.seconds, SHM)) == want


@pytest.mark.parametrize("extra,want", [(-3e-11, 1), (3e-13, 1), (3e-11, 2)])
def test_costs_equal_to_a_picosecond_are_a_tie(extra, want):
    """As above at 62 500 bytes, with a copy speed that makes the fused bucket ``extra``
    seconds dearer: within 1e-12 s it is a tie, which the single bucket wins."""
    model = CostModel(copy_beta=2 * 2 * 62_500 / (25e-6 + extra))
    g = G()
    outs = [g.collective(g.compute(1e-3), 62_500) for _ in range(2)]
    g.compute(1e-3, *outs)
    assert len(choose_buckets(g.nodes, g.seconds, model)) == want


def test_all_gathers_price_the_gathered_bytes():
    """An all-gather on 4 ranks of 1 MB pieces moves 3/4 of the 4 MB result per rank
    (3 MB at 1e9 B/s = 3 ms); an all-reduce of 1 MB moves 2 x 3/4 MB (1.5 ms)."""
    model = CostModel(alpha=0.0, beta=1e9)
    for kind, want in (("all_gather", 3e-3), ("all_reduce", 1.5e-3), ("reduce_scatter", 0.75e-3)):
        g = G()
        g.nodes.append(Node("collective", kind, kinded(kind, 10**6, 4, 0), (0,), (5,), 0.0))
        g.seconds.append(0.0)
        assert lateness(g.nodes, [0.0, 0.0], [(0,)], model) == pytest.approx(want + 20e-6)


def test_a_prefix_that_finishes_later_at_equal_lateness_is_dropped():
    """Rate 1, 1 ms + bytes / 1e9 per call (+ 20 us to start it), packing at 1e9 B/s.
    Member 1 (1 MB) is read at once: 2.02 ms late, the step's lateness.  Members 2 and 3
    (1 MB each, read 10 ms later) finish earlier apart (2 x 2.02 ms) than fused (1.02 +
    2 + 4 ms of packing), both in time, so the fused prefix is dropped; member 4, made
    50 ms later, then moves alone and the step ends at the same time either way."""
    g = G()
    g.compute(0.0, g.collective(g.compute(0.0), 10**6))
    outs = [g.collective(g.compute(0.0), 10**6) for _ in range(2)]
    g.compute(1e-2)
    g.compute(0.0, *outs)
    last = g.collective(g.compute(5e-2), 10**6)
    g.compute(1e-2)
    g.compute(0.0, last)
    model = CostModel(alpha=1e-3, beta=1e9, copy_beta=1e9, overlap_rate=1.0)
    assert choose_buckets(g.nodes, g.seconds, model) == [(1,), (4,), (6,), (10,)]
