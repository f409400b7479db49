"""Hand-derived backward rules of the composites ``fusion.patterns`` recognises, written as
ordinary DTensor ops (so they run on any layout, and compile like any op).

Autodiff of the unfused ops is exact but long: a layer norm written as nine numpy ops
differentiates into about twenty, a tanh GELU into twelve plus the sums its reused values
need.  These rules are the ones hand-written training code uses (Megatron's, llm.c's):

- layer norm ``y = xhat * g + b``, ``xhat = (x - mean) / std``:
  ``dx = (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)) / std`` with ``dxhat = dy * g``;
  ``dg = sum(dy * xhat)``, ``db = sum(dy)`` over the broadcast dims;
- GELU ``y = h x (1 + t)``, ``t = tanh(c (x + k x^3))``:
  ``dx = dy (h (1 + t) + h c x (1 - t^2)(1 + 3 k x^2))``;
- softmax ``p``: ``dx = p (dy - sum(dy p))``;
- logsumexp ``log(sum(e)) + m``, ``e = exp(x - m)``: ``dx = dy e / sum(e)`` (the shift ``m``
  cancels, followed or not: log-softmax and cross-entropy built on it inherit this).

Each takes the match's bindings (inputs, scalars, the labelled forward values it reuses,
``axis``), the output's cotangent and value, and the names of the inputs whose cotangents
are wanted; it returns those cotangents by name.
"""
from __future__ import annotations

from .vjps import unbroadcast


def layer_norm(b, dy, out, wanted):
    xhat = b["xhat"]
    dxhat = dy * b["g"] if "g" in b else dy
    axis = b["axis"]
    centred = dxhat - dxhat.mean(axis=axis, keepdims=True)
    centred = centred - xhat * (dxhat * xhat).mean(axis=axis, keepdims=True)
    dx = centred * b["rstd"] if "rstd" in b else centred / b["std"]
    grads = {"x": dx}
    if "g" in wanted:
        grads["g"] = unbroadcast(dy * xhat, b["g"].shape)
    if "b" in wanted:
        grads["b"] = unbroadcast(dy, b["b"].shape)
    return grads


def gelu(b, dy, out, wanted):
    x, t, h, c, k = b["x"], b["t"], b["h"], b["c"], b["k"]
    slope = (x * x) * (3 * k * c * h) + c * h          # h c (1 + 3 k x^2)
    d = (1 - t * t) * slope * x + (t * h + h)           # + h (1 + t)
    return {"x": dy * d}


def softmax(b, dy, p, wanted):
    return {"x": p * (dy - (dy * p).sum(axis=b["axis"], keepdims=True))}


def logsumexp(b, dy, out, wanted):
    return {"x": dy * (b["e"] / b["s"])}


# composite -> the bindings whose values its rule reads (the tape must have kept them; the
# others it reads for shapes at most); softmax reads its output (p) too
READS = {"layer_norm": ("xhat", "g", "rstd", "std"), "gelu": ("x", "t"), "softmax": (),
         "logsumexp": ("e", "s")}
READS_OUTPUT = {"softmax"}

# composite -> (rule, its differentiable inputs)
RULES = {
    "layer_norm": (layer_norm, ("x", "g", "b")),
    "gelu": (gelu, ("x",)),
    "softmax": (softmax, ("x",)),
    "logsumexp": (logsumexp, ("x",)),
}
