"""The FFT's stages: sharding rules, local kernels and the choice of the next stage
(``numpy/fft.py`` drives them; its docstring gives the layouts each function returns).

A transform over several axes is separable, so it runs as a few *stages*, each one local
transform (numpy's ``fftn``, ``ifftn``, ``rfftn`` or ``irfftn``, with its own lengths and
norm) over axes that every block holds whole.  The ``fft`` rule says just that, for one
mesh dim: the operand may be whole, or split along a dim the stage does not transform,
and the output is laid out as the operand was used.  ``numpy/fft.py`` lays each stage's
operand out first, as :func:`stage_layout` says: a split transformed axis moves to another
dim (an all-to-all, the slab and pencil transposes of FFTW-MPI and heFFTe, 1/n of a
gather's bytes), or nowhere (a gather) where no dim is left, and stays there afterwards
("transposed out").  The layout is chosen for the whole mesh at once because mesh dims
that move onto one dim must keep the nesting order cheap to undo, which the chooser,
deciding each mesh dim alone, cannot see; run alone, the op still gets a valid layout
from the chooser (the rule lists dims no later stage transforms first, longer first).

:func:`next_stage` picks a stage's axes from shapes and placements alone (the same on
every rank): all remaining axes at once when none is split or a dim outside them can take
the splits (one all-to-all, one local call); else the unsplit ones first (no
communication), after which the others can move their splits onto those.  Real transforms
keep numpy's order: ``rfftn`` transforms its last axis in its first stage, ``irfftn`` in
its last.  ``fft_adjoint`` is a stage's transpose (its gradient, JAX's convention): the
stage's own transform of the cotangent (the DFT matrix is symmetric; JAX's rules for the
real ones), then cropped or zero-padded back to the input's lengths.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..device.arrays import xp
from ..placement import Partial, Replicate, Shard
from .registry import Choice, OpCall, Strategy, register, replicated

KINDS = ("fft", "ifft", "rfft", "irfft")
SWAP_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def stage_shape(kind: str, shape, axes, lengths) -> tuple:
    """The output shape of a stage: each axis at its length; ``rfft`` halves its last."""
    out = list(shape)
    for a, n in zip(axes, lengths):
        out[a] = n
    if kind == "rfft":
        out[axes[-1]] = lengths[-1] // 2 + 1
    return tuple(out)


def targets(shape, axes, pending) -> list:
    """The dims a split may move to, best first: those no later stage transforms, then the
    pending ones; larger dims first in each (even blocks), then in dim order."""
    free = [d for d in range(len(shape)) if d not in axes]
    return sorted(free, key=lambda d: (d in pending, -shape[d], d))


def _strategy(call: OpCall, out_shape, kernel) -> Strategy:
    _, axes, _, _, pending = call.params[:5]
    (x,) = call.operands
    choices = [replicated(1)] + [Choice((Shard(d),), Shard(d))
                                 for d in targets(x.shape, axes, pending)]
    return Strategy(out_shape, choices, kernel=kernel)


@register("fft")
def fft_rule(call: OpCall) -> Strategy:
    """A stage: params (kind, axes, lengths, norm, pending dims)."""
    kind, axes, lengths, norm, _ = call.params
    return _strategy(call, stage_shape(kind, call.operands[0].shape, axes, lengths),
                     partial(transform, kind, axes, lengths, norm))


@register("fft_adjoint")
def fft_adjoint_rule(call: OpCall) -> Strategy:
    """A stage's transpose: params (kind, axes, lengths, norm, pending, input lengths,
    whether the input was real)."""
    kind, axes, lengths, norm, _, in_lengths, real = call.params
    shape = list(call.operands[0].shape)
    for a, n in zip(axes, in_lengths):
        shape[a] = n
    return _strategy(call, tuple(shape),
                     partial(adjoint, kind, axes, lengths, norm, in_lengths, real))


def transform(kind, axes, lengths, norm, block):
    """numpy's transform of ``kind`` on a block holding ``axes`` whole (its module's fft)."""
    return getattr(xp(block).fft, kind + "n")(block, s=lengths, axes=axes, norm=norm)


def resize(block, axes, lengths):
    """``block`` cropped or zero-padded at the end of each axis to its length."""
    block = block[tuple(slice(0, lengths[axes.index(d)]) if d in axes else slice(None)
                        for d in range(block.ndim))]
    pad = [(0, max(lengths[axes.index(d)] - block.shape[d], 0)) if d in axes else (0, 0)
           for d in range(block.ndim)]
    return np.pad(block, pad) if any(p[1] for p in pad) else block


def hermitian_weights(n: int):
    """How often each term of a length-``n`` half spectrum counts in the full one: once for
    the mean (and the Nyquist term of an even ``n``), twice for the others."""
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w


def adjoint(kind, axes, lengths, norm, in_lengths, real, g):
    """The transpose of a stage (the DFT matrix is symmetric: ``fft``'s is ``fft``, with the
    same norm), before the transpose of its input's crop or pad.  ``rfft`` crops a complex
    transform of real input: zero-pad the cotangent back, transform, keep the real part.
    ``irfft`` counts each half-spectrum term once or twice (``hermitian_weights``) and
    ignores the imaginary parts of the mean and Nyquist terms: its transpose is the
    conjugated, weighted ``rfftn`` of the cotangent, with the swapped norm (JAX's rule)."""
    fft = xp(g).fft
    if kind in ("fft", "ifft"):
        out = getattr(fft, kind + "n")(g, s=lengths, axes=axes, norm=norm)
    elif kind == "rfft":
        out = fft.fftn(g, s=lengths, axes=axes, norm=norm).real
    else:
        out = fft.rfftn(g, s=lengths, axes=axes, norm=SWAP_NORM[norm])
        shape = [1] * g.ndim
        shape[axes[-1]] = out.shape[axes[-1]]
        weights = hermitian_weights(lengths[-1]).astype(out.real.dtype).reshape(shape)
        out = (out * _like(weights, out)).conj()
    if real and out.dtype.kind == "c":
        out = out.real
    return resize(out, list(axes), in_lengths)


def _like(host, block):
    return host if type(block) is np.ndarray else xp(block).asarray(host)


# --- the next stage ----------------------------------------------------------------------

def split_dims(placements, mesh_shape) -> frozenset:
    """The dims that a mesh dim of size > 1 splits."""
    return frozenset(p.dim for p, n in zip(placements, mesh_shape)
                     if isinstance(p, Shard) and n > 1)


def _holds(remaining, shape, placements, mesh_shape, exclude=()) -> bool:
    """Whether some dim outside ``remaining`` (and ``exclude``) is long enough to take
    their splits."""
    for d in range(len(shape)):
        if d in remaining or d in exclude:
            continue
        ranks = math.prod(n for p, n in zip(placements, mesh_shape)
                          if isinstance(p, Shard) and (p.dim in remaining or p.dim == d))
        if shape[d] >= ranks:
            return True
    return False


def _c2c(kind, remaining, shape, placements, mesh_shape, split, exclude=()):
    if not split & set(remaining) or _holds(remaining, shape, placements, mesh_shape, exclude):
        return kind, tuple(remaining)
    whole = tuple(a for a in remaining if a not in split)
    if whole or len(remaining) == 1:
        return kind, whole or tuple(remaining)
    keep = max(remaining, key=lambda a: shape[a])     # the splits gather onto it meanwhile
    return kind, tuple(a for a in remaining if a != keep)


def _axes_of_stage(kind, remaining, shape, placements, mesh_shape):
    split = split_dims(placements, mesh_shape)
    if kind in ("fft", "ifft"):
        return _c2c(kind, remaining, shape, placements, mesh_shape, split)
    if not split & set(remaining) or _holds(remaining, shape, placements, mesh_shape):
        return kind, remaining
    last = remaining[-1]
    if kind == "rfft":          # numpy's first step: rfft along the last axis
        if last in split:
            return kind, (last,)
        return kind, tuple(a for a in remaining if a not in split)
    if len(remaining) == 1:     # irfft: the last axis alone, split, nowhere to go
        return kind, remaining
    return _c2c("ifft", remaining[:-1], shape, placements, mesh_shape, split, (last,))


def stage_layout(shape, placements, mesh_shape, axes, pending) -> tuple:
    """``placements`` with each split of a stage's axis moved (an all-to-all) to a dim
    outside the stage: one no later stage transforms before a pending one, one no other
    mesh dim splits before a shared one (nested splits of one dim cost a gather to undo),
    the longer first, the first in dim order on ties; Replicate where no dim is outside
    (an all-gather).  Partial terms are reduced (Replicate), as for any op without a
    Partial rule."""
    out = [Replicate() if isinstance(p, Partial) else p for p in placements]
    free = [d for d in range(len(shape)) if d not in axes]
    for i, p in enumerate(out):
        if not (isinstance(p, Shard) and p.dim in axes):
            continue
        taken = {q.dim for j, q in enumerate(out)
                 if j != i and isinstance(q, Shard) and mesh_shape[j] > 1}
        out[i] = Shard(min(free, key=lambda d: (d in pending, d in taken, -shape[d], d))
                       ) if free else Replicate()
    return tuple(out)


def next_stage(kind, remaining, shape, placements, mesh_shape):
    """(the stage's kind, its axes, the axes left pending, the layout it runs in) for the
    next stage of a ``kind`` transform whose ``remaining`` axes (in numpy's order, the real
    transforms' special axis last) are not yet transformed, on an operand of this
    ``shape`` and ``placements``: the same answer on every rank."""
    remaining = tuple(remaining)
    stage, axes = _axes_of_stage(kind, remaining, shape, placements, mesh_shape)
    pending = tuple(a for a in remaining if a not in axes)
    return stage, axes, pending, stage_layout(shape, placements, mesh_shape, axes, pending)
