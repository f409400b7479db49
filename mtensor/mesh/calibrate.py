"""``mt.calibrate(mesh)``: measure latency and bandwidth per mesh dim and use them.

Each mesh dim of size > 1 times an 8-byte all-reduce (latency ``alpha``) and a large one
(bandwidth ``beta`` from the bus bytes it moves), and every rank times a local copy
(``copy_beta``) and a float64 matmul (``flops``, what ``mt.auto_shard`` prices compute
with).  Timings differ from rank to rank, and every rank must plan alike, so the
numbers of rank 0 of the mesh are broadcast (of the link probes, the mean over the ranks) and
every rank installs that one model.

How a link overlaps compute (``cost.timeline``'s rate behind compute and compute slowdown) is
fitted to four probes per mesh dim shaped like training steps (``timeline.PROBES``): large
all-reduces started one by one, each followed by matmul chunks with a ``Testall`` after
each, then waited for; with chunks a third, two thirds or all of an all-reduce's time, so
the link is the bottleneck in some and compute in others.  (Chunks made of many tiny
matmuls in a Python loop behaved unlike real steps; one BLAS call per chunk is what a step's
nodes are.)  The fit is the grid point of the timeline model that
predicts the probes best, computed on every rank from the same agreed numbers.

On a GPU mesh every buffer and matmul is on the device and each timing waits for the
device, so the model prices the mesh dims' backends (staged, CUDA-aware or NCCL) and the
GPU's copies and flops.
"""
from __future__ import annotations

import time

import numpy as np

from ..cost.model import CostModel, bus_bytes, get_cost_model, set_cost_model
from ..cost.timeline import PROBES, fit_overlap
from ..device import arrays as device
from ..device.arrays import array_module
from .device_mesh import world_mesh


def _median_time(fn, repeats: int, settle=None) -> float:
    """Median seconds of ``fn``; ``settle`` waits for the device (GPU work is queued)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        if settle is not None:
            settle()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _link(group, large_bytes: int, repeats: int, xp, settle):
    """(alpha, beta, large all-reduce seconds) of one communicator from a tiny and a large
    all-reduce (of the mesh's device buffers: a GPU mesh measures its backend)."""
    tiny = xp.zeros(1, np.float64)
    big = xp.zeros(large_bytes // 8, np.float64)
    group.all_reduce(big, big, None, "sum")  # warm up: connections, pages
    alpha = _median_time(lambda: group.all_reduce(tiny, tiny, None, "sum"), 4 * repeats,
                         settle)
    t = _median_time(lambda: group.all_reduce(big, big, None, "sum"), repeats, settle)
    moved = bus_bytes("all_reduce", group.size, big.nbytes)
    return alpha, moved / max(t - alpha, 1e-9), t


def _matmul_lasting(seconds: float, xp, settle):
    """A compute chunk for the probes: one float32 matmul (numpy's BLAS, as real steps run)
    sized to take about ``seconds`` here (sized twice from the fastest of a few runs: the
    first calls of a size are slow)."""
    n = 256
    for _ in range(2):
        a = xp.ones((n, n), np.float32)
        a @ a
        took = min(_median_time(lambda: a @ a, 1, settle) for _ in range(5))
        n = int(np.clip(n * (seconds / max(took, 1e-9)) ** (1 / 3), 16, 2048))
    b = xp.ones((n, n), np.float32)
    b @ b
    return lambda: b @ b


def _probe(group, large_bytes: int, probe, chunk, repeats: int, xp, settle):
    """Median seconds of a probe (per bucket, start an all-reduce of ``large_bytes`` and run
    its compute chunks with a ``Testall`` after each; then wait for all), and the median
    seconds of a chunk inside it, while transfers are in flight."""
    nbuckets, nchunks, _ = probe
    bufs = [(xp.ones(large_bytes // 8), xp.empty(large_bytes // 8)) for _ in range(nbuckets)]
    inside = []

    def once():
        requests = []
        for send, recv in bufs:
            requests.append(group.start("all_reduce", send, recv, None, "sum"))
            for _ in range(nchunks):
                began = time.perf_counter()
                chunk()
                settle()
                inside.append(time.perf_counter() - began)
                group.test_all(requests)
        for request in requests:
            group.wait(request)
    group.barrier()
    return _median_time(once, repeats, settle), float(np.median(inside))


def _overlap_probes(group, large_bytes: int, comm_s: float, repeats: int, xp, settle):
    """[chunk seconds alone, probe seconds, chunk seconds inside] for each of ``PROBES``."""
    out = []
    for probe in PROBES:
        chunk = _matmul_lasting(probe[2] * comm_s, xp, settle)
        out += [_median_time(chunk, repeats, settle),
                *_probe(group, large_bytes, probe, chunk, repeats, xp, settle)]
    return out


def calibrate(mesh=None, large_bytes: int = 4 << 20, repeats: int = 5,
              install: bool = True) -> CostModel:
    """Measure every mesh dim (a collective over the mesh; default: a 1-D mesh of every
    rank), return the model and, with ``install``, use it for every later choice and plan."""
    if mesh is None:
        mesh = world_mesh()
    default = get_cost_model()
    width = 3 + 3 * len(PROBES)            # alpha, beta, all-reduce seconds, the probes
    measured = np.zeros((mesh.ndim, width), np.float64)
    xp = array_module(mesh.device_type)
    src = xp.ones(large_bytes // 8)

    def settle():
        device.synchronize(src)
    for dim in range(mesh.ndim):
        if mesh.shape[dim] > 1:
            group = mesh.communicator(dim)
            measured[dim, :3] = _link(group, large_bytes, repeats, xp, settle)
            measured[dim, 3:] = _overlap_probes(group, large_bytes, measured[dim, 2], repeats,
                                                xp, settle)
    dst = xp.empty_like(src)
    square = xp.ones((512, 512))
    square @ square
    copy_s = _median_time(lambda: np.copyto(dst, src), repeats, settle)
    matmul_s = _median_time(lambda: square @ square, repeats, settle)
    local = np.array([src.nbytes / max(copy_s, 1e-9), 2 * 512 ** 3 / max(matmul_s, 1e-9)])
    mesh.communicator().broadcast(local, 0)
    mesh.communicator().all_reduce(measured, measured, None, "sum")   # the ranks' mean:
    measured /= mesh.size()                                           # the probes are noisy
    per_dim, rates, slowdowns = [], [], []
    for dim, n in enumerate(mesh.shape):
        if n == 1:
            per_dim.append((default.alpha, default.beta))
            rates.append(default.overlap_rate)
            continue
        alpha, beta, comm_s = (float(v) for v in measured[dim, :3])
        rate, slowdown = fit_overlap(comm_s, 2 * (n - 1), measured[dim, 3:].tolist())
        per_dim.append((alpha, beta))
        rates.append(rate)
        slowdowns.append(slowdown)
    links = [link for link, n in zip(per_dim, mesh.shape) if n > 1] or [per_dim[0]]
    model = CostModel(alpha=float(np.mean([a for a, _ in links])),
                      beta=float(np.mean([b for _, b in links])),
                      copy_beta=float(local[0]), flops=float(local[1]),
                      per_dim=tuple(per_dim),
                      overlap_rate=min(rates), overlap_slowdown=max(slowdowns, default=0.0),
                      rate_per_dim=tuple(rates))
    if install:
        set_cost_model(model)
    return model
