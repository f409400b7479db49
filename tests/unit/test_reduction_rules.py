"""Reduction rules: the listed choices follow the algebra (reducing a split dim gives the
reduction's own Partial; Partial inputs pass only through the same reduction), every listed
choice simulates to numpy's result on ranks with uneven and empty shards, the split ``mean``
divides by the global count in numpy's accumulator, and the errors name op, shape, placements.
"""
import numpy as np
import pytest
from test_pointwise_rules import PA, PM, PMIN, PS, S0, S1, S2, R, arr, as_set, run_choice

from mtensor.ops import RULES, OpCall, Operand
from mtensor.placement import Partial

NAMES = ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "any", "all")


def call_of(name, x, axis, keepdims=False, dtype=None, mesh=(3,)):
    x = np.asarray(x)
    return OpCall(name, (Operand(x.shape, x.dtype, (R,)),), (axis, keepdims, dtype), mesh)


def listed(name, x, axis, keepdims=False, dtype=None):
    return as_set(RULES[name](call_of(name, x, axis, keepdims, dtype)).choices)


def numpy_of(name, x, axis, keepdims, dtype):
    extra = {"dtype": dtype} if dtype is not None else {}
    return getattr(np, name)(x, axis=axis, keepdims=keepdims, **extra)


def sim(name, x, axis, choice, keepdims=False, dtype=None, n=3):
    return run_choice(name, [x], choice, (axis, keepdims, dtype), n=n,
                      expected=lambda: numpy_of(name, x, axis, keepdims, dtype))


X = arr(4, 5, seed=3)
BASE = {((R,), R)}


@pytest.mark.parametrize("keepdims", [False, True])
def test_sum_and_mean_of_floats(keepdims):
    for name in ("sum", "mean"):
        # reducing dim 1: dim 0 keeps its split; split dim 1 leaves partial sums; terms of a
        # sum (or of an average) add up through a sum
        assert listed(name, X, 1, keepdims) == BASE | {
            ((S0,), S0), ((S1,), PS), ((PS,), PS), ((PA,), PA)}
        # reducing dim 0 renumbers dim 1 unless the reduced dim is kept
        assert listed(name, X, 0, keepdims) == BASE | {
            ((S1,), S1 if keepdims else S0), ((S0,), PS), ((PS,), PS), ((PA,), PA)}


def test_max_min_any_all_and_those_without_terms():
    assert listed("max", X, 1) == BASE | {((S0,), S0), ((S1,), PM), ((PM,), PM)}
    assert listed("min", X, None) == BASE | {((S0,), PMIN), ((S1,), PMIN), ((PMIN,), PMIN)}
    flags = X > 0
    # any = max over bools, all = min; bool terms do not pass through
    assert listed("any", flags, 0) == BASE | {((S1,), S0), ((S0,), PM)}
    assert listed("all", flags, (0, 1), True) == BASE | {((S0,), PMIN), ((S1,), PMIN)}
    for name in ("prod", "argmax", "argmin"):
        assert listed(name, X, 1) == BASE | {((S0,), S0)}
        assert listed(name, X, 0, True) == BASE | {((S1,), S1)}


def test_terms_pass_only_without_a_dtype_change():
    # int8 sums come out int64: widening each int8 term loses numpy's wrap-around
    small = X.astype(np.int8)
    assert listed("sum", small, 1) == BASE | {((S0,), S0), ((S1,), PS)}
    # int64 sums keep their dtype; averaged terms would be truncated
    ints = X.astype(np.int64)
    assert listed("sum", ints, 1) == BASE | {((S0,), S0), ((S1,), PS), ((PS,), PS)}
    assert listed("sum", X.astype(np.float32), 1, dtype=np.dtype("f8")) == BASE | {
        ((S0,), S0), ((S1,), PS)}


