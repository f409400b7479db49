"""Ops taught from user code (no MPI): ``mt.register_sharding``'s rule form and its checks,
and ``mt.testing.check_rule`` simulating every choice of a rule on every block, catching a
wrong one by name."""
import numpy as np
import pytest

import mtensor as mt
from mtensor.ops import RULES, Choice, OpCall, Operand
from mtensor.ops.user_rules import ROUTES, Route, ShardingCall
from mtensor.placement import Partial, Replicate, Shard

R, S0, S1, PS = Replicate(), Shard(0), Shard(1), Partial("sum")
MESHES = [(2,), (3,), (4,), (2, 2), (3, 1)]


def unwrap_rule(call):
    """np.unwrap runs along ``axis``: a split there needs it whole; other dims stay split."""
    ndim = call.operands[0].ndim
    axis = call.args["axis"] % ndim
    return [(Shard(d), Shard(d)) for d in range(ndim) if d != axis]


def unwrap_claims_its_axis(call):
    return [(Shard(d), Shard(d)) for d in range(call.operands[0].ndim)]


def trapezoid_rule(call):
    """np.trapezoid over ``axis``: linear in ``y`` (sum terms stay terms); a split of another
    dim keeps it, at its place in the output."""
    ndim = call.operands[0].ndim
    axis = call.args["axis"] % ndim
    kept = [d for d in range(ndim) if d != axis]
    return [(Shard(d), Shard(kept.index(d))) for d in kept] + [(PS, PS)]


def phases(*shape, seed=0):
    """Wrapped angles of a drifting phase: unwrap adds a multiple of 2 pi from the first
    wrap on, so a block unwrapped on its own starts from the wrong turn."""
    steps = np.random.default_rng(seed).uniform(-0.5, 2.5, shape)
    return np.angle(np.exp(1j * steps.cumsum(axis=-1)))


@pytest.fixture
def taught():
    """Ops registered in a test are forgotten after it."""
    ops = []
    yield ops.append
    for op in ops:
        RULES.pop(ROUTES.pop(op).name, None)


@pytest.mark.parametrize("shape, axis", [((7,), -1), ((6, 5), 0), ((6, 5), 1), ((4, 3, 5), 1)])
def test_check_rule_passes_a_right_rule_on_every_layout(shape, axis):
    mt.testing.check_rule(np.unwrap, unwrap_rule, phases(*shape), axis=axis, mesh_shapes=MESHES)


def test_check_rule_names_the_wrong_choice_the_mesh_and_the_element():
    with pytest.raises(AssertionError) as info:
        mt.testing.check_rule(np.unwrap, unwrap_claims_its_axis, phases(6, 5), axis=1)
    text = str(info.value)
    assert text.startswith("check_rule: np.unwrap choice [S(1)] -> S(1) on mesh (2,): "
                           "element ("), text
    assert "where numpy gives" in text


def test_check_rule_assembles_partial_terms_and_moves_output_dims():
    y, x = phases(5, 6), np.linspace(0, 1, 6) ** 2
    for axis in (0, 1):
        mt.testing.check_rule(np.trapezoid, trapezoid_rule, y, axis=axis, mesh_shapes=MESHES)

    def splits_the_axis(call):
        return [((S1, S0), PS)]   # y and x split along the axis: the edge panels are lost
    with pytest.raises(AssertionError, match=r"np.trapezoid choice \[S\(1\), S\(0\)\] -> P\(sum\) on "
                                             r"mesh \(2,\): element \(0,\)"):
        mt.testing.check_rule(np.trapezoid, splits_the_axis, y, x)


def test_check_rule_on_a_two_dim_mesh_names_each_mesh_dims_choice():
    with pytest.raises(AssertionError, match=r"choices \[R\] -> R; \[S\(0\)\] -> S\(0\) \(per "
                                             r"mesh dim\) on mesh \(2, 2\)"):
        mt.testing.check_rule(np.unwrap, unwrap_claims_its_axis, phases(12), mesh_shapes=[(2, 2)])


def test_check_rule_reports_a_kernel_that_raises_and_a_wrong_out_shape():
    def kernel(p, axis):
        raise RuntimeError("boom")
    with pytest.raises(AssertionError, match="choice .R. -> R on mesh .2,.: the kernel raised "
                                             "RuntimeError: boom"):
        mt.testing.check_rule(np.unwrap, unwrap_rule, phases(4), axis=0, kernel=kernel)
    with pytest.raises(AssertionError, match=r"output shape is \(3,\), numpy's \(4,\)"):
        mt.testing.check_rule(np.unwrap, unwrap_rule, phases(4), out_shape=lambda call: (3,))


