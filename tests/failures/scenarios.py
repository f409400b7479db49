"""Bad inputs and broken runs, one per process: ``mpiexec -n 2 python scenarios.py NAME``.

Each scenario must end the job with a non-zero exit and a clear message from every rank
that saw the problem, within seconds (tests/test_failures.py checks that).
"""
import sys
import time

import numpy as np
from mpi4py import MPI

import mtensor as mt

RANK = MPI.COMM_WORLD.rank
R, S0, S1 = mt.Replicate(), mt.Shard(0), mt.Shard(1)


def mesh():
    return mt.init_device_mesh((MPI.COMM_WORLD.size,))


def shard_dim_out_of_range():
    mt.distribute_tensor(np.ones((4, 4)), mesh(), [mt.Shard(2)])


def placements_wrong_length():
    mt.distribute_tensor(np.ones((4, 4)), mesh(), [S0, R])


def mesh_size_mismatch():
    mt.init_device_mesh((MPI.COMM_WORLD.size + 1,))


def different_meshes():
    a = mt.distribute_tensor(np.ones((4, 4)), mesh(), [S0])
    other = mt.init_device_mesh((MPI.COMM_WORLD.size,), mesh_dim_names=("tp",))
    a + mt.distribute_tensor(np.ones((4, 4)), other, [S0])


def matmul_shape_mismatch():
    m = mesh()
    mt.distribute_tensor(np.ones((8, 6)), m, [S0]) @ mt.distribute_tensor(np.ones((5, 4)), m, [R])


def run_check_local_shape():
    rows = 3 if RANK == 0 else 1  # array_split of 4 rows over 2 ranks gives 2 and 2
    mt.DTensor.from_local(np.ones((rows, 3)), mesh(), [S0], shape=(4, 3), run_check=True)


def run_check_dtype():
    dtype = np.float64 if RANK == 0 else np.float32
    mt.DTensor.from_local(np.ones((2, 3), dtype), mesh(), [S0], shape=(4, 3), run_check=True)


def one_rank_raises():
    x = mt.distribute_tensor(np.ones((4, 4)), mesh(), [S0])
    if RANK == 1:
        raise RuntimeError("boom: rank 1 fails while rank 0 waits in full_tensor()")
    x.full_tensor()


def thread_raises():
    import threading
    x = mt.distribute_tensor(np.ones((4, 4)), mesh(), [S0])
    if RANK == 0:
        threading.Thread(target=lambda: 1 / 0).start()
        time.sleep(60)
    x.full_tensor()


def pipeline_stage_raises():
    """Stage 1 raises in micro-batch 2's forward while stage 0 waits for its gradients; the
    caller even swallows the error, yet the job ends (no exception can reach stage 0)."""
    m = mt.init_device_mesh((2, 1), mesh_dim_names=("pp", "dp"))
    w = mt.distribute_tensor(np.eye(3)[None].repeat(2, 0), m, [S0, R])
    xs = [mt.distribute_tensor(np.ones((2, 3)), m, [R, R]) for _ in range(4)]
    calls = []

    def stage(p, x, where):
        calls.append(where.index)
        if where.index == 1 and len(calls) == 3:
            raise ValueError("boom in stage 1: a bad layer")
        for a in p["w"]:
            x = x @ a
        return x
    pipe = mt.pipeline.value_and_grad(stage, lambda p, y, t: (y * t).sum(), m)
    try:
        pipe({"w": w}, xs, xs)
    except ValueError:
        time.sleep(60)


def divergent_collectives():
    mt.set_checks(True)
    x = mt.distribute_tensor(np.ones((4, 4)), mesh(), [S0])
    if RANK == 0:
        x.full_tensor()
    else:
        x.redistribute(placements=[S1])


def collective_never_completes():
    mt.set_timeout(2)
    x = mt.distribute_tensor(np.ones((4, 4)), mesh(), [S0])
    if RANK == 0:
        x.full_tensor()
    time.sleep(60)


if __name__ == "__main__":
    globals()[sys.argv[1]]()
