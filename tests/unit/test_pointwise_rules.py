"""Pointwise rules against the algebra of placements, checked on simulated ranks.

``run_choice`` is the oracle: it cuts whole numpy inputs by a choice's input placements on a
1-D mesh of ``n`` ranks (``np.array_split`` blocks; Partial operands as random terms that
sum / average / max / min to the value), runs the rule's local kernel on every rank, combines
the blocks by the output placement and compares with numpy on the whole arrays.  The other
two ``*_rules`` test files import it.
"""
from types import SimpleNamespace

import numpy as np
import pytest

from mtensor.cost.model import CostModel
from mtensor.device import buffers
from mtensor.ops import RULES, Choice, OpCall, Operand, choose, pointwise
from mtensor.ops.pointwise import UFUNCS
from mtensor.placement import Partial, Replicate, Shard

R, S0, S1, S2 = Replicate(), Shard(0), Shard(1), Shard(2)
PS, PA, PM, PMIN = Partial("sum"), Partial("avg"), Partial("max"), Partial("min")
P = {"sum": PS, "avg": PA, "max": PM, "min": PMIN}


def arr(*shape, dtype=float, seed=0, low=-4, high=5):
    """Small integers (sums stay exact) as ``dtype``."""
    return np.random.default_rng(seed).integers(low, high, shape).astype(dtype)


def operand(value, placed=True, safe=True):
    """An Operand for ``value``: a DTensor (placements on a 1-D mesh) or a constant (None)."""
    if isinstance(value, (bool, int, float, complex)):
        return Operand((), np.dtype(type(value)), None, weak=True, safe=safe)
    value = np.asarray(value)
    return Operand(value.shape, value.dtype, (R,) if placed else None, safe=safe)


def make_call(name, values, params=(), mesh=(3,), consts=()):
    """OpCall of ``name`` over ``values``; positions in ``consts`` are constants."""
    ops = tuple(operand(v, j not in consts) for j, v in enumerate(values))
    return OpCall(name, ops, tuple(params), tuple(mesh))


def terms(value, placement, n, rng):
    """``n`` rank blocks of ``value`` in ``placement`` (one mesh dim)."""
    v = np.asarray(value)
    if isinstance(placement, Replicate):
        return [v] * n
    if isinstance(placement, Shard):
        return np.array_split(v, n, axis=placement.dim)
    op = placement.reduce_op
    if op in ("max", "min"):
        # each element: one rank (at random) holds the value, the others lie below it (max)
        # or above it (min)
        gap = rng.integers(0, 4, (n,) + v.shape)
        np.put_along_axis(gap, rng.integers(0, n, (1,) + v.shape), 0, axis=0)
        return [v - g.astype(v.dtype) if op == "max" else v + g.astype(v.dtype) for g in gap]
    rest = [rng.integers(-3, 4, v.shape).astype(v.dtype) for _ in range(n - 1)]
    return [v * (n if op == "avg" else 1) - sum(rest, np.zeros_like(v))] + rest


def combine(blocks, placement):
    """The whole value from every rank's block, or None where replicas disagree."""
    blocks = [np.asarray(b) for b in blocks]
    if isinstance(placement, Replicate):
        same = all(b.shape == blocks[0].shape and np.array_equal(b, blocks[0], equal_nan=True)
                   for b in blocks)
        return blocks[0] if same else None
    if isinstance(placement, Shard):
        return np.concatenate(blocks, axis=placement.dim)
    stacked = np.stack(blocks)
    op = placement.reduce_op
    if op == "avg":
        return (np.add.reduce(stacked, axis=0) / len(blocks)).astype(stacked.dtype)
    reduce = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op]
    return reduce.reduce(stacked, axis=0, dtype=stacked.dtype)


def run_choice(name, values, choice, params=(), n=3, consts=(), expected=None, seed=1):
    """Whether ``choice`` of the rule for ``name`` gives numpy's result on ``n`` ranks."""
    call = make_call(name, values, params, (n,), consts)
    strategy = RULES[name](call)
    ins, out = tuple((p,) for p in choice.inputs), (choice.output,)
    rng = np.random.default_rng(seed)
    blocks = [terms(v, p, n, rng) for v, p in zip(values, choice.inputs)]
    outs = []
    for r in range(n):
        kernel = strategy.bind(ins, out, SimpleNamespace(shape=(n,), coordinate=(r,)))
        result = kernel(*(b[r] for b in blocks))
        outs.append(result if strategy.nout > 1 else (result,))
    nout = strategy.nout
    got = [combine([o[k] for o in outs], choice.output) for k in range(nout)]
    want = expected() if expected else getattr(np, name)(*values, **dict(params))
    want = list(want) if nout > 1 else [want]
    for g, w in zip(got, want):
        w = np.asarray(w)
        if g is None or g.shape != w.shape or g.dtype != w.dtype:
            return False
        # rank terms round on their own in float32 / float16, within a few ulps of the whole
        tol = max(1e-12, 8 * np.finfo(w.dtype).eps) if w.dtype.kind in "fc" else 0
        if not np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True):
            return False
    return True


