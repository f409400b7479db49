"""The compiler's graph passes (``trace_compile.passes``) on hand-made graphs (no MPI): each
rewrite where it applies, near misses that must not match, results read elsewhere, and a
property test that random step graphs give the same results with and without the passes
(bit for bit for the exact ones)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.overlap.replay import Replay
from mtensor.overlap.schedule import plan_schedule
from mtensor.trace_compile.graph import Graph, Node, aval_of
from mtensor.trace_compile.passes import (
    EXACT,
    FAST,
    cse,
    dce,
    fold,
    inplace,
    pass_names,
    run_passes,
    simplify,
)


class B:
    """A graph under construction: ``inputs`` arrays, then ops on slots; ``result(*slots)``
    builds the Graph returning them."""

    def __init__(self, *inputs):
        self.values = list(inputs)
        self.inputs = list(range(len(inputs)))
        self.nodes, self.consts, self.private = [], {}, set()

    def const(self, value, private=True):
        self.values.append(value)
        slot = len(self.values) - 1
        self.consts[slot] = value
        if private:
            self.private.add(slot)
        return slot

    def op(self, name, fn, *ins, params=(), nout=1):
        result = fn(*[self.values[s] for s in ins])
        outs = []
        for r in ((result,) if nout == 1 else result):
            self.values.append(r)
            outs.append(len(self.values) - 1)
        self.nodes.append(Node("compute", name, fn, tuple(ins), tuple(outs), 0.0,
                               params=params))
        return outs[0] if nout == 1 else tuple(outs)

    def effect(self, name, fn, *ins):
        fn(*[self.values[s] for s in ins])
        self.nodes.append(Node("effect", name, fn, tuple(ins), (), 0.0))

    def graph(self, *results):
        avals = [aval_of(v) for v in self.values]
        return Graph("g", list(self.nodes), len(self.values), dict(self.consts),
                     list(self.inputs), [(s, None) for s in results], avals=avals,
                     private=frozenset(self.private))


def run(graph, *inputs):
    """The graph's results on ``inputs``, through the replay (compute nodes only)."""
    program = plan_schedule(graph.nodes, [], [], 1 << 30)
    env = Replay(graph, [], program)(dict(zip(graph.inputs, inputs)))
    return [env[s] for s, _ in graph.outputs]


def names(graph):
    return [n.name for n in graph.nodes]


X = np.arange(1.0, 7.0).reshape(2, 3)


def test_dce_drops_unread_compute_and_keeps_effects():
    b = B(X.copy())
    dead = b.op("exp", np.exp, 0)
    b.op("negative", np.negative, dead)             # dead too: a chain
    kept = b.op("add", np.add, 0, 0)
    b.effect("update", lambda a: a.__iadd__(1), 0)   # an effect stays, though it makes nothing
    g, counts = dce.run(b.graph(kept))
    assert names(g) == ["add", "update"] and counts == {"removed": 2}


def test_cse_merges_one_kernel_on_the_same_slots_only():
    b = B(X)
    a1 = b.op("multiply", np.multiply, 0, 0)
    a2 = b.op("multiply", np.multiply, 0, 0)                  # the same: merged
    other = b.op("multiply", lambda x, y: np.multiply(x, y), 0, 0)   # another kernel
    c = b.op("add", np.add, a1, a2)
    d = b.op("add", np.add, c, other)
    g, counts = cse.run(b.graph(d))
    assert counts == {"merged": 1} and len(g.nodes) == 4
    assert g.nodes[2].ins == (a1, a1)
    assert np.array_equal(run(g, X)[0], run(b.graph(d), X)[0])


def test_cse_recomputes_an_elementwise_value_that_died_and_merges_the_rest():
    """``x * x`` in a forward and again in a backward: merging would keep the first alive
    across, so it is computed twice; a reduction (not elementwise) is merged all the same."""
    b = B(X)
    total = lambda a: a.sum(axis=0)                              # noqa: E731
    sq = b.op("multiply", np.multiply, 0, 0)
    cube = b.op("multiply", np.multiply, sq, 0)                  # sq's last read
    s1 = b.op("sum", total, 0)
    used = b.op("exp", np.exp, s1)                               # s1's last read
    again = b.op("multiply", np.multiply, 0, 0)                  # sq is dead by now: kept
    s2 = b.op("sum", total, 0)                                   # merged into s1
    out = b.op("add", np.add, b.op("add", np.add, cube, again), b.op("add", np.add, used, s2))
    g, counts = cse.run(b.graph(out))
    assert counts == {"merged": 1} and names(g).count("multiply") == 3
    assert names(g).count("sum") == 1
    assert np.array_equal(run(g, X)[0], run(b.graph(out), X)[0])


