"""Pipeline schedules as data (mtensor.pipeline.schedules), without MPI: every action once
on its stage's rank, forwards before backwards, no deadlock in a simulated run of the
send/receive order, tags that tell every message of a step apart, and the bubble each
schedule predicts against the closed forms."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtensor.pipeline import schedules as sc
from mtensor.pipeline import simulation
from mtensor.pipeline.p2p import HEADER, decode_spec, encode_spec
from mtensor.placement import Partial, Replicate, Shard

SIZES = [(p, m) for p in range(1, 7) for m in range(1, 13)]


def _all(name, p, m, v=1):
    return sc.make(name, p, m, v)


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", SIZES)
def test_gpipe_and_1f1b_are_complete_ordered_and_predict_the_closed_form_bubble(name, p, m):
    schedule = _all(name, p, m)
    sc.check(schedule)
    for forward, backward in [(1.0, 1.0), (1.0, 2.0), (0.3, 1.7)]:
        got = simulation.simulate(schedule, forward, backward).bubble
        assert got == pytest.approx((p - 1) / (m + p - 1), abs=1e-12), (forward, backward)


@pytest.mark.parametrize("p,m", SIZES)
def test_1f1b_holds_at_most_ranks_minus_r_micro_batches(p, m):
    peaks = simulation.peak_in_flight(sc.one_f_one_b(p, m))
    assert peaks == [min(p - r, m) for r in range(p)]
    assert simulation.peak_in_flight(sc.gpipe(p, m)) == [m] * p


@pytest.mark.parametrize("p,m,v", [(p, m, v) for p in range(1, 5) for m in range(p, 13, p)
                                   for v in range(1, 4)])
def test_interleaved_is_deadlock_free_and_divides_the_bubble(p, m, v):
    schedule = sc.interleaved_1f1b(p, m, v)
    sc.check(schedule)
    bubble = simulation.simulate(schedule).bubble          # forward 1, backward 2
    assert bubble == pytest.approx((p - 1) / (v * m + p - 1), abs=1e-9)
    assert bubble <= simulation.predicted_bubble(sc.one_f_one_b(p, m)) + 1e-12


def test_interleaved_needs_a_multiple_of_ranks():
    with pytest.raises(ValueError, match="5 micro-batches is not a multiple of 2 ranks"):
        sc.interleaved_1f1b(2, 5, 2)


def test_the_simulator_finds_a_cycle_of_receives():
    """Complete and ordered, yet deadlocked: rank 1 first waits for micro-batch 1, which
    rank 0 sends only after micro-batch 0's backward, which needs rank 1's."""
    A = sc.Action
    rows = ((A("F", 0, 0), A("B", 0, 0), A("F", 1, 0), A("B", 1, 0)),
            (A("F", 1, 1), A("F", 0, 1), A("B", 0, 1), A("B", 1, 1)))
    schedule = sc.Schedule("cycle", 2, 2, 1, rows)
    sc.check(schedule)
    with pytest.raises(simulation.DeadlockError, match="rank 0 at B0, rank 1 at F1s1"):
        simulation.simulate(schedule)
    fine = sc.Schedule("fine", 2, 2, 1, (rows[0], (rows[1][1], rows[1][2], rows[1][0],
                                                   rows[1][3])))
    assert simulation.simulate(fine).makespan > 0


@given(p=st.integers(1, 6), m=st.integers(1, 10), seed=st.randoms(use_true_random=False))
def test_any_valid_reordering_that_keeps_1f1b_waits_is_checked_alike(p, m, seed):
    """A rank's actions shuffled keep every action once; check refuses exactly the orders
    that put a backward before its forward."""
    rows = [list(row) for row in sc.one_f_one_b(p, m).actions]
    r = seed.randrange(p)
    seed.shuffle(rows[r])
    schedule = sc.Schedule("shuffled", p, m, 1, tuple(tuple(row) for row in rows))
    seen, ordered = set(), True
    for a in rows[r]:
        ordered &= a.phase == "F" or sc.Action("F", a.microbatch, a.stage) in seen
        seen.add(a)
    if ordered:
        sc.check(schedule)
    else:
        with pytest.raises(ValueError, match="before its forward"):
            sc.check(schedule)


def test_check_refuses_incomplete_or_misplaced_schedules():
    good = sc.one_f_one_b(2, 2)
    missing = sc.Schedule("x", 2, 2, 1, (good.actions[0][:-1], good.actions[1]))
    with pytest.raises(ValueError, match="missing"):
        sc.check(missing)
    swapped = sc.Schedule("x", 2, 2, 1, (good.actions[1], good.actions[0]))
    with pytest.raises(ValueError, match="lives on rank"):
        sc.check(swapped)
    twice = sc.Schedule("x", 2, 2, 1, (good.actions[0] + good.actions[0][:1],
                                       good.actions[1]))
    with pytest.raises(ValueError, match="twice"):
        sc.check(twice)


@pytest.mark.parametrize("name,v", [("gpipe", 1), ("1f1b", 1), ("interleaved_1f1b", 2)])
def test_every_message_of_a_step_has_its_own_tag_and_one_receiver(name, v):
    for p, m in [(2, 4), (3, 6), (4, 8)]:
        schedule = sc.make(name, p, m, v)
        sent, received = {}, {}
        for r, row in enumerate(schedule.actions):
            for a in row:
                target = schedule.target(a)
                if target is not None:
                    key = (r, schedule.rank_of(target), schedule.tag(a))
                    assert key not in sent
                    sent[key] = a
                if schedule.source(a) is not None:
                    key = (schedule.rank_of(schedule.source(a)), r, schedule.incoming_tag(a))
                    assert key not in received
                    received[key] = a
        assert set(sent) == set(received)
        assert max(tag for _, _, tag in sent) * 2 + 1 < 32768     # data 2t, header 2t + 1


def test_the_tag_space_is_checked():
    with pytest.raises(ValueError, match="message tags"):
        sc.one_f_one_b(8, 2000)


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_a_slow_stage_sets_the_pace(name):
    """With one stage twice as slow the makespan is set by it: m slow slots plus the fast
    stages' fill and drain."""
    p, m = 4, 8
    costs = [(1.0, 2.0)] * p
    costs[2] = (2.0, 4.0)
    sim = simulation.simulate(sc.make(name, p, m), costs=costs)
    assert sim.makespan >= m * 6.0
    assert sim.busy[2] == pytest.approx(m * 6.0)


