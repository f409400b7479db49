"""The strategy chooser (no MPI): prices worked out by hand from the alpha-beta model, the
tie-breaks, out= targets, the error, and a brute-force oracle over random calls."""
import math

import numpy as np
import pytest

from mtensor.cost.model import CostModel
from mtensor.ops import RULES, Choice, OpCall, Operand, choose
from mtensor.ops.choose import _change_cost
from mtensor.placement import Partial, Replicate, Shard, max_local_shape

R, P, S0, S1 = Replicate(), Partial(), Shard(0), Shard(1)


@pytest.fixture(autouse=True)
def fresh_price_caches():
    """Prices are cached: start each test empty so that it really prices its calls."""
    _change_cost.cache_clear()
    max_local_shape.cache_clear()
UNIT = CostModel(alpha=1.0, beta=1.0, copy_beta=1.0)   # seconds = steps + bytes, easy sums


def call_of(*operands, mesh=(4,), name="op"):
    return OpCall(name, tuple(Operand(s, np.dtype(d), p) for s, d, p in operands), (), mesh)


def test_price_of_a_gather_worked_by_hand():
    # (8, 4) float64 as S(0) on 4 ranks: each block 2 x 4 x 8 = 64 B.  Wanting R is an
    # all-gather of the 256 B whole: alpha + 3/4 * 256 / beta = 1 + 192.
    call = call_of(((8, 4), "f8", (S0,)))
    assert choose(call, [Choice((R,), R)], UNIT) == (((R,),), (R,), 193.0)
    # float32: half the bytes
    call = call_of(((8, 4), "f4", (S0,)))
    assert choose(call, [Choice((R,), R)], UNIT)[2] == 97.0
    # 7 rows on 4 ranks: the largest block (2 rows) prices it: 4 * 2 * 4 * 8 = 256 B gathered
    call = call_of(((7, 4), "f8", (S0,)))
    assert choose(call, [Choice((R,), R)], UNIT)[2] == 193.0


def test_cheapest_choice_wins_and_costs_add_over_operands_and_mesh_dims():
    # x (8, 4) f8 [S0, R] and y (4, 6) f8 [R, S1] on a (2, 4) mesh.
    call = call_of(((8, 4), "f8", (S0, R)), ((4, 6), "f8", (R, S1)), mesh=(2, 4))
    choices = [Choice((R, R), R), Choice((S0, R), S0), Choice((R, S1), S1)]
    wanted, out, cost = choose(call, choices, UNIT)
    # mesh dim 0: (S0, R) costs nothing; mesh dim 1: (R, S1) costs nothing
    assert wanted == ((S0, R), (R, S1)) and out == (S0, S1) and cost == 0.0
    wanted, out, cost = choose(call, [Choice((R, R), R)], UNIT)
    # mesh dim 0 gathers x: its block under [S0, R] is 4 x 4 x 8 = 128 B, 256 B gathered on 2
    # ranks: 1 + 128.  mesh dim 1 gathers y: its block under [R, S1] is 4 x 2 x 8 = 64 B, 256 B
    # on 4 ranks: 1 + 192.
    assert wanted == ((R, R), (R, R)) and out == (R, R) and cost == 129.0 + 193.0


def test_partial_terms_reduce_and_slicing_is_a_copy():
    # (8,) f8 as P on 4 ranks: 64 B block; all-reduce moves 2 * 3/4 * 64 = 96 B: 1 + 96.
    call = call_of(((8,), "f8", (P,)))
    assert choose(call, [Choice((R,), R)], UNIT)[2] == 97.0
    # R -> S(0) copies a quarter of the 64 B block locally at copy_beta
    call = call_of(((8,), "f8", (R,)))
    assert choose(call, [Choice((S0,), S0)], UNIT)[2] == 16.0


def test_ties_go_to_fewer_relabelled_operands_then_to_the_earlier_choice():
    # a size-1 mesh dim makes every change free: keeping the operand's placement wins
    call = call_of(((8,), "f8", (S0,)), mesh=(1,))
    assert choose(call, [Choice((R,), R), Choice((S0,), S0)], UNIT)[:2] == (((S0,),), (S0,))
    # equal cost and equal moves: the first listed wins
    call = call_of(((8, 8), "f8", (R,)), mesh=(1,))
    first, second = Choice((S0,), S0), Choice((S1,), S1)
    assert choose(call, [first, second], UNIT)[1] == (S0,)
    assert choose(call, [second, first], UNIT)[1] == (S1,)
    # on 4 ranks a free choice beats a cheaper-to-list one that moves data
    call = call_of(((8, 8), "f8", (S1,)))
    assert choose(call, [Choice((R,), R), Choice((S1,), S0)], UNIT)[1] == (S0,)


