"""``cost.timeline``, the model behind ``mt.explain``'s prediction and ``mt.calibrate``'s
overlap fit (pure: no MPI), on programs small enough to work out by hand."""
import pytest

from mtensor.cost.model import CostModel
from mtensor.cost.timeline import (
    PROBES,
    START_OVERHEAD_S,
    BucketCost,
    Timeline,
    bucket_cost,
    fit_overlap,
    predict_probe,
    probe_program,
    simulate,
)


def bucket(seconds=10.0, phases=1, rate=1.0, link=0):
    return BucketCost(link, seconds, phases, 0.0, rate)


def test_a_bucket_behind_longer_compute_is_hidden():
    t = simulate([("start", 0), ("compute", 0), ("wait", 0)], [30.0], [bucket()])
    assert t.step_s == 30.0 and t.hidden_fraction == 1.0 and t.end[0] == 10.0


def test_a_link_that_moves_nothing_behind_compute_hides_nothing():
    t = simulate([("start", 0), ("compute", 0), ("wait", 0)], [30.0], [bucket(rate=0.0)])
    assert t.step_s == 40.0 and t.hidden_fraction == 0.0 and t.exposed[0] == 10.0


def test_buckets_on_one_link_move_one_after_another():
    """Two 10 s buckets started together behind 10 s of compute: the second one waits for
    the first, so half the communication shows (pricing each alone would say all hidden)."""
    program = [("start", 0), ("start", 1), ("compute", 0), ("wait", 0), ("wait", 1)]
    t = simulate(program, [10.0], [bucket(), bucket()])
    assert t.step_s == 20.0 and t.hidden_fraction == 0.5
    on_two_links = simulate(program, [10.0], [bucket(), bucket(link=1)])
    assert on_two_links.step_s == 10.0


def test_the_next_phase_starts_only_at_a_poll():
    """Two phases of 5 s: behind one 30 s node the second phase waits for the poll at its
    end; behind two 15 s nodes it starts at the poll between them."""
    one = simulate([("start", 0), ("compute", 0), ("wait", 0)], [30.0], [bucket(phases=2)])
    assert one.step_s == 35.0
    two = simulate([("start", 0), ("compute", 0), ("compute", 1), ("wait", 0)],
                   [15.0, 15.0], [bucket(phases=2)])
    assert two.step_s == 30.0


def test_behind_compute_a_link_moves_at_its_rate():
    t = simulate([("start", 0), ("compute", 0), ("compute", 1), ("wait", 0)], [10.0, 10.0],
                 [bucket(seconds=10.0, rate=0.3)])
    assert t.step_s == pytest.approx(24.0)       # 3 + 3 behind compute, 4 in the wait


def test_compute_slows_while_the_link_moves_behind_it():
    t = simulate([("start", 0), ("compute", 0), ("wait", 0)], [30.0], [bucket()], 0.5)
    assert t.step_s == pytest.approx(10.0 + (30.0 - 10.0 / 1.5))   # 10 s slowed, then alone


def test_blocking_runs_and_start_costs():
    t = simulate([("compute", 0), ("run", 0)], [5.0], [BucketCost(0, 10.0, 2, 1.0)])
    assert t.step_s == 16.0 and t.start[0] == 6.0 and t.hidden_fraction == 0.0


def _probes(comm_s, phases, rate, slowdown):
    measured = []
    for probe in PROBES:
        chunk = probe[2] * comm_s
        measured += [chunk, predict_probe(probe, comm_s, phases, chunk, rate, slowdown),
                     chunk * (1 + slowdown)]
    return measured


@pytest.mark.parametrize("rate,slowdown", [(0.0, 0.0), (0.4, 0.1), (1.0, 0.0), (0.65, 0.35)])
def test_the_overlap_fit_recovers_the_model_that_made_the_probes(rate, slowdown):
    """Probes made by the model itself: the rate and the slowdown come back."""
    assert fit_overlap(0.035, 2, _probes(0.035, 2, rate, slowdown)) == (rate, slowdown)


def test_a_start_then_a_wait_costs_the_start_once():
    t = simulate([("start", 0), ("compute", 0), ("wait", 0)], [10.0],
                 [BucketCost(0, 5.0, 1, 1.0, 1.0)])
    assert t.step_s == 11.0 and t.exposed[0] == 0.0 and t.start[0] == 1.0 and t.end[0] == 6.0