def test_an_integer_mean_has_no_terms():
    # a mean computed as int truncates each rank's term: 1/2 + 1/2 -> 0 + 0, not 1
    ints = X.astype(np.int64)
    assert listed("mean", ints, 1, dtype=np.dtype("i8")) == BASE | {((S0,), S0), ((PS,), PS)}
    assert listed("mean", X, 1, dtype=np.dtype("i8")) == BASE | {((S0,), S0)}
    # the float mean of ints does have terms (but only its own dtype passes)
    assert listed("mean", ints, 1) == BASE | {((S0,), S0), ((S1,), PS)}


CASES = [(name, axis, keep) for name in NAMES
         for axis in (None, 0, 1, -1, (0, 1))
         for keep in (False, True)
         if not (name.startswith("arg") and isinstance(axis, tuple))]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name, axis, keep", CASES)
def test_every_listed_choice_simulates(name, axis, keep):
    for x in (X, arr(2, 7, seed=4)):  # (2, 7) on 3 ranks: an empty shard of dim 0
        x = x > 0 if name in ("any", "all") else x
        for choice in RULES[name](call_of(name, x, axis, keep)).choices:
            assert sim(name, x, axis, choice, keep), choice


@pytest.mark.parametrize("name, dtype, src", [
    ("sum", "i2", "i1"), ("sum", None, "i1"), ("prod", None, "u1"), ("mean", None, "i2"),
    ("mean", "f4", "f8"), ("mean", None, "f2"), ("mean", None, "?"), ("mean", None, "i1"),
    ("sum", None, "?"), ("any", None, "f8"), ("all", None, "i4"),
])
def test_dtypes_follow_numpy(name, dtype, src):
    x = arr(7, 3, seed=5, low=0, high=3).astype(src)
    dtype = dtype and np.dtype(dtype)
    for choice in RULES[name](call_of(name, x, 0, False, dtype)).choices:
        if not (isinstance(choice.inputs[0], Partial) and src == "?"):
            assert sim(name, x, 0, choice, dtype=dtype), choice


@pytest.mark.parametrize("src", ["?", "i1", "u1", "i8", "f2", "f4"])
def test_split_mean_accumulates_as_numpy_does(src):
    """The split kernel on one whole block is numpy's mean bit for bit: 2/3 in float64 for
    integers and bools (never float32), float32 for float16."""
    x = np.array([[1, 1, 0], [1, 0, 0], [3, 1, 1]]).astype(src)
    s = RULES["mean"](call_of("mean", x, 1))
    kernel = s.bind(((S1,),), (PS,), None)
    got, want = kernel(x), np.mean(x, axis=1)
    assert got.dtype == want.dtype and np.array_equal(got, want)


@pytest.mark.parametrize("x, dtype", [
    (np.array([2048, 1, 1], np.float16), None),   # float16 sums to 2048 + 1 + 1 = 2048
    (np.array([1e8 + 1, -1e8, 0.0]), "f4"),       # float32 sums 1e8 - 1e8 = 0
    (np.array([1e8, 1, -1e8], np.float32), None),  # float32 sums to 0 (float64 to 1)
    (np.array([1e8 + 1, -1e8, 0.0]), "f8"),
])
def test_split_mean_accumulates_in_numpys_dtype(x, dtype):
    dtype = dtype and np.dtype(dtype)
    kernel = RULES["mean"](call_of("mean", x, 0, dtype=dtype)).bind(((S0,),), (PS,), None)
    got, want = kernel(x), np.mean(x, dtype=dtype)
    assert got.dtype == want.dtype and got == want


def test_split_mean_divides_by_the_global_count():
    x = np.arange(7.0)
    s = RULES["mean"](call_of("mean", x, 0, dtype=np.dtype("f4")))
    kernel = s.bind(((S0,),), (PS,), None)
    # a rank holding [0, 1, 2] of 7 elements contributes 3 / 7, not 3 / 3
    got = kernel(x[:3])
    assert got.dtype == np.float32 and got == np.float32(3 / 7)
    whole = s.bind(((R,),), (R,), None)(x)
    assert whole.dtype == np.float32 and whole == np.float32(3.0)


