"""The rule table and the helpers every rule uses (no MPI): operands, calls, error messages,
dtype promotion, when partial terms survive, and axis normalisation checked against numpy."""
import itertools

import numpy as np
import pytest

from mtensor.ops.registry import (
    RULES,
    Choice,
    OpCall,
    Operand,
    Strategy,
    normalize_axes,
    register,
    replicated,
    result_dtype,
    shard_along,
    terms_survive,
    wants,
)
from mtensor.placement import Partial, Replicate, Shard

R, S0, S1 = Replicate(), Shard(0), Shard(1)


def call_of(*operands, name="op", params=(), mesh=(2,)):
    return OpCall(name, tuple(operands), params, mesh)


def test_operand_ndim_and_defaults():
    a = Operand((3, 4, 5), np.dtype("f8"), (S0,))
    assert a.ndim == 3 and Operand((), np.dtype("f8"), None).ndim == 0
    # an array operand unless told otherwise: not weak, and safe for partial terms
    assert a.weak is False and a.safe is True


@pytest.mark.parametrize("dtype", ["i1", "u2", "f4", "c8", "?"])
def test_promotion_follows_nep50(dtype):
    arr = np.zeros(2, dtype)
    # numpy's own promotion with a Python scalar (weak) and with a 0-d array (strong)
    for py in (True, 3, 2.5):
        weak = Operand((), np.dtype(type(py)), None, weak=True)
        strong = Operand((), np.dtype(type(py)), None)
        x = Operand((2,), np.dtype(dtype), (S0,))
        assert result_dtype(call_of(x, weak)) == (arr + py).dtype
        assert result_dtype(call_of(x, strong)) == (arr + np.array(py)).dtype
    assert Operand((), np.dtype("i8"), None, weak=True).promotion_arg() == 0
    assert type(Operand((), np.dtype("f8"), None, weak=True).promotion_arg()) is float
    assert Operand((), np.dtype("f4"), None).promotion_arg() == np.dtype("f4")


def test_describe_and_error_name_op_shapes_and_placements():
    call = call_of(Operand((3, 4), np.dtype("f8"), (S0, R)), Operand((5,), np.dtype("f8"), None),
                   name="matmul", mesh=(2, 2))
    assert call.describe() == "matmul of (3, 4) [S(0), R], (5,)"
    err = call.error("shapes differ", "reshape first")
    assert type(err) is ValueError
    assert str(err) == "matmul of (3, 4) [S(0), R], (5,): shapes differ; reshape first"


def test_strategy_binds_its_kernel_or_asks_kernel_for():
    plain = Strategy((2,), [replicated(1)], kernel=np.negative)
    assert plain.nout == 1 and plain.into is None and plain.kernel_for is None
    assert plain.bind(((R,),), (R,), None) is np.negative
    seen = []

    def kernel_for(ins, out, mesh):
        seen.append((ins, out, mesh))
        return np.positive

    lazy = Strategy((2,), [replicated(1)], kernel_for=kernel_for)
    assert lazy.kernel is None
    assert lazy.bind(((S0,),), (S0,), "mesh") is np.positive
    assert seen == [(((S0,),), (S0,), "mesh")]


def test_register_adds_each_name_once():
    names = ("_test_registry_a", "_test_registry_b")

    def rule(call):
        return None

    try:
        assert register(*names)(rule) is rule
        assert all(RULES[n] is rule for n in names)
        with pytest.raises(ValueError, match="ops: a rule for '_test_registry_b' is registered"
                                             " twice"):
            register("_test_registry_b")(lambda call: None)
        assert RULES["_test_registry_b"] is rule
    finally:
        for n in names:
            RULES.pop(n, None)


def test_every_numpy_family_is_registered():
    for name in ("transpose", "reshape", "concatenate", "stack", "ufunc_reduce", "squeeze"):
        assert callable(RULES[name])


@pytest.mark.parametrize("dtypes, op, survive", [
    (("i8", "i8"), "sum", True),
    (("i8", "i8"), "max", True),
    (("i8", "i8"), "avg", False),      # the all-reduce of avg divides: truncates integers
    (("f4", "f4"), "avg", True),
    (("c8", "c8"), "avg", True),
    (("i1", "i2"), "sum", False),      # the int8 terms widen: numpy's wrap-around is lost
    (("f8", "f4"), "max", False),      # the float32 terms widen
    (("?", "?"), "min", True),
])
def test_terms_survive_only_without_dtype_changes(dtypes, op, survive):
    call = call_of(*(Operand((2,), np.dtype(d), (Partial(op),)) for d in dtypes))
    assert terms_survive(call, op) is survive


def test_terms_survive_ignores_constants_and_honours_out_dtype():
    x = Operand((2,), np.dtype("f4"), (Partial(),))
    const = Operand((), np.dtype("f8"), None)
    # the float64 constant promotes the result to float64 and the f4 terms widen...
    assert terms_survive(call_of(x, const), "sum") is False
    # ...but a weak Python float does not promote, and the constant itself holds no terms
    weak = Operand((), np.dtype("f8"), None, weak=True)
    assert terms_survive(call_of(x, weak), "sum") is True
    # an explicit output dtype replaces numpy's promotion
    assert terms_survive(call_of(x, const), "sum", out_dtype="f4") is True
    assert terms_survive(call_of(x, weak), "sum", out_dtype="f8") is False
    i = Operand((2,), np.dtype("i4"), (Partial("avg"),))
    assert terms_survive(call_of(i), "avg", out_dtype=np.dtype("i4")) is False
    assert terms_survive(call_of(i), "sum", out_dtype=np.dtype("i4")) is True


def test_choice_builders():
    assert replicated(3) == Choice((R, R, R), R)
    assert replicated(0) == Choice((), R)
    assert wants([0, None, 2]) == (S0, R, Shard(2))
    assert shard_along([1, None], 0) == Choice((S1, R), S0)


@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_normalize_axes_matches_numpy(ndim):
    call = call_of(Operand((2,) * ndim, np.dtype("f8"), (R,)), name="sum")
    a = np.zeros(tuple(range(2, 2 + ndim)))
    assert normalize_axes(call, None, ndim) == tuple(range(ndim))
    for k in (1, 2):
        for axes in itertools.permutations(range(-ndim, ndim), k):
            if len({x % ndim for x in axes}) < k:
                continue
            kept = a.sum(axis=axes, keepdims=True).shape   # numpy's reduced dims become 1
            want = tuple(d for d in range(ndim) if kept[d] == 1)
            assert normalize_axes(call, axes, ndim) == want, axes
            assert all(type(d) is int for d in normalize_axes(call, axes, ndim))
    assert normalize_axes(call, np.int64(-1), ndim) == (ndim - 1,)
    assert normalize_axes(call, -ndim, ndim) == (0,)


def test_normalize_axes_errors_name_the_call():
    call = call_of(Operand((3, 4), np.dtype("f8"), (S0,)), name="sum")
    for bad in (2, -3, (0, 2)):
        a = bad if isinstance(bad, int) else 2
        with pytest.raises(ValueError) as info:
            normalize_axes(call, bad, 2)
        assert str(info.value) == (f"sum of (3, 4) [S(0)]: axis {a} is out of range for 2 dims; "
                                   "pass an axis in range(-2, 2)")
    with pytest.raises(ValueError) as info:
        normalize_axes(call, (1, -1), 2)
    assert str(info.value) == "sum of (3, 4) [S(0)]: axis (1, -1) repeats a dim; name each dim once"
    with pytest.raises(ValueError, match="axis 0 is out of range for 0 dims"):
        normalize_axes(call, 0, 0)
