"""The whole-graph search without MPI: graphs written from shapes (GraphBuilder), the integer
program against brute force, pins diagnosed, memory budgets, the heuristic fallback."""
import itertools
import math

import numpy as np
import pytest

from mtensor import Replicate as R
from mtensor import Shard as S
from mtensor.autoshard import GraphBuilder, diagnose_pins, parse_bytes, search
from mtensor.autoshard.explain import explain
from mtensor.autoshard.problem import Pricer, build
from mtensor.autoshard.solve import NoPlan, solve
from mtensor.cost.model import CostModel

MODEL = CostModel()


def two_matmuls(d, batch, n, pins, dtype=np.float32):
    """The propagator's block: H = X @ A; Y = H @ B, Y read whole."""
    g = GraphBuilder((n,))
    x = g.leaf("X", (batch, d), dtype, pins.get("X"))
    a = g.leaf("A", (d, 4 * d), dtype, pins.get("A"))
    b = g.leaf("B", (4 * d, d), dtype, pins.get("B"))
    g.pin(g.op("matmul", g.op("matmul", x, a), b), (R(),) * len(g.graph.mesh_shape))
    return g.graph


def test_only_x_pinned_gives_megatron_columns_then_rows():
    solution = search(two_matmuls(8192, 16, 8, {"X": (R(),)}), MODEL)
    assert solution.leaf_layouts() == {"X": (R(),), "A": (S(1),), "B": (S(0),)}
    assert [c[0] for c in solution.bill.collectives] == ["all_reduce"]
    assert solution.bill.comm_bytes == 2 * 7 * (16 * 8192 * 4) // 8   # one all-reduce of Y


def test_bad_pins_are_priced_against_the_best_plan_and_the_costly_pin_named():
    bad = {"X": (S(0),), "A": (S(0),), "B": (S(1),)}
    solution = search(two_matmuls(8192, 16, 8, bad), MODEL, budget=parse_bytes("1GiB"))
    report = diagnose_pins(solution, MODEL)
    assert sorted(c[0] for c in solution.bill.collectives) == ["all_gather", "all_reduce",
                                                               "all_to_all"]
    assert report.comm_ratio >= 3 and report.fights
    assert report.blame in bad and report.blame_bill.step_s < solution.bill.step_s
    text = explain(solution, report)
    assert "fight the math" in text and f"'{report.blame}'" in text


def test_without_a_budget_a_tiny_block_stays_whole_and_a_budget_splits_it():
    """Splitting a small matmul saves less compute than its all-reduce costs; a budget below
    the replicated weights makes the search split them anyway."""
    graph = two_matmuls(8, 4, 4, {"X": (R(),)}, np.float64)
    free = search(graph, MODEL)
    assert set(free.leaf_layouts().values()) == {(R(),)} and not free.bill.collectives
    whole = free.bill.memory_bytes
    tight = search(graph, MODEL, budget=whole / 2)
    assert tight.bill.memory_bytes <= whole / 2
    assert tight.leaf_layouts()["A"] != (R(),) or tight.leaf_layouts()["B"] != (R(),)
    with pytest.raises(NoPlan, match="memory budget"):
        search(graph, MODEL, budget=whole / 100)


def _mlp_graph(mesh_shape, blocks=2, batch=256, d=64, hidden=256, train=True):
    """Forward (and the backward's products) of an MLP of tanh blocks with a squared loss,
    written by hand as value_and_grad records them; the batch pinned on dp."""
    g = GraphBuilder(mesh_shape)
    pin = (S(0),) + (R(),) * (len(mesh_shape) - 1)
    x = g.leaf("x", (batch, d), pinned=pin)
    t = g.leaf("t", (batch, d), pinned=pin)
    ws, acts, h = [], [], x
    for i in range(blocks):
        a = g.leaf(f"params/a{i}", (d, hidden), param=train)
        b = g.leaf(f"params/b{i}", (hidden, d), param=train)
        z = g.op("tanh", g.op("matmul", h, a, region=f"block{i}"), region=f"block{i}")
        acts.append((h, z))
        ws.append((a, b))
        h = g.op("matmul", z, b, region=f"block{i}")
    diff = g.op("subtract", h, t)
    loss = g.op("mean", g.op("multiply", diff, diff), params=(None, False, None))
    g.pin(loss, (R(),) * len(mesh_shape))
    if not train:
        return g.graph
    grad = g.op("multiply", diff, 2.0 / (batch * d), phase="backward")
    for i in reversed(range(blocks)):
        (inp, z), (a, b) = acts[i], ws[i]
        bw = dict(phase="backward", region=f"block{i}")
        g.grad(g.op("matmul", g.op("transpose", z, params=((1, 0),), **bw), grad, **bw), b)
        gz = g.op("multiply", g.op("matmul", grad, g.op("transpose", b, params=((1, 0),), **bw), **bw),
                  g.op("subtract", 1.0, g.op("multiply", z, z, **bw), **bw), **bw)
        g.grad(g.op("matmul", g.op("transpose", inp, params=((1, 0),), **bw), gz, **bw), a)
        grad = g.op("matmul", gz, g.op("transpose", a, params=((1, 0),), **bw), **bw)
    return g.graph


