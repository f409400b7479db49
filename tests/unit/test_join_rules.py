"""concatenate and stack simulated rank by rank on one process (no MPI): every combination of
the listed choices against numpy on whole arrays, which dims may stay split, and the errors."""
import numpy as np
import pytest
from test_views_rules import check_all_choices, shard_pairs

from mtensor.ops import RULES, OpCall, Operand
from mtensor.ops.join import concatenate_rule, stack_rule
from mtensor.placement import Partial, Replicate, Shard

R, S0, S1 = Replicate(), Shard(0), Shard(1)


def A(*shape, seed=0):
    return np.random.default_rng(seed).integers(-5, 6, shape).astype(float)


def rule(name, shapes, params, mesh=(2,), placements=None):
    ops = tuple(Operand(s, np.dtype("f8"), placements or (R,) * len(mesh)) for s in shapes)
    return RULES[name](OpCall(name, ops, params, mesh))


def test_rules_are_the_registered_ones():
    assert RULES["concatenate"] is concatenate_rule and RULES["stack"] is stack_rule


@pytest.mark.parametrize("mesh", [(2,), (3,), (2, 2)])
@pytest.mark.parametrize("shapes, axis", [
    ([(3, 4), (5, 4)], 0), ([(3, 4), (5, 4), (1, 4)], -2), ([(5, 2), (5, 3)], 1),
    ([(5, 2), (5, 3)], -1), ([(2, 3, 4), (2, 1, 4)], 1), ([(4,), (3,)], 0),
])
def test_concatenate_all_choices(mesh, shapes, axis):
    arrays = [A(*s, seed=k) for k, s in enumerate(shapes)]
    strategy, _ = check_all_choices("concatenate", arrays, (axis,), mesh,
                                    np.concatenate(arrays, axis=axis))
    ndim = len(shapes[0])
    # every dim but the joined one stays split, in place
    assert shard_pairs(strategy) == {d: d for d in range(ndim) if d != axis % ndim}
    assert all(ch.inputs == (ch.inputs[0],) * len(arrays) for ch in strategy.choices)
    assert [ch.output for ch in strategy.choices if isinstance(ch.output, Partial)] == [
        Partial(op) for op in ("sum", "avg", "max", "min")]


@pytest.mark.parametrize("mesh", [(2,), (3,), (2, 2)])
@pytest.mark.parametrize("shapes, axis", [
    ([(3, 4), (3, 4)], 0), ([(3, 4)] * 3, 1), ([(3, 4), (3, 4)], 2), ([(3, 4), (3, 4)], -1),
    ([(3, 4), (3, 4)], -3), ([(5,), (5,)], 0), ([(), ()], 0),
])
def test_stack_all_choices(mesh, shapes, axis):
    arrays = [A(*s, seed=k) for k, s in enumerate(shapes)]
    strategy, _ = check_all_choices("stack", arrays, (axis,), mesh, np.stack(arrays, axis=axis))
    ndim = len(shapes[0])
    new = axis % (ndim + 1)
    assert shard_pairs(strategy) == {d: d if d < new else d + 1 for d in range(ndim)}


@pytest.mark.parametrize("name, shapes, axis, message", [
    ("concatenate", [(3, 4), (3, 5)], 0, "operand shapes differ outside axis 0; join arrays of "
                                         "one shape"),
    ("concatenate", [(3, 4), (3, 4, 1)], 0, "operand shapes differ outside axis 0; join arrays "
                                            "of one shape"),
    ("concatenate", [(3, 4), (3, 4), (2, 5)], -1, "operand shapes differ outside axis 1; join "
                                                  "arrays of one shape"),
    ("concatenate", [(3, 4), (3, 4)], 2, "axis 2 is out of range for 2 dims; pass an axis in "
                                         "range(-2, 2)"),
    ("concatenate", [(3, 4), (3, 4)], -3, "axis -3 is out of range for 2 dims; pass an axis in "
                                          "range(-2, 2)"),
    ("concatenate", [(), ()], 0, "zero-dimensional arrays cannot be concatenated; use stack"),
    ("stack", [(3, 4), (4, 3)], 0, "operand shapes differ; join arrays of one shape"),
    ("stack", [(3, 4), (3, 4), (3,)], 0, "operand shapes differ; join arrays of one shape"),
    ("stack", [(3, 4), (3, 4)], 3, "axis 3 is out of range for 3 dims; pass an axis in "
                                   "range(-3, 3)"),
    ("stack", [(3, 4), (3, 4)], -4, "axis -4 is out of range for 3 dims; pass an axis in "
                                    "range(-3, 3)"),
])
def test_errors_name_the_op_shapes_and_axis(name, shapes, axis, message):
    with pytest.raises(ValueError):   # numpy refuses these too
        getattr(np, name)([np.zeros(s) for s in shapes], axis=axis)
    with pytest.raises(ValueError) as info:
        rule(name, shapes, (axis,), placements=(S0,) if shapes[0] else (R,))
    described = ", ".join(f"{s} [{'S(0)' if shapes[0] else 'R'}]" for s in shapes)
    assert str(info.value) == f"{name} of {described}: {message}"


def test_out_shapes():
    assert rule("concatenate", [(3, 4), (5, 4)], (0,)).out_shape == (8, 4)
    assert rule("concatenate", [(2, 3), (2, 1), (2, 2)], (1,)).out_shape == (2, 6)
    assert rule("stack", [(3, 4)] * 3, (1,)).out_shape == (3, 3, 4)
    assert rule("stack", [(3, 4)] * 2, (-1,)).out_shape == (3, 4, 2)
