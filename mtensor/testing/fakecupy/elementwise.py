"""``ElementwiseKernel`` of the fake: the kernel's C source run with numpy, statement by
statement, on the device arrays' data, so a test sees what the generated source computes.

The source may use what the compiler's fusion pass writes and no more: declarations
``double t0 = ...;`` (or ``float``), the assignment of the outputs, numbers (a trailing
``f`` marks a float literal), ``+ - * /``, parentheses, and the math functions of
``FUNCTIONS``.  Anything else is refused, as nvcc would refuse what it cannot compile; what
nvcc alone can show (that it compiles, FMA contraction) needs a GPU.
"""
import re

import numpy as np

from .core import run_kernel

FUNCTIONS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "sin": np.sin,
             "cos": np.cos, "fabs": np.absolute, "expm1": np.expm1, "log1p": np.log1p}
TYPES = {"double": np.float64, "float": np.float32}
_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*(?:[eE][-+]?\d+)?f?)|([A-Za-z_]\w*)|([-+*/(),]))")


class ElementwiseKernel:
    """CuPy's ``ElementwiseKernel(in_params, out_params, operation, name, options=...)``;
    called with the inputs (device arrays or scalars) and optionally the outputs (which the
    operation may read: an in-place update), it returns the output(s), new and C-contiguous
    when not given."""

    def __init__(self, in_params, out_params, operation, name="kernel", options=(), **kwargs):
        self.inputs, self.outputs = _params(in_params), _params(out_params)
        self.statements = [_statement(s, self) for s in operation.split(";") if s.strip()]
        self.name, self.options = name, tuple(options)
        known = {n for _, n in self.inputs + self.outputs} | set(FUNCTIONS)
        for target, _, (_, names) in self.statements:
            unknown = names - known
            if unknown:
                raise ValueError(f"fake ElementwiseKernel {name!r}: {sorted(unknown)} are "
                                 f"not declared before use (nvcc would refuse)")
            known.add(target)

    def __call__(self, *args):
        if len(args) not in (len(self.inputs), len(self.inputs) + len(self.outputs)):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        given = args[len(self.inputs):]
        result = run_kernel(self._run, args[:len(self.inputs)], {"out": given} if given
                            else {})
        return result[0] if len(self.outputs) == 1 else result

    def _run(self, *values, out=()):
        scope = {name: np.asarray(v, dtype) if isinstance(v, np.ndarray) else v
                 for (dtype, name), v in zip(self.inputs, values)}
        scope.update((name, o.copy()) for (_, name), o in zip(self.outputs, out))
        for target, dtype, (expression, _) in self.statements:
            value = eval(expression, {"__builtins__": {}, **FUNCTIONS}, scope)
            scope[target] = np.asarray(value).astype(dtype, copy=False)
        if not out:
            shape = np.broadcast_shapes(*(np.shape(v) for v in values))
            return (np.broadcast_to(scope[self.outputs[0][1]], shape).copy(),)
        for (_, name), o in zip(self.outputs, out):
            np.copyto(o, scope[name])
        return tuple(out)


def _params(text):
    out = []
    for part in text.split(","):
        words = part.split()
        if len(words) != 2 or words[0] not in TYPES:
            raise ValueError(f"fake ElementwiseKernel: cannot read the parameter {part!r}")
        out.append((TYPES[words[0]], words[1]))
    return out


def _statement(text, kernel):
    """(target, dtype, Python expression) of ``type name = expr`` or ``name = expr``."""
    left, eq, right = text.partition("=")
    words = left.split()
    if not eq or not 1 <= len(words) <= 2:
        raise ValueError(f"fake ElementwiseKernel: cannot read the statement {text!r}")
    outputs = dict((n, t) for t, n in kernel.outputs)
    if len(words) == 2:
        if words[0] not in TYPES:
            raise ValueError(f"fake ElementwiseKernel: unknown type {words[0]!r}")
        dtype = TYPES[words[0]]
    elif words[0] in outputs:
        dtype = outputs[words[0]]
    else:
        raise ValueError(f"fake ElementwiseKernel: {words[0]!r} is not declared")
    return words[-1], dtype, _expression(right)


def _expression(text):
    """(``text`` as Python, the names it reads), token by token; float literals become
    NumPy float32 values."""
    out, names, pos = [], set(), 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"fake ElementwiseKernel: cannot read {text[pos:]!r}")
        number, name, op = m.groups()
        if number is not None:
            out.append(f"np_float32({number[:-1]})" if number.endswith("f") else number)
        elif name is not None:
            out.append(name)
            names.add(name)
        else:
            out.append(op)
        pos = m.end()
    return " ".join(out), names


FUNCTIONS["np_float32"] = np.float32
