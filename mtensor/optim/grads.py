"""Gradients between the backward and the update: ``accumulate`` sums microbatches in place
(no communication while their sums are pending), ``reduce_grads`` lays the total out like
the parameters, which is the step's one reduction per gradient (bucketed under
``mt.compile``, as DDP's and FSDP2's are).
"""
from __future__ import annotations

from ..dtensor import DTensor, relayout
from ..pytree import flatten
from ..spec import fmt_placements


def _matched(what: str, tree, like):
    """``tree``'s and ``like``'s DTensor leaves, pairwise, with the same shapes."""
    leaves, build = flatten(tree)
    others, _ = flatten(like)
    if len(leaves) != len(others):
        raise ValueError(f"{what}: the gradients have {len(leaves)} leaves but the tree they "
                         f"go with has {len(others)}")
    for i, (a, b) in enumerate(zip(leaves, others)):
        if type(a) is DTensor and (type(b) is not DTensor or a.shape != b.shape):
            found = b.shape if type(b) is DTensor else type(b).__name__
            raise ValueError(f"{what}: leaf {i} has shape {a.shape} "
                             f"{fmt_placements(a.placements)} but its counterpart has "
                             f"{found}; were they taken from different parameters or "
                             f"batches of different shapes?")
    return leaves, others, build


def accumulate(total, grads):
    """``total += grads``, leaf by leaf, in place; returns ``total`` (``grads`` itself when
    ``total`` is None, the first microbatch).  Gradients from ``value_and_grad(fn,
    reduce=False)`` keep their sums pending (``Partial``), so this moves no data."""
    if total is None:
        return grads
    leaves, others, _ = _matched("accumulate", grads, total)
    for g, t in zip(leaves, others):
        if type(g) is DTensor:
            t += g
    return total


def reduce_grads(grads, params):
    """Each gradient laid out like its parameter: the pending sums of ``reduce=False``
    gradients reduced (an all-reduce for a replicated parameter, a reduce-scatter for one
    split over the batch dims), the others as they are.  Returns a new tree."""
    leaves, others, build = _matched("reduce_grads", grads, params)
    return build([relayout(g, p.placements) if type(g) is DTensor
                  and g.placements != p.placements else g for g, p in zip(leaves, others)])
