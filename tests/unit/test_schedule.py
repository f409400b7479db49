"""The scheduling pass (pure: no MPI): starts as early and waits as late as the graph, the
in-place effects and the cap on bytes in flight allow, checked on random graphs against
those rules stated apart from the pass, and on small graphs worked out by hand."""
from graphs import G as Graph
from graphs import random_graphs
from hypothesis import given, settings

from mtensor.overlap.bucketing import plan_buckets
from mtensor.overlap.schedule import plan_schedule


def G():
    """Graphs with two inputs (slots 0 and 1) whose collectives move 1 KiB by default."""
    return Graph(ninputs=2, nbytes=1024)


def _check_eager_and_lazy(nodes, buckets, program, cap, overlap):
    """Every start comes right after the last node it must follow (its inputs' makers, the
    last effect before it and the previous bucket's start), and every wait is needed by
    what comes next (a reader, an effect, a start it feeds or that would pass the cap, or
    the end)."""
    maker = {s: i for i, n in enumerate(nodes) for s in n.outs}
    ins = [{s for m in b for s in nodes[m].ins} for b in buckets]
    outs = [{s for m in b for s in nodes[m].outs} for b in buckets]
    size = [sum(nodes[m].fn.bucket_bytes for m in b) for b in buckets]
    after, earliest = [], -1
    for k, b in enumerate(buckets):
        effects = [e for e in range(b[-1]) if nodes[e].kind == "effect"]
        earliest = max([earliest, *(maker.get(s, -1) for s in ins[k]), *effects[-1:]])
        after.append(sum(1 for n in nodes[:earliest + 1] if n.kind != "collective"))
    computes, inflight = 0, []
    for p, (what, k) in enumerate(program):
        if what == "compute":
            computes += 1
        elif what in ("start", "run"):
            assert computes == after[k], (k, program)
            if what == "start":
                inflight.append(k)
        else:
            following = next(((w, j) for w, j in program[p + 1:] if w != "wait"), None)
            if following is not None:
                w, j = following
                if w == "compute":
                    assert nodes[j].kind == "effect" or set(nodes[j].ins) & outs[k], p
                else:
                    assert (ins[j] & outs[k] or k == inflight[0]
                            and sum(size[i] for i in inflight) + size[j] > cap), p
            inflight.remove(k)
    for what, k in program:
        if what == "start":
            between = program[program.index(("start", k)) + 1:program.index(("wait", k))]
            assert overlap and any(w == "compute" for w, _ in between), (k, program)


def graphs():
    return random_graphs(nodes=25, kinds=("all_reduce", "all_to_all"), kib=8, cap_kib=32)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(graphs())
def test_starts_are_eager_and_waits_lazy(case):
    nodes, cap, overlap = case
    buckets = plan_buckets(nodes, cap, cap)
    program = plan_schedule(nodes, buckets, [overlap] * len(buckets), 2 * cap)
    _check_eager_and_lazy(nodes, buckets, program, 2 * cap, overlap)
    assert sorted(k for w, k in program if w in ("start", "run")) == list(range(len(buckets)))
    assert sorted(k for w, k in program if w == "wait") == \
        sorted(k for w, k in program if w == "start")


def test_a_collective_of_a_collectives_result_waits_for_it():
    """all_reduce(all_reduce(x)): the second starts right after the first, so it waits for
    it first; with compute in between the first would overlap, here it runs blocking."""
    g = G()
    a = g.collective(0)
    b = g.collective(a)
    g.compute(1)
    g.compute(b)
    assert plan_schedule(g.nodes, [(0,), (1,)], [True] * 2, 1 << 30) == [
        ("run", 0), ("start", 1), ("compute", 2), ("wait", 1), ("compute", 3)]


