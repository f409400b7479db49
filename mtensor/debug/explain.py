"""What a compiled step communicates: its buckets, where each starts and is waited for, and
the predicted share of communication hidden behind compute.

The prediction prices each bucket with the cost model (alpha + bus bytes / beta on its mesh
dim) and sets it against the compute the schedule puts between its start and its wait, timed
while tracing: hidden = min(comm, compute) per bucket, summed, over all communication.
"""
from __future__ import annotations

from ..redistribute.cost import get_cost_model


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if nbytes < 1024 or unit == "MiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return ""


class Explanation:
    def __init__(self, traced):
        graph, model = traced.graph, get_cost_model()
        self.name = graph.name
        self.ncollectives = len(graph.collectives())
        self.rows = []
        started, compute = {}, 0.0
        for what, k in traced.program:
            if what == "compute":
                compute += graph.nodes[k].seconds
            elif what == "start":
                started[k] = compute
            else:
                b = traced.replay.buckets[k]
                alpha, beta = model.link(b.mesh_dim)
                comm = alpha + b.nbytes / beta
                between = compute - started.pop(k) if what == "wait" else 0.0
                self.rows.append(dict(bucket=k, collective=b.kind, mesh_dim=b.mesh_dim,
                                      members=len(b.members), bytes=b.nbytes,
                                      overlapped=what == "wait", comm_s=comm,
                                      compute_s=between, hidden_s=min(comm, between)))
        self.rows.sort(key=lambda r: r["bucket"])
        self.comm_s = sum(r["comm_s"] for r in self.rows)
        self.hidden_fraction = (sum(r["hidden_s"] for r in self.rows) / self.comm_s
                                if self.comm_s else 0.0)

    @property
    def summary(self) -> str:
        return (f"{self.name}: {self.ncollectives} collectives in {len(self.rows)} buckets; "
                f"predicted hidden {100 * self.hidden_fraction:.0f}% of "
                f"{1e3 * self.comm_s:.3f} ms communication")

    def __str__(self) -> str:
        lines = [self.summary, f"{'bucket':>6}  {'collective':<14} {'mesh dim':>8} {'members':>7} "
                       f"{'bytes':>10}  {'runs':<9} {'comm ms':>8} {'compute ms':>10}"]
        for r in self.rows:
            lines.append(f"{r['bucket']:>6}  {r['collective']:<14} {r['mesh_dim']:>8} "
                         f"{r['members']:>7} {_size(r['bytes']):>10}  "
                         f"{'overlapped' if r['overlapped'] else 'blocking':<9} "
                         f"{1e3 * r['comm_s']:>8.3f} {1e3 * r['compute_s']:>10.3f}")
        return "\n".join(lines)

    __repr__ = __str__


def explain(fn, *args, **kwargs) -> Explanation:
    """The communication plan of ``fn(*args, **kwargs)`` as ``mt.compile`` runs it.  A plain
    function is compiled first; tracing runs it once, collectives included (every rank must
    call this)."""
    from ..trace_compile.compile import Compiled, compile
    step = fn if isinstance(fn, Compiled) else compile(fn)
    if step.traced_for(args, kwargs) is None:
        step(*args, **kwargs)
    return Explanation(step.traced_for(args, kwargs))
