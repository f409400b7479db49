"""The composite patterns on hand-made programs (pure: no arrays, no MPI): each spelling
users write matches with the bindings its backward needs; near misses do not."""
import itertools
from collections import Counter

import pytest

from mtensor.fusion.match import Alt, Op, Same, Scalar, Var, match
from mtensor.fusion.patterns import PATTERNS

KEEP = (-1, True, None)


class Program:
    """Ops on named values: ``p.op("mean", "x", params=KEEP)`` returns the new value's
    name; numbers are scalar constants."""

    def __init__(self):
        self.ops, self.made, self.count = [], {}, itertools.count()

    def op(self, name, *operands, params=()):
        out = f"v{next(self.count)}"
        self.made[out] = len(self.ops)
        self.ops.append((name, params, operands))
        return out

    def producer(self, value):
        i = self.made.get(value) if isinstance(value, str) else None
        return None if i is None else (*self.ops[i], i)

    @staticmethod
    def scalar(value):
        return float(value) if isinstance(value, (int, float)) else None

    @staticmethod
    def key(value):
        return value

    def uses(self, extra=()):
        count = Counter(o for _, _, operands in self.ops for o in operands)
        count.update(extra)
        return count.__getitem__


def find(p, root, extra_uses=()):
    """(composite name, match) of the first pattern matching at ``root``."""
    for name, pattern in PATTERNS:
        m = match(pattern, root, p, p.uses(extra_uses))
        if m is not None:
            return name, m
    return None, None


def layer_norm(p, x="x", g="g", b="b", square="multiply", div=True, axis=-1, eps=1e-5):
    mu = p.op("mean", x, params=(axis, True, None))
    xc = p.op("subtract", x, mu)
    sq = p.op(square, xc, xc) if square == "multiply" else (
        p.op("power", xc, 2) if square == "power" else p.op("square", xc))
    var = p.op("mean", sq, params=(axis, True, None))
    std = p.op("sqrt", p.op("add", var, eps))
    xhat = p.op("divide", xc, std) if div else p.op("multiply", xc, p.op("divide", 1, std))
    out = xhat if g is None else p.op("multiply", xhat, g)
    return out if b is None else p.op("add", out, b)


@pytest.mark.parametrize("square", ["multiply", "power", "square"])
@pytest.mark.parametrize("div", [True, False])
def test_layer_norm_spellings(square, div):
    p = Program()
    name, m = find(p, layer_norm(p, square=square, div=div))
    assert name == "layer_norm"
    assert (m.bound["x"], m.bound["g"], m.bound["b"], m.bound["eps"]) == ("x", "g", "b", 1e-5)
    assert m.bound["axis"] == -1 and "xhat" in m.bound
    assert ("std" in m.bound) if div else ("rstd" in m.bound)
    assert len(m.records) == len(p.ops)
    assert m.inputs == {"x", "g", "b"}


def test_layer_norm_without_affine_and_with_np_var():
    p = Program()
    name, m = find(p, layer_norm(p, g=None, b=None))
    assert name == "layer_norm" and "g" not in m.bound and "b" not in m.bound
    p = Program()          # np.var(x, -1, keepdims=True): mean, subtract, square, sum, divide
    centred = p.op("subtract", "x", p.op("mean", "x", params=KEEP))
    var = p.op("divide", p.op("sum", p.op("square", centred), params=KEEP), 128)
    xc = p.op("subtract", "x", p.op("mean", "x", params=KEEP))
    root = p.op("divide", xc, p.op("sqrt", p.op("add", var, 1e-5)))
    name, m = find(p, root)
    assert name == "layer_norm" and m.bound["n"] == 128 and m.bound["xc"] == xc


def test_layer_norm_near_misses():
    p = Program()   # reductions over different axes
    mu = p.op("mean", "x", params=(-1, True, None))
    xc = p.op("subtract", "x", mu)
    var = p.op("mean", p.op("multiply", xc, xc), params=(0, True, None))
    assert find(p, p.op("divide", xc, p.op("sqrt", p.op("add", var, 1e-5))))[0] is None
    p = Program()   # dims not kept
    mu = p.op("mean", "x", params=(-1, False, None))
    xc = p.op("subtract", "x", mu)
    var = p.op("mean", p.op("multiply", xc, xc), params=(-1, False, None))
    assert find(p, p.op("divide", xc, p.op("sqrt", p.op("add", var, 1e-5))))[0] is None
    p = Program()   # centred by the mean of another array
    xc = p.op("subtract", "x", p.op("mean", "y", params=KEEP))
    var = p.op("mean", p.op("multiply", xc, xc), params=KEEP)
    assert find(p, p.op("divide", xc, p.op("sqrt", p.op("add", var, 1e-5))))[0] is None
    p = Program()   # an array, not a scalar, as eps
    xc = p.op("subtract", "x", p.op("mean", "x", params=KEEP))
    var = p.op("mean", p.op("multiply", xc, xc), params=KEEP)
    assert find(p, p.op("divide", xc, p.op("sqrt", p.op("add", var, "eps"))))[0] is None


