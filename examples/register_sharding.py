"""Teach mtensor an op it lacks: ``np.unwrap``, from user code.

    mpiexec -n 4 python examples/register_sharding.py

The rule is written for ONE mesh dim, as mtensor's own: unwrap runs along ``axis``, so a
split of that dim needs it whole, and a split of any other dim runs on each block.  The
rule is checked first on a simulated mesh (no MPI: every choice, every block, against
numpy), then used: rows split over the mesh unwrap along each row with no communication;
unwrapping down the columns moves the data first, as the cost model chooses.
"""
import numpy as np
from mpi4py import MPI

import mtensor as mt
from mtensor import Replicate, Shard


@mt.register_sharding(np.unwrap)
def unwrap_rule(call):
    ndim = call.operands[0].ndim
    axis = call.args["axis"] % ndim            # numpy's default (-1) filled in
    return [(Shard(d), Shard(d)) for d in range(ndim) if d != axis]


def phases(rows, cols):
    """Wrapped angles of drifting phases: unwrap restores the drift along each row."""
    steps = np.random.default_rng(0).uniform(-0.5, 2.5, (rows, cols))
    return np.angle(np.exp(1j * steps.cumsum(axis=1)))


p = phases(8, 6)
mt.testing.check_rule(np.unwrap, unwrap_rule, p, axis=1, mesh_shapes=[(2,), (3,), (2, 2)])

try:                                            # a rule that claims the axis may be split
    mt.testing.check_rule(np.unwrap, lambda call: [(Shard(1), Shard(1))], p, axis=1)
except AssertionError as e:
    caught = str(e)

mesh = mt.init_device_mesh((MPI.COMM_WORLD.size,))
with mesh:                                      # the default mesh of the constructors
    x = mt.distribute_tensor(p, mesh, [Shard(0)])
    with mt.CommDebugMode() as along_rows:
        u = np.unwrap(x)                        # rows split: each rank unwraps its own
    with mt.CommDebugMode() as down_cols:
        v = np.unwrap(x, axis=0)                # the axis split: the data moves first
    z = mt.zeros((8, 6), placements=[Replicate()])

ok = (np.allclose(mt.asnumpy(u), np.unwrap(p)) and np.allclose(mt.asnumpy(v), np.unwrap(p, axis=0))
      and np.array_equal(mt.asnumpy(z + u), np.unwrap(p)))
if MPI.COMM_WORLD.rank == 0:
    print(f"check_rule caught the wrong rule: {caught.split(': element')[0]}")
    print(f"along the rows: {list(u.placements)}, collectives {along_rows.get_comm_counts()}")
    print(f"down the columns: {list(v.placements)}, collectives {down_cols.get_comm_counts()}")
    print(f"matches numpy: {ok}")