def choices(name, values, params=(), consts=(), mesh=(3,), **kw):
    call = OpCall(name, tuple(kw.get("operands") or (operand(v, j not in consts)
                                                    for j, v in enumerate(values))),
                  tuple(params), tuple(mesh))
    return RULES[name](call).choices


def as_set(listed):
    return {(c.inputs, c.output) for c in listed}


def shards(nin, *dims):
    """The plain choices: everything whole, or each operand split on output dim d (when it
    spans it)."""
    out = {((R,) * nin, R)}
    for d, per_operand in dims:
        out.add((tuple(R if k is None else Shard(k) for k in per_operand), Shard(d)))
    return out


def one_partial(nin, op, positions, out=None):
    return {(tuple(P[op] if j == k else R for j in range(nin)), P[out or op]) for k in positions}


# --- the listed choices, derived from the algebra -------------------------------------------

X, Y = arr(4, 5, seed=1), arr(4, 5, seed=2)
PLAIN2 = shards(2, (0, (0, 0)), (1, (1, 1)))


def test_add_lists_sums_of_sums_and_shifted_max_min():
    # (a1 + a2) + (b1 + b2) = (a1 + b1) + (a2 + b2); max(a1, a2) + b = max(a1 + b, a2 + b)
    want = PLAIN2 | {((PS, PS), PS), ((PA, PA), PA)}
    for op in ("max", "min"):
        want |= one_partial(2, op, (0, 1))
    assert as_set(choices("add", [X, Y])) == want


def test_subtract_shifts_max_min_of_the_first_operand_only():
    # max(a1, a2) - b = max(a1 - b, a2 - b), but b - max(a1, a2) = min(b - a1, b - a2)
    want = PLAIN2 | {((PS, PS), PS), ((PA, PA), PA)}
    for op in ("max", "min"):
        want |= one_partial(2, op, (0,))
    assert as_set(choices("subtract", [X, Y])) == want
    assert not run_choice("subtract", [X, Y], Choice((R, PM), PM))
    assert run_choice("subtract", [X, Y], Choice((R, PM), PMIN))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # terms meet 0 or inf
def test_multiply_and_divide_scale_sums_by_a_whole_operand():
    want = PLAIN2 | one_partial(2, "sum", (0, 1)) | one_partial(2, "avg", (0, 1))
    assert as_set(choices("multiply", [X, Y])) == want
    # (a1 + a2) / b = a1 / b + a2 / b, but b / (a1 + a2) is no sum of b / ai
    want = PLAIN2 | one_partial(2, "sum", (0,)) | one_partial(2, "avg", (0,))
    assert as_set(choices("divide", [X, Y + 10])) == want
    assert not run_choice("divide", [X, Y + 10], Choice((R, PS), PS))
    # a product of two sums is not the sum of the products
    assert not run_choice("multiply", [X, Y], Choice((PS, PS), PS))


def test_unary_maps():
    x = [X]
    plain = shards(1, (0, (0,)), (1, (1,)))
    # -max(a1, a2) = min(-a1, -a2)
    assert as_set(choices("negative", x)) == plain | {
        ((PS,), PS), ((PA,), PA), ((PM,), PMIN), ((PMIN,), PM)}
    assert as_set(choices("positive", x)) == plain | {((P[o],), P[o]) for o in P}
    assert as_set(choices("conjugate", x)) == plain | {((PS,), PS), ((PA,), PA)}
    assert as_set(choices("copy", x)) == plain | {((P[o],), P[o]) for o in P}
    # exp is neither linear nor does it map one reduction to another here
    assert as_set(choices("exp", x)) == plain


@pytest.mark.parametrize("name, op", [("maximum", "max"), ("fmax", "max"),
                                      ("minimum", "min"), ("fmin", "min")])
