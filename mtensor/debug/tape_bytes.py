"""``mt.debug.tape_bytes()``: how many bytes the gradient tape now keeps for the backward
pass, to see what ``mt.remat`` saves.

Call it inside the function ``value_and_grad`` differentiates (e.g. just before it returns
the loss): it counts each distinct buffer the recorded ops hold (their operands as used,
their outputs), not the parameters' own blocks.  Outside a recording it is 0, and so inside
the forward of a ``mt.remat`` block, whose ops the tape does not record.
"""
from __future__ import annotations

from .. import modes


def tape_bytes() -> int:
    tape = modes.active.tape
    return 0 if tape is None else tape.held_bytes()
