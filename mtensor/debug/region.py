"""``mt.debug.region(name)``: name a part of the program, so ``CommDebugMode`` says which
collectives it ran, in its forward and in its backward pass.

Regions nest (``"block0/attention"``).  The gradient tape keeps the region each op ran in,
and the backward pass runs each op's gradient in that region again, so a backward
collective is billed to the block whose forward made it (DTensor's module tracking,
without modules).  Outside a region the name is ``""``.
"""
from __future__ import annotations

from contextlib import contextmanager

from .. import modes


@contextmanager
def region(name: str):
    outer = modes.active.region
    modes.active.region = f"{outer}/{name}" if outer else name
    try:
        yield
    finally:
        modes.active.region = outer
