"""Contractions: ``matmul``/``@``, ``dot``, ``tensordot`` and ``einsum``, all through one rule.

Each op is first written as einsum subscripts (one label per dim), then on one mesh dim:
- a free label (kept in the output) may be split on every operand that spans it: the output
  is split the same way;
- a contracted label split on every operand that has it gives partial sums: ``P(sum)``;
- the op is linear in each operand, so one operand's partial terms times whole operands give
  partial terms of the result.
The local kernel is the numpy function on the local blocks, or one GEMM on 2-D views of
them where that gives the same product without copies (``ops.gemm``).
"""
from __future__ import annotations

import string
from typing import List, Sequence, Tuple

import numpy as np

from ..placement import Partial, Replicate
from .gemm import gemm_kernel
from .registry import (
    Choice,
    OpCall,
    Strategy,
    register,
    replicated,
    shard_along,
    terms_survive,
    wants,
)

Subscripts = Tuple[Tuple[str, ...], str]


def label_sizes(call: OpCall, inputs: Sequence[str], broadcast: str = "") -> dict:
    """Size of every label; labels in ``broadcast`` may be 1 on some operands."""
    sizes = {}
    for labels, operand in zip(inputs, call.operands):
        if len(labels) != operand.ndim:
            raise call.error(f"subscripts {','.join(inputs)} give {len(labels)} labels for an "
                             f"operand with {operand.ndim} dims", "give one label per dim")
        for label, size in zip(labels, operand.shape):
            known = sizes.setdefault(label, size)
            if known == size or (label in broadcast and 1 in (known, size)):
                sizes[label] = max(known, size)
                continue
            raise call.error(f"dim {label!r} has size {known} on one operand and {size} on "
                             f"another", "make the contracted and shared dims agree")
    return sizes


def einsum_choices(call: OpCall, inputs: Sequence[str], output: str, sizes: dict) -> List[Choice]:
    nin = len(inputs)

    def dims_of(label):
        return [labels.index(label) if label in labels and operand.shape[labels.index(label)]
                == sizes[label] and labels.count(label) == 1 else None
                for labels, operand in zip(inputs, call.operands)]

    choices = [replicated(nin)]
    repeated = {c for labels in inputs for c in labels if labels.count(c) > 1}
    for k, label in enumerate(output):
        dims = dims_of(label)
        if any(d is not None for d in dims) and label not in repeated:
            choices.append(shard_along(dims, k))
    for label in sorted(set("".join(inputs)) - set(output) - repeated):
        dims = dims_of(label)
        if all(d is not None or label not in labels for d, labels in zip(dims, inputs)):
            choices.append(Choice(wants(dims), Partial("sum")))
    if all(o.dtype.kind in "iufc" for o in call.operands):
        for op in [op for op in ("sum", "avg") if terms_survive(call, op)]:
            for j in range(nin):
                terms = tuple(Partial(op) if i == j else Replicate() for i in range(nin))
                choices.append(Choice(terms, Partial(op)))
    return choices


def contraction(call: OpCall, inputs: Sequence[str], output: str, kernel, broadcast="") -> Strategy:
    sizes = label_sizes(call, inputs, broadcast)
    out_shape = tuple(sizes[label] for label in output)
    return Strategy(out_shape, einsum_choices(call, inputs, output, sizes), kernel=kernel)


def _labels(n: int, skip: str = "") -> str:
    return "".join(c for c in string.ascii_letters if c not in skip)[:n]


def matmul_subscripts(call: OpCall) -> Tuple[Tuple[str, str], str, str]:
    """matmul as einsum: batch dims broadcast (right-aligned), 1-D operands lose their dim."""
    a, b = (o.ndim for o in call.operands)
    if a == 0 or b == 0:
        raise call.error("matmul does not take 0-d operands", "use multiply (*) instead")
    batch = _labels(max(a, b) - 2, "ijk") if max(a, b) > 2 else ""
    left = batch[len(batch) - max(a - 2, 0):] + ("ij" if a > 1 else "j")
    right = batch[len(batch) - max(b - 2, 0):] + ("jk" if b > 1 else "j")
    out = batch + ("i" if a > 1 else "") + ("k" if b > 1 else "")
    if call.operands[0].shape[-1] != call.operands[1].shape[-2 if b > 1 else -1]:
        inner = (call.operands[0].shape[-1], call.operands[1].shape[-2 if b > 1 else -1])
        raise call.error(f"inner dims differ ({inner[0]} != {inner[1]})",
                         "make the last dim of the first operand equal the contracted dim of "
                         "the second")
    return (left, right), out, batch


def _dot_form(call: OpCall):
    a, b = (o.ndim for o in call.operands)
    left = _labels(a)
    right = _labels(b, left)
    right = right[:-2] + left[-1] + right[-1] if b >= 2 else left[-1]
    return (left, right), left[:-1] + right.replace(left[-1], ""), ""


def _tensordot_form(call: OpCall):
    (axes_a, axes_b) = call.params
    a, b = call.operands
    left = _labels(a.ndim)
    right = list(_labels(b.ndim, left))
    for i, j in zip(axes_a, axes_b):
        right[j] = left[i]
    right = "".join(right)
    output = "".join(c for c in left if c not in right) + "".join(c for c in right if c not in left)
    return (left, right), output, ""


def einsum_form(call: OpCall):
    """(subscripts of each operand, of the output, labels that may broadcast) of any
    contraction op: the one description both the sharding rule and the gradient use."""
    if call.name == "matmul":
        return matmul_subscripts(call)
    if call.name == "dot":
        return _dot_form(call)
    if call.name == "tensordot":
        return _tensordot_form(call)
    return parse_einsum(call, call.params[0])


_KERNELS = {
    "matmul": lambda params: np.matmul,
    "dot": lambda params: np.dot,
    "tensordot": lambda params: lambda x, y: np.tensordot(x, y, axes=params),
    "einsum": lambda params: lambda *ops: np.einsum(params[0], *ops, optimize=_big(ops)),
}


def _big(ops) -> bool:
    """Let numpy route a large einsum through BLAS (tensordot): its own loops are ~10x
    slower there, while planning the path costs ~20 us, too much for small blocks."""
    return len(ops) > 1 and sum(np.size(o) for o in ops) > 16384


@register(*_KERNELS)
def contraction_rule(call: OpCall) -> Strategy:
    inputs, output, broadcast = einsum_form(call)
    kernel = _KERNELS[call.name](call.params)
    if not broadcast:
        kernel = gemm_kernel(inputs, output, kernel)
    return contraction(call, inputs, output, kernel, broadcast)


def parse_einsum(call: OpCall, subscripts: str) -> Tuple[Tuple[str, ...], str, str]:
    """Explicit subscripts: ``...`` expanded to fresh labels (which may broadcast)."""
    subscripts = subscripts.replace(" ", "")
    lhs, arrow, rhs = subscripts.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(call.operands):
        raise call.error(f"subscripts {subscripts!r} name {len(inputs)} operands",
                         "give one subscript per operand")
    used = set(subscripts)
    nell = max((o.ndim - len(s.replace("...", "")) for s, o in zip(inputs, call.operands)
                if "..." in s), default=0)
    ell = _labels(nell, "".join(used))
    inputs = tuple(s.replace("...", ell[nell - (o.ndim - len(s.replace("...", ""))):])
                   for s, o in zip(inputs, call.operands))
    if not arrow:
        counts = "".join(inputs)
        rhs = ell + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in ell))
    else:
        rhs = rhs.replace("...", ell)
    return inputs, rhs, ell
