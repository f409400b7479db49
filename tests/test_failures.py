"""Every bad input or broken run ends the job quickly, non-zero, with a clear message from
every rank that saw it (each scenario in its own mpiexec, under a timeout)."""
import time

import pytest
from launcher import run_under_mpi

ALL_RANKS = (0, 1)
SCENARIOS = {  # name: (ranks that must report it, text they report)
    "shard_dim_out_of_range": (ALL_RANKS, "shard tensor dim 2 but the tensor has shape (4, 4)"),
    "placements_wrong_length": (ALL_RANKS, "have 2 entries but the mesh (2,) has 1 dims"),
    "mesh_size_mismatch": (ALL_RANKS, "holds 3 ranks but the communicator has 2"),
    "different_meshes": (ALL_RANKS, "operands live on different meshes"),
    "matmul_shape_mismatch": (ALL_RANKS, "inner dims differ (6 != 5)"),
    "run_check_local_shape": (ALL_RANKS, "rank 0 (mesh coordinate [0]) holds a block of shape (3, 3)"),
    "run_check_dtype": (ALL_RANKS, "rank 1 holds dtype float32 but rank 0 holds float64"),
    "one_rank_raises": ((1,), "boom: rank 1 fails while rank 0 waits in full_tensor()"),
    "thread_raises": ((0,), "ZeroDivisionError: division by zero"),
    "pipeline_stage_raises": ((1,), "mt.pipeline: stage rank 1 of 2 raised ValueError: boom "
                                    "in stage 1: a bad layer in the forward of micro-batch 2"),
    "divergent_collectives": (ALL_RANKS, "collectives diverge across the mesh: ranks [0] run "
                                         "all_gather on mesh dim 0 of global shape (4, 4) "
                                         "float64 for full_tensor; ranks [1] run all_to_all"),
    "collective_never_completes": ((0,), "all_gather on mesh dim 0 of global shape (4, 4) "
                                         "float64 for full_tensor did not complete within 2 s"),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_bad_run_ends_with_a_clear_error(name):
    ranks, text = SCENARIOS[name]
    start = time.monotonic()
    result = run_under_mpi(2, ["tests/failures/scenarios.py", name], timeout=60)
    elapsed = time.monotonic() - start
    assert result.returncode != 0, result.stdout
    for rank in ranks:
        lines = [ln for ln in result.stdout.splitlines() if ln.startswith(f"[rank {rank}]")]
        assert any(text in ln for ln in lines), f"rank {rank} did not report {text!r}:\n{result.stdout}"
    assert elapsed < 30, f"took {elapsed:.0f} s"