def test_phases_queued_together_share_the_link_behind_compute():
    """Two 4 s phases behind 8 s of compute: at rate 0.5 each gets half the link and both
    finish with the compute; at 0.3 each moves 2.4 s and the waits move the rest in turn."""
    program = [("start", 0), ("start", 1), ("compute", 0), ("wait", 0), ("wait", 1)]
    costs = lambda rate: [bucket(4.0, rate=rate), bucket(4.0, rate=rate)]   # noqa: E731
    assert simulate(program, [8.0], costs(0.5)).step_s == pytest.approx(8.0)
    slow = simulate(program, [8.0], costs(0.3))
    assert slow.step_s == pytest.approx(11.2)
    assert slow.exposed == pytest.approx({0: 1.6, 1: 1.6})
    slowed = simulate(program, [8.0], costs(0.5), overlap_slowdown=1.0)
    assert slowed.step_s == pytest.approx(8.0 + 8.0 - 8.0 / 2)   # busy 8 s at half speed


@pytest.mark.parametrize("rate,slowdown,want", [(1.0, 0.0, 15.0), (0.5, 0.0, 15.0),
                                                (0.25, 0.0, 17.5), (1.0, 1.0, 17.5)])
def test_a_probe_worked_out_by_hand(rate, slowdown, want):
    """One 10 s all-reduce of 2 phases behind one 10 s chunk: the first phase moves behind
    the chunk (if the rate allows), the second only after the poll that ends it."""
    assert predict_probe((1, 1, 1.0), 10.0, 2, 10.0, rate, slowdown) == pytest.approx(want)


def test_the_slowdown_is_the_median_ratio_of_chunks_inside_to_alone_within_0_and_1():
    comm_s = 0.035
    base = _probes(comm_s, 2, 0.4, 0.0)
    for inside, want in (([1.0, 1.1, 1.2, 1.5], 0.2), ([3.0, 3.0, 3.0, 3.0], 1.0),
                         ([0.5, 0.9, 0.9, 0.9], 0.0)):
        measured = list(base)
        for k, ratio in enumerate(inside):
            measured[3 * k + 2] = measured[3 * k] * ratio
        assert fit_overlap(comm_s, 2, measured)[1] == want


def test_compute_alone_takes_its_time():
    t = simulate([("compute", 0), ("compute", 1)], [2.0, 3.0], [])
    assert t.step_s == 5.0 and t.compute_s == 5.0 and t.comm_s == 0 and t.hidden_fraction == 0.0


def test_a_bucket_moves_behind_compute_without_a_wait():
    """Started, then 30 s of compute and no wait: its 10 s move during the compute."""
    t = simulate([("start", 0), ("compute", 0)], [30.0], [bucket(rate=0.5)])
    assert t.end == {0: 20.0} and t.step_s == 30.0     # at half speed: 20 s


def test_inside_a_wait_the_link_moves_one_bucket_at_a_time():
    """Two 4 s buckets started together, then waited for at once: the first is done at 4 s,
    the second at 8 s (behind compute both would move together and end at 8 s)."""
    t = simulate([("start", 0), ("start", 1), ("wait", 0), ("wait", 1)], [],
                 [bucket(4.0), bucket(4.0)])
    assert t.end == {0: 4.0, 1: 8.0} and t.exposed == {0: 4.0, 1: 4.0} and t.step_s == 8.0


def test_a_wait_moves_every_started_bucket_in_order_of_start():
    """Waiting for the second of two 4 s buckets moves the first one first."""
    t = simulate([("start", 0), ("start", 1), ("wait", 1), ("wait", 0)], [],
                 [bucket(4.0), bucket(4.0)])
    assert t.end == {0: 4.0, 1: 8.0} and t.exposed == {1: 8.0, 0: 0.0}


def test_buckets_on_two_links_move_at_once_in_a_wait():
    t = simulate([("start", 0), ("start", 1), ("wait", 1), ("wait", 0)], [],
                 [bucket(4.0), bucket(6.0, link=1)])
    assert t.end == {0: 4.0, 1: 6.0} and t.step_s == 6.0


def test_a_wait_queues_each_next_phase_at_once():
    """Three phases of 2 s, waited for right away: 6 s, no poll needed between phases."""
    t = simulate([("start", 0), ("wait", 0)], [], [bucket(6.0, phases=3)])
    assert t.step_s == 6.0 and t.end == {0: 6.0}


