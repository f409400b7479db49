"""Node-aware layout arithmetic and the per-link cost defaults, without MPI."""
import pytest

from mtensor.cost.model import INTER_NODE, INTER_NODE_RATE, CostModel, for_links
from mtensor.mesh import topology


@pytest.mark.parametrize("nodes,want", [
    (["a", "a", "b", "b"], (0, 1, 2, 3)),              # already node by node
    (["a", "b", "a", "b"], (0, 2, 1, 3)),              # round-robin launch: regrouped
    (["b", "a", "b", "a", "b", "a", "b", "a"], (0, 2, 4, 6, 1, 3, 5, 7)),
    (["x"] * 3, (0, 1, 2)),
])
def test_ranks_are_ordered_node_by_node(nodes, want):
    assert topology.node_order(nodes) == want


@pytest.mark.parametrize("shape,nodes,want", [
    ((2, 4), ["a"] * 4 + ["b"] * 4, (False, True)),    # tp inside each node, dp across
    ((4, 2), ["a"] * 4 + ["b"] * 4, (False, True)),
    ((2, 4), ["a", "b"] * 4, (True, False)),           # rank order over round-robin nodes
    ((2, 2, 2), ["a"] * 4 + ["b"] * 4, (False, True, True)),
    ((8,), ["a"] * 4 + ["b"] * 4, (False,)),
    ((2, 4), ["a"] * 8, (True, True)),
])
def test_a_mesh_dim_is_intra_node_when_every_group_is(shape, nodes, want):
    assert topology.intra_node(shape, nodes) == want


def test_node_order_puts_the_innermost_dims_inside_a_node():
    nodes = ["a", "b"] * 4                             # 2 nodes of 4, ranks interleaved
    order = topology.node_order(nodes)
    assert topology.intra_node((2, 4), [nodes[r] for r in order]) == (False, True)
    assert topology.intra_node((2, 4), nodes) == (True, False)


def test_repr_words():
    assert topology.describe(("dp", "tp"), (False, True), 2) == \
        "2 nodes, tp inside a node, dp across nodes"
    assert topology.describe(None, (True,), 1) == ""


def test_uncalibrated_models_price_links_across_nodes_slower():
    model = CostModel()
    assert for_links(model, (True, True)) is model
    split = for_links(model, (False, True))
    assert split.link(0) == INTER_NODE and split.link(1) == (model.alpha, model.beta)
    # a NIC moves posted bytes behind compute, shared memory does not: what mt.compile's
    # overlap="auto" asks before it starts a bucket early
    assert split.rate(0) == INTER_NODE_RATE > 0 and split.rate(1) == model.overlap_rate == 0
    assert for_links(model, (False, True)) is split            # one model per layout
    calibrated = CostModel(per_dim=((1e-6, 1e10), (1e-6, 1e10)))
    assert for_links(calibrated, (False, True)) is calibrated  # measured links win
    big = 64 << 20
    assert split.step_time("all_reduce", 0, 4, big) > 3 * split.step_time("all_reduce", 1, 4, big)


def test_groups_and_their_nodes():
    nodes = ["a"] * 4 + ["b"] * 4
    assert topology.group_nodes((2, 4), nodes, (1, 2), 0) == ("a", "b")
    assert topology.group_nodes((2, 4), nodes, (1, 2), 1) == ("b",) * 4
    assert topology.even_split(("a", "a", "b", "b")) == 2
    assert topology.even_split(("a", "a", "a", "b")) == 0       # uneven: flat
    assert topology.even_split(("a", "a")) == 0                 # one node: flat


def test_the_two_level_all_reduce_wins_above_a_size_the_links_give():
    from mtensor.cost.model import hierarchical_crossover
    model = for_links(CostModel(), (False,))
    a_in, b_in = model.alpha, model.beta
    a_x, b_x = INTER_NODE
    crossover = hierarchical_crossover(model, 0, 2, 2)

    def flat(s):            # one all-reduce of 4 ranks over the slow link
        return a_x + 2 * 3 / 4 * s / b_x

    def two_level(s):       # reduce-scatter and all-gather in pairs, all-reduce of halves
        return 2 * (a_in + s / 2 / b_in) + a_x + 2 * (1 / 2) * (s / 2) / b_x
    below, above = crossover * 0.9, crossover * 1.1
    assert flat(below) < two_level(below) and two_level(above) < flat(above)
    assert hierarchical_crossover(CostModel(), 0, 2, 2) == float("inf")  # equal links: never


def test_two_level_gathers_and_scatters_win_above_their_own_crossover():
    from mtensor.cost.model import hierarchical_crossover
    model = for_links(CostModel(), (False,))
    a_in, b_in = model.alpha, model.beta
    a_x, b_x = INTER_NODE
    for kind in ("all_gather", "reduce_scatter"):
        crossover = hierarchical_crossover(model, 0, 2, 2, kind)

        def flat(s):        # 4 ranks over the slow link, s: the whole buffer
            return a_x + 3 / 4 * s / b_x

        def two_level(s):   # halves across the pair of nodes, pairs inside, one reorder copy
            return a_x + (1 / 2) * (s / 2) / b_x + a_in + (1 / 2) * s / b_in + s / model.copy_beta
        below, above = crossover * 0.9, crossover * 1.1
        assert flat(below) < two_level(below) and two_level(above) < flat(above), kind
        assert hierarchical_crossover(CostModel(), 0, 2, 2, kind) == float("inf")


def test_plans_price_a_two_level_dim_as_what_runs():
    """A dim whose collectives run in two levels is priced at the cheaper of flat and two
    levels, the two meeting at the backend's crossover."""
    from mtensor.cost.model import hierarchical_crossover, two_level_time
    flat_model = for_links(CostModel(), (False,))
    priced = for_links(CostModel(), (False,), ((2, 2),))
    assert flat_model.two_level == () and priced.two_level == ((2, 2),)
    for kind in ("all_reduce", "all_gather", "reduce_scatter"):
        at = hierarchical_crossover(priced, 0, 2, 2, kind)
        flat = flat_model.step_time(kind, 0, 4, at)
        # equal up to bus_bytes' integer floor
        assert two_level_time(priced, kind, 0, 2, 2, at) == pytest.approx(flat, rel=1e-4)
        for s in (at / 10, at * 10):
            want = min(flat_model.step_time(kind, 0, 4, s),
                       two_level_time(priced, kind, 0, 2, 2, s))
            assert priced.step_time(kind, 0, 4, s) == want
        assert priced.step_time(kind, 0, 4, at * 10) < flat_model.step_time(kind, 0, 4, at * 10)
    assert priced.step_time("all_to_all", 0, 4, 1 << 20) == flat_model.step_time(
        "all_to_all", 0, 4, 1 << 20)


def test_a_dim_is_priced_in_two_levels_only_where_every_group_is():
    even = ("a", "a", "b", "b") * 2          # (2, 4) mesh, row-major: dim 1 groups of 4
    assert topology.uniform_split((2, 4), even, 1) == (2, 2)
    assert topology.uniform_split((2, 4), even, 0) == ()           # groups inside a node
    # 5 + 3 ranks on two nodes, mesh (4, 2): dim 0's groups are (a, a, b, b) for odd
    # positions but (a, a, a, b) for even ones, so no rank may price dim 0 in two levels
    uneven = ("a",) * 5 + ("b",) * 3
    assert topology.even_split(topology.group_nodes((4, 2), uneven, (0, 1), 0)) == 2
    assert topology.uniform_split((4, 2), uneven, 0) == ()