def test_split_max_of_an_empty_shard_is_the_identity():
    s = RULES["max"](call_of("max", np.zeros((2, 3)), 0))
    assert np.array_equal(s.bind(((S0,),), (PM,), None)(np.zeros((0, 3))), [-np.inf] * 3)
    s = RULES["min"](call_of("min", np.zeros((2, 3), np.int16), 0, True))
    got = s.bind(((S0,),), (PMIN,), None)(np.zeros((0, 3), np.int16))
    assert got.shape == (1, 3) and (got == np.iinfo(np.int16).max).all()
    # unsplit, the reduction is numpy's own (which rejects the empty block)
    with pytest.raises(ValueError):
        s.bind(((R,),), (R,), None)(np.zeros((0, 3), np.int16))


def test_out_shapes():
    for keep in (False, True):
        assert RULES["sum"](call_of("sum", np.zeros((2, 3, 4)), (0, 2), keep)).out_shape == (
            (1, 3, 1) if keep else (3,))
    assert RULES["argmax"](call_of("argmax", np.zeros((2, 3, 4)), None)).out_shape == ()


def test_argmax_kernels_take_axis_and_keepdims():
    x = arr(4, 5, seed=6)
    for name in ("argmax", "argmin"):
        for axis, keep in ((1, True), (-1, False), (None, False), (np.int64(0), True)):
            s = RULES[name](call_of(name, x, axis, keep))
            got = s.bind(((R,),), (R,), None)(x)
            assert np.array_equal(got, getattr(np, name)(x, axis=axis, keepdims=keep))


def test_errors_name_op_shape_placements():
    with pytest.raises(ValueError, match=r"^argmax of \(3, 4\) \[R\]: axis \(0, 1\) must be an "
                                         r"int or None; reduce one axis at a time$"):
        RULES["argmax"](call_of("argmax", np.zeros((3, 4)), (0, 1)))
    with pytest.raises(ValueError, match=r"^argmin of .*axis \[1\] must be an int"):
        RULES["argmin"](call_of("argmin", np.zeros((3, 4)), [1]))
    with pytest.raises(ValueError, match=r"^max of \(0, 3\) \[R\]: zero-size reduction over "
                                         r"axis 0 has no identity; reduce over non-empty dims$"):
        RULES["max"](call_of("max", np.zeros((0, 3)), 0))
    for name in ("min", "argmax", "argmin"):
        with pytest.raises(ValueError, match=f"^{name} of .*zero-size reduction over axis None"):
            RULES[name](call_of(name, np.zeros((3, 0)), None))
    # sums, products, any and all have an identity; a non-empty axis needs none
    for name in ("sum", "prod", "mean", "any", "all"):
        assert RULES[name](call_of(name, np.zeros((3, 0)), 1)).out_shape == (3,)
    assert RULES["argmax"](call_of("argmax", np.zeros((0, 3)), 1)).out_shape == (0,)
    assert RULES["max"](call_of("max", np.zeros((1, 3)), 0)).out_shape == (3,)
    # a tuple axis is fine for the other reductions
    assert RULES["sum"](call_of("sum", np.zeros((3, 4)), (0, 1))).out_shape == ()


def test_partial_input_on_three_dims_keeps_its_dims():
    x = arr(2, 3, 4, seed=7)
    got = listed("sum", x, 1, True)
    assert got == BASE | {((S0,), S0), ((S2,), S2), ((S1,), PS), ((PS,), PS), ((PA,), PA)}


@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all_give_bools_for_object_arrays(name):
    """numpy's any/all answer bools even where the logical ufuncs would keep the objects."""
    x = np.array([[0, 2], [0, 3]], dtype=object)
    for axis in (0, None):
        kernel = RULES[name](call_of(name, x, axis)).bind(((R,),), (R,), None)
        got, want = kernel(x), getattr(np, name)(x, axis=axis)
        assert np.asarray(got).dtype == bool and np.array_equal(got, want)
