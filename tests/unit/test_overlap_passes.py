"""The bucketing and scheduling passes on hand-made graphs (pure planning: no MPI)."""
import numpy as np
from graphs import KIB, G, random_graphs
from hypothesis import given, settings

from mtensor.overlap.bucketing import first_readers, first_reads, plan_buckets
from mtensor.overlap.schedule import plan_schedule


def dp_step(n):
    """n gradients, each computed then all-reduced; all read by the optimizer at the end."""
    g, grads = G(), []
    for _ in range(n):
        grads.append(g.collective(g.compute(0)))
    for r in grads:
        g.effect(r)
    return g.nodes


def test_independent_gradients_fuse_into_one_bucket():
    assert plan_buckets(dp_step(100), 25 << 20, 25 << 20) == [tuple(range(1, 200, 2))]


def test_caps_split_buckets_and_the_first_bucket_is_small():
    buckets = plan_buckets(dp_step(100), 100 * KIB, 8 * KIB)
    assert [len(b) for b in buckets] == [2] + [25] * 3 + [23]
    assert sorted(i for b in buckets for i in b) == list(range(1, 200, 2))


def test_a_reader_in_between_keeps_collectives_apart():
    g = G()
    a = g.collective(0)
    b = g.collective(g.compute(a))        # its input needs a's result
    g.compute(b)
    assert plan_buckets(g.nodes, 1 << 30, 1 << 30) == [(0,), (2,)]


def test_only_matching_keys_fuse():
    g = G()
    outs = [g.collective(0, kind=k, dtype=d, mesh_dim=m, op=o) for k, d, m, o in [
        ("all_reduce", np.float64, 0, "sum"), ("all_reduce", np.float32, 0, "sum"),
        ("all_reduce", np.float64, 1, "sum"), ("all_reduce", np.float64, 0, "max"),
        ("all_gather", np.float64, 0, None), ("all_to_all", np.float64, 0, None),
        ("all_reduce", np.float64, 0, "sum"), ("all_to_all", np.float64, 0, None)]]
    g.compute(*outs)
    assert plan_buckets(g.nodes, 1 << 30, 1 << 30) == [(1,), (2,), (3,), (4,), (5,), (0, 6), (7,)]


def test_collectives_start_after_their_input_and_wait_at_first_use():
    g = G()
    grad = g.compute(0)
    r = g.collective(grad)
    g.compute(0)                      # independent compute: overlaps
    g.compute(0)
    g.compute(r)                      # first use
    program = plan_schedule(g.nodes, [(1,)], [True] * 1, 1 << 30)
    assert program == [("compute", 0), ("start", 0), ("compute", 2), ("compute", 3),
                       ("wait", 0), ("compute", 4)]


def test_no_compute_in_between_or_overlap_off_means_blocking():
    g = G()
    r = g.collective(0)
    g.compute(r)
    assert plan_schedule(g.nodes, [(0,)], [True] * 1, 1 << 30) == [("run", 0), ("compute", 1)]
    g = G()
    r = g.collective(0)
    g.compute(0)
    g.compute(r)
    assert plan_schedule(g.nodes, [(0,)], [False], 1 << 30) == [("run", 0), ("compute", 1),
                                                              ("compute", 2)]


def test_effects_wait_for_everything_in_flight():
    g = G()
    r = g.collective(0)
    g.compute(0)
    g.effect(0)                       # writes what the collective may still read
    g.compute(r)
    program = plan_schedule(g.nodes, [(0,)], [True] * 1, 1 << 30)
    assert program.index(("wait", 0)) < program.index(("compute", 2))


def test_collectives_after_an_update_start_after_it_and_buckets_do_not_span_it():
    """sgd(p) then gather(p): the gather reads the array the update writes in place."""
    g = G()
    before = g.collective(0)           # reads p before the update
    g.effect(0)                        # p -= lr * grad, in place
    after = g.collective(0)            # reads p after it
    g.compute(before, after)
    buckets = plan_buckets(g.nodes, 1 << 30, 1 << 30)
    assert buckets == [(0,), (2,)]
    program = plan_schedule(g.nodes, buckets, [True] * len(buckets), 1 << 30)
    assert program.index(("compute", 1)) < program.index(("run", 1))


def test_bytes_in_flight_are_capped():
    g = G()
    outs = [g.collective(g.compute(0), nbytes=KIB) for _ in range(3)]
    g.compute(0)
    g.compute(*outs)
    program = plan_schedule(g.nodes, [(1,), (3,), (5,)], [True] * 3, 2 * KIB)
    assert program.index(("wait", 0)) < program.index(("start", 2))