def test_constants_are_free_but_never_partial():
    const = ((8,), "f8", None)
    call = call_of(((8,), "f8", (P,)), const)
    # the array keeps its terms for free, but the constant cannot become terms
    got = choose(call, [Choice((P, P), P), Choice((P, R), P)], UNIT)
    assert got == (((P,), (R,)), (P,), 0.0)
    with pytest.raises(ValueError) as info:
        choose(call, [Choice((P, P), P)], UNIT)
    assert str(info.value) == ("op of (8,) [P(sum)], (8,): no strategy fits these operands; "
                               "redistribute the operands to Replicate() first")
    # a constant sliced or whole costs nothing and is not counted as relabelled
    call = call_of(const, ((8,), "f8", (S0,)))
    assert choose(call, [Choice((S0, S0), S0)], UNIT)[2] == 0.0
    assert choose(call, [Choice((R, R), R), Choice((S0, S0), S0)], UNIT)[1] == (S0,)


def test_into_restricts_the_output():
    call = call_of(((8, 8), "f8", (S0,)))
    choices = [Choice((S0,), S0), Choice((R,), R), Choice((S1,), S1)]
    assert choose(call, choices, UNIT, into=(R,)) == (((R,),), (R,), 385.0)  # 1 + 3/4 * 512
    assert choose(call, choices, UNIT, into=(S1,))[:2] == (((S1,),), (S1,))
    assert choose(call, choices, UNIT, into=(P,)) is None
    call = call_of(((8, 8), "f8", (S0, R)), mesh=(2, 2))
    assert choose(call, choices, UNIT, into=(S0, P)) is None
    assert choose(call, choices, UNIT, into=(S0, S1))[1] == (S0, S1)


def test_a_new_split_comes_after_every_whole_or_partial_output():
    # (8, 16) f8 P on 4 ranks (a 1 KiB block): an all-reduce (1 + 1536) beats nothing in
    # price next to a reduce-scatter (1 + 768), but the split it leaves would be gathered
    # again (1 + 768 more): a nonlinear op on partial terms reduces them whole
    call = call_of(((8, 16), "f8", (P,)))
    choices = [Choice((S0,), S0), Choice((R,), R)]
    assert choose(call, choices, UNIT) == (((R,),), (R,), 1537.0)
    # where an operand is split on that mesh dim already, its split is no new one: cheapest wins
    call = call_of(((8, 16), "f8", (P,)), ((8, 16), "f8", (S0,)))
    choices = [Choice((R, R), R), Choice((S0, S0), S0)]
    assert choose(call, choices, UNIT) == (((S0,), (S0,)), (S0,), 769.0)
    # and a new split is still taken when it is the only choice
    call = call_of(((8, 16), "f8", (P,)))
    assert choose(call, [Choice((S0,), S0)], UNIT)[1] == (S0,)


def test_an_operand_used_twice_moves_once_and_whole_beats_partial_on_a_tie():
    # x * x with x (8, 16) f8 P: reducing both uses is one all-reduce of x (the same
    # block), the same price as reducing one use and keeping partial terms (P * R is
    # linear): the whole output wins the tie, so the square's result needs no reduction
    x = ((8, 16), "f8", (P,))
    choices = [Choice((P, R), P), Choice((R, R), R)]
    twice = OpCall("multiply", call_of(x, x).operands, (), (4,), aliases=(0,))
    assert choose(twice, choices, UNIT) == (((R,), (R,)), (R,), 1537.0)
    # two different operands with the same layout: both move, so the cheaper P * R wins
    assert choose(call_of(x, x), choices, UNIT) == (((P,), (R,)), (P,), 1537.0)


def test_an_operand_used_again_later_is_priced_once_per_layout_it_is_wanted_in():
    x, z = ((8, 16), "f8", (P,)), ((8, 16), "f8", (S0,))
    # (x, x, z): the second x rides on the first's all-reduce (1537); z is still priced: the
    # choice that keeps z split costs 1537, gathering z too 1537 + 769
    call = OpCall("op", call_of(x, x, z).operands, (), (4,), aliases=(0, -1))
    choices = [Choice((R, R, R), R), Choice((R, R, S0), S0)]
    assert choose(call, choices, UNIT) == (((R,), (R,), (S0,)), (S0,), 1537.0)
    # (x, z, x) with x wanted whole twice moves once (1537); wanted partial and whole, the
    # whole use moves it (1537 too): the tie keeps the rule's order
    call = OpCall("op", call_of(x, z, x).operands, (), (4,), aliases=(-1, 0))
    choices = [Choice((R, S0, R), S0), Choice((P, S0, R), S0)]
    assert choose(call, choices, UNIT) == (((R,), (S0,), (R,)), (S0,), 1537.0)


