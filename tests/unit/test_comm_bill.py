"""CommDebugMode's records by region and phase, and the bill it prints (no MPI: records
are added as the executors add them)."""
from mtensor import modes
from mtensor.debug import CommDebugMode, region


def _run(comm):
    with region("block0"):
        comm.add("all_reduce", 1, (4, 8), "float64", 256)
        with region("mlp"):
            comm.add("all_reduce", 1, (4, 8), "float64", 256)
    modes.active.phase = "backward"  # what value_and_grad sets while its backward runs
    try:
        with region("block0"):
            comm.add("all_reduce", 0, (8,), "float64", 64)
            comm.add("all_reduce", 0, (8,), "float64", 64)
            comm.add("all_gather", 1, (8,), "float64", 32)
    finally:
        modes.active.phase = "forward"
    comm.add("broadcast", -1, (), "float64", 8)


def test_records_keep_their_region_and_phase():
    comm = CommDebugMode()
    _run(comm)
    assert [(r.region, r.phase) for r in comm.log] == [
        ("block0", "forward"), ("block0/mlp", "forward"), *[("block0", "backward")] * 3,
        ("", "forward")]
    assert comm.get_counts_by_region() == {
        ("block0", "forward"): {("all_reduce", 1): 1},
        ("block0/mlp", "forward"): {("all_reduce", 1): 1},
        ("block0", "backward"): {("all_reduce", 0): 2, ("all_gather", 1): 1},
        ("", "forward"): {("broadcast", -1): 1}}
    assert modes.active.region == ""


def test_bill_rows_name_the_mesh_dims():
    comm = CommDebugMode()
    _run(comm)
    rows = comm.bill(("dp", "tp")).splitlines()
    assert rows[1:] == [
        "block0                forward   1 x all_reduce@tp, 256 B",
        "block0/mlp            forward   1 x all_reduce@tp, 256 B",
        "block0                backward  2 x all_reduce@dp, 1 x all_gather@tp, 160 B",
        "(outside)             forward   1 x broadcast@mesh, 8 B"]
    assert comm.bill().splitlines()[1].endswith("1 x all_reduce@1, 256 B")
