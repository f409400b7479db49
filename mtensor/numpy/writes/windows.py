"""Writes through windows: ``U[1:-1, 1:-1] = V`` where ``U`` is split along a dim the key
slices (step 1) and ``V`` is split alike along the region's dim.  Each rank writes the rows
of the region inside its block of ``U``; those are ``V``'s block shifted by the slice's
start, so a halo exchange of a few of ``V``'s rows brings them (``ops.windows``), where
gathering ``V`` whole would move it all."""
from __future__ import annotations

from ...ops.plans.indexing import indexed_dims, is_advanced
from ...ops.windows import Window, halo_plan, is_split_once
from ...placement import Shard, local_bounds
from ...redistribute.halo import bind_windows


def windowed_value(target, entries, value, want, offsets):
    """(the value's layout, its windows, its block's offsets in the region), or None when
    no mesh dim reads it through a window.  ``value`` is broadcast to the region;
    ``want``/``offsets``: the layout and offsets the write would otherwise use."""
    if is_advanced(entries):
        return None
    mesh = target.device_mesh
    bounds = local_bounds(target.shape, mesh.shape, target.placements, mesh.coordinate)
    want, offsets, windows = list(want), list(offsets), []
    for _, entry, dim, pos in indexed_dims(entries):
        i = is_split_once(target.placements, mesh.shape, dim)
        if i is None or entry[0] != "s" or entry[3] != 1:
            continue
        start, stop = entry[1], max(entry[2], entry[1])
        if value.placements[i] != Shard(pos) or is_split_once(
                value.placements, mesh.shape, pos) != i:
            continue
        window = Window(0, i, pos, target.shape[dim], -start, stop - start)
        if halo_plan(window, value.shape[pos], mesh.shape[i]) is None:
            continue
        want[i] = Shard(pos)
        windows.append(window)
        offsets[pos] = max(bounds[dim][0], start) - start
    if not windows:
        return None
    return want, windows, offsets


def window_block(value, want, windows):
    """``value``'s block (laid out as ``want`` by the caller) read through ``windows``."""
    return bind_windows(value.device_mesh, value.shape, value.dtype, tuple(want),
                        tuple(windows))(value._local)
