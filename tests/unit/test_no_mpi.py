"""Pure planning needs no MPI: in a fresh interpreter where ``import mpi4py.MPI`` fails,
mtensor imports and its planning layers (placements, rules, planner, pricer) run."""
import subprocess
import sys

SCRIPT = """
import sys
sys.modules["mpi4py.MPI"] = None          # any 'from mpi4py import MPI' now raises
import numpy as np
import mtensor as mt
from mtensor.debug.price import AbstractTensor, price_op
from mtensor.placement import Partial, Replicate, Shard, local_shape
from mtensor.cost.model import get_cost_model
from mtensor.redistribute.plan import plan_redistribute

assert local_shape((7, 4), (4,), (Shard(0),), (3,)) == (1, 4)
plan = plan_redistribute((Partial(),), (Shard(0),), (8, 4), (4,), 8, get_cost_model())
assert [s.kind for s in plan.steps] == ["reduce_scatter"], plan.steps
x = AbstractTensor((8, 16), np.dtype(np.float64), (Shard(0), Replicate()))
w = AbstractTensor((16, 32), np.dtype(np.float64), (Replicate(), Shard(1)))
assert price_op("matmul", (x, w), (2, 2)).output.placements == (Shard(0), Shard(1))
try:
    mt.init_device_mesh((1,))
except ImportError:
    print("mesh needs MPI")
"""


def test_planning_imports_and_runs_without_libmpi():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "mesh needs MPI" in result.stdout
