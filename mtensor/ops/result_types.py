"""The dtype a numpy ufunc gives on operands of given types, found on one-element stand-ins:
what a block must hold to take an op's result in place (``dispatch``'s temporary elision).
Operand types are ``("array", dtype)``, ``("scalar", dtype)`` (numpy scalars: strong) or
``("python", type)`` (Python numbers: weak, NEP 50)."""
from __future__ import annotations

import numpy as np


def result_type(name, types):
    """The dtype numpy's ``name`` gives on operands of ``types`` (weak Python scalars,
    strong numpy ones), or None where it is not a ufunc or refuses them."""
    ufunc = getattr(np, name, None)
    if not isinstance(ufunc, np.ufunc) or ufunc.nout != 1 or ufunc.nin != len(types):
        return None
    args = [np.ones(1, t) if kind == "array" else np.dtype(t).type(1) if kind == "scalar"
            else t(1) if t in (bool, int, float, complex) else None for kind, t in types]
    try:
        with np.errstate(all="ignore"):
            return None if any(a is None for a in args) else ufunc(*args).dtype
    except (TypeError, ValueError):
        return None