def test_max_of_maxes(name, op):
    assert as_set(choices(name, [X, Y])) == PLAIN2 | {((P[op], P[op]), P[op])}
    other = "min" if op == "max" else "max"
    # the max of two mins is no min of maxes: with equal operands, ranks holding a term
    # above the value in either operand raise the elementwise max
    assert not run_choice(name, [X, X], Choice((P[other], P[other]), P[other]))


def test_order_algebra_needs_floats():
    """Integers wrap around: max(127, 120) + 1 wraps to -128 while max(-128, 121) = 121."""
    x, one = np.array([127], np.int8), np.array([1], np.int8)
    ints = as_set(choices("add", [x, one]))
    assert not any(out in (PM, PMIN) for _, out in ints)
    assert ((PS, PS), PS) in ints
    assert not run_choice("add", [x, one], Choice((PM, R), PM), n=2)
    negs = as_set(choices("negative", [np.array([3], np.int16)]))
    assert ((PS,), PS) in negs and ((PM,), PMIN) not in negs
    # one float operand is not enough
    assert not any(o == PM for _, o in as_set(choices("add", [X, x.astype(np.int64)])))
    sub = as_set(choices("subtract", [X.astype(np.float32), Y.astype(np.float32)]))
    assert ((PM, R), PM) in sub


def test_sums_need_unchanged_dtypes_but_max_min_do_not():
    """f4 terms promoted to f8 round each term alone; max(f4 terms) rounds the same."""
    listed = as_set(choices("add", [X.astype(np.float32), Y]))
    assert not any(o in (PS, PA) for _, o in listed)
    assert one_partial(2, "max", (0, 1)) <= listed
    # integer avg terms are truncated by the average: only sum survives on integers
    ints = as_set(choices("multiply", [X.astype(np.int64), Y.astype(np.int64)]))
    assert one_partial(2, "sum", (0, 1)) <= ints and not any(o == PA for _, o in ints)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # terms meet 0 or inf
def test_unsafe_or_boolean_operands_reduce_first():
    # inf * (5 + -3) = inf, but inf * 5 + inf * -3 = nan
    call = OpCall("multiply", (operand(X), operand(np.inf, safe=False)), (), (3,))
    assert not any(isinstance(c.output, Partial) for c in RULES["multiply"](call).choices)
    assert run_choice("multiply", [X, np.full((4, 5), 1.5)], Choice((PS, R), PS))
    assert not run_choice("multiply", [X + 10, np.full((4, 5), np.inf)], Choice((PS, R), PS))
    flags = [X > 0, Y > 0]
    assert as_set(choices("logical_or", flags)) == PLAIN2
    assert not any(isinstance(c.output, Partial) for c in choices("add", [X, Y > 0]))


def test_a_dtype_argument_casts_each_term():
    listed = choices("add", [X, Y], (("dtype", np.dtype("f4")),))
    assert as_set(listed) == PLAIN2
    assert run_choice("add", [X, Y], Choice((S1, S1), S1), (("dtype", np.dtype("f4")),))


def test_broadcast_operands_are_used_whole():
    a, row, col, scalar = arr(4, 5), arr(5), arr(4, 1), arr()
    # output dim 0: only ``a`` spans it; output dim 1: ``a`` and ``row`` (right-aligned)
    assert shards(2, (0, (0, None)), (1, (1, 0))) <= as_set(choices("add", [a, row]))
    # ``col`` is 1 along dim 1: broadcast there, so not split on it
    assert shards(2, (0, (0, 0)), (1, (1, None))) <= as_set(choices("add", [a, col]))
    assert shards(2, (0, (0, None)), (1, (1, None))) <= as_set(choices("add", [a, scalar]))
    for args in ([a, row], [col, a], [a, scalar]):
        for c in choices("add", args):
            assert run_choice("add", args, c), (c, args)


def test_rank_mismatch_shard_choices_simulate():
    a, b = arr(2, 3, 4), arr(3, 1)
    listed = choices("multiply", [a, b])
    assert shards(2, (0, (0, None)), (1, (1, 0)), (2, (2, None))) == {
        x for x in as_set(listed) if not any(isinstance(p, Partial) for p in x[0])}
    for c in listed:
        assert run_choice("multiply", [a, b], c)


def test_broadcast_error_names_op_shapes_and_placements():
    with pytest.raises(ValueError, match=r"^add of \(3, 4\) \[R\], \(5,\) \[R\]: shapes "
                                         r"\(3, 4\), \(5,\) do not broadcast together; "
                                         r"make trailing dims equal or 1$"):
        choices("add", [arr(3, 4), arr(5)])
    with pytest.raises(ValueError, match=r"^where of .*\(2,\), \(3,\) do not broadcast"):
        choices("where", [arr(2) > 0, arr(2), arr(3)])


