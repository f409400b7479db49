"""numpy's ``np.fft`` on DTensors: the transforms, ``fftshift`` and ``ifftshift``.

A transform runs as a few stages, each one numpy call on every block (``ops/fft.py``): the
axes a block holds whole are transformed where they lie, with the output split as the input
(a transform along unsplit axes costs no communication).  A split axis to transform is first
re-split along another dim by an all-to-all (the redistribution Shard(a) -> Shard(b): slab
decomposition on a 1-D mesh, pencil on a 2-D one: 1/n of the bytes a gather would move);
the split then stays where it landed, as FFTW-MPI's "transposed out" does, so the output may
be split along another dim than the input.  The values are numpy's in every case (rounding
apart): only the layout differs.  A split moves to the longest dim that no later stage
transforms, one no other mesh dim splits before a shared one, the first in dim order on
ties (``ops.fft.stage_layout``); a dim with nowhere to go (a split 1-D array) is gathered.
Layouts returned and all-to-alls, on a 1-D mesh unless said (``docs/guide/ops.md`` has
the full table):

- along unsplit axes only: the input's layout, no communication;
- ``fft(x, axis=0)``, ``fft2``, ``ifft2``, ``fftn``, ``ifftn``, ``rfft2``, ``rfftn`` of a
  row-split (S(0)) 2-D or 3-D array: column-split (S(1)), one all-to-all;
- ``irfft2``/``irfftn`` of S(1) (what ``rfft2`` returns): S(0), one all-to-all; of S(0):
  S(0), two (numpy's order: the last axis is transformed last, so it must be whole then);
  ``rfft2`` of S(1): S(1), two (its last axis goes first);
- ``fftn`` of a 3-D pencil (S(0), S(1)) on a 2-D mesh: (S(2), S(2)), one all-to-all per
  mesh dim; ``ifftn`` of that: (S(0), S(1)), the same.

``n``/``s`` crop or zero-pad an axis inside the stage that transforms it (numpy's own
``s``), where the axis is whole, so they cost nothing more.  Repeated ``axes`` run numpy's
sequence of one-axis transforms.  ``hfft`` is ``irfft`` of the conjugate and ``ihfft`` the
conjugate of ``rfft``, with the norm swapped (numpy's definitions).  ``fftshift`` and
``ifftshift`` are ``np.roll`` by half of each axis, laid out as their input (roll leaves
``P(sum)`` terms along a split axis today: a reduce-scatter).  ``fftfreq`` and ``rfftfreq``
are not array functions (they take lengths, not arrays): numpy answers them with numpy
arrays; the array API's ``xp.fft.fftfreq(n, device=mesh)`` gives DTensors.  Every stage is an op of
dispatch, so the transforms compile (``mt.compile``) and have gradients (their transposes:
``autodiff/vjps_numpy.py``).
"""
from __future__ import annotations

import operator
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from ..dtensor import DTensor
from ..ops.fft import SWAP_NORM, next_stage
from ..placement import reduced
from .rearrange import roll
from .util import implements, into_out, run


def _norm(norm) -> str:
    norm = "backward" if norm is None else norm
    if norm not in SWAP_NORM:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         f'"forward".')
    return norm


def _operand(name, a) -> DTensor:
    if type(a) is not DTensor:
        raise TypeError(f"np.fft.{name}: the array is a {type(a).__name__}, not a DTensor (only "
                        f"out= is); pass a DTensor, or a numpy out=")
    return a


def _lengths(lengths):
    for n in lengths:
        if n < 1:
            raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return tuple(int(n) for n in lengths)


def _cook(a, s, axes, inverse_real=False):
    """numpy's ``_cook_nd_args``: the transform lengths and axes (with numpy's warnings)."""
    if s is None:
        s = [a.shape[ax] for ax in axes] if axes is not None else list(a.shape)
    elif axes is None:
        warnings.warn("`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy "
                      "2.0). In a future version of NumPy, this will raise an error and "
                      "`s[i]` will correspond to the size along the transformed axis "
                      "specified by `axes[i]`. To retain current behaviour, pass a sequence "
                      "[0, ..., k-1] to `axes` for an array of dimension k.",
                      DeprecationWarning, stacklevel=4)
    s = list(s)
    axes = list(range(-len(s), 0)) if axes is None else list(axes)
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    axes = [normalize_axis_index(operator.index(ax), a.ndim) for ax in axes]
    if None in s:
        warnings.warn("Passing an array containing `None` values to `s` is deprecated in "
                      "NumPy 2.0 and will raise an error in a future version of NumPy. To use "
                      "the default behaviour of the corresponding 1-D transform, pass the "
                      "value matching the default for its `n` parameter. To use the default "
                      "behaviour for every axis, the `s` argument can be omitted.",
                      DeprecationWarning, stacklevel=4)
    return [a.shape[ax] if n is not None and n == -1 else n for n, ax in zip(s, axes)], axes


def _staged(kind, a, axes, lengths, norm):
    """One transform over distinct ``axes`` (numpy's order), stage by stage: each laid out
    as ``ops.fft.next_stage`` says (a redistribution, differentiated and compiled as any),
    then transformed where it lies."""
    remaining = dict(zip(axes, lengths))
    mesh_shape = a.device_mesh.shape
    while remaining:
        stage, on, pending, layout = next_stage(kind, tuple(remaining), a.shape, a.placements,
                                                mesh_shape)
        if layout != a.placements:
            a = a.redistribute(placements=layout)
        a = run("fft", (a,), (stage, on, tuple(remaining.pop(ax) for ax in on), norm,
                              pending))
        kind = "fft" if stage == "rfft" else kind
    return a


