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
import sys

import numpy as np

from .. import dispatch, modes
from ..comm import guard
from ..device.arrays import contiguous
from ..dtensor import DTensor, redistribution, relayout
from ..elision import owned
from ..placement import Partial, reduced
from ..pytree import flatten
from . import fusion, tape, vjps
from .tape import VJPS


def _settled(g):
    """A Partial cotangent reduced once, before several products use it; in its own block
    where the walk alone holds it and one all-reduce does it (MPI_IN_PLACE, as a
    hand-written backward reduces its input gradient)."""
    if not any(isinstance(p, Partial) for p in g.placements):
        return g
    guard.state.op = "the gradient (reducing a shared cotangent)"
    target = reduced(g.placements)
    if (sys.getrefcount(g) == _HELD_SETTLING and g._view is None and g._reduced is None
            and modes.active.tracer is None and modes.active.autoshard is None):
        program, spec = redistribution(g._spec, target, g.device_mesh.cost_model())
        if program.reduces and (not g._local.flags.c_contiguous or owned(g._local)):
            block = contiguous(g._local)     # a copy of its own where not contiguous
            program.reduce_in_place(block)
            return DTensor(block, spec)
    return relayout(g, target)


def _backward(recorded, value, leaves, reduce=True, seeds=None):
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
    key = recorded.key
    for leaf in leaves:
        complete_at.setdefault(first_use.get(key(leaf), -1), []).append(leaf)
    grads = {key(value): np.ones_like(value)} if seeds is None else seeds
    done, outer = {}, modes.active.region
    modes.active.phase = "backward"
    try:
        for i in reversed(range(len(entries))):
            modes.active.region = entries[i].region
            _accumulate(entries[i], grads, recorded.tracked)
            for leaf in complete_at.get(i, ()):
                done[id(leaf)] = _gradient(leaf, grads.get(key(leaf)), reduce)
        modes.active.region = outer
        for leaf in complete_at.get(-1, ()):
            done[id(leaf)] = _gradient(leaf, grads.get(key(leaf)), reduce)
    finally:
        modes.active.region, modes.active.phase = outer, "forward"
        vjps.forget_relaid()
    return done


def _accumulate(entry, grads, tracked) -> None:
    """Add the entry's contributions to its operands' gradients (a rule of ``tape.JOINT``
    gets the tuple of all its outputs' cotangents)."""
    if entry.name in tape.JOINT:
        g = tuple(grads.pop(id(o), None) for o in entry.outputs)
        if all(c is None for c in g):
            return
    else:
        g = grads.pop(id(entry.outputs[0]), None)
        if g is None:
            return
    wanted = [j for j, o in enumerate(entry.operands) if id(o) in tracked]
    if len(wanted) > 1 and type(g) is not tuple:
        g = _settled(g)
    for j in wanted:
        g = modes.active.reuse.get(id(g), (None, g))[1]  # as the last product laid it out
        contribution = VJPS[entry.name](j, g, entry.result, entry.values, entry.params)
        key = id(entry.operands[j])
        grads[key] = contribution if key not in grads else _summed(grads.pop(key), contribution)


def _summed(total, contribution):
    """``total + contribution``, written into ``total``'s block when the walk alone holds
    ``total`` (a cotangent passed on unchanged to two operands is held twice: it gets a
    fresh sum): gradients summed over a value's uses then reuse one array, as hand-written
    backward passes do (``dispatch``'s temporary elision decides the rest)."""
    if sys.getrefcount(total) == _HELD_HERE:
        return dispatch.dispatch("add", (total, contribution), temporary=total)
    return total + contribution


def _held_here() -> int:
    """What ``_summed`` reads for a total nothing but its own name holds: measured."""
    class Total:
        pass
    return _count(Total())


def _count(total) -> int:
    return sys.getrefcount(total)


