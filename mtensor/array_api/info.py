"""``__array_namespace_info__()``: what the namespace supports, its default device (the
innermost ``with mesh:`` block's mesh, else the 1-D mesh of every rank) and its dtypes
(numpy's).
"""
from __future__ import annotations

import numpy as np

from .devices import default_device

_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]


class Info:
    """The standard's inspection object (``xp.__array_namespace_info__()``)."""

    __module__ = "mtensor.array_api"

    def capabilities(self) -> dict:
        """Boolean masks and ``nonzero``/``unique`` (data-dependent shapes) both run on
        DTensors (the hits laid out balanced); ``max dimensions`` is numpy's."""
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        return default_device()

    def devices(self) -> list:
        """The default device: other meshes are the program's own (``init_device_mesh``)."""
        return [default_device()]

    def default_dtypes(self, *, device=None) -> dict:
        return {"real floating": np.dtype(np.float64), "complex floating": np.dtype(np.complex128),
                "integral": np.dtype(np.intp), "indexing": np.dtype(np.intp)}

    def dtypes(self, *, device=None, kind=None) -> dict:
        kinds = (kind,) if isinstance(kind, str) or kind is None else tuple(kind)
        names = _KINDS["bool"] + _KINDS["numeric"] if kind is None else tuple(
            n for k in kinds for n in _KINDS[k])
        return {n: np.dtype(n) for n in names}


def __array_namespace_info__() -> Info:
    return Info()
