"""``plan.explain()``: the chosen layouts, the collectives per region and phase, and the
failure modes of sharding compilers made visible:

- a region whose backward runs more collectives on a mesh dim than its forward (not
  counting the gradients' own reduction into their parameters' layout), the sign of a
  layout the backward has to undo;
- an activation (a value the step computes) of ``LARGE_BYTES`` or more all-gathered;
- pins that fight the math: the bill against the best plan without them, and the pin whose
  release saves the most.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List

from ..spec import fmt_placements

LARGE_BYTES = 1 << 20


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


def _dim_name(mesh_names, d: int) -> str:
    return mesh_names[d] if mesh_names and d < len(mesh_names) else f"dim{d}"


def per_region(bill, names) -> Dict[tuple, Counter]:
    """(region, phase) -> Counter of "kind@mesh dim" over the bill's collectives."""
    out: Dict[tuple, Counter] = {}
    for m in bill.moves:
        for kind, dim, _ in m.collectives:
            out.setdefault((m.region or "(step)", m.phase), Counter())[
                f"{kind}@{_dim_name(names, dim)}"] += 1
    return out


def flags(solution, names) -> List[str]:
    graph, out = solution.graph, []
    counts: Dict[tuple, Counter] = {}
    for m in solution.bill.moves:
        if m.why == "gradient":
            continue
        for _, dim, _ in m.collectives:
            counts.setdefault((m.region or "(step)", dim), Counter())[m.phase] += 1
    for (region, dim), c in sorted(counts.items()):
        if c["backward"] > c["forward"]:
            out.append(f"{region}: the backward runs {c['backward']} collectives on mesh dim "
                       f"{_dim_name(names, dim)}, its forward {c['forward']}")
    leaves = {leaf.value for leaf in graph.leaves}
    for m in solution.bill.moves:
        value = graph.values[m.value]
        if (m.value not in leaves and value.nbytes >= LARGE_BYTES
                and any(kind == "all_gather" for kind, _, _ in m.collectives)):
            where = graph.nodes[m.node].name + f" #{m.node}" if m.node is not None else "a read"
            out.append(f"a large activation all-gathered: {value.shape} {value.dtype} "
                       f"({_size(value.nbytes)}) before {where} ({m.phase})")
    return out


def _totals(bill) -> str:
    kinds = Counter(kind for kind, _, _ in bill.collectives)
    text = ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items())) or "no collectives"
    return (f"comm {bill.comm_s * 1e3:.3f} ms ({text}, {bill.comm_bytes:,} B per rank), "
            f"compute {bill.compute_s * 1e3:.3f} ms, step {bill.step_s * 1e3:.3f} ms")


def pins_text(report) -> List[str]:
    if report is None:
        return ["pins: none (every argument was free)"]
    lines = [f"pins: with them {_totals(report.pinned)}",
             f"      best plan without them {_totals(report.free)}",
             f"      ratio with / without: comm {report.comm_ratio:.2f}x, step "
             f"{report.step_ratio:.2f}x"]
    if report.fights and report.blame is not None:
        lines.append(f"      the pins fight the math: change the pin of '{report.blame}' (released "
                     f"alone: {_totals(report.blame_bill)})")
    return lines


def explain(solution, report=None, names=None, title="step") -> str:
    graph, bill = solution.graph, solution.bill
    lines = [f"auto_shard plan of {title} on mesh {graph.mesh_shape}: {solution.method}, "
             f"search {solution.seconds:.3f} s for {len(graph.nodes)} ops",
             f"predicted per step: {_totals(bill)}",
             f"memory per rank (arguments, gradients, optimizer state, activations kept for "
             f"the backward): {_size(bill.memory_bytes)}"
             + (f" (budget {_size(solution.problem.budget)})"
                if solution.problem.budget is not None else ""),
             "arguments:"]
    for path, layout in solution.leaf_layouts().items():
        value = graph.values[next(leaf.value for leaf in graph.leaves if leaf.path == path)]
        lines.append(f"  {path:<24} {str(value.shape):<16} {fmt_placements(layout)}")
    lines.append("collectives per region and phase:")
    for (region, phase), c in per_region(bill, names).items():
        lines.append(f"  {region:<24} {phase:<9} "
                     + ", ".join(f"{n} x {k}" for k, n in sorted(c.items())))
    found = flags(solution, names)
    lines.append("flags: " + ("none" if not found else ""))
    lines += [f"  - {f}" for f in found]
    lines += pins_text(report)
    lines.append("ops (operands as used -> output):")
    moved = Counter(m.node for m in bill.moves if m.collectives)
    for k, (node, ins, out) in zip([k for k, n in enumerate(graph.nodes) if n.kind == "op"],
                                   solution.op_layouts()):
        used = " x ".join(fmt_placements(layout) if v is not None else "const"
                          for layout, v in zip(ins, node.inputs))
        extra = f"  [{moved[k]} redistribution(s) before it]" if moved[k] else ""
        lines.append(f"  #{k:<4} {node.name:<12} {node.phase:<9} {used} -> {fmt_placements(out)}{extra}")
    return "\n".join(lines)
