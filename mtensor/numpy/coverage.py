"""Which of numpy's overridable functions run on DTensors: every function numpy lets
``__array_function__`` override (numpy's ``_ArrayFunctionDispatcher`` objects in its public
modules) is either implemented (a handler in ``util.HANDLED``, or a creation function with
NEP 35's ``like=``) or refused here with the reason.  ``tools/numpy_coverage.py`` writes the
table of ``docs/reference/numpy_coverage.md`` from it; ``tests/unit/test_numpy_coverage.py``
fails when numpy adds a function that is in neither list.
"""
from __future__ import annotations

import importlib

import numpy as np

from . import creation, util

MODULES = ("numpy", "numpy.linalg", "numpy.fft", "numpy.char", "numpy.strings", "numpy.rec",
           "numpy.lib.scimath", "numpy.lib.stride_tricks", "numpy.lib.recfunctions",
           "numpy.lib.array_utils", "numpy.ma", "numpy.random", "numpy.polynomial",
           "numpy.testing", "numpy.lib.npyio")

REFUSED_MODULES = {
    "numpy.char": "string arrays: DTensors hold numeric and boolean dtypes only",
    "numpy.strings": "string arrays: DTensors hold numeric and boolean dtypes only",
    "numpy.lib.recfunctions": "structured dtypes: DTensors hold numeric and boolean dtypes only",
}
REFUSED = {
    "numpy.apply_along_axis": "a Python function per 1-D slice: write it with mt.local_map "
                              "on blocks whose slices are whole, or use full_tensor()",
    "numpy.apply_over_axes": "a Python function per axis: call it on the DTensor axis by "
                             "axis (each reduction has a rule)",
    "numpy.busday_count": "datetime dtypes: not held by DTensors",
    "numpy.busday_offset": "datetime dtypes: not held by DTensors",
    "numpy.is_busday": "datetime dtypes: not held by DTensors",
    "numpy.datetime_as_string": "datetime dtypes: not held by DTensors",
    "numpy.histogram2d": "bins agreed over several split samples at once: not written yet; "
                         "np.histogram of each coordinate is",
    "numpy.histogramdd": "bins agreed over several split samples at once: not written yet; "
                         "np.histogram of each coordinate is",
    "numpy.packbits": "packing changes a split dim's length by 8 per block boundary: use "
                      "to_local() when each block's length is a multiple of 8",
    "numpy.unpackbits": "packing changes a split dim's length by 8 per block boundary: use "
                        "to_local() when each block's length is a multiple of 8",
    "numpy.save": "one file of the whole array: mt.save writes a distributed checkpoint, "
                  "np.save(path, mt.asnumpy(x)) one file",
    "numpy.savez": "one file of whole arrays: mt.save writes a distributed checkpoint",
    "numpy.savez_compressed": "one file of whole arrays: mt.save writes a distributed "
                              "checkpoint",
    "numpy.savetxt": "one text file of the whole array: np.savetxt(path, mt.asnumpy(x))",
    "numpy.unwrap": "no built-in rule, on purpose: it is the worked example of "
                    "mt.register_sharding (examples/register_sharding.py adds one in five "
                    "lines)",
    "numpy.lib.stride_tricks.sliding_window_view": "windows cross the blocks' edges: a halo "
                                                   "exchange (the neighbours issue)",
}


def overridable() -> dict:
    """Every overridable numpy function by its public name (the first module listing it)."""
    dispatcher = type(np.concatenate)
    found: dict = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in sorted(dir(module)):
            f = getattr(module, attr)
            if not attr.startswith("_") and isinstance(f, dispatcher) and f not in found:
                found[f] = f"{name}.{attr}"
    return {public: f for f, public in found.items()}


def implemented(f) -> bool:
    return f in util.HANDLED or f in creation.LIKE_FUNCTIONS


def refusal(public: str, f=None):
    """Why ``public`` (or the function ``f``) is refused, or None."""
    if public in REFUSED:
        return REFUSED[public]
    module = public.rsplit(".", 1)[0] if f is None else getattr(f, "__module__", "")
    return REFUSED_MODULES.get(module) or REFUSED_MODULES.get(public.rsplit(".", 1)[0])


def table() -> list:
    """(public name, "implemented" or "refused", where it is or why) for each function."""
    rows = []
    for public, f in sorted(overridable().items()):
        if implemented(f):
            rows.append((public, "implemented", util.HANDLED[f].__module__
                         if f in util.HANDLED else "mtensor.numpy.creation (like=)"))
        else:
            rows.append((public, "refused", refusal(public, f)))
    return rows