def test_stage_idle_is_each_ranks_share_of_its_own_span():
    sim = simulation.simulate(sc.one_f_one_b(2, 2), 1.0, 1.0)
    # rank 0: F0 F1 | waits | B0 | B1 ; rank 1: waits 1 then F0 B0 F1 B1
    assert sim.spans[1][0][1] == 1.0 and sim.stage_idle(1) == pytest.approx(1 / 5)
    assert sim.makespan == 6.0 and sim.stage_idle(0) == pytest.approx(2 / 6)


@pytest.mark.parametrize("shape,dtype,placements", [
    ((4, 16, 8), "float64", (Shard(0), Replicate())),
    ((), "float32", (Partial("sum"), Partial("max"))),
    ((3, 5), "complex128", (Replicate(), Shard(1), Partial("avg"))),
    ((0, 2), "bool", (Replicate(),))])
def test_a_message_header_carries_the_spec(shape, dtype, placements):
    header = encode_spec(shape, dtype, placements)
    assert header.shape == (HEADER,)
    got = decode_spec(header, len(placements))
    assert got == (tuple(shape), np.dtype(dtype), tuple(placements))


def test_a_header_refuses_what_it_cannot_carry():
    with pytest.raises(ValueError, match="cannot send"):
        encode_spec((1,) * 40, "float64", ())
    with pytest.raises(ValueError, match="cannot send"):
        encode_spec((2,), "object", ())


def test_schedules_print_per_rank():
    text = str(sc.one_f_one_b(2, 3))
    assert text.splitlines()[1].split()[2:] == ["F0", "F1", "B0", "F2", "B1", "B2"]
    assert list(itertools.chain(*sc.gpipe(1, 1).actions)) == [sc.Action("F", 0, 0),
                                                              sc.Action("B", 0, 0)]


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(2, 4), (4, 4), (4, 8), (3, 5)])
def test_ranks_sharing_cores(name, p, m):
    """With a core each the shared simulation is the ideal one; on one core nothing idles
    while anything can run (the makespan is the total work when the schedule never waits
    on a message nobody computes), and the bubble shrinks as cores get fewer."""
    schedule = sc.make(name, p, m)
    ideal = simulation.simulate(schedule)
    alike = simulation.simulate(schedule, cores=p + 1)
    assert alike.makespan == pytest.approx(ideal.makespan)
    one = simulation.simulate(schedule, cores=1)
    assert one.makespan == pytest.approx(3.0 * m * p)       # F 1 + B 2 per action pair
    bubbles = [simulation.simulate(schedule, cores=c).bubble for c in range(1, p + 1)]
    assert all(a <= b + 1e-9 for a, b in zip(bubbles, bubbles[1:]))
    assert bubbles[-1] == pytest.approx(ideal.bubble)


def test_measured_durations_replace_the_costs_action_by_action():
    schedule = sc.one_f_one_b(3, 4)
    plain = simulation.simulate(schedule, 1.0, 2.0)
    same = {a: 1.0 if a.phase == "F" else 2.0 for row in schedule.actions for a in row}
    assert simulation.simulate(schedule, durations=same).spans == plain.spans
    slow = dict(same)
    slow[sc.Action("B", 3, 2)] = 12.0            # the last backward of the last stage
    assert simulation.simulate(schedule, durations=slow).makespan == pytest.approx(
        plain.makespan + 10.0)
