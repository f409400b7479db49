"""The ZeRO-3 passes on hand-made graphs (pure planning: no MPI): resharding after the
forward, the prefetch depth's start limits, the schedule that obeys them, and the depth the
cost model's timeline chooses."""
from types import SimpleNamespace

from graphs import KIB, G

from mtensor.overlap import prefetch
from mtensor.overlap.bucketing import plan_buckets
from mtensor.overlap.schedule import plan_schedule
from mtensor.trace_compile.graph import Graph


def zero3(layers=4, nbytes=64 * KIB, seconds=0.01, backward_reads_first=False):
    """Parameters 0..layers-1 (inputs) and a batch (input ``layers``); the forward gathers
    each parameter and computes with it; the backward reads each gathered copy again (but
    the first layer's, as for a model whose input needs no gradient), reduce-scatters each
    gradient, and an update writes every parameter."""
    g = G(ninputs=layers + 1, nbytes=nbytes)
    h, gathered = layers, []
    per_layer = seconds if isinstance(seconds, list) else [seconds] * layers
    for i in range(layers):
        w = g.collective(i, kind="all_gather")
        gathered.append(w)
        h = g.compute(h, w, seconds=per_layer[i])
    d = g.compute(h, phase="backward", seconds=per_layer[-1])
    grads = []
    for i in reversed(range(layers)):
        ins = (d, gathered[i]) if i or backward_reads_first else (d,)
        d = g.compute(*ins, phase="backward", seconds=per_layer[i])
        grads.append(g.collective(d, kind="reduce_scatter", phase="backward"))
    for i, r in enumerate(grads):
        g.effect(layers - 1 - i, r)
    return Graph("zero3", g.nodes, g.next, {}, list(range(layers + 1)), [])


def test_parameter_gathers_are_the_all_gathers_of_arguments():
    graph = zero3()
    assert [graph.nodes[i].ins[0] for i in prefetch.parameter_gathers(graph)] == [0, 1, 2, 3]
    assert prefetch.kept_for_backward(graph) == 3 * 2 * 64 * KIB   # layers 1-3, whole copies


def test_resharding_gathers_again_in_the_order_the_backward_needs_them():
    graph = zero3()
    out = prefetch.reshard_after_forward(graph)
    again = [i for i in prefetch.parameter_gathers(out) if out.nodes[i].where[1] == "backward"]
    assert [out.nodes[i].ins[0] for i in again] == [3, 2, 1]        # layer 0: not read back
    assert out.nslots == graph.nslots + 3 and len(out.nodes) == len(graph.nodes) + 3
    first_backward = min(i for i, n in enumerate(out.nodes)
                         if n.where[1] == "backward" and n.kind == "compute")
    assert again[0] < first_backward
    readers = []
    for i in again:
        fresh = out.nodes[i].outs[0]
        mine = [j for j, n in enumerate(out.nodes) if fresh in n.ins]
        assert mine and min(mine) > i and all(out.nodes[j].where[1] == "backward" for j in mine)
        readers.append(min(mine))
    for j in range(1, len(again)):       # posted before the block that needs the one before
        assert again[j - 1] < again[j] < readers[j - 1]
        between = out.nodes[again[j]:readers[j - 1]]
        assert not any(n.name == "reduce_scatter" for n in between)
    for i in prefetch.parameter_gathers(out):
        if out.nodes[i].where[1] == "forward":
            old = out.nodes[i].outs[0]
            assert all(n.where[1] == "forward" for n in out.nodes if old in n.ins)
    assert prefetch.kept_for_backward(out) == 0
    assert prefetch.reshard_after_forward(out).nodes == out.nodes  # nothing left to do


def test_a_gather_the_backward_does_not_read_is_not_repeated():
    graph = zero3(backward_reads_first=True)
    assert len(prefetch.reshard_after_forward(graph).nodes) == len(graph.nodes) + 4
    g = G(ninputs=2)
    g.compute(1, g.collective(0, kind="all_gather"))
    g.compute(g.collective(1, kind="all_reduce"), phase="backward")   # not an argument's gather
    plain = Graph("plain", g.nodes, g.next, {}, [0, 1], [])
    assert prefetch.reshard_after_forward(plain) is plain