@settings(max_examples=300, deadline=None)
@given(random_graphs())
def test_every_schedule_is_valid(case):
    """Every value exists before it is read, buckets start in one order and each is
    finished once, effects run with nothing in flight, no collective starts before an
    effect that precedes it nor shares a bucket across one, and every node runs once."""
    nodes, cap, overlap = case
    buckets = plan_buckets(nodes, cap, cap)
    program = plan_schedule(nodes, buckets, [overlap] * len(buckets), 4 * cap)
    member = {m: k for k, b in enumerate(buckets) for m in b}
    assert sorted(member) == [i for i, n in enumerate(nodes) if n.kind == "collective"]
    effects = [i for i, n in enumerate(nodes) if n.kind == "effect"]
    for b in buckets:
        assert all((b[0] < e) == (b[-1] < e) for e in effects), (b, effects)
    ready = {s for n in nodes for s in n.ins} - {s for n in nodes for s in n.outs}
    started, inflight, computed = [], set(), []
    for what, k in program:
        if what == "compute":
            node = nodes[k]
            assert set(node.ins) <= ready
            assert node.kind != "effect" or not inflight
            ready.update(node.outs)
            computed.append(k)
            continue
        if what in ("start", "run"):
            assert {s for m in buckets[k] for s in nodes[m].ins} <= ready
            assert all(e in computed for e in effects if e < buckets[k][-1])
            started.append(k)
        if what == "start":
            inflight.add(k)
        else:
            inflight.discard(k)
            ready.update(s for m in buckets[k] for s in nodes[m].outs)
    assert started == list(range(len(buckets)))
    assert not inflight
    assert computed == [i for i, n in enumerate(nodes) if n.kind != "collective"]


def test_first_reads_name_the_first_reader_of_any_result():
    g = G()
    a = g.compute(0)            # node 0
    b = g.collective(a)         # node 1: reads a
    g.compute(b)                # node 2: reads b
    g.compute(a, b)             # node 3
    g.effect(0)                 # node 4: no result
    readers = first_readers(g.nodes)
    assert readers[0] == 0 and readers[a] == 1 and readers[b] == 2
    assert first_reads(g.nodes) == [1, 2, 5, 5, 5]


def test_a_bucket_fills_up_to_its_cap_exactly():
    """4 KiB gradients: an 8 KiB cap takes two, one byte less takes one."""
    assert plan_buckets(dp_step(3), 8 * KIB, 8 * KIB) == [(1, 3), (5,)]
    assert plan_buckets(dp_step(3), 8 * KIB - 1, 8 * KIB - 1) == [(1,), (3,), (5,)]


def test_only_the_first_bucket_made_gets_the_first_cap():
    assert plan_buckets(dp_step(4), 8 * KIB, 4 * KIB) == [(1,), (3, 5), (7,)]
    g = G()
    alone = g.collective(0, kind="all_to_all")      # made first: the first cap is spent
    outs = [g.collective(0) for _ in range(3)]
    g.compute(alone, *outs)
    assert plan_buckets(g.nodes, 8 * KIB, 4 * KIB) == [(0,), (1, 2), (3,)]
    g = G()
    outs = [g.collective(0, op=op) for op in ("max", "sum", "sum", "max")]
    g.compute(*outs)                                  # the max bucket opened first
    assert plan_buckets(g.nodes, 8 * KIB, 4 * KIB) == [(0,), (1, 2), (3,)]


def test_a_collective_of_a_collectives_result_is_not_in_its_bucket():
    g = G()
    g.compute(g.collective(g.collective(0)))
    assert plan_buckets(g.nodes, 1 << 30, 1 << 30) == [(0,), (1,)]


def test_an_effect_closes_the_buckets_of_every_key():
    g = G()
    outs = [g.collective(0, op="sum"), g.collective(0, op="max")]
    g.effect(0)
    outs += [g.collective(0, op="sum"), g.collective(0, op="max")]
    g.compute(*outs)
    assert plan_buckets(g.nodes, 1 << 30, 1 << 30) == [(0,), (1,), (3,), (4,)]


def test_collectives_on_different_meshes_do_not_fuse():
    g = G()
    a = g.collective(0)
    b = g.collective(0)
    g.nodes[-1].fn.mesh = object()
    g.compute(a, b)
    assert plan_buckets(g.nodes, 1 << 30, 1 << 30) == [(0,), (1,)]
