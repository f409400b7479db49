"""CommDebugMode: counts the collectives that really ran, with their bytes.

The executors call :func:`record` right after each collective returns; while no mode is
active that is one list check.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Tuple

_active: List["CommDebugMode"] = []


@dataclass(frozen=True)
class CommRecord:
    """One collective as it ran on this rank; ``bytes`` in the bus-bandwidth convention."""

    collective: str
    mesh_dim: int
    shape: Tuple[int, ...]
    dtype: str
    bytes: int


def record(collective: str, mesh_dim: int, shape, dtype, nbytes: int) -> None:
    if _active:
        entry = CommRecord(collective, mesh_dim, tuple(shape), str(dtype), int(nbytes))
        for mode in _active:
            mode.log.append(entry)


class CommDebugMode:
    """Context manager: ``with CommDebugMode() as comm: ...; comm.get_comm_counts()``."""

    def __init__(self):
        self.log: List[CommRecord] = []

    def __enter__(self) -> "CommDebugMode":
        self.log = []
        _active.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _active.remove(self)

    def get_total_counts(self) -> int:
        return len(self.log)

    def get_comm_counts(self) -> Dict[str, int]:
        """Number of calls per collective name (``all_reduce``, ``all_gather``, ...)."""
        return dict(Counter(r.collective for r in self.log))

    def get_comm_bytes(self) -> Dict[str, int]:
        """Bytes this rank moved per collective name, bus-bandwidth convention."""
        out: Dict[str, int] = {}
        for r in self.log:
            out[r.collective] = out.get(r.collective, 0) + r.bytes
        return out

    def get_total_bytes(self) -> int:
        return sum(r.bytes for r in self.log)
