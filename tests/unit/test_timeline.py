"""``overlap.timeline``, the model behind ``mt.explain``'s prediction and ``mt.calibrate``'s
overlap fit (pure: no MPI), on programs small enough to work out by hand."""
import pytest

from mtensor.overlap.timeline import (PROBES, BucketCost, fit_overlap, predict_probe,
                                      simulate)

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
