"""numpy's splitting functions on DTensors: ``split``, ``array_split``, ``hsplit``, ``vsplit``,
``dsplit``, each piece a view (a slice) of the input, so a split dim keeps its split where
the slice allows (``getitem``'s rule) and nothing moves until a piece is used.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.array_utils import normalize_axis_index

from .shapes import getitem
from .util import implements, refuse_dtensor_args


def _bounds(n: int, indices_or_sections) -> list:
    """The (start, stop) of each piece of a dim of ``n``, as numpy's ``array_split``."""
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        each, extra = divmod(n, sections)
        cuts = np.cumsum([0] + extra * [each + 1] + (sections - extra) * [each])
        return list(zip(cuts[:-1].tolist(), cuts[1:].tolist()))
    cuts = [0] + [int(i) for i in indices_or_sections] + [n]
    return list(zip(cuts[:-1], cuts[1:]))


@implements(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    refuse_dtensor_args("array_split", indices_or_sections=indices_or_sections)
    axis = normalize_axis_index(axis, ary.ndim)
    lead = (slice(None),) * axis
    return [getitem(ary, lead + (slice(start, stop),))
            for start, stop in _bounds(ary.shape[axis], indices_or_sections)]


@implements(np.split)
def split(ary, indices_or_sections, axis=0):
    if np.ndim(indices_or_sections) == 0:
        n = ary.shape[normalize_axis_index(axis, ary.ndim)]
        if int(indices_or_sections) <= 0 or n % int(indices_or_sections):
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


def _split_at_least(name, ary, indices_or_sections, ndim, axis):
    if ary.ndim < ndim:
        raise ValueError(f"{name} only works on arrays of {ndim} or more dimensions")
    return split(ary, indices_or_sections, axis)


@implements(np.hsplit)
def hsplit(ary, indices_or_sections):
    if ary.ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ary.ndim > 1 else 0)


@implements(np.vsplit)
def vsplit(ary, indices_or_sections):
    return _split_at_least("vsplit", ary, indices_or_sections, 2, 0)


@implements(np.dsplit)
def dsplit(ary, indices_or_sections):
    return _split_at_least("dsplit", ary, indices_or_sections, 3, 2)