def call_for(route, *args, mesh=(2,), **kwargs):
    name, operands, params, cache = route.split(args, kwargs)
    ops = tuple(Operand(np.shape(o), np.asarray(o).dtype, (R,) * len(mesh)) for o in operands)
    return OpCall(name, ops, params, mesh), cache


def test_the_rule_reads_static_arguments_by_name_with_numpys_defaults():
    seen = []

    def rule(call):
        seen.append(call)
        return []
    route = Route(np.unwrap, rule)
    strategy = route(call_for(route, phases(3, 4), None, 0)[0])
    (call,) = seen
    assert type(call) is ShardingCall and call.name == "np.unwrap"
    assert call.args == {"discont": None, "axis": 0, "period": 2 * np.pi}
    assert [o.shape for o in call.operands] == [(3, 4)]
    # numpy's own shape on stand-ins, and the whole-array choice added to an empty list
    assert strategy.out_shape == (3, 4) and strategy.choices == [Choice((R,), R)]
    assert str(call.error("bad", "fix")) == "np.unwrap of (3, 4) [R]: bad; fix"


def test_arrays_anywhere_in_the_arguments_are_operands_in_their_places():
    route = Route(np.trapezoid, lambda call: [((S0, R), S0)])
    y, x = phases(4, 3), np.arange(3.0)
    call, cache = call_for(route, y, x=x, axis=1)
    assert cache and [o.shape for o in call.operands] == [(4, 3), (3,)]
    strategy = route(call)
    assert strategy.out_shape == (4,)
    assert strategy.choices == [Choice((R, R), R), Choice((S0, R), S0)]
    np.testing.assert_array_equal(strategy.kernel(y[:2], x), np.trapezoid(y[:2], x=x, axis=1))


def test_split_refuses_out_and_arrays_in_lists_and_leaves_unhashable_params_uncached():
    route = Route(np.unwrap, unwrap_rule)
    with pytest.raises(TypeError, match="np.unwrap: out= is not supported"):
        route.split((phases(3),), {"out": np.zeros(3)})
    with pytest.raises(TypeError, match="np.unwrap: an array inside a list"):
        route.split(([phases(3)],), {})
    assert route.split((phases(3),), {"axis": [0]})[3] is False


@pytest.mark.parametrize("choices, words", [
    ([(S0,)], "is not a pair"),
    ([((S0, S0), S0)], "has 2 operand placement(s)"),
    ([(Shard(2), S0)], "shards dim 2 of an array of 2 dims"),
    ([(S0, Shard(1))], "shards dim 1 of an array of 1 dims"),
    ([("S0", S0)], "holds 'S0', not Shard(d)"),
])
def test_a_malformed_choice_is_named(choices, words):
    route = Route(np.sum, lambda call: choices, out_shape=lambda call: (4,))
    with pytest.raises(ValueError) as info:
        route(call_for(route, np.ones((4, 3)), axis=1)[0])
    assert "register_sharding: the rule for np.sum returned choice 0" in str(info.value)
    assert words in str(info.value)


def test_register_sharding_as_decorator_and_by_name(taught):
    @mt.register_sharding("unwrap")
    def rule(call):
        return unwrap_rule(call)
    taught(np.unwrap)
    assert ROUTES[np.unwrap].rule is rule and RULES["np.unwrap"] is ROUTES[np.unwrap]
    with pytest.raises(ValueError, match="np.unwrap was registered before; pass override=True"):
        mt.register_sharding(np.unwrap, unwrap_rule)
    assert mt.register_sharding(np.unwrap, unwrap_rule, override=True) is unwrap_rule
    assert ROUTES[np.unwrap].rule is unwrap_rule


@pytest.mark.parametrize("op", [np.sum, np.add, np.ptp])
def test_overriding_a_built_in_op_asks_for_override(op, taught):
    with pytest.raises(ValueError, match=f"np.{op.__name__} has a built-in rule; pass "
                                         f"override=True"):
        mt.register_sharding(op, unwrap_rule)
    mt.register_sharding(op, unwrap_rule, override=True)
    taught(op)
    assert RULES[f"np.{op.__name__}"] is ROUTES[op]


def test_register_sharding_refuses_what_is_not_an_op_or_a_rule():
    with pytest.raises(ValueError, match="numpy has no function 'no_such_fn'"):
        mt.register_sharding("no_such_fn", unwrap_rule)
    with pytest.raises(TypeError, match="op must be a numpy function"):
        mt.register_sharding(3, unwrap_rule)
    with pytest.raises(TypeError, match="the rule for np.sinc must be callable"):
        mt.register_sharding(np.sinc, [(S0, S0)])
