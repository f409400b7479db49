"""``mt.explain``: what a step communicates.  Each op with the strategy it ran (the
placements of its operands and result), each collective with its mesh dim and bytes, totals,
per-rank memory, the buckets ``mt.compile`` forms, where each starts and is waited for, and
the predicted share of communication hidden behind compute.

The prediction runs the step's program on ``cost.timeline``'s model: the compute nodes
take their median times in this rank's latest replays (before any, the trace's, the slowest
rank's under auto buckets; the first call's are inflated by first-touch page faults, ~1.6x
on the test bed's step), each bucket is priced by the cost model and moves on its mesh dim's link after the
buckets started before it, in phases that start only in an MPI call, at the share of its
speed the link keeps behind compute.  hidden = 1 - (predicted step -
compute) / communication, the quantity ``benchmarks/netbed`` measures; calibrate first
(``mt.calibrate``) for a prediction of this machine rather than of the default model.
"""
from __future__ import annotations

from ..cost.timeline import bucket_cost, simulate
from ..overlap.bucketing import first_readers

# functions traced -> an object whose str() is a section of the bill, or None: what higher
# layers add (mt.pipeline: each stage's timeline and its bubble)
SECTIONS: list = []


def _size(nbytes: float) -> str:
    if nbytes < 1024:
        return f"{nbytes:.0f} B"
    if nbytes < 1 << 20:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / (1 << 20):.1f} MiB"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _consumers(nodes) -> dict:
    """{index of the op that needs it (None: the result): [collective nodes]}: a collective is
    listed under the first op that reads its result, through chains of collectives."""
    reader = first_readers(nodes)
    out = {}
    for node in nodes:
        if node.kind != "collective":
            continue
        at = reader.get(node.outs[0])
        while at is not None and nodes[at].kind == "collective":
            at = reader.get(nodes[at].outs[0])
        out.setdefault(at, []).append(node)
    return out


