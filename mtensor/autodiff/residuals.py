"""What each gradient rule reads of its op's values, so the tape keeps those and no more.

A tape that kept every operand and output of every op would keep every temporary of the
forward alive until the backward pass: each op then writes its result into memory last
touched a step ago, where without a tape it reuses a temporary just freed, still in cache
(the GPT of ``examples/lm_model.py`` at 2 ranks: its forward takes 30 ms, 44 ms with every
value it makes kept).  A followed value whose value no rule reads is kept as a
:class:`~mtensor.autodiff.tape.Ghost` (its identity and spec); the rest as they are.  An op
not listed here keeps everything, as every rule may read anything.
"""
from __future__ import annotations

# op -> reads(wanted operand positions, number of operands) -> (positions whose values the
# rule reads, whether it reads the output's value); shapes, dtypes and layouts come from
# the spec a ghost keeps


def _nothing(wanted, n):
    return (), False


def _the_others(wanted, n):          # a product: each operand's cotangent needs the others
    return {k for j in wanted for k in range(n) if k != j}, False


def _output(wanted, n):              # exp, tanh, ...: written with the op's result
    return (), True


def _first(wanted, n):
    return (0,), False


def _first_and_output(wanted, n):
    return (0,), True


READS = {
    **dict.fromkeys(("add", "subtract", "negative", "positive", "copy", "contiguous",
                     "astype", "sum", "mean", "transpose", "reshape", "expand_dims", "squeeze",
                     "broadcast_to", "getitem", "roll", "redistribute", "concatenate",
                     "stack"), _nothing),
    **dict.fromkeys(("multiply", "matmul", "dot", "tensordot", "einsum"), _the_others),
    **dict.fromkeys(("exp", "expm1", "sqrt", "tanh", "reciprocal"), _output),
    **dict.fromkeys(("log", "log1p", "square", "absolute", "sin", "cos"), _first),
    **dict.fromkeys(("max", "min", "prod"), _first_and_output),
    "divide": lambda wanted, n: ((1,), 1 in wanted),     # g / b; -g * out / b
    "where": lambda wanted, n: ((0,), False),            # the condition
}


def reads(name: str, wanted, n: int):
    """(operand positions read, output read) by ``name``'s rule for the ``wanted``
    operands' cotangents."""
    rule = READS.get(name)
    return (range(n), True) if rule is None else rule(wanted, n)