def test_a_reader_of_two_buckets_waits_for_them_in_order():
    g = G()
    a = g.collective(0)
    b = g.collective(1)
    g.compute(0)
    g.compute(b, a)
    assert plan_schedule(g.nodes, [(0,), (1,)], [True] * 2, 1 << 30) == [
        ("start", 0), ("start", 1), ("compute", 2), ("wait", 0), ("wait", 1), ("compute", 3)]


def test_a_start_that_fills_the_cap_exactly_does_not_wait():
    """Two 1 KiB buckets under a 2 KiB cap fit together; under 2 KiB - 1 the first is
    waited for before the second starts, and both then run blocking."""
    g = G()
    a = g.collective(0)
    b = g.collective(1)
    g.compute(0)
    g.compute(a, b)
    assert plan_schedule(g.nodes, [(0,), (1,)], [True] * 2, 2048) == [
        ("start", 0), ("start", 1), ("compute", 2), ("wait", 0), ("wait", 1), ("compute", 3)]
    assert plan_schedule(g.nodes, [(0,), (1,)], [True] * 2, 2047) == [
        ("run", 0), ("start", 1), ("compute", 2), ("wait", 1), ("compute", 3)]


def test_the_cap_waits_for_the_oldest_until_the_new_one_fits():
    """Three 1 KiB buckets in flight under a 3 KiB cap; a 2 KiB fourth waits for two."""
    g = G()
    outs = [g.collective(0) for _ in range(3)] + [g.collective(0, 2048)]
    g.compute(0)
    g.compute(*outs)
    program = plan_schedule(g.nodes, [(0,), (1,), (2,), (3,)], [True] * 4, 3072)
    # 0 and 1 have no compute between their start and their wait: they run blocking
    assert program == [("run", 0), ("run", 1), ("start", 2), ("start", 3), ("compute", 4),
                       ("wait", 2), ("wait", 3), ("compute", 5)]


def test_a_fused_bucket_starts_after_its_last_input_even_over_the_cap():
    """Nothing in flight: a bucket larger than the cap still starts (alone)."""
    g = G()
    a = g.collective(g.compute(0), 1024)
    g.compute(1)
    b = g.collective(g.compute(1), 1024)
    g.compute(0)
    g.compute(a, b)
    # nodes: 0 compute, 1 coll, 2 compute, 3 compute, 4 coll, 5 compute, 6 compute
    assert plan_schedule(g.nodes, [(1, 4)], [True] * 1, 1024) == [
        ("compute", 0), ("compute", 2), ("compute", 3), ("start", 0), ("compute", 5),
        ("wait", 0), ("compute", 6)]


def test_an_effect_waits_for_everything_then_later_buckets_start_after_it():
    g = G()
    a = g.collective(0)
    g.compute(1)
    b = g.collective(1)
    g.compute(0)
    g.effect(0)
    c = g.collective(0)
    g.compute(0)
    g.compute(a, b, c)
    # nodes: 0 coll, 1 compute, 2 coll, 3 compute, 4 effect, 5 coll, 6 compute, 7 compute;
    # buckets 0 and 1 read arguments: both start at once
    assert plan_schedule(g.nodes, [(0,), (2,), (5,)], [True] * 3, 1 << 30) == [
        ("start", 0), ("start", 1), ("compute", 1), ("compute", 3), ("wait", 0), ("wait", 1),
        ("compute", 4), ("start", 2), ("compute", 6), ("wait", 2), ("compute", 7)]


def test_starts_keep_the_bucket_order_even_when_inputs_exist_earlier():
    """Bucket 1's input exists from the start but bucket 0's only after node 0: bucket 1
    starts after bucket 0, at node 0."""
    g = G()
    a = g.collective(g.compute(0))
    b = g.collective(1)
    g.compute(1)
    g.compute(a, b)
    assert plan_schedule(g.nodes, [(1,), (2,)], [True] * 2, 1 << 30) == [
        ("compute", 0), ("start", 0), ("start", 1), ("compute", 3), ("wait", 0), ("wait", 1),
        ("compute", 4)]
