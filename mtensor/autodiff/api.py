"""``mt.value_and_grad`` and ``mt.grad``: reverse mode over DTensor programs, JAX-style.

The function runs once with the tape on; the backward pass then walks the tape in reverse,
running each op's vector-Jacobian product as ordinary DTensor ops.  A cotangent that is a
Partial sum and feeds more than one product is reduced once first (the all-reduce Megatron
places on the input gradient), not once per consumer.  Each gradient is finally laid out
like its parameter, so a parameter replicated over a batch-sharded mesh dim gets its
data-parallel all-reduce there, and a sharded one keeps its shard with no extra traffic.
"""
from __future__ import annotations

import functools

import numpy as np

from .. import dispatch, modes
from ..comm import guard
from ..dtensor import DTensor, relayout
from ..placement import Partial, reduced
from ..pytree import flatten
from . import tape
from .tape import VJPS


def _settled(g):
    """A Partial cotangent reduced once, before several products use it."""
    if not any(isinstance(p, Partial) for p in g.placements):
        return g
    guard.state.op = "the gradient (reducing a shared cotangent)"
    return relayout(g, reduced(g.placements))


def _backward(recorded, value, leaves):
    """Each leaf's gradient, laid out like the leaf.  A gradient is complete once the reverse
    walk passes the leaf's first use, and is laid out right then (as DDP's hooks fire when a
    gradient is ready): its data-parallel all-reduce then comes while the rest of the backward
    is still to run, which a compiled step overlaps with that compute.  Each op's gradient
    runs in the ``debug.region`` the op ran in, so its collectives are billed there."""
    entries, first_use = recorded.entries, {}
    for i, entry in enumerate(entries):
        for o in entry.operands:
            first_use.setdefault(id(o), i)
    complete_at = {}
    for leaf in leaves:
        complete_at.setdefault(first_use.get(id(leaf), -1), []).append(leaf)
    grads, done, outer = {id(value): np.ones_like(value)}, {}, modes.active.region
    modes.active.phase = "backward"
    try:
        for i in reversed(range(len(entries))):
            modes.active.region = entries[i].region
            _accumulate(entries[i], grads, recorded.tracked)
            for leaf in complete_at.get(i, ()):
                done[id(leaf)] = _gradient(leaf, grads)
        modes.active.region = outer
        for leaf in complete_at.get(-1, ()):
            done[id(leaf)] = _gradient(leaf, grads)
    finally:
        modes.active.region, modes.active.phase = outer, "forward"
    return done


def _accumulate(entry, grads, tracked) -> None:
    """Add the entry's contributions to its operands' gradients."""
    g = grads.pop(id(entry.outputs[0]), None)
    if g is None:
        return
    wanted = [j for j, o in enumerate(entry.operands) if id(o) in tracked]
    if len(wanted) > 1:
        g = _settled(g)
    for j in wanted:
        g = modes.active.reuse.get(id(g), (None, g))[1]  # as the last product laid it out
        contribution = VJPS[entry.name](j, g, entry.outputs[0], entry.values, entry.params)
        key = id(entry.operands[j])
        grads[key] = contribution if key not in grads else grads[key] + contribution


def value_and_grad(fn, argnums=0, has_aux=False):
    """``fn``'s value and its gradients with respect to the DTensors in ``args[argnums]``
    (pytrees of dicts, lists and tuples); ``fn`` must return a scalar float DTensor (or
    ``(scalar, aux)`` with ``has_aux``)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        flat = [flatten(args[i]) for i in nums]
        leaves = [leaf for leaves, _ in flat for leaf in leaves if isinstance(leaf, DTensor)]
        recorded = tape.start(leaves)
        try:
            out = fn(*args, **kwargs)
            value, aux = out if has_aux else (out, None)
            _check_value(value)
            tape.stop()
            modes.active.reuse = {}
            grads = _backward(recorded, value, leaves)
        finally:
            modes.active.reuse = None
            tape.stop()
        trees = [build([grads[id(leaf)] if isinstance(leaf, DTensor) else None
                        for leaf in tree_leaves]) for tree_leaves, build in flat]
        result = trees[0] if isinstance(argnums, int) else tuple(trees)
        return ((value, aux) if has_aux else value), result
    return run


def grad(fn, argnums=0, has_aux=False):
    """Only the gradients of :func:`value_and_grad` (with ``aux`` when ``has_aux``)."""
    both = value_and_grad(fn, argnums, has_aux)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        value, grads = both(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads
    return run


def stop_gradient(x):
    """``x``'s value as a constant of the differentiated function (JAX's
    ``lax.stop_gradient``): the backward pass sends nothing through it.  E.g. the shift of a
    log-sum-exp, ``m = mt.stop_gradient(z.max(axis=-1, keepdims=True))``, whose true
    contribution to the gradient is zero.  A copy, laid out as ``x`` is."""
    if type(x) is not DTensor:
        return np.array(x)
    return dispatch.dispatch("stop_gradient", (x,), ())


def _check_value(value):
    if not isinstance(value, DTensor) or value.shape != () or value.dtype.kind not in "f":
        what = (f"a DTensor of shape {value.shape} and dtype {value.dtype}"
                if isinstance(value, DTensor) else type(value).__name__)
        raise TypeError(f"value_and_grad: the function must return a scalar float DTensor "
                        f"(e.g. a loss); it returned {what}")


def _gradient(leaf, grads):
    """The leaf's gradient laid out like the leaf (zeros where it was not used)."""
    g = grads.get(id(leaf))
    if g is None:
        return np.zeros_like(leaf)
    if g.dtype != leaf.dtype:
        g = g.astype(leaf.dtype)
    guard.state.op = "the gradient (laid out like its parameter)"
    if modes.active.autoshard is not None:
        modes.active.autoshard.like(g, leaf)
    return relayout(g, leaf.placements)
