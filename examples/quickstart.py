"""Quick start: a tensor-parallel MLP block written as plain numpy, on a (dp, tp) mesh.

    mpiexec -n 4 python examples/quickstart.py

X is split by rows over "dp" (data parallel), A by columns and B by rows over "tp" (Megatron's
column- and row-parallel layers).  The code is ordinary numpy; the sharding rules carry the
placements through each op, and the only collective is the all-reduce that finishes the
Partial sum of the second matmul -- the one an expert would place by hand.
"""
import numpy as np
from mpi4py import MPI

import mtensor as mt

size = MPI.COMM_WORLD.size
shape = (2, size // 2) if size % 2 == 0 and size > 2 else (1, size)
mesh = mt.init_device_mesh(shape, mesh_dim_names=("dp", "tp"))

rng = mt.random.default_rng(0)                 # same values whatever the mesh and placements
X = rng.standard_normal((8, 16), mesh=mesh, placements=[mt.Shard(0), mt.Replicate()])
A = rng.standard_normal((16, 32), mesh=mesh, placements=[mt.Replicate(), mt.Shard(1)])
B = rng.standard_normal((32, 16), mesh=mesh, placements=[mt.Replicate(), mt.Shard(0)])

with mt.CommDebugMode() as comm:
    H = np.tanh(X @ A)                          # column-parallel: no communication
    Y = H @ B                                   # row-parallel: partial sums on "tp"
    Z = Y.redistribute(mesh, [mt.Shard(0), mt.Replicate()])   # one all-reduce on "tp"

x, a, b = (t.full_tensor() for t in (X, A, B))  # whole arrays, to check against numpy
full = Z.full_tensor()
if MPI.COMM_WORLD.rank == 0:
    print(f"mesh {mesh.shape} {mesh.mesh_dim_names}")
    for name, t in (("X", X), ("A", A), ("H", H), ("Y", Y), ("Z", Z)):
        print(f"  {name}: global {t.shape}, placements {list(t.placements)}, "
              f"local block {t.to_local().shape}")
    print(f"matches numpy: {np.allclose(full, np.tanh(x @ a) @ b)}")
    print(f"collectives: {comm.get_comm_counts()}  bytes per rank: {comm.get_comm_bytes()}")
