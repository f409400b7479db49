"""``mt.visualize_sharding``: which ranks hold which block of a 1-D or 2-D DTensor, as a grid
(the picture DTensor's and JAX's ``visualize_sharding`` draw).

Everything comes from the spec (no communication): each mesh coordinate's block bounds, with
the ranks that hold the same block in one cell; a Partial mesh dim is noted on the ranks,
since their blocks are terms of a sum (or max, ...) rather than copies.
"""
from __future__ import annotations

import sys

from ..placement import Partial, local_bounds, mesh_coords


def _cells(spec):
    """{(row bounds, column bounds): [ranks]} for a 1-D or 2-D spec."""
    mesh = spec.mesh
    shape = spec.shape if len(spec.shape) == 2 else (1,) + tuple(spec.shape)
    cells = {}
    for rank, coord in enumerate(mesh_coords(mesh.shape)):
        bounds = local_bounds(spec.shape, mesh.shape, spec.placements, coord)
        if len(spec.shape) == 1:
            bounds = ((0, 1),) + tuple(bounds)
        cells.setdefault(bounds, []).append(rank)
    return shape, cells


def _ranks(ranks) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + ",".join(map(str, ranks))


def sharding_text(x) -> str:
    spec = x.spec
    if len(spec.shape) not in (1, 2):
        raise ValueError(f"visualize_sharding: draws 1-D and 2-D DTensors; this one has shape "
                         f"{spec.shape} (reshape it or look at x.placements)")
    shape, cells = _cells(spec)
    rows = sorted({b[0] for b in cells})
    cols = sorted({b[1] for b in cells})
    partial = [f"{p.reduce_op} over mesh dim {i}" for i, p in enumerate(spec.placements)
               if isinstance(p, Partial)]
    head = (f"DTensor {tuple(spec.shape)} {spec.dtype} {list(spec.placements)} on mesh "
            f"{tuple(spec.mesh.shape)}" + (f"; partial terms: {', '.join(partial)}" if partial else ""))
    text = {(r, c): _ranks(cells[(r, c)]) if (r, c) in cells else "-" for r in rows for c in cols}
    col_names = [("" if len(spec.shape) == 1 else "cols ") + f"{c[0]}:{c[1]}" for c in cols]
    row_names = ["" if len(spec.shape) == 1 else f"rows {r[0]}:{r[1]}" for r in rows]
    width = max(len(s) for s in list(text.values()) + col_names)
    label = max(len(s) for s in row_names)
    rule = " " * label + "+" + "+".join("-" * (width + 2) for _ in cols) + "+"
    lines = [head, " " * label + " " + " ".join(f" {c:^{width}} " for c in col_names), rule]
    for r, name in zip(rows, row_names):
        lines.append(f"{name:>{label}}|" + "|".join(f" {text[(r, c)]:^{width}} " for c in cols) + "|")
        lines.append(rule)
    return "\n".join(lines)


def visualize_sharding(x, file=None) -> str:
    """Print the grid on the mesh's first rank (to ``file``, default stdout) and return it on
    every rank; no communication."""
    text = sharding_text(x)
    if x.device_mesh.comm.rank == 0:
        print(text, file=file or sys.stdout)
    return text
