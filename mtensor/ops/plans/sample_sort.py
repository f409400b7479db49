"""Pure planning of the distributed sample sort behind ``np.sort``, ``np.argsort`` and
``np.unique`` on a split axis (executed by :mod:`numpy_sort`).

Every rank holds a sorted run; the plan picks regular samples from each run, chooses
``p - 1`` splitters from all the samples, cuts each run at the splitters (the pieces go to
their ranks with one all-to-all), and, once the pieces are merged, moves rows again so the
result has the balanced ``array_split`` layout (a second all-to-all).  Ties are ordered by
``(value, rank, position in the run)``, which is numpy's stable order when runs hold
consecutive slices of the array; ``together=True`` instead keeps equal values on one rank
(what ``unique`` needs to drop duplicates without another exchange).

Only counts, positions and comparisons live here; no MPI.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...placement import local_shape, mesh_coords


def layout_counts(n: int, mesh_shape, placements) -> np.ndarray:
    """Rows of a 1-D tensor of length ``n`` held by each rank (rank order) under ``placements``."""
    counts = [local_shape((n,), mesh_shape, placements, c)[0] for c in mesh_coords(mesh_shape)]
    return np.array(counts, dtype=np.int64)  # pragma: no mutate


def sample_positions(n: int, per_run: int) -> np.ndarray:
    """Positions of ``min(n, per_run)`` regular samples of a sorted run of ``n``: the middle
    of each of that many equal parts."""
    k = min(n, per_run)
    parts = np.arange(k, dtype=np.int64)  # pragma: no mutate
    return (parts * 2 + 1) * n // (2 * max(k, 1))


def sample_owners(run_lengths: Sequence[int], per_run: int):
    """Rank and run position of every sample, in the order the all-gather lays them out."""
    positions = [sample_positions(int(n), per_run) for n in run_lengths]
    ranks = np.concatenate([np.full(len(p), r, np.int64)  # pragma: no mutate
                            for r, p in enumerate(positions)])
    return ranks, np.concatenate(positions)


def splitter_picks(n_samples: int, parts: int) -> np.ndarray:
    """Indices, into the sorted samples, of the ``parts - 1`` splitters."""
    picks = np.arange(1, parts, dtype=np.int64)  # pragma: no mutate
    return picks * n_samples // parts


def cut_points(keys, rank: int, values, ranks, positions, together: bool) -> np.ndarray:
    """Where the sorted run ``keys`` of ``rank`` is cut by the splitters ``(values, ranks,
    positions)``: element ``i`` goes to bucket ``j`` when ``cuts[j-1] <= i < cuts[j]``.

    An element precedes a splitter when its value is less, or equal with ``(rank,
    position)`` less; with ``together``, equal values all follow the splitter."""
    lo = np.searchsorted(keys, values)   # side="left", numpy's default
    if together:
        return lo
    hi = np.searchsorted(keys, values, side="right")
    mine = np.clip(positions, lo, hi)
    return np.where(ranks > rank, hi, np.where(ranks < rank, lo, mine))


def bucket_counts(cuts, n: int) -> np.ndarray:
    """Elements sent to each rank, from the cut points of a run of ``n``."""
    return np.diff(np.concatenate(([0], cuts, [n]))).astype(np.int64)


def _overlaps(lo: int, hi: int, bounds) -> np.ndarray:
    return np.clip(np.minimum(hi, bounds[1:]) - np.maximum(lo, bounds[:-1]), 0, None)


def rebalance_counts(held: Sequence[int], target: Sequence[int], rank: int):
    """``(send, recv)`` element counts of ``rank`` that move rows held as ``held`` (in global
    order, rank by rank) to the layout ``target``: each row goes where its global position
    falls."""
    have = np.concatenate(([0], np.cumsum(held))).astype(np.int64)
    want = np.concatenate(([0], np.cumsum(target))).astype(np.int64)
    if have[-1] != want[-1]:
        raise ValueError(f"rebalance: {have[-1]} rows held but {want[-1]} in the target layout")
    return (_overlaps(have[rank], have[rank + 1], want),
            _overlaps(want[rank], want[rank + 1], have))