class Explanation:
    """The comm bill of one traced signature.  ``ops``: (op, strategy or collective detail,
    bytes) in program order, each op followed by the collectives that brought its operands;
    ``totals``: {collective: (count, bytes)}; ``rows``: one dict per bucket (its predicted
    ``start_s``, ``end_s`` and ``exposed_s``, the wait it costs); ``chosen_by``: how the
    buckets were chosen; ``hidden_fraction``, ``step_s``, ``exposed_s``: the prediction
    described above."""

    def __init__(self, traced):
        graph = traced.graph
        model = graph.cost_model()
        self.name, self.graph = graph.name, graph
        self.ncollectives = len(graph.collectives())
        self.ops, self.totals = [], {}
        needed_by = _consumers(graph.nodes)
        for i, node in enumerate(graph.nodes):
            if node.kind == "collective":
                c = node.fn
                count, nbytes = self.totals.get(node.name, (0, 0))
                self.totals[node.name] = (count + 1, nbytes + c.nbytes)
                continue
            if not (node.detail or node.kind == "effect"):
                continue
            self.ops.append((node.name, node.detail or "in place", None))
            self.ops += [(f"  <- {n.name}", f"mesh dim {n.fn.mesh_dim}" +
                          (f", {n.fn.op}" if n.fn.op else ""), n.fn.nbytes)
                         for n in needed_by.get(i, ())]
        self.ops += [(f"  <- {n.name}", f"mesh dim {n.fn.mesh_dim} (for the result)", n.fn.nbytes)
                     for n in needed_by.get(None, ())]
        self.chosen_by = traced.chosen_by
        self.prefetch = traced.prefetch
        self.passes = traced.passes
        self.timed = ("this rank's latest replays" if traced.replay.history
                      else "the trace (no replay yet)")
        self.timeline = _timeline(traced, model)
        self.rows = self._buckets(traced, self.timeline)
        self.comm_s = self.timeline.comm_s
        self.step_s = self.timeline.step_s
        self.exposed_s = sum(self.timeline.exposed.values())
        self.hidden_fraction = self.timeline.hidden_fraction
        self.sections = [found for found in (section(traced) for section in SECTIONS)
                         if found is not None]

    @staticmethod
    def _buckets(traced, timeline):
        runs = {k: what for what, k in traced.program if what != "compute"}
        rows = []
        for k, b in enumerate(traced.replay.buckets):
            rows.append(dict(bucket=k, collective=b.kind, mesh_dim=b.mesh_dim,
                             backend=b.members[0].mesh.backends[b.mesh_dim],
                             members=len(b.members), bytes=b.nbytes,
                             overlapped=runs[k] != "run", comm_s=timeline.costs[k].seconds,
                             start_s=timeline.start[k], end_s=timeline.end[k],
                             exposed_s=timeline.exposed[k]))
        return rows

    @property
    def summary(self) -> str:
        return (f"{self.name}: {_count(self.ncollectives, 'collective')} in "
                f"{_count(len(self.rows), 'bucket')}; "
                f"predicted hidden {100 * self.hidden_fraction:.0f}% of "
                f"{1e3 * self.comm_s:.3f} ms communication; step "
                f"{1e3 * self.step_s:.3f} ms")

    def __str__(self) -> str:
        width = max([len(op) for op, _, _ in self.ops] + [10])
        lines = [self.summary,
                 f"memory per rank: arguments {_size(self.graph.input_bytes)}, results "
                 f"{_size(self.graph.output_bytes)}", "",
                 f"{'op':<{width}}  {'strategy / collective':<48} {'bytes':>10}"]
        lines += [f"{op:<{width}}  {what:<48} {'' if b is None else _size(b):>10}"
                  for op, what, b in self.ops]
        lines.append("totals: " + (", ".join(f"{k} x{n} ({_size(b)})" for k, (n, b) in
                                             self.totals.items()) or "no collectives"))
        if self.prefetch is not None and self.prefetch.gathers:
            lines.append(f"parameters: {self.prefetch}")
        lines += _pass_lines(self.passes)
        lines += ["", f"buckets ({self.chosen_by}); predicted times from the step's start, "
                      f"compute timed in {self.timed}:",
                  f"{'bucket':>6}  {'collective':<14} {'mesh dim':>8} {'backend':<10} "
                  f"{'members':>7} "
                  f"{'bytes':>10}  {'runs':<10} {'comm ms':>8} {'start ms':>9} {'end ms':>9} "
                  f"{'exposed ms':>10}"]
        for r in self.rows:
            lines.append(f"{r['bucket']:>6}  {r['collective']:<14} {r['mesh_dim']:>8} "
                         f"{r['backend']:<10} {r['members']:>7} {_size(r['bytes']):>10}  "
                         f"{'overlapped' if r['overlapped'] else 'blocking':<10} "
                         f"{1e3 * r['comm_s']:>8.3f} {1e3 * r['start_s']:>9.3f} "
                         f"{1e3 * r['end_s']:>9.3f} {1e3 * r['exposed_s']:>10.3f}")
        for section in self.sections:
            lines += ["", str(section)]
        return "\n".join(lines)

    __repr__ = __str__


def _pass_lines(reports) -> list:
    """The graph passes' table: compute ops and the bytes of the temporaries they make,
    before and after each pass, and what it did."""
    if not reports:
        return ["", "graph passes: none"]
    lines = ["", "graph passes (compute ops, bytes of temporaries: before -> after):"]
    for r in reports:
        did = ", ".join(f"{k.replace('_', ' ')} " + (_size(v) if k.endswith("bytes") else str(v))
                        for k, v in r.counts.items()) or "nothing to do"
        lines.append(f"  {r.name:<14} {r.nodes_before:>5} -> {r.nodes_after:<5} "
                     f"{_size(r.bytes_before):>10} -> {_size(r.bytes_after):<10}  {did}")
    return lines


def _timeline(traced, model):
    """The step's predicted timeline (see the module's docstring)."""
    costs = [bucket_cost(b.kind, b.mesh_dim, b.members[0].n, b.nbytes,
                         sum(m.bucket_bytes for m in b.members), b.fused, model)
             for b in traced.replay.buckets]
    seconds = traced.replay.node_seconds(traced.seconds)
    return simulate(traced.program, seconds, costs, model.overlap_slowdown)
