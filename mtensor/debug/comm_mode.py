"""CommDebugMode: counts the collectives that really ran, with their bytes.

An active mode sits in ``modes.active.counters``; the executors call
``modes.count_collective`` right after each collective returns (one list check while no
mode is active).  Each record keeps the ``debug.region`` it ran in and its phase: forward,
or backward while a gradient pass runs; a compiled step's replay reports each collective (or
bucket: its first member's) with the region and phase it was traced in.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Tuple

from .. import modes


@dataclass(frozen=True)
class CommRecord:
    """One collective as it ran on this rank; ``bytes`` in the bus-bandwidth convention."""

    collective: str
    mesh_dim: int
    shape: Tuple[int, ...]
    dtype: str
    bytes: int
    region: str = ""
    phase: str = "forward"
    backend: str = "mpi"


class CommDebugMode:
    """Context manager: ``with CommDebugMode() as comm: ...; comm.get_comm_counts()``."""

    def __init__(self):
        self.log: List[CommRecord] = []

    def __enter__(self) -> "CommDebugMode":
        self.log = []
        modes.active.counters.append(self)
        return self

    def __exit__(self, *exc) -> None:
        modes.active.counters.remove(self)

    def add(self, collective: str, mesh_dim: int, shape, dtype, nbytes: int,
            backend: str = "mpi") -> None:
        self.log.append(CommRecord(collective, mesh_dim, tuple(shape), str(dtype), int(nbytes),
                                   modes.active.region, modes.active.phase, backend))

    def get_total_counts(self) -> int:
        return len(self.log)

    def get_comm_counts(self) -> Dict[str, int]:
        """Number of calls per collective name (``all_reduce``, ``all_gather``, ...)."""
        return dict(Counter(r.collective for r in self.log))

    def get_backend_counts(self) -> Dict[str, int]:
        """Number of calls per communication backend that ran them (``mpi``, ``staged``,
        ``cuda-aware``, ``nccl``)."""
        return dict(Counter(r.backend for r in self.log))

    def get_comm_bytes(self) -> Dict[str, int]:
        """Bytes this rank moved per collective name, bus-bandwidth convention."""
        out: Dict[str, int] = {}
        for r in self.log:
            out[r.collective] = out.get(r.collective, 0) + r.bytes
        return out

    def get_total_bytes(self) -> int:
        return sum(r.bytes for r in self.log)

    def _by_region(self) -> Dict[Tuple[str, str], List[CommRecord]]:
        """The records per (region, phase), in the order the pairs first ran."""
        out: Dict[Tuple[str, str], List[CommRecord]] = {}
        for r in self.log:
            out.setdefault((r.region, r.phase), []).append(r)
        return out

    def bill(self, mesh_dim_names=()) -> str:
        """A table, one row per (region, phase) in the order they first ran: the calls of each
        collective per mesh dim (named by ``mesh_dim_names`` where given) and the bytes."""
        names = dict(enumerate(mesh_dim_names))
        lines = [f"{'region':<22}{'phase':<10}collectives (calls x name@mesh dim), bytes"]
        for (region, phase), records in self._by_region().items():
            calls = Counter(f"{r.collective}@{names.get(r.mesh_dim, r.mesh_dim)}"
                            if r.mesh_dim >= 0 else f"{r.collective}@mesh" for r in records)
            text = ", ".join(f"{n} x {k}" for k, n in calls.items())
            lines.append(f"{region or '(outside)':<22}{phase:<10}{text}, "
                         f"{sum(r.bytes for r in records):,} B")
        return "\n".join(lines)

    def get_counts_by_region(self) -> Dict[Tuple[str, str], Dict[Tuple[str, int], int]]:
        """``{(region, phase): {(collective, mesh_dim): calls}}``, e.g.
        ``{("block0/mlp", "backward"): {("all_reduce", 1): 1}}``."""
        return {k: dict(Counter((r.collective, r.mesh_dim) for r in records))
                for k, records in self._by_region().items()}
