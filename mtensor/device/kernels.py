"""Generated elementwise kernels on a device: the source of one (CuPy's ``ElementwiseKernel``
arguments), compiled by the array module of the blocks it first runs on and kept, one per
module.  The compiler's fusion pass makes them; the device layer is the only place that
touches the array module."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from .arrays import xp


@dataclass(eq=False)
class Elementwise:
    """``operation`` over the ``in_params`` (``"double x0, double x1"``) into one output
    (``out_params``) of ``dtype`` laid out with its axes in memory in ``order`` (outermost
    first; None: C order), as the ops it replaces would have laid it out (later reductions
    add in memory order); compiled with nvcc ``options`` at the first call."""

    in_params: str
    out_params: str
    operation: str
    name: str
    dtype: Any
    order: Optional[tuple] = None
    options: tuple = ()
    _compiled: dict = field(default_factory=dict, repr=False)

    def __call__(self, *blocks):
        module = xp(blocks[0])
        kernel = self._compiled.get(module)
        if kernel is None:
            kernel = module.ElementwiseKernel(self.in_params, self.out_params, self.operation,
                                              self.name, options=self.options)
            self._compiled[module] = kernel
        shape = np.broadcast_shapes(*(b.shape for b in blocks))
        if self.order is None:
            out = module.empty(shape, self.dtype)
        else:
            out = module.empty(tuple(shape[d] for d in self.order), self.dtype).transpose(
                tuple(self.order.index(d) for d in range(len(self.order))))
        return kernel(*blocks, out)


@dataclass(eq=False)
class InPlace:
    """A kernel that reads and writes the arrays it is given as outputs (an optimizer's
    parameter and moments, one launch for the whole update): ``operation`` over the
    ``in_params`` (arrays and scalars) and the ``out_params``, compiled at the first call."""

    in_params: str
    out_params: str
    operation: str
    name: str
    options: tuple = ()
    _compiled: dict = field(default_factory=dict, repr=False)

    def __call__(self, *args):
        module = xp(next(a for a in args if hasattr(a, "shape")))
        kernel = self._compiled.get(module)
        if kernel is None:
            kernel = module.ElementwiseKernel(self.in_params, self.out_params, self.operation,
                                              self.name, options=self.options)
            self._compiled[module] = kernel
        kernel(*args)
