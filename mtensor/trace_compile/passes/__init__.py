"""The compiler's middle end: passes over the traced graph, run in order between tracing
and the bucketing and overlap passes, each a module with a ``run(graph) -> (graph,
counts)`` (pure: the graph IR, no MPI; every rank runs them on the same graph, so every
rank makes the same rewrite).

==========  =======================================================  ==========
pass        what it does                                             bit for bit
==========  =======================================================  ==========
fold        ops on private constants run once, at compile time       yes
simplify    x*1, x-0, -(-x), transpose pairs (exact); x+0, x**2,     exact rules
            x**3, sum of a broadcast (``passes="fast"``)             only
cse         the same kernel on the same slots runs once              yes
dce         results nothing reads are not computed                   yes
fuse        elementwise chains on GPU blocks become one generated    FMA off
            kernel (CuPy's ElementwiseKernel); host graphs stay      (exact)
inplace     a ufunc may write into an operand that dies there        yes
==========  =======================================================  ==========

``mt.compile(passes=...)``: ``"exact"`` (the default: every pass in its bit-for-bit form,
so a replay equals the eager step bit for bit), ``"fast"`` (also the rules that may change
the last bit), ``None`` or ``()`` (none), or a sequence of pass names
(``("cse", "dce")``; ``"simplify"`` and ``"fuse"`` there run in their exact forms,
``"simplify-fast"`` and ``"fuse-fast"`` in their fast ones).
Composites with hand-derived gradients (layer norm, GELU, softmax, logsumexp) are fused
before the graph exists, on the gradient tape (``autodiff.fusion``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from . import cse, dce, fold, fuse, inplace, simplify
from .slots import nbytes

PASSES = {
    "fold": fold.run,
    "simplify": lambda g: simplify.run(g, exact=True),
    "simplify-fast": simplify.run,
    "cse": cse.run,
    "dce": dce.run,
    "inplace": inplace.run,
    "fuse": fuse.run,
    "fuse-fast": lambda g: fuse.run(g, exact=False),
}
EXACT = ("fold", "simplify", "cse", "dce", "fuse", "inplace")
FAST = ("fold", "simplify-fast", "cse", "dce", "fuse-fast", "inplace")


def pass_names(passes) -> tuple:
    """The pass names ``mt.compile(passes=...)`` asks for, checked."""
    if passes is None:
        return ()
    if isinstance(passes, str):
        if passes not in ("exact", "fast"):
            raise ValueError(f"mt.compile: passes={passes!r}: give \"exact\", \"fast\", None "
                             f"or a sequence of pass names from {sorted(PASSES)}")
        return EXACT if passes == "exact" else FAST
    names = tuple(passes)
    unknown = [p for p in names if p not in PASSES]
    if unknown:
        raise ValueError(f"mt.compile: unknown passes {unknown}; the passes are "
                         f"{sorted(PASSES)}")
    return names


@dataclass
class PassReport:
    """What one pass did: the compute nodes and temporaries' bytes before and after, and
    its counts (rules applied, nodes merged, ...)."""

    name: str
    nodes_before: int
    nodes_after: int
    bytes_before: int
    bytes_after: int
    counts: dict = field(default_factory=dict)


def run_passes(graph, names) -> tuple:
    """``graph`` through the passes ``names`` in order: (the graph, one report each)."""
    reports: List[PassReport] = []
    for name in names:
        before, temps = _computes(graph), temporaries(graph)
        graph, counts = PASSES[name](graph)
        reports.append(PassReport(name, before, _computes(graph), temps, temporaries(graph),
                                  counts))
    return graph, reports


def _computes(graph) -> int:
    return sum(n.kind == "compute" for n in graph.nodes)


def temporaries(graph) -> int:
    """Bytes of the arrays the step's compute nodes make (each result once)."""
    return sum(nbytes(graph, s) for n in graph.nodes if n.kind == "compute" for s in n.outs)