def test_a_read_outside_refuses_every_spelling_that_holds_it():
    p = Program()
    root = layer_norm(p)
    p.op("multiply", "v1", 2.0)               # v1: the centred x, read outside
    assert find(p, root) == (None, None)
    p = Program()
    root = layer_norm(p)
    assert find(p, root, extra_uses=["v1"]) == (None, None)   # seeded from outside
    assert find(p, root)[0] == "layer_norm"


def gelu(p, x="x", grouping=0, cube="multiply"):
    half = p.op("multiply", 0.5, x) if grouping == 0 else None
    x3 = p.op("multiply", p.op("multiply", x, x), x) if cube == "multiply" else p.op(
        "power", x, 3)
    inner = p.op("add", x, p.op("multiply", 0.044715, x3))
    t = p.op("tanh", p.op("multiply", 0.7978845608028654, inner))
    one_plus = p.op("add", 1, t)
    if grouping == 0:
        return p.op("multiply", half, one_plus)
    if grouping == 1:
        return p.op("multiply", 0.5, p.op("multiply", x, one_plus))
    return p.op("multiply", p.op("multiply", x, one_plus), 0.5)


@pytest.mark.parametrize("grouping", [0, 1, 2])
@pytest.mark.parametrize("cube", ["multiply", "power"])
def test_gelu_spellings(grouping, cube):
    p = Program()
    name, m = find(p, gelu(p, grouping=grouping, cube=cube))
    assert name == "gelu"
    assert (m.bound["x"], m.bound["h"], m.bound["k"]) == ("x", 0.5, 0.044715)
    assert m.bound["c"] == pytest.approx(0.7978845608028654) and "t" in m.bound


def test_gelu_near_misses():
    p = Program()   # the cube of another array
    x3 = p.op("multiply", p.op("multiply", "y", "y"), "y")
    t = p.op("tanh", p.op("multiply", 0.79, p.op("add", "x", p.op("multiply", 0.04, x3))))
    assert find(p, p.op("multiply", p.op("multiply", 0.5, "x"), p.op("add", 1, t)))[0] is None
    p = Program()   # 2 + tanh, not 1 + tanh
    x3 = p.op("power", "x", 3)
    t = p.op("tanh", p.op("multiply", 0.79, p.op("add", "x", p.op("multiply", 0.04, x3))))
    assert find(p, p.op("multiply", p.op("multiply", 0.5, "x"), p.op("add", 2, t)))[0] is None


def test_softmax_spellings_and_near_miss():
    for shift in ("max", "stopped", None):
        p = Program()
        s = "s"
        if shift == "max":
            s = p.op("subtract", "x", p.op("max", "x", params=KEEP))
        elif shift == "stopped":
            s = p.op("subtract", "x", "m")
        e = p.op("exp", "x" if shift is None else s)
        name, m = find(p, p.op("divide", e, p.op("sum", e, params=KEEP)))
        assert name == "softmax" and m.bound["e"] == e, shift
    p = Program()   # divided by the sum of another exp
    e, f = p.op("exp", "x"), p.op("exp", "y")
    assert find(p, p.op("divide", e, p.op("sum", f, params=KEEP)))[0] is None


def test_logsumexp_adds_back_its_own_shift():
    p = Program()
    lse = p.op("log", p.op("sum", p.op("exp", p.op("subtract", "z", "m")), params=KEEP))
    name, m = find(p, p.op("add", lse, "m"))
    assert name == "logsumexp" and m.bound["shift"] == "m"
    p = Program()   # adding another value: only the log part is the composite
    lse = p.op("log", p.op("sum", p.op("exp", p.op("subtract", "z", "m")), params=KEEP))
    root = p.op("add", lse, "other")
    assert find(p, root)[0] is None and find(p, lse)[0] == "logsumexp"


def test_shared_subpatterns_bind_one_value_and_same_needs_a_binding():
    xx = Op("multiply", Var("a"), Var("a"))
    pattern = Op("add", xx, xx)
    p = Program()
    v, w = p.op("multiply", "x", "x"), p.op("multiply", "x", "x")
    assert match(pattern, p.op("add", v, v), p, p.uses()) is not None
    assert match(pattern, p.op("add", v, w), p, p.uses()) is None     # two equal ops, two values
    assert match(Op("exp", Same("m")), p.op("exp", "x"), p, p.uses()) is None
    assert match(Alt(Op("log", Var("y")), Op("exp", Scalar("c", 1))),
                 p.op("exp", 1), p, p.uses()).bound == {"c": 1.0}