def test_a_whole_operand_is_cut_once_for_every_mesh_dim_that_cuts_it():
    # x (8, 32) f8 [R, R] (2 KiB whole) meets y [S0, S1] (256 B blocks) on a (2, 4) mesh.
    # Gathering y on dim 0 costs 1 + 1/2 * 512 = 257.  Cutting x there is one copy of what
    # is left after both dims cut it: 2048 / 4 / 2 = 256, so x is cut (priced on dim 0 alone,
    # 2048 / 2 = 1024, y would be gathered); dim 1 likewise: 256 against 1 + 3/4 * 1024
    x, y = ((8, 32), "f8", (R, R)), ((8, 32), "f8", (S0, S1))
    choices = [Choice((R, R), R), Choice((S0, S0), S0), Choice((S1, S1), S1)]
    assert choose(call_of(x, y, mesh=(2, 4)), choices, UNIT) == (
        ((S0, S1), (S0, S1)), (S0, S1), 512.0)


def _largest_block(shape, mesh, placements):
    """Brute force: the block at coordinate 0 cut by np.array_split, mesh dim 0 first."""
    index = [np.arange(s) for s in shape]
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            index[p.dim] = np.array_split(index[p.dim], mesh[i])[0]
    return math.prod(len(x) for x in index)


def _brute(call, choices, model, into):
    wanted, output, total = [[] for _ in call.operands], [], 0.0
    for i, n in enumerate(call.mesh_shape):
        priced = []
        for k, ch in enumerate(choices):
            if into is not None and ch.output != into[i]:
                continue
            cost, moved = 0.0, 0
            for o, want in zip(call.operands, ch.inputs):
                if o.placements is None:
                    cost = math.inf if isinstance(want, Partial) else cost
                    continue
                block = _largest_block(o.shape, call.mesh_shape, o.placements) * o.dtype.itemsize
                if isinstance(want, Shard) and o.placements[i] == R:   # one copy cuts them all
                    block //= math.prod(m for k, m in enumerate(call.mesh_shape)
                                        if k != i and o.placements[k] == R)
                cost += model.change_time(o.placements[i], want, i, n, block)
                moved += o.placements[i] != want
            split = isinstance(ch.output, Shard) and not any(
                isinstance(o.placements[i], Shard) for o in call.operands if o.placements)
            first = call.operands[0].placements
            relabelled = first is not None and first[i] != ch.output
            if cost < math.inf:
                priced.append((split, cost, moved, isinstance(ch.output, Partial), relabelled, k))
        if not priced:
            return None
        _, cost, _, _, _, k = min(priced)
        for j, w in enumerate(choices[k].inputs):
            wanted[j].append(w)
        output.append(choices[k].output)
        total += cost
    return tuple(map(tuple, wanted)), tuple(output), total


MODELS = [UNIT, CostModel(), CostModel(per_dim=((1e-3, 1e6), (1e-6, 1e10))),
          CostModel(alpha=0.0, beta=1e9, copy_beta=1e8)]


def test_choices_match_a_brute_force_search():
    rng = np.random.default_rng(7)
    for trial in range(400):
        mesh = tuple(int(n) for n in rng.integers(1, 5, rng.integers(1, 4)))
        nops = int(rng.integers(1, 4))
        shapes = [tuple(int(s) for s in rng.integers(0, 9, rng.integers(1, 4)))
                  for _ in range(nops)]
        pool = lambda nd: [R, P, Partial("max")] + [Shard(d) for d in range(nd)]
        ops = []
        for s in shapes:
            pl = None if rng.random() < 0.2 else tuple(rng.choice(pool(len(s))) for _ in mesh)
            ops.append((s, rng.choice(["f8", "f4", "i2"]), pl))
        call = call_of(*ops, mesh=mesh)
        choices = [Choice(tuple(rng.choice(pool(len(s))) for s in shapes),
                          rng.choice(pool(1))) for _ in range(int(rng.integers(1, 6)))]
        model = MODELS[trial % len(MODELS)]
        into = tuple(rng.choice(pool(1)) for _ in mesh) if trial % 3 == 0 else None
        want = _brute(call, choices, model, into)
        if want is None and into is None:
            with pytest.raises(ValueError, match="no strategy fits"):
                choose(call, choices, model)
        else:
            assert choose(call, choices, model, into) == want, (call, choices, into)


def test_choose_runs_the_rules_choices():
    # transpose of (6, 4) S(0) on 3 ranks: S(0) -> S(1) is free
    call = OpCall("transpose", (Operand((6, 4), np.dtype("f8"), (S0,)),), (None,), (3,))
    assert choose(call, RULES["transpose"](call).choices, UNIT) == (((S0,),), (S1,), 0.0)