def _first_reader(graph, slot):
    return next(j for j, n in enumerate(graph.nodes) if slot in n.ins)


def test_depth_limits_each_gather_to_the_first_use_of_the_one_depth_before():
    graph = prefetch.reshard_after_forward(zero3(layers=5))
    buckets = [(i,) for i, n in enumerate(graph.nodes) if n.kind == "collective"]
    gathers = [k for k, b in enumerate(buckets) if graph.nodes[b[0]].name == "all_gather"]
    forward = [k for k in gathers if graph.nodes[buckets[k][0]].where[1] == "forward"]
    backward = [k for k in gathers if k not in forward]
    assert prefetch.start_limits(graph, buckets, None) == [-1] * len(buckets)
    for depth in (1, 2):
        limits = prefetch.start_limits(graph, buckets, depth)
        for seq in (forward, backward):
            for j, k in enumerate(seq[depth:]):
                used = _first_reader(graph, graph.nodes[buckets[seq[j]][0]].outs[0])
                assert limits[k] == used - 1
        assert all(limits[k] == -1 for k in forward[:depth])
        start = next(i for i, n in enumerate(graph.nodes) if n.where[1] == "backward")
        assert all(limits[k] == start - 1 for k in backward[:depth])
        assert all(limits[k] == -1 for k in range(len(buckets)) if k not in gathers)
    none = prefetch.start_limits(graph, buckets, 0)
    for k in gathers:
        assert none[k] == _first_reader(graph, graph.nodes[buckets[k][0]].outs[0]) - 1


def test_the_schedule_starts_no_gather_before_its_limit_and_keeps_the_order():
    graph = prefetch.reshard_after_forward(zero3(layers=6))
    buckets = plan_buckets(graph.nodes, 1, 1)
    for depth in (0, 1, 2, 3, None):
        limits = prefetch.start_limits(graph, buckets, depth)
        program = plan_schedule(graph.nodes, buckets, [True] * len(buckets), 1 << 30, limits)
        done, started = 0, []
        for what, k in program:
            if what == "compute":
                done += 1
            elif what in ("start", "run"):
                before = sum(graph.nodes[i].kind != "collective" for i in range(limits[k] + 1))
                assert done >= before, (depth, k, limits[k])
                started.append(k)
        assert started == sorted(started) == list(range(len(buckets)))


def _model(rate):
    return SimpleNamespace(link=lambda dim: (1e-5, 1e8), copy_beta=1e10,
                           rate=lambda dim: rate, overlap_slowdown=0.0)


def test_the_cost_model_chooses_a_deeper_prefetch_only_where_gathers_outlast_a_block():
    """A gather shorter than a block hides behind it one ahead; ~21 ms gathers behind 10 ms
    blocks need two blocks each; after a long block followed by short ones, gathering
    further ahead hides what one ahead leaves exposed behind the short blocks."""
    uneven = [0.08, 0.001, 0.001, 0.001, 0.03, 0.03]
    for nbytes, seconds, deeper in ((64 * KIB, 0.01, False), (1024 * KIB, 0.03, False),
                                    (2048 * KIB, 0.01, True), (2048 * KIB, uneven, True)):
        graph = zero3(layers=6, nbytes=nbytes, seconds=seconds)
        buckets = plan_buckets(graph.nodes, 1, 1)
        times = [n.seconds for n in graph.nodes]
        depth = prefetch.choose_depth(graph, buckets, [True] * len(buckets), 1 << 40, times,
                                      _model(0.9))
        assert (depth > 2) == deeper, (nbytes, seconds, depth)     # one block of slack
    g = G()
    g.compute(g.collective(0))
    plain = Graph("plain", g.nodes, g.next, {}, [0], [])
    assert prefetch.choose_depth(plain, [(0,)], [True], 1 << 30, [0.0, 0.0], _model(0.5)) is None
