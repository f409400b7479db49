"""``mt.calibrate(mesh)``: measure latency and bandwidth per mesh dim and use them.

Each mesh dim of size > 1 times an 8-byte all-reduce (latency ``alpha``) and a large one
(bandwidth ``beta`` from the bus bytes it moves), and every rank times a local copy
(``copy_beta``).  Timings differ from rank to rank, and every rank must plan alike, so the
numbers of rank 0 of the mesh are broadcast and every rank installs that one model.
"""
from __future__ import annotations

import time

import numpy as np

from ..mesh import world_mesh
from .cost import CostModel, bus_bytes, get_cost_model, set_cost_model


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _link(group, large_bytes: int, repeats: int):
    """(alpha, beta) of one communicator from a tiny and a large all-reduce."""
    tiny = np.zeros(1, np.float64)
    big = np.zeros(large_bytes // 8, np.float64)
    group.all_reduce(big, big, None, "sum")  # warm up: connections, pages
    alpha = _median_time(lambda: group.all_reduce(tiny, tiny, None, "sum"), 4 * repeats)
    t = _median_time(lambda: group.all_reduce(big, big, None, "sum"), repeats)
    moved = bus_bytes("all_reduce", group.size, big.nbytes)
    return alpha, moved / max(t - alpha, 1e-9)


def calibrate(mesh=None, large_bytes: int = 4 << 20, repeats: int = 5,
              install: bool = True) -> CostModel:
    """Measure every mesh dim (a collective over the mesh; default: a 1-D mesh of every
    rank), return the model and, with ``install``, use it for every later choice and plan."""
    if mesh is None:
        mesh = world_mesh()
    default = get_cost_model()
    measured = np.zeros(2 * mesh.ndim + 1, np.float64)
    for dim in range(mesh.ndim):
        if mesh.shape[dim] > 1:
            measured[2 * dim: 2 * dim + 2] = _link(mesh.communicator(dim), large_bytes,
                                                   repeats)
        else:
            measured[2 * dim: 2 * dim + 2] = default.alpha, default.beta
    src = np.ones(large_bytes // 8)
    dst = np.empty_like(src)
    measured[-1] = src.nbytes / max(_median_time(lambda: np.copyto(dst, src), repeats), 1e-9)
    mesh.communicator().broadcast(measured, 0)
    per_dim = tuple((float(measured[2 * d]), float(measured[2 * d + 1])) for d in range(mesh.ndim))
    links = [link for link, n in zip(per_dim, mesh.shape) if n > 1] or [per_dim[0]]
    model = CostModel(alpha=float(np.mean([a for a, _ in links])),
                      beta=float(np.mean([b for _, b in links])),
                      copy_beta=float(measured[-1]), per_dim=per_dim)
    if install:
        set_cost_model(model)
    return model