def test_cse_leaves_slots_an_effect_writes_and_returned_results():
    b = B(X.copy())
    first = b.op("exp", np.exp, 0)
    b.effect("update", lambda a: a.__imul__(2), 0)
    again = b.op("exp", np.exp, 0)                 # reads the written input: not the same
    g, counts = cse.run(b.graph(b.op("add", np.add, first, again)))
    assert counts == {} and names(g) == ["exp", "update", "exp", "add"]
    b = B(X)
    r1, r2 = b.op("exp", np.exp, 0), b.op("exp", np.exp, 0)
    assert cse.run(b.graph(r1, r2))[1] == {}       # both returned: two arrays, not one


def test_cse_sees_through_a_view_of_a_written_array():
    b = B(X.copy())
    view = b.op("reshape", lambda a: a.reshape(-1), 0)
    first = b.op("exp", np.exp, view)
    b.effect("update", lambda a: a.__imul__(2), 0)
    again = b.op("exp", np.exp, view)
    assert cse.run(b.graph(b.op("add", np.add, first, again)))[1] == {}


@pytest.mark.parametrize("name, fn, const, exact", [
    ("multiply", np.multiply, 1, True), ("divide", np.divide, 1, True),
    ("subtract", np.subtract, 0, True), ("add", np.add, 0, False)])
def test_identities(name, fn, const, exact):
    b = B(X)
    one = b.const(const)
    y = b.op(name, fn, 0, one)
    z = b.op("exp", np.exp, y)
    g, counts = simplify.run(b.graph(z), exact=exact)
    assert names(g) == ["exp"] and g.nodes[0].ins == (0,) and sum(counts.values()) == 1
    if not exact:
        assert simplify.run(b.graph(z), exact=True)[1] == {}


def test_identity_near_misses_keep_the_op():
    b = B(np.arange(6).reshape(2, 3))
    y = b.op("multiply", np.multiply, 0, b.const(1.0))       # int * 1.0 is float: kept
    x = B(X)
    w = x.op("multiply", np.multiply, 0, x.const(np.ones(3)))   # an array of ones: kept
    u = x.op("multiply", np.multiply, 0, x.const(2))
    v = x.op("add", np.add, 0, x.const(np.zeros((4, 2, 3))))    # broadcasts x: kept
    assert simplify.run(b.graph(b.op("exp", np.exp, y)))[1] == {}
    assert simplify.run(x.graph(x.op("add", np.add, w, u), v))[1] == {}


def test_double_negative_and_transposes():
    b = B(np.arange(24.0).reshape(2, 3, 4))
    n = b.op("negative", np.negative, b.op("negative", np.negative, 0))
    t = b.op("transpose", lambda a: a.transpose(1, 2, 0), 0, params=((1, 2, 0),))
    back = b.op("transpose", lambda a: a.transpose(2, 0, 1), t, params=((2, 0, 1),))
    not_back = b.op("transpose", lambda a: a.transpose(1, 2, 0), t, params=((1, 2, 0),))
    s = b.op("add", np.add, n, back)
    g, counts = simplify.run(b.graph(b.op("exp", np.exp, s), not_back), exact=True)
    assert counts == {"double_negative": 1, "double_transpose": 1}
    g, _ = dce.run(g)
    assert names(g) == ["transpose", "transpose", "add", "exp"]


def test_small_powers_become_products_in_the_fast_rules_only():
    b = B(X)
    sq = b.op("power", np.power, 0, b.const(2))
    cube = b.op("power", np.power, 0, b.const(3))
    half = b.op("power", np.power, 0, b.const(2.5))
    graph = b.graph(b.op("add", np.add, sq, cube), half)
    assert simplify.run(graph, exact=True)[1] == {}
    g, counts = simplify.run(graph)
    assert counts == {"small_power": 2} and names(g).count("power") == 1
    assert np.allclose(run(g, X)[0], X ** 2 + X ** 3, rtol=1e-15)


def test_sum_of_a_broadcast_is_a_product():
    b = B(np.arange(3.0))
    wide = b.op("broadcast_to", lambda a: np.broadcast_to(a, (4, 3)), 0)
    total = b.op("sum", lambda a: a.sum(axis=0, keepdims=True), wide, params=(0, True, None))
    partial = b.op("sum", lambda a: a.sum(axis=1), wide, params=(1, False, None))
    g, counts = simplify.run(b.graph(b.op("exp", np.exp, total), partial))
    assert counts == {"sum_of_broadcast": 1}
    assert np.array_equal(run(g, np.arange(3.0))[0], np.exp(4 * np.arange(3.0))[None])


