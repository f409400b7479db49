"""``mt.compile``'s choices for parameters split over the batch dims (ZeRO-3, FSDP): whether
the backward gathers them again (``reshard_after_forward``) and how far the gathers run
ahead of the compute (``prefetch``).  The passes themselves are ``overlap.prefetch``; this
module checks the options and agrees, across ranks, on what depends on a rank's own sizes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from ..cost.sizes import parse_bytes
from ..overlap import prefetch as passes


@dataclass
class Prefetch:
    """What the step does with its parameter gathers, for the schedule and ``explain``."""

    gathers: int = 0                 # parameter gathers in the replayed graph
    depth: Optional[int] = None      # blocks of gathers ahead of the compute (None: all)
    resharded: bool = False          # the backward gathers again
    why: str = ""
    limits: List[int] = field(default_factory=list)

    def __str__(self) -> str:
        if not self.gathers:
            return "no parameter gathers"
        ahead = "as early as possible" if self.depth is None else (
            "none (each at its use)" if self.depth == 0 else f"depth {self.depth}")
        again = "gathered again in the backward" if self.resharded else "kept for the backward"
        return f"{self.gathers} parameter gathers, prefetch {ahead}, {again} ({self.why})"


class PrefetchOptions:
    def __init__(self, prefetch, reshard, memory_budget):
        if prefetch not in ("auto", None) and (isinstance(prefetch, bool) or not isinstance(
                prefetch, int) or prefetch < 0):
            raise TypeError(f"mt.compile: prefetch must be \"auto\", None or a depth >= 0, "
                            f"not {prefetch!r}")
        if reshard not in (True, False, "auto"):
            raise TypeError(f"mt.compile: reshard_after_forward must be True, False or "
                            f"\"auto\", not {reshard!r}")
        self.prefetch, self.reshard = prefetch, reshard
        self.budget = parse_bytes(memory_budget, "mt.compile: memory_budget")

    def resharded(self, graph):
        """(the graph, whether its backward gathers again): ``reshard_after_forward``."""
        kept = passes.kept_for_backward(graph)
        if self.reshard is False or not kept:
            return graph, False
        if self.reshard == "auto":
            if self.budget is None:
                return graph, False
            need = _agreed_max(graph, float(graph.input_bytes + kept))
            if need is None or need <= self.budget:
                return graph, False
        return passes.reshard_after_forward(graph), True

    def plan(self, graph, buckets, overlaps, inflight_cap, seconds, resharded) -> Prefetch:
        gathers = len(passes.parameter_gathers(graph))
        why = ("reshard_after_forward=True" if self.reshard is True else
               "memory_budget exceeded" if resharded else
               "reshard_after_forward=False" if self.reshard is False else
               "within memory_budget" if self.budget is not None else "no memory_budget")
        depth = self.prefetch
        if depth == "auto":
            depth = 1 if seconds is None else passes.choose_depth(
                graph, buckets, overlaps, inflight_cap, seconds, graph.cost_model())
        return Prefetch(gathers, depth, resharded, why,
                        passes.start_limits(graph, buckets, depth))


def _agreed_max(graph, value: float) -> Optional[float]:
    """The largest ``value`` over the ranks of the graph's one mesh (None: several)."""
    meshes = {id(n.fn.mesh): n.fn.mesh for n in graph.collectives()}
    if len(meshes) != 1:
        return None
    out = np.array([value], np.float64)
    next(iter(meshes.values())).communicator().all_reduce(out, out, None, "max")
    return float(out[0])