# --- every listed choice simulates to numpy's result ----------------------------------------

F4 = np.float32
SOUND = [
    ("add", [X, Y], ()), ("subtract", [X, Y], ()), ("multiply", [X, Y], ()),
    ("divide", [X, Y + 10], ()), ("negative", [X], ()), ("positive", [X], ()),
    ("conjugate", [X + 1j * Y], ()), ("maximum", [X, Y], ()), ("fmin", [X, Y], ()),
    ("add", [X.astype(F4), Y], ()), ("add", [arr(4, 5), arr(5)], ()),
    ("add", [X, Y], (("dtype", np.dtype("f4")),)), ("divmod", [X, Y + 10], ()),
    ("exp", [X], ()), ("greater", [X, Y], ()), ("copy", [X], ()),
    ("add", [X.astype(np.int64), Y.astype(np.int64)], ()),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name, values, params", SOUND)
def test_every_listed_choice_is_sound(name, values, params):
    for c in choices(name, values, params):
        assert run_choice(name, values, c, params), c


# --- kernels --------------------------------------------------------------------------------

def strategy(name, values, params=(), consts=()):
    return RULES[name](make_call(name, values, params, (3,), consts))


def test_every_elementwise_ufunc_is_registered():
    names = {n for n in dir(np) if isinstance(getattr(np, n), np.ufunc)}
    assert {"add", "exp", "divmod", "logical_not", "isnan"} <= set(UFUNCS)
    assert "matmul" not in UFUNCS  # a gufunc (signature (n,k),(k,m)->(n,m)): contraction
    assert set(UFUNCS) == {getattr(np, n).__name__ for n in names
                           if getattr(np, n).signature is None}
    assert list(UFUNCS) == sorted(UFUNCS)


def test_ufunc_kernels_and_into():
    s = strategy("divmod", [X, Y + 10])
    assert s.nout == 2 and s.into is None and s.out_shape == (4, 5)
    q, r = s.kernel(X, Y + 10)
    assert np.array_equal(q, X // (Y + 10)) and np.array_equal(r, X % (Y + 10))
    add = strategy("add", [X, Y])
    assert add.nout == 1 and add.kernel is np.add
    out = np.zeros((4, 5))
    add.into(X, Y, out)
    assert np.array_equal(out, X + Y)
    neg = strategy("negative", [X])
    out = np.zeros((4, 5))
    neg.into(X, out)
    assert np.array_equal(out, -X)
    # dtype=f4 adds in float32: 1e8 + 1 rounds to 1e8 before -1e8 is added
    a, b = np.array([1e8 + 1]), np.array([-1e8])
    cast = strategy("add", [a, b], (("dtype", np.dtype("f4")),))
    assert cast.kernel(a, b).dtype == np.float32 and cast.kernel(a, b)[0] == 0
    out = np.ones(1, np.float32)
    cast.into(a, b, out)
    assert out[0] == 0
    neg = strategy("negative", [a], (("dtype", np.dtype("f4")),))
    out = np.zeros(1, np.float32)
    neg.into(a, out)
    assert out[0] == np.float32(-1e8)


def test_where_and_clip_have_no_partial_algebra():
    cond = X > 0
    w = strategy("where", [cond, X, Y])
    assert as_set(w.choices) == shards(3, (0, (0, 0, 0)), (1, (1, 1, 1)))
    assert np.array_equal(w.kernel(cond, X, Y), np.where(cond, X, Y))
    c = strategy("clip", [X, arr(5) - 1, arr(5) + 5])
    assert as_set(c.choices) == shards(3, (0, (0, None, None)), (1, (1, 0, 0)))
    for ch in c.choices:
        assert run_choice("clip", [X, arr(5) - 1, arr(5) + 5], ch)


# --- astype: which reductions survive a cast ------------------------------------------------

def cast_ops(src, dst):
    listed = as_set(choices("astype", [arr(6, dtype=src)], (np.dtype(dst),)))
    plain = shards(1, (0, (0,)))
    assert plain <= listed
    return {o.reduce_op for ins, o in listed - plain if ins == (o,)} | (
        {"bad"} if any(ins != (o,) for ins, o in listed - plain) else set())


@pytest.mark.parametrize("src, dst, keep", [
    ("f8", "f8", {"sum", "max", "min"}),   # nothing changes
    ("f8", "f4", {"max", "min"}),          # rounding keeps order, not sums
    ("f4", "f8", {"max", "min"}),          # safe: order kept; sums of f4 terms already rounded
    ("i8", "i4", {"sum"}),                 # narrowing ints agrees modulo 2**32, order lost
    ("i8", "u8", {"sum"}),                 # same width: modulo 2**64
    ("i4", "i8", {"max", "min"}),          # safe widening loses wrap-around of sums
    ("u1", "i2", {"max", "min"}),
    ("i4", "f8", {"max", "min"}),
    ("f8", "i8", set()),                   # truncation of each term
    ("?", "i4", set()), ("i4", "?", set()),
    ("f8", "c16", set()),                  # complex has no order
    ("c16", "c16", {"sum"}),
])
def test_cast_algebra(src, dst, keep):
    assert cast_ops(src, dst) == keep


@pytest.mark.parametrize("src, dst", [("i8", "i4"), ("i8", "u8"), ("f8", "f4"), ("i4", "f8")])
def test_cast_choices_simulate(src, dst):
    x = arr(6, dtype=src) * 1000 + 7
    params = (np.dtype(dst),)
    for c in choices("astype", [x], params):
        assert run_choice("astype", [x], c, params, expected=lambda: x.astype(dst))


def test_cast_of_terms_that_do_not_survive():
    x = np.array([100000, -5, 7], np.int64)
    # truncating each float term is not truncating the sum
    assert not run_choice("astype", [np.array([0.5, 1.5, 2.0])], Choice((PS,), PS),
                          (np.dtype("i8"),), expected=lambda: np.array([0, 1, 2]))
    assert run_choice("astype", [x], Choice((S0,), S0), (np.dtype("i2"),),
                      expected=lambda: x.astype("i2"))


# --- round, real/imag, interp ---------------------------------------------------------------

def test_round():
    x = np.array([0.5, 1.5, 2.25, -2.5, 3.14159])
    s = strategy("round", [x], (1,))
    assert as_set(s.choices) == shards(1, (0, (0,)))
    assert np.array_equal(s.kernel(x), np.round(x, 1))
    assert np.array_equal(strategy("round", [x], (0,)).kernel(x), [0.0, 2.0, 2.0, -2.0, 3.0])
    with pytest.raises(TypeError):
        strategy("round", [np.array(["a"])], (0,))


@pytest.mark.parametrize("name", ["real", "imag"])
def test_parts_of_a_sum_are_sums_of_parts(name):
    z = X + 1j * Y
    s = strategy(name, [z])
    assert as_set(s.choices) == shards(1, (0, (0,)), (1, (1,))) | {((PS,), PS), ((PA,), PA)}
    got = s.kernel(z)
    assert np.array_equal(got, getattr(np, name)(z)) and not np.shares_memory(got, z)
    for c in s.choices:
        assert run_choice(name, [z], c, expected=lambda: getattr(np, name)(z).copy())


def test_interp_splits_x_only():
    x, xp, fp = np.array([-1.0, 0.5, 1.5, 2.0, 9.0]), np.array([0.0, 1.0, 2.0]), np.array(
        [0.0, 10.0, 30.0])
    params = (-5.0, 99.0, None)
    s = strategy("interp", [x, xp, fp], params)
    assert as_set(s.choices) == shards(3, (0, (0, None, None)))
    want = np.interp(x, xp, fp, -5.0, 99.0, None)
    for c in s.choices:
        assert run_choice("interp", [x, xp, fp], c, params, expected=lambda: want)
    assert list(want[[0, 4]]) == [-5.0, 99.0]
    periodic = (None, None, 2.0)
    got = strategy("interp", [x, xp, fp], periodic).kernel(x, xp, fp)
    assert np.array_equal(got, np.interp(x, xp, fp, period=2.0))
    scalar = strategy("interp", [np.array(0.5), xp, fp], params).kernel(np.array(0.5), xp, fp)
    assert isinstance(scalar, np.ndarray) and scalar == 5.0


@pytest.mark.parametrize("xp, fp, period, match", [
    (np.zeros(3), np.zeros(4), None, "same length"),
    (np.zeros((2, 2)), np.zeros((2, 2)), None, "reshape|deep"),
    (np.arange(3.0), np.zeros(3), 0.0, "period"),
    (np.zeros(0), np.zeros(0), None, "empty"),
])
def test_interp_raises_numpys_errors_when_planning(xp, fp, period, match):
    with pytest.raises(ValueError, match=match):
        strategy("interp", [np.zeros(4), xp, fp], (None, None, period))


def test_interp_on_scalar_samples_raises_numpys_error():
    with pytest.raises(ValueError, match="too small depth"):
        strategy("interp", [np.zeros(4), np.array(1.0), np.array(2.0)], (None, None, None))


def test_chooser_keeps_partial_terms_for_free():
    # with both operands P(sum), adding the terms costs nothing; anything else reduces
    call = OpCall("add", (Operand((4, 5), np.dtype(float), (PS,)),
                          Operand((4, 5), np.dtype(float), (PS,))), (), (3,))
    assert choose(call, RULES["add"](call).choices, CostModel())[1:] == ((PS,), 0)


# --- the algebra's building blocks, called directly ------------------------------------------

def three(dtype=float):
    return make_call("add", [arr(2, dtype=dtype), arr(2, dtype=dtype), arr(2, dtype=dtype)])


def test_all_partial_puts_the_same_terms_on_every_operand():
    got = pointwise._all_partial(("sum", "max"))(three())
    assert got == [Choice((PS, PS, PS), PS), Choice((PM, PM, PM), PM)]


def test_one_partial_puts_terms_on_one_operand_at_a_time():
    got = pointwise._one_partial(("sum", "min"))(three())
    assert got == [Choice((PS, R, R), PS), Choice((R, PS, R), PS), Choice((R, R, PS), PS),
                   Choice((PMIN, R, R), PMIN), Choice((R, PMIN, R), PMIN),
                   Choice((R, R, PMIN), PMIN)]
    assert pointwise._one_partial(("avg",), positions=(0, 2))(three()) == [
        Choice((PA, R, R), PA), Choice((R, R, PA), PA)]


def test_unary_map_and_join():
    call = make_call("negative", [X])
    assert pointwise._unary_map({"max": "min", "sum": "sum"})(call) == [
        Choice((PM,), PMIN), Choice((PS,), PS)]
    first = pointwise._all_partial(("max",))
    second = pointwise._one_partial(("avg",))
    assert pointwise._join(first, second)(make_call("add", [X, Y])) == [
        Choice((PM, PM), PM), Choice((PA, R), PA), Choice((R, PA), PA)]


def test_floats_keeps_order_algebra_for_floats_only():
    make = pointwise._all_partial(("max",))
    assert pointwise._floats(make)(three()) == [Choice((PM, PM, PM), PM)]
    assert pointwise._floats(make)(three(np.float32)) == [Choice((PM, PM, PM), PM)]
    assert pointwise._floats(make)(three(np.int32)) == []
    mixed = make_call("add", [arr(2), arr(2, dtype=np.int64)])
    assert pointwise._floats(make)(mixed) == []


@pytest.mark.parametrize("name, a, b", [
    ("add", arr(400, 400), 1.5), ("multiply", arr(400, 400, dtype=np.float32), 2.0),
    ("add", arr(400, 400, dtype=np.int8), 3), ("divide", arr(400, 400, dtype=int), 7),
    ("less", arr(400, 400), arr(400, 400, seed=2)), ("subtract", 1, arr(400, 400)),
    ("negative", arr(400, 400, dtype=np.int16), None)])
def test_a_large_block_is_written_into_a_pooled_buffer(name, a, b, monkeypatch):
    """numpy's values and dtype, in a buffer of the pool; the trace records the ufunc.  (The
    pool's smallest size at glibc's default, 128 KiB: under mtensor's heap policy it serves
    only blocks of 32 MiB and more, too large for a unit test.)"""
    monkeypatch.setattr(buffers, "MIN_BYTES", 1 << 17)
    values = [a] if b is None else [a, b]
    strategy = RULES[name](make_call(name, values, mesh=(1,)))
    ins = tuple((R,) for _ in values)
    kernel = strategy.bind(ins, (R,), SimpleNamespace(shape=(1,), coordinate=(0,)))
    got, want = kernel(*values), getattr(np, name)(*values)
    assert got.dtype == want.dtype and np.array_equal(got, want)
    assert got.base is not None and kernel.unpooled is getattr(np, name)
    small = [v[:2, :2] if isinstance(v, np.ndarray) else v for v in values]
    strategy = RULES[name](make_call(name, small, mesh=(1,)))
    assert strategy.bind(ins, (R,), SimpleNamespace(shape=(1,), coordinate=(0,))) is getattr(
        np, name)