def test_fold_runs_ops_on_private_constants_once():
    b = B(X)
    mask = b.op("tril", lambda a: np.tril(a), b.const(np.ones((2, 3))))
    scale = b.op("divide", np.divide, b.const(1.0), b.const(4.0))
    outside = b.op("exp", np.exp, b.const(np.ones(3), private=False))
    y = b.op("where", lambda m, x, s: np.where(m > 0, x * s, 0), mask, 0, scale)
    g, counts = fold.run(b.graph(b.op("add", np.add, y, outside)))
    assert counts == {"folded": 2} and names(g) == ["exp", "where", "add"]
    assert np.array_equal(run(g, X)[0], run(b.graph(b.op("add", np.add, y, outside)), X)[0])


def test_fold_leaves_constants_an_effect_writes():
    b = B(X)
    acc = b.const(np.zeros(3))
    doubled = b.op("multiply", np.multiply, acc, b.const(2.0))
    b.effect("accumulate", lambda a, x: a.__iadd__(x[0]), acc, 0)
    assert fold.run(b.graph(doubled))[1] == {}


def test_inplace_names_operands_that_die_and_were_made_in_the_step():
    b = B(X, X)
    s = b.op("add", np.add, 0, 1)            # inputs: never written
    t = b.op("exp", np.exp, s)               # s is read again below
    u = b.op("multiply", np.multiply, t, s)  # t dies here, s too
    v = b.op("add", np.add, u, t)            # t read after: not a candidate at u
    graph = b.graph(v)
    g, counts = inplace.run(graph)
    into = {n.name + str(i): n.into for i, n in enumerate(g.nodes)}
    assert into == {"add0": (), "exp1": (), "multiply2": (s,), "add3": (u, t)}
    assert counts["may_write_in_place"] == 2 and counts["reusable_bytes"] == 2 * X.nbytes


def test_pass_names():
    assert pass_names("exact") == EXACT and pass_names("fast") == FAST
    assert pass_names(None) == () and pass_names(["cse"]) == ("cse",)
    with pytest.raises(ValueError, match="unknown passes"):
        pass_names(["cse", "vectorize"])
    with pytest.raises(ValueError, match="exact"):
        pass_names("fastest")


UNARY = [("negative", np.negative), ("exp", lambda a: np.exp(a / 8)), ("square", np.square),
         ("transpose", lambda a: a.T)]
BINARY = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
          ("power", np.power)]


@st.composite
def step_graphs(draw):
    """Random step-like graphs on two 3x3 inputs: ufuncs (the same kernels repeated, so
    CSE finds work), identities with constants, powers, dead values and in-place updates."""
    b = B(np.linspace(0.5, 2, 9).reshape(3, 3), np.linspace(-1, 1, 9).reshape(3, 3))
    live = [0, 1]
    for _ in range(draw(st.integers(1, 25))):
        what = draw(st.sampled_from(["unary", "binary", "const", "effect"]))
        a = draw(st.sampled_from(live))
        if what == "unary":
            name, fn = draw(st.sampled_from(UNARY))
            live.append(b.op(name, fn, a, params=((1, 0),) if name == "transpose" else ()))
        elif what == "binary":
            name, fn = draw(st.sampled_from(BINARY))
            other = b.const(2) if name == "power" else draw(st.sampled_from(live))
            live.append(b.op(name, fn, a, other))
        elif what == "const":
            name, fn = draw(st.sampled_from(BINARY[:3]))
            live.append(b.op(name, fn, a, b.const(draw(st.sampled_from([0, 1, 1.0, 3])))))
        elif a not in b.inputs:
            b.effect("update", lambda t: t.__imul__(0.5), a)
    outs = draw(st.lists(st.sampled_from(live), min_size=1, max_size=3, unique=True))
    return b, outs


def _inputs():
    return np.linspace(0.5, 2, 9).reshape(3, 3), np.linspace(-1, 1, 9).reshape(3, 3)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(step_graphs())
def test_random_step_graphs_give_the_same_results_with_the_passes(case):
    b, outs = case
    graph = b.graph(*outs)
    want = [np.copy(r) for r in run(graph, *_inputs())]
    exact, _ = run_passes(graph, EXACT)
    for got, w in zip(run(exact, *_inputs()), want):
        assert np.array_equal(got, w, equal_nan=True)
    fast, _ = run_passes(graph, FAST)
    for got, w in zip(run(fast, *_inputs()), want):
        assert np.allclose(got, w, rtol=1e-12, equal_nan=True)
