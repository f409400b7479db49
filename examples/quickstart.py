"""Quick start: a 2x2 mesh, a distributed matrix product, a redistribution, the comm bill.

    mpiexec -n 4 python examples/quickstart.py

The product is written on local blocks with the eager core's API (from_local + Partial): the
inner dim is sharded on "tp", so each rank's partial product is a term of a Partial(sum)
and one all-reduce over "tp" finishes it, exactly as a tensor-parallel layer does by hand.
"""
import numpy as np
from mpi4py import MPI

import mtensor as mt

size = MPI.COMM_WORLD.size
shape = (2, size // 2) if size % 2 == 0 else (1, size)
mesh = mt.init_device_mesh(shape, mesh_dim_names=("dp", "tp"))

rng = np.random.default_rng(0)                 # same seed everywhere: same full arrays
X, W = rng.standard_normal((8, 6)), rng.standard_normal((6, 4))

x = mt.distribute_tensor(X, mesh, [mt.Shard(0), mt.Shard(1)])    # rows on dp, inner on tp
w = mt.distribute_tensor(W, mesh, [mt.Replicate(), mt.Shard(0)])  # inner on tp

with mt.CommDebugMode() as comm:
    partial = mt.DTensor.from_local(
        x.to_local() @ w.to_local(), mesh, [mt.Shard(0), mt.Partial()], shape=(8, 4)
    )
    y = partial.redistribute(mesh, [mt.Shard(0), mt.Replicate()])  # all-reduce on tp
    z = y.redistribute(mesh, [mt.Replicate(), mt.Shard(1)])        # all-gather on dp, slice tp
    full = z.full_tensor()                                         # all-gather on tp

if MPI.COMM_WORLD.rank == 0:
    print(f"mesh {mesh.shape} {mesh.mesh_dim_names}, rank 0 at {mesh.get_coordinate()}")
    print(f"x: {x}")
    print(f"y = x @ w: {y}")
    print(f"z: {z}")
    print(f"matches numpy: {np.allclose(full, X @ W)}")
    print(f"collectives: {comm.get_comm_counts()}  bytes per rank: {comm.get_comm_bytes()}")
    for entry in comm.log:
        print(f"  {entry.collective:<10} mesh dim {entry.mesh_dim}  {entry.shape} {entry.dtype}"
              f"  {entry.bytes} B")