def _held_settling() -> int:
    """What ``_settled`` reads for a cotangent nothing but the walk's name holds: measured."""
    class Cotangent:
        pass
    g = Cotangent()
    return _count(g)


_HELD_HERE = _held_here()
_HELD_SETTLING = _held_settling()


def backward_from(recorded, seeds: dict) -> dict:
    """The backward walk over a tape recorded inside another's backward pass
    (``tape.nested``: ``mt.remat`` recomputes its block so), from ``seeds`` (cotangents by
    id of the outputs they belong to), with the tape off and a reuse memo of its own.  The
    dict it returns (``seeds``, walked) holds the cotangents of the tape's inputs by id, as
    the walk left them: not yet laid out like the inputs, so the outer walk carries them on
    as it would have without the nested recording."""
    tape.stop()
    modes.active.reuse = {}
    fusion.fuse(recorded, seeds)
    _backward(recorded, None, (), seeds=seeds)
    return seeds


def walk_back(recorded, seeds: dict, leaves, reduce=True, fuse=True):
    """The backward walk over ``recorded`` (a tape stopped before, its forward done) from
    ``seeds`` (cotangents by id of the outputs they belong to), as ``value_and_grad``'s
    own (``fuse``: its fused rules too): ``(gradients of leaves by id, laid out as
    value_and_grad(reduce=) lays them out; the cotangents left by id, e.g. of the tape's
    other inputs, not laid out)``.  A pipeline stage runs each micro-batch's backward so,
    from the gradient its next stage sends; the tape's slots are left empty, so another
    forward may record next."""
    tape.stop()
    if fuse:
        fusion.fuse(recorded, seeds)
    modes.active.reuse = {}
    try:
        done = _backward(recorded, None, leaves, reduce, seeds=seeds)
    finally:
        modes.active.reuse = None
    return done, seeds


def value_and_grad(fn, argnums=0, has_aux=False, *, reduce=True, fuse=True):
    """``fn``'s value and its gradients with respect to the DTensors in ``args[argnums]``
    (pytrees of dicts, lists and tuples); ``fn`` must return a scalar float DTensor (or
    ``(scalar, aux)`` with ``has_aux``).

    ``reduce=False`` leaves each gradient's pending sums pending (DDP's ``no_sync``): where
    the parameter is not Partial on a mesh dim but its gradient is (a parameter replicated
    over the batch dims), the gradient stays ``Partial`` there, so microbatches accumulate
    with ``+=`` and no communication, and ``mt.optim.reduce_grads`` lays the total out like
    the parameters once per step.

    ``fuse=True`` gives the layer norms, GELUs, softmaxes and logsumexps ``fn`` writes in
    plain numpy their hand-derived backward (``autodiff.fusion``): fewer, cheaper ops, equal
    to the unfused gradient to rounding; ``False`` differentiates every op as written."""
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
            if fuse:
                fusion.fuse(recorded, (recorded.key(value),))
            modes.active.reuse = {}
            grads = _backward(recorded, value, leaves, reduce)
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


def pending(grad_placements, param_placements) -> tuple:
    """The layout of a gradient whose reductions wait (``reduce=False``): the parameter's
    placements, except Partial wherever the gradient is Partial and the parameter is not."""
    return tuple(g if isinstance(g, Partial) and not isinstance(p, Partial) else p
                 for g, p in zip(grad_placements, param_placements))


def _gradient(leaf, g, reduce=True):
    """The leaf's gradient ``g`` laid out like the leaf (zeros where it was not used: None),
    or with its sums pending (``reduce=False``)."""
    if g is None:
        return np.zeros_like(leaf)
    if g.dtype != leaf.dtype:
        g = g.astype(leaf.dtype)
    guard.state.op = "the gradient (laid out like its parameter)"
    if modes.active.autoshard is not None:
        modes.active.autoshard.like(g, leaf)
    return relayout(g, leaf.placements if reduce else pending(g.placements, leaf.placements))
