"""The composites the compiler and the gradient tape recognise in plain numpy code: layer
norm, GELU (tanh form), softmax and logsumexp (log-softmax and cross-entropy are written
with it), each as the few spellings users write (``examples/lm_model.py``'s among them).

Each pattern is read from its root (the value the composite returns) back to its inputs;
``label``s name the values its backward reuses.  Reductions must run over one axis with
``keepdims=True``, the axis bound as ``axis`` (one axis for every reduction of a match).
"""
from __future__ import annotations

from .match import Alt, Op, Same, Scalar, Var


def _one_axis_kept(params, operands):
    """A reduction's (axis, keepdims, ...) params over one axis, dims kept."""
    if len(params) < 2 or not isinstance(params[0], int) or params[1] is not True:
        return None
    if len(params) > 2 and params[2] is not None:       # a dtype= of its own
        return None
    return {"axis": params[0]}


def _reduce(name, x, label=""):
    return Op(name, x, params=_one_axis_kept, label=label)


def _square(v):
    return Alt(Op("multiply", v, v), Op("square", v), Op("power", v, Scalar("two", 2)))


def _layer_norm():
    """(x - mean(x)) / sqrt(var + eps) [* g] [+ b], the variance as the mean of squares of
    the centred x or np.var (``n`` must then be the axis' length: ``ddof=0``), the division
    also as a product with 1/sqrt(...)."""
    x, eps = Var("x"), Scalar("eps")
    xc = Op("subtract", x, _reduce("mean", x), label="xc")
    np_var = Op("divide", _reduce("sum", _square(Op("subtract", x, _reduce("mean", x)))),
                Scalar("n"))                        # np.var(x, axis, keepdims=True)
    var = Alt(_reduce("mean", _square(xc)), np_var)
    std = Op("sqrt", Op("add", var, eps), label="std")
    rstd = Alt(Op("divide", Scalar("one", 1), std, label="rstd"),
               Op("reciprocal", std, label="rstd"))
    xhat = Alt(Op("divide", xc, std, label="xhat"), Op("multiply", xc, rstd, label="xhat"))
    scaled = Op("multiply", xhat, Var("g"), label="scaled")
    return [("layer_norm", Op("add", scaled, Var("b"))), ("layer_norm", scaled),
            ("layer_norm", xhat)]


def _gelu():
    """h * x * (1 + tanh(c * (x + k * x**3))) (GPT-2's tanh GELU; h, c and k as written)."""
    x = Var("x")
    cube = Alt(Op("multiply", _square(x), x), Op("power", x, Scalar("three", 3)))
    inner = Op("add", x, Op("multiply", Scalar("k"), cube))
    t = Op("tanh", Op("multiply", Scalar("c"), inner), label="t")
    one_plus = Op("add", Scalar("one", 1), t)
    h = Scalar("h")
    return [("gelu", Alt(Op("multiply", Op("multiply", h, x), one_plus),
                         Op("multiply", h, Op("multiply", x, one_plus)),
                         Op("multiply", Op("multiply", x, one_plus), h)))]


def _shifted_exp(x):
    """exp(x - max(x)) with the max followed or stopped (any value the tape does not follow
    shifts softmax without changing it), or exp(x)."""
    return Op("exp", Alt(Op("subtract", x, Alt(_reduce("max", x), Var("shift"))), x),
              label="e")


def _softmax():
    x = Var("x")
    e = _shifted_exp(x)
    return [("softmax", Op("divide", e, _reduce("sum", e, label="s")))]


def _logsumexp():
    """log(sum(exp(x - m))) + m; log-softmax (x - logsumexp) and cross-entropy read it."""
    x = Var("x")
    e = _shifted_exp(x)
    lse = Op("log", _reduce("sum", e, label="s"))
    return [("logsumexp", Op("add", lse, Alt(_reduce("max", x), Same("shift")))),
            ("logsumexp", lse)]


# (composite name, pattern), the larger spellings of one composite first
PATTERNS = [*_layer_norm(), *_gelu(), *_softmax(), *_logsumexp()]
ROOT_OPS = frozenset(name for _, pattern in PATTERNS
                     for name in (pattern.names if isinstance(pattern, Op) else
                                  [n for o in pattern.options for n in o.names]))
