"""Node-aware meshes with ranks told they sit on other nodes (MTENSOR_NODE_OF_RANK): a
round-robin launch over two nodes, as a cluster's scheduler may make, at 4 and 8 ranks."""
import warnings

import numpy as np
import pytest
from mpi_helpers import WORLD, assert_all_ranks, host

import mtensor as mt
from mtensor.cost.model import INTER_NODE, for_links
from mtensor.mesh import nodes as mesh_nodes
from mtensor.placement import Replicate, Shard


def _two_nodes():
    if WORLD.size not in (4, 8):
        pytest.skip("two fake nodes of 2 or 4 ranks")
    return [str(r % 2) for r in range(WORLD.size)]          # round-robin over 2 nodes


def _mesh(nodes, monkeypatch, **options):
    monkeypatch.setenv("MTENSOR_NODE_OF_RANK", ",".join(nodes))
    return mt.init_device_mesh((2, WORLD.size // 2), mesh_dim_names=("dp", "tp"),
                               comm=WORLD.Dup(), **options)


def test_tp_is_laid_inside_a_node_and_computes_like_numpy(monkeypatch):
    nodes = _two_nodes()
    mesh = _mesh(nodes, monkeypatch)
    assert mesh.intra_node == (False, True) and len(set(mesh.nodes)) == 2
    assert "tp inside a node, dp across nodes" in repr(mesh)
    tp_members = mesh.get_group("tp").allgather(WORLD.rank)
    assert_all_ranks(all(nodes[r] == nodes[WORLD.rank] for r in tp_members),
                     f"tp group {tp_members} spans nodes {nodes}")
    assert mesh["tp"].intra_node == (True,) and mesh["dp"].intra_node == (False,)
    rng = np.random.default_rng(0)
    x, a, b = rng.normal(size=(8, 6)), rng.normal(size=(6, 12)), rng.normal(size=(12, 6))
    X = mt.distribute_tensor(x, mesh, [Shard(0), Replicate()])
    A = mt.distribute_tensor(a, mesh, [Replicate(), Shard(1)])
    B = mt.distribute_tensor(b, mesh, [Replicate(), Shard(0)])
    with mt.CommDebugMode() as comm:
        Y = (np.tanh(X @ A) @ B).redistribute(mesh, [Shard(0), Replicate()])
    assert comm.get_comm_counts() == {"all_reduce": 1}
    assert [r.mesh_dim for r in comm.log] == [1]                # on tp: inside the node
    np.testing.assert_allclose(host(Y), np.tanh(x @ a) @ b, rtol=1e-12)
    model = for_links(mt.get_cost_model(), mesh.intra_node)
    assert model.link(0) == INTER_NODE and model.link(1) != INTER_NODE


def test_rank_layout_keeps_rank_order_and_warns_once(monkeypatch):
    nodes = _two_nodes()
    mesh_nodes._warned.discard("tp")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mesh = _mesh(nodes, monkeypatch, layout="rank")
        _mesh(nodes, monkeypatch, layout="rank")
    assert mesh.intra_node == (True, False)
    assert mesh.get_coordinate() == list(np.unravel_index(WORLD.rank, mesh.shape))
    said = [w for w in seen if "'tp'" in str(w.message) and "spans nodes" in str(w.message)]
    assert len(said) == (1 if WORLD.rank == 0 else 0)
    with warnings.catch_warnings(record=True) as quiet:
        warnings.simplefilter("always")
        mesh_nodes._warned.discard("tp")
        _mesh(nodes, monkeypatch, layout="rank", heavy=())
    assert not [w for w in quiet if "spans nodes" in str(w.message)]


def test_a_node_list_of_the_wrong_length_fails_on_every_rank(monkeypatch):
    monkeypatch.setenv("MTENSOR_NODE_OF_RANK", "0")
    if WORLD.size == 1:
        pytest.skip("one rank, one node: the list fits")
    with pytest.raises(ValueError, match="MTENSOR_NODE_OF_RANK='0' names 1 ranks"):
        mt.init_device_mesh((WORLD.size,), comm=WORLD.Dup())
    with pytest.raises(ValueError, match="layout 'zigzag'"):
        mt.init_device_mesh((WORLD.size,), layout="zigzag")


def test_an_all_reduce_across_nodes_reduces_inside_them_first(monkeypatch):
    """A 1-D mesh over two nodes: above the crossover the cost model gives, reduce-scatter
    inside each node, all-reduce of the pieces across, all-gather inside; numpy's sums and
    NaN-carrying max either way."""
    nodes = _two_nodes()
    monkeypatch.setenv("MTENSOR_NODE_OF_RANK", ",".join(nodes))
    mesh = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("dp",), comm=WORLD.Dup())
    assert mesh.backends == ("mpi-hier",) and mesh.intra_node == (False,)
    crossover = mesh.communicator(0).crossover["all_reduce"]
    assert 1 << 10 < crossover < 1 << 20               # ~18 KiB with the default links
    for rows in (4, int(crossover // 8 // 3) + 7):     # below and above it, uneven pieces
        terms = [np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) * (r + 1) - r
                 for r in range(WORLD.size)]
        terms[-1][0, 0] = np.nan
        for op, want in (("sum", sum(terms[1:], terms[0])), ("max", np.maximum.reduce(terms))):
            x = mt.DTensor.from_local(terms[WORLD.rank], mesh, [mt.Partial(op)], shape=(rows, 3))
            with mt.CommDebugMode() as comm:
                got = host(x.redistribute(mesh, [Replicate()]).to_local())
            assert comm.get_backend_counts() == {"mpi-hier": 1}
            assert_all_ranks(np.allclose(got, want, equal_nan=True), f"{op} of {rows} rows")


def test_gathers_and_scatters_across_nodes_go_in_two_levels(monkeypatch):
    """All-gather (S(0) -> R) and reduce-scatter (P -> S(0)) over two round-robin nodes,
    below and above their crossover, uneven rows: numpy's results, the pieces in rank order."""
    nodes = _two_nodes()
    monkeypatch.setenv("MTENSOR_NODE_OF_RANK", ",".join(nodes))
    mesh = mt.init_device_mesh((WORLD.size,), mesh_dim_names=("dp",), comm=WORLD.Dup())
    crossover = mesh.communicator(0).crossover
    assert crossover["all_gather"] == crossover["reduce_scatter"] < 1 << 20
    assert mesh.two_level == ((WORLD.size // 2, 2),)          # priced as it runs
    model, big = mesh.cost_model(), 64 << 20
    assert model.step_time("all_gather", 0, WORLD.size, big) < for_links(
        mt.get_cost_model(), mesh.intra_node).step_time("all_gather", 0, WORLD.size, big)
    for rows in (WORLD.size + 1, int(crossover["all_gather"] // 8 // 3) + 5):
        full = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3)
        x = mt.distribute_tensor(full, mesh, [Shard(0)])
        with mt.CommDebugMode() as comm:
            gathered = host(x.redistribute(mesh, [Replicate()]).to_local())
        assert_all_ranks(np.array_equal(gathered, full), f"all-gather of {rows} rows")
        terms = [full * (r + 1) - r for r in range(WORLD.size)]
        p = mt.DTensor.from_local(terms[WORLD.rank], mesh, [mt.Partial()], shape=full.shape)
        with mt.CommDebugMode() as scatter_comm:
            mine = host(p.redistribute(mesh, [Shard(0)]).to_local())
        want = np.array_split(sum(terms[1:], terms[0]), WORLD.size)[mesh.coordinate[0]]
        assert_all_ranks(np.allclose(mine, want, rtol=1e-12), f"reduce-scatter of {rows} rows")
        for counted in (comm, scatter_comm):
            assert counted.get_backend_counts() == {"mpi-hier": 1}


def test_ranks_price_a_dim_alike_when_its_groups_split_differently(monkeypatch):
    """5 + 3 ranks on two nodes, mesh (4, 2): some dim-0 groups run in two levels and some
    flat, so every rank prices dim 0 flat (different models would choose different
    collectives and hang); each group still computes numpy's sum."""
    if WORLD.size != 8:
        pytest.skip("5 + 3 ranks on two fake nodes")
    monkeypatch.setenv("MTENSOR_NODE_OF_RANK", "0,0,0,0,0,1,1,1")
    mesh = mt.init_device_mesh((4, 2), mesh_dim_names=("dp", "tp"), layout="rank",
                               comm=WORLD.Dup(), heavy=())
    backends = WORLD.allgather(mesh.backends[0])
    assert set(backends) == {"mpi", "mpi-hier"}, backends
    assert mesh.two_level == ((), ())
    assert len(set(WORLD.allgather(hash(mesh.cost_model())))) == 1
    hier = [mesh.communicator(0).crossover["all_reduce"]] if mesh.backends[0] == "mpi-hier" else []
    rows = int(max(sum(WORLD.allgather(hier), [])) // 8 // 3) + 9     # above the crossover
    terms = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) * (WORLD.rank + 1)
    p = mt.DTensor.from_local(terms, mesh, [mt.Partial(), Replicate()], shape=terms.shape)
    got = host(p.redistribute(mesh, [Replicate(), Replicate()]).to_local())
    column = mesh.get_group(0).allgather(WORLD.rank)
    want = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) * sum(r + 1 for r in column)
    assert_all_ranks(np.allclose(got, want, rtol=1e-12), "dp sums")


def test_compile_overlaps_the_dim_across_nodes_and_blocks_inside_one(monkeypatch):
    """``overlap="auto"``: the dp all-reduce (across nodes: a NIC moves bytes behind compute)
    starts early and is waited for late; the tp one (shared memory) is one blocking call."""
    mesh = _mesh(_two_nodes(), monkeypatch)
    rng = np.random.default_rng(1)
    g, h, x = rng.normal(size=(4, 6)), rng.normal(size=(6, 4)), rng.normal(size=(32, 32))
    G = mt.DTensor.from_local(g, mesh, [mt.Partial(), Replicate()], shape=g.shape)
    H = mt.DTensor.from_local(h, mesh, [Replicate(), mt.Partial()], shape=h.shape)
    X = mt.distribute_tensor(x, mesh, [Replicate(), Replicate()])

    def reduce_both(G, H, X):
        dp = G.redistribute(mesh, [Replicate(), Replicate()])
        tp = H.redistribute(mesh, [Replicate(), Replicate()])
        return dp, tp, np.tanh(X @ X) * 2        # compute after both: something to hide behind

    step = mt.compile(reduce_both)
    step(G, H, X)
    dp, tp, _ = step(G, H, X)
    traced = step.traced
    kinds = {traced.graph.nodes[b[0]].fn.mesh_dim: what for what, k in traced.program
             if what in ("start", "run") for b in [traced.buckets[k]]}
    assert kinds == {0: "start", 1: "run"}, traced.program
    np.testing.assert_allclose(host(dp), g * 2, rtol=1e-12)
    np.testing.assert_allclose(host(tp), h * (WORLD.size // 2), rtol=1e-12)