def test_polls_between_compute_nodes_queue_the_next_phase():
    """Two 5 s phases behind three 4 s nodes at full rate: phase 1 moves in 0-5 s (ends
    inside node 2), waits for the poll at 8 s, moves 8-12 s behind node 3, and its last
    second in the wait: 13 s."""
    t = simulate([("start", 0), ("compute", 0), ("compute", 1), ("compute", 2), ("wait", 0)],
                 [4.0, 4.0, 4.0], [bucket(10.0, phases=2)])
    assert t.step_s == pytest.approx(13.0) and t.end[0] == pytest.approx(13.0)
    assert t.exposed[0] == pytest.approx(1.0)


def test_compute_slows_only_while_a_link_moves():
    """Slowdown 1 (half speed) and a 4 s bucket at rate 0.5 (8 s to move behind compute):
    a 10 s node runs 8 s slowed (4 s of work) then 6 s alone: 14 s.  With rate 0 nothing
    moves behind it and it takes 10 s, then the wait 4 s."""
    moving = simulate([("start", 0), ("compute", 0), ("wait", 0)], [10.0],
                      [bucket(4.0, rate=0.5)], overlap_slowdown=1.0)
    assert moving.step_s == pytest.approx(14.0) and moving.end[0] == pytest.approx(8.0)
    still = simulate([("start", 0), ("compute", 0), ("wait", 0)], [10.0],
                     [bucket(4.0, rate=0.0)], overlap_slowdown=1.0)
    assert still.step_s == pytest.approx(14.0) and still.end[0] == pytest.approx(14.0)


def test_busy_time_follows_the_phases_sharing_the_link():
    """Phases of 2 s and 6 s queued together at rate 0.5, behind a 20 s node slowed 2x
    (slowdown 1): both move at 0.5 until the first ends at 4 s, the other at 0.5 (its rate)
    for its last 4 s: busy 12 s, slowed, so the node's 20 s of work take 12 + 14 = 26 s."""
    t = simulate([("start", 0), ("start", 1), ("compute", 0)], [20.0],
                 [bucket(2.0, rate=0.5), bucket(6.0, rate=0.5)], overlap_slowdown=1.0)
    assert t.end == pytest.approx({0: 4.0, 1: 12.0}) and t.step_s == pytest.approx(26.0)


def test_busy_time_at_a_rate_above_the_fair_share():
    """At rate 1 two phases of 2 s and 6 s share the link (0.5 each) until 4 s, then the
    second moves alone at full speed: 8 s busy; slowed 2x, a 10 s node takes 8 + 6 s."""
    t = simulate([("start", 0), ("start", 1), ("compute", 0)], [10.0],
                 [bucket(2.0), bucket(6.0)], overlap_slowdown=1.0)
    assert t.end == pytest.approx({0: 4.0, 1: 8.0}) and t.step_s == pytest.approx(14.0)


def test_the_longest_busy_link_sets_the_slowed_time():
    """Links 0 (2 s at rate 1) and 1 (6 s at rate 1), slowdown 1: busy 6 s, so a 10 s node
    runs 6 s slowed (3 s of work) and 7 s alone: 13 s."""
    t = simulate([("start", 0), ("start", 1), ("compute", 0)], [10.0],
                 [bucket(2.0), bucket(6.0, link=1)], overlap_slowdown=1.0)
    assert t.step_s == pytest.approx(13.0)
    rev = simulate([("start", 1), ("start", 0), ("compute", 0)], [10.0],
                   [bucket(2.0), bucket(6.0, link=1)], overlap_slowdown=1.0)
    assert rev.step_s == pytest.approx(13.0)


def test_a_blocking_run_is_a_start_and_a_wait():
    t = simulate([("run", 0), ("compute", 0)], [3.0], [BucketCost(0, 4.0, 2, 0.5, 1.0)])
    assert t.step_s == 7.5 and t.start == {0: 0.5} and t.end == {0: 4.5}
    assert t.exposed == {0: 4.0} and t.comm_s == 4.0 and t.compute_s == 3.0


