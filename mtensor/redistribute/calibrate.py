"""``mt.calibrate(mesh)``: measure latency and bandwidth per mesh dim and use them.

Each mesh dim of size > 1 times an 8-byte all-reduce (latency ``alpha``) and a large one
(bandwidth ``beta`` from the bus bytes it moves), and every rank times a local copy
(``copy_beta``).  Timings differ from rank to rank, and every rank must plan alike, so the
numbers of rank 0 of the mesh are broadcast and every rank installs that one model.

How a link overlaps compute (``overlap.timeline``'s window per poll and compute slowdown) is
fitted to two probes per mesh dim: the large all-reduce started, then compute chunks with a
``Testall`` after each, then the wait; once with many short chunks (each shorter than the
window: the bytes move while numpy computes, if they can at all) and once with two long
ones (each longer: the link stalls until the next poll).  The fit is the grid point of the
timeline model that predicts both probes best, computed on every rank from rank 0's
broadcast numbers.
"""
from __future__ import annotations

import time

import numpy as np

from ..mesh import world_mesh
from ..overlap.timeline import BucketCost, simulate
from .cost import CostModel, bus_bytes, get_cost_model, set_cost_model


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _link(group, large_bytes: int, repeats: int):
    """(alpha, beta, large all-reduce seconds) of one communicator from a tiny and a large
    all-reduce."""
    tiny = np.zeros(1, np.float64)
    big = np.zeros(large_bytes // 8, np.float64)
    group.all_reduce(big, big, None, "sum")  # warm up: connections, pages
    alpha = _median_time(lambda: group.all_reduce(tiny, tiny, None, "sum"), 4 * repeats)
    t = _median_time(lambda: group.all_reduce(big, big, None, "sum"), repeats)
    moved = bus_bytes("all_reduce", group.size, big.nbytes)
    return alpha, moved / max(t - alpha, 1e-9), t


_UNIT = np.ones((96, 96))


def _unit() -> None:
    """A unit of compute for the probes: a small matmul (numpy's BLAS, like real steps)."""
    _UNIT @ _UNIT


def _chunk(units: int):
    def run():
        for _ in range(units):
            _unit()
    return run


def _probe(group, large_bytes: int, chunk, nchunks: int, repeats: int) -> float:
    """Median seconds of: start the large all-reduce, ``nchunks`` x (chunk, Testall), wait."""
    send = np.ones(large_bytes // 8)
    recv = np.empty_like(send)

    def once():
        request = group.start("all_reduce", send, recv, None, "sum")
        for _ in range(nchunks):
            chunk()
            group.test_all([request])
        group.wait(request)
    group.barrier()
    return _median_time(once, repeats)


PROBES = ((1 / 8, 12), (1 / 4, 6), (1 / 2, 3), (1, 1))   # (chunk / all-reduce time, chunks)


def _overlap_probes(group, large_bytes: int, comm_s: float, repeats: int):
    """[chunk seconds, probe seconds] for each of ``PROBES``."""
    unit_s = _median_time(_unit, 20)
    out = []
    for share, nchunks in PROBES:
        chunk = _chunk(max(1, round(share * comm_s / unit_s)))
        out += [_median_time(chunk, repeats), _probe(group, large_bytes, chunk, nchunks,
                                                     repeats)]
    return out


def fit_overlap(comm_s: float, phases: int, measured) -> tuple:
    """(window seconds, slowdown) of the timeline model that best predicts the probes
    (``measured``: chunk and probe seconds per probe, as ``_overlap_probes`` returns)."""
    windows = [0.0] + [comm_s * f for f in np.geomspace(1 / 64, 2, 22)] + [float("inf")]
    slowdowns = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
    best = None
    for window in windows:
        for slowdown in slowdowns:
            cost = [BucketCost(0, comm_s, phases, 0.0, window)]
            err = 0.0
            for (_, nchunks), chunk_s, probe_s in zip(PROBES, measured[0::2], measured[1::2]):
                program = [("start", 0)] + [("compute", i) for i in range(nchunks)]
                predicted = simulate(program + [("wait", 0)], [chunk_s] * nchunks, cost,
                                     slowdown).step_s
                err += (predicted / probe_s - 1) ** 2
            if best is None or err < best[0] - 1e-12:
                best = (err, window, slowdown)
    return best[1], best[2]


def calibrate(mesh=None, large_bytes: int = 4 << 20, repeats: int = 5,
              install: bool = True) -> CostModel:
    """Measure every mesh dim (a collective over the mesh; default: a 1-D mesh of every
    rank), return the model and, with ``install``, use it for every later choice and plan."""
    if mesh is None:
        mesh = world_mesh()
    default = get_cost_model()
    width = 3 + 2 * len(PROBES)            # alpha, beta, all-reduce seconds, the probes
    measured = np.zeros((mesh.ndim, width), np.float64)
    for dim in range(mesh.ndim):
        if mesh.shape[dim] > 1:
            group = mesh.communicator(dim)
            measured[dim, :3] = _link(group, large_bytes, repeats)
            measured[dim, 3:] = _overlap_probes(group, large_bytes, measured[dim, 2], repeats)
    src = np.ones(large_bytes // 8)
    dst = np.empty_like(src)
    copy_beta = np.array([src.nbytes / max(_median_time(lambda: np.copyto(dst, src), repeats),
                                           1e-9)])
    for buf in (measured, copy_beta):
        mesh.communicator().broadcast(buf, 0)
    per_dim, windows, slowdowns = [], [], []
    for dim, n in enumerate(mesh.shape):
        if n == 1:
            per_dim.append((default.alpha, default.beta))
            windows.append(default.poll_window_s)
            continue
        alpha, beta, comm_s = (float(v) for v in measured[dim, :3])
        window, slowdown = fit_overlap(comm_s, 2 * (n - 1), measured[dim, 3:].tolist())
        per_dim.append((alpha, beta))
        windows.append(window)
        slowdowns.append(slowdown)
    links = [link for link, n in zip(per_dim, mesh.shape) if n > 1] or [per_dim[0]]
    model = CostModel(alpha=float(np.mean([a for a, _ in links])),
                      beta=float(np.mean([b for _, b in links])),
                      copy_beta=float(copy_beta[0]), per_dim=tuple(per_dim),
                      poll_window_s=min(windows), overlap_slowdown=max(slowdowns, default=0.0),
                      window_per_dim=tuple(windows))
    if install:
        set_cost_model(model)
    return model