def transform(name, kind, a, axes, lengths, norm, out=None):
    """``kind`` over ``axes`` at ``lengths``: staged, or numpy's one-axis sequence where
    an axis repeats (``fftn(x, axes=(0, 0))`` transforms axis 0 twice)."""
    a, norm, lengths = _operand(name, a), _norm(norm), _lengths(lengths)
    if not axes:
        return into_out(a, out)
    if len(set(axes)) == len(axes):
        return into_out(_staged(kind, a, tuple(axes), lengths, norm), out)
    steps = list(zip(axes, lengths))
    if kind in ("fft", "ifft"):
        order = [(kind, step) for step in reversed(steps)]
    elif kind == "rfft":
        order = [("rfft", steps[-1])] + [("fft", step) for step in reversed(steps[:-1])]
    else:
        order = [("ifft", step) for step in steps[:-1]] + [("irfft", steps[-1])]
    for k, (ax, n) in order:
        a = _staged(k, a, (ax,), (n,), norm)
    return into_out(a, out)


def _one(name, kind, a, n, axis, norm, out):
    a = _operand(name, a)
    axis = normalize_axis_index(operator.index(axis), a.ndim)
    if n is None:
        n = 2 * (a.shape[axis] - 1) if kind == "irfft" else a.shape[axis]
    return transform(name, kind, a, (axis,), (n,), norm, out)


def _many(name, kind, a, s, axes, norm, out):
    a = _operand(name, a)
    lengths, axes = _cook(a, s, axes)
    if kind == "irfft" and axes and (s is None or lengths[-1] is None):
        lengths[-1] = 2 * (a.shape[axes[-1]] - 1)
    lengths = [a.shape[ax] if n is None else n for n, ax in zip(lengths, axes)]
    return transform(name, kind, a, axes, lengths, norm, out)


@implements(np.fft.fft)
def fft(a, n=None, axis=-1, norm=None, out=None):
    return _one("fft", "fft", a, n, axis, norm, out)


@implements(np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None, out=None):
    return _one("ifft", "ifft", a, n, axis, norm, out)


@implements(np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None, out=None):
    return _one("rfft", "rfft", a, n, axis, norm, out)


@implements(np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None, out=None):
    return _one("irfft", "irfft", a, n, axis, norm, out)


@implements(np.fft.hfft)
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy's definition: the ``irfft`` of the conjugate, with the norm swapped."""
    a = _operand("hfft", a)
    if n is None:
        n = 2 * (a.shape[normalize_axis_index(operator.index(axis), a.ndim)] - 1)
    return into_out(irfft(np.conjugate(a), n, axis, SWAP_NORM[_norm(norm)]), out)


@implements(np.fft.ihfft)
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """numpy's definition: the conjugate of the ``rfft``, with the norm swapped."""
    return into_out(np.conjugate(rfft(a, n, axis, SWAP_NORM[_norm(norm)])), out)


@implements(np.fft.fftn)
def fftn(a, s=None, axes=None, norm=None, out=None):
    return _many("fftn", "fft", a, s, axes, norm, out)


@implements(np.fft.ifftn)
def ifftn(a, s=None, axes=None, norm=None, out=None):
    return _many("ifftn", "ifft", a, s, axes, norm, out)


@implements(np.fft.rfftn)
def rfftn(a, s=None, axes=None, norm=None, out=None):
    return _many("rfftn", "rfft", a, s, axes, norm, out)


@implements(np.fft.irfftn)
def irfftn(a, s=None, axes=None, norm=None, out=None):
    return _many("irfftn", "irfft", a, s, axes, norm, out)


@implements(np.fft.fft2)
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _many("fft2", "fft", a, s, axes, norm, out)


@implements(np.fft.ifft2)
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _many("ifft2", "ifft", a, s, axes, norm, out)


@implements(np.fft.rfft2)
def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _many("rfft2", "rfft", a, s, axes, norm, out)


@implements(np.fft.irfft2)
def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    return _many("irfft2", "irfft", a, s, axes, norm, out)


def _shift(x, axes, sign):
    """numpy's shifts: ``np.roll`` by half of each axis (along a split axis, roll's rule),
    laid out as ``x`` (roll may leave partial terms: a reduce-scatter)."""
    x = _operand("fftshift" if sign > 0 else "ifftshift", x)
    if axes is None:
        axes = tuple(range(x.ndim))
        shift = [sign * (dim // 2) for dim in x.shape]
    elif isinstance(axes, (int, np.integer)):
        shift = sign * (x.shape[axes] // 2)
    else:
        shift = [sign * (x.shape[ax] // 2) for ax in axes]
    out = roll(x, shift, axes)
    layout = reduced(x.placements)
    return out if out.placements == layout else out.redistribute(placements=layout)


@implements(np.fft.fftshift)
def fftshift(x, axes=None):
    return _shift(x, axes, 1)


@implements(np.fft.ifftshift)
def ifftshift(x, axes=None):
    return _shift(x, axes, -1)