def test_hidden_fraction_takes_out_the_start_costs_and_stays_within_0_and_1():
    costs = (BucketCost(0, 4.0, 1, 1.0), BucketCost(0, 4.0, 1, 1.0))
    assert Timeline(12.0, 10.0, 4.0, costs, {0: 1.0}).hidden_fraction == 0.75   # 1 s exposed
    assert Timeline(13.0, 10.0, 8.0, costs, {0: 1.0, 1: 1.0}).hidden_fraction == 0.875
    assert Timeline(9.0, 10.0, 4.0, costs, {}).hidden_fraction == 1.0
    assert Timeline(20.0, 10.0, 4.0, costs, {}).hidden_fraction == 0.0
    assert Timeline(11.0, 10.0, 0.5, costs, {}).hidden_fraction == 0.0
    assert Timeline(10.0, 10.0, 0.0, costs, {}).hidden_fraction == 0.0


def test_a_bucket_is_priced_from_its_link_phases_and_packing():
    """An all-reduce on 4 ranks of mesh dim 1 (2 ms + bytes / 1e5): 3000 bus bytes take
    32 ms, in 2 x 3 phases; packing 1000 bytes and unpacking them at 1e4 B/s costs 0.2 s."""
    model = CostModel(per_dim=((1e-3, 1e6), (2e-3, 1e5)), copy_beta=1e4,
                      rate_per_dim=(0.1, 0.7))
    fused = bucket_cost("all_reduce", 1, 4, 3000, 1000, True, model)
    assert fused == BucketCost(1, pytest.approx(0.032), 6, pytest.approx(START_OVERHEAD_S + 0.2),
                               0.7)
    alone = bucket_cost("all_gather", 0, 4, 3000, 1000, False, model)
    assert alone == BucketCost(0, pytest.approx(4e-3), 3, START_OVERHEAD_S, 0.1)
    assert bucket_cost("reduce_scatter", 0, 1, 0, 8, False, model).phases == 1
    assert START_OVERHEAD_S == 20e-6


def test_probe_program():
    assert probe_program(2, 2) == ([("start", 0), ("compute", 0), ("compute", 1),
                                    ("start", 1), ("compute", 2), ("compute", 3),
                                    ("wait", 0), ("wait", 1)], 4)
    assert probe_program(1, 0) == ([("start", 0), ("wait", 0)], 0)


def test_probes_with_no_compute_fit_the_least_rate_and_no_slowdown():
    """Chunks of 0 s: every rate predicts the same probe times (ties go to rate 0), and no
    chunk ratio exists to measure a slowdown."""
    probe_s = predict_probe(PROBES[0], 0.01, 2, 0.0, 0.0, 0.0)
    assert fit_overlap(0.01, 2, [0.0, probe_s, 0.0] * 4) == (0.0, 0.0)


def test_the_slowdown_is_rounded_to_hundredths():
    comm_s = 0.035
    measured = _probes(comm_s, 2, 0.4, 0.0)
    for k in range(4):
        measured[3 * k + 2] = measured[3 * k] * 1.123
    assert fit_overlap(comm_s, 2, measured)[1] == 0.12


def test_a_phase_still_moving_at_a_poll_is_not_queued_again():
    """Two 5 s phases behind four 3 s nodes: phase 1 moves 0-5 s through the poll at 3 s,
    phase 2 is queued at the poll at 6 s and moves 6-11 s."""
    t = simulate([("start", 0)] + [("compute", i) for i in range(4)], [3.0] * 4,
                 [bucket(10.0, phases=2)])
    assert t.end == {0: 11.0} and t.step_s == 12.0


def test_an_idle_link_does_not_hide_a_busy_one():
    """Link 0 idle, link 1 busy 4 s: a 10 s node slowed 2x runs 4 s slowed and 8 s alone."""
    for program in ([("start", 1), ("compute", 0)],
                    [("start", 0), ("start", 1), ("compute", 0)]):
        t = simulate(program, [10.0], [bucket(4.0, rate=0.0), bucket(4.0, link=1)], 1.0)
        assert t.step_s == pytest.approx(12.0), program


def test_compute_all_slowed_while_the_link_stays_busy():
    """A 30 s bucket behind a 10 s node slowed 2x: the node takes 20 s, the wait 10 s."""
    t = simulate([("start", 0), ("compute", 0), ("wait", 0)], [10.0], [bucket(30.0)], 1.0)
    assert t.step_s == pytest.approx(30.0) and t.exposed[0] == pytest.approx(10.0)
    assert simulate([("start", 0), ("compute", 0)], [10.0], [bucket(30.0)], 1.0).step_s == \
        pytest.approx(20.0)