@pytest.mark.parametrize("mesh_shape", [(2, 2), (2, 4)])
def test_a_training_graph_gets_megatron_on_tp_and_data_parallel_weights_on_dp(mesh_shape):
    solution = search(_mlp_graph(mesh_shape), MODEL)
    layouts = solution.leaf_layouts()
    for i in range(2):
        assert layouts[f"params/a{i}"] == (R(), S(1)), layouts
        assert layouts[f"params/b{i}"] == (R(), S(0)), layouts
    assert solution.method == "exact (integer program)"


def test_the_heuristic_fallback_plans_the_same_training_graph_within_its_documented_gap():
    graph = _mlp_graph((2, 4))
    exact = search(graph, MODEL)
    heuristic = search(graph, MODEL, exact_limit=0)
    assert heuristic.method.startswith("heuristic")
    assert exact.bill.step_s <= heuristic.bill.step_s * (1 + 1e-9)
    assert heuristic.bill.step_s <= 2 * exact.bill.step_s


def _objective(problem, assignment):
    pricer = Pricer(problem, MODEL).at(0, assignment)
    total = sum(pricer.item_cost(i, a[0]) for i, a in enumerate(assignment))
    for e in problem.edges:
        p = problem.items[e.src].choices[0][assignment[e.src][0]].output
        dst = problem.items[e.dst].choices[0][assignment[e.dst][0]]
        total += pricer.edge_cost(e, p, dst.output if e.slot < 0 else dst.inputs[e.slot])
    return total


@pytest.mark.parametrize("seed", range(6))
def test_on_a_1d_mesh_the_integer_program_is_the_brute_force_optimum(seed):
    """One mesh dim: the program is exact, so no assignment of every item is cheaper."""
    rng = np.random.default_rng(seed)
    g = GraphBuilder((4,))
    m, k, n = (int(s) for s in rng.choice([4, 8, 64, 256], 3))
    x = g.leaf("x", (m, k))
    w = g.leaf("w", (k, n))
    y = g.op("matmul", x, w)
    z = g.op(str(rng.choice(["tanh", "exp"])), y)
    s = g.op("add", z, y) if seed % 2 else g.op("multiply", z, 2.0)
    g.pin(g.op("sum", s, params=(0, False, None)), (R(),))
    problem = build(g.graph, MODEL)
    assignment, _, _ = solve(problem, MODEL)
    best = min(_objective(problem, [[c] for c in combo]) for combo in itertools.product(
        *[range(len(item.choices[0])) for item in problem.items]))
    assert math.isclose(_objective(problem, assignment), best, rel_tol=1e-9, abs_tol=1e-15)


def test_a_value_read_twice_is_reduced_once():
    """A partial sum read by two ops needs one all-reduce, not one per read."""
    g = GraphBuilder((4,))
    x = g.leaf("x", (64, 512), pinned=(S(1),))
    w = g.leaf("w", (512, 64), pinned=(S(0),))
    y = g.op("matmul", x, w)                     # partial sums on every rank
    g.pin(g.op("add", g.op("tanh", y), g.op("exp", y)), (R(),))
    solution = search(g.graph, MODEL)
    assert [c[0] for c in solution.bill.collectives] == ["all_reduce"]


def test_parse_bytes():
    assert parse_bytes("4GiB") == 4 * 2 ** 30 and parse_bytes("512 MB") == 512e6
    assert parse_bytes(1000) == 1000 and parse_bytes(None) is None
    with pytest.raises(ValueError, match="not a size"):
        parse_bytes("4 parsecs")
