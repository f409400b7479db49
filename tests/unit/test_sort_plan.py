"""The sample sort's plan without MPI: the exchanges are simulated rank by rank."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.ops.plans import sample_sort as plan
from mtensor.placement import Replicate, Shard


def test_layout_counts_follow_the_placements():
    assert plan.layout_counts(7, (4,), (Shard(0),)).tolist() == [2, 2, 2, 1]
    assert plan.layout_counts(6, (2, 2), (Shard(0), Shard(0))).tolist() == [2, 1, 2, 1]
    assert plan.layout_counts(3, (2, 2), (Shard(0), Replicate())).tolist() == [2, 2, 1, 1]
    assert plan.layout_counts(0, (3,), (Shard(0),)).tolist() == [0, 0, 0]


@given(st.integers(0, 50), st.integers(1, 9))
def test_sample_positions_are_sorted_and_inside(n, k):
    pos = plan.sample_positions(n, k)
    assert len(pos) == min(n, k)
    assert np.all(np.diff(pos) > 0) and np.all((0 <= pos) & (pos < max(n, 1)))


def simulate(runs, together):
    """Every rank's sorted run cut at the splitters and merged per bucket, as the executor
    does: returns (merged keys per rank, (rank, position) tags per rank)."""
    p = len(runs)
    lengths = [len(r) for r in runs]
    samples = np.concatenate([r[plan.sample_positions(len(r), p)] for r in runs])
    ranks, positions = plan.sample_owners(lengths, p)
    pick = np.argsort(samples, kind="stable")[plan.splitter_picks(len(samples), p)]
    pieces = []
    for rank, run in enumerate(runs):
        cuts = plan.cut_points(run, rank, samples[pick], ranks[pick], positions[pick], together)
        counts = plan.bucket_counts(cuts, len(run))
        assert counts.sum() == len(run) and np.all(counts >= 0)
        bounds = np.concatenate(([0], np.cumsum(counts)))
        pieces.append([(run[bounds[d]:bounds[d + 1]],
                        [(rank, i) for i in range(bounds[d], bounds[d + 1])]) for d in range(p)])
    merged, tags = [], []
    for d in range(p):
        keys = np.concatenate([pieces[s][d][0] for s in range(p)])
        tag = sum((pieces[s][d][1] for s in range(p)), [])
        order = np.argsort(keys, kind="stable")
        merged.append(keys[order])
        tags.append([tag[i] for i in order])
    return merged, tags


_runs = st.lists(st.lists(st.sampled_from([-1.0, 0.0, 2.0, 2.5, np.nan]), max_size=12),
                 min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(_runs)
def test_buckets_concatenate_to_the_stable_sort(values):
    runs = [np.sort(np.array(v)) for v in values]
    if not sum(len(r) for r in runs):
        return
    merged, tags = simulate(runs, together=False)
    whole = np.concatenate(runs)
    flat_tags = [(r, i) for r, run in enumerate(runs) for i in range(len(run))]
    order = np.argsort(whole, kind="stable")
    assert np.array_equal(np.concatenate(merged), whole[order], equal_nan=True)
    assert sum(tags, []) == [flat_tags[i] for i in order]


@settings(max_examples=200, deadline=None)
@given(_runs)
def test_together_keeps_equal_values_on_one_rank(values):
    runs = [np.unique(np.array(v)) for v in values]
    if not sum(len(r) for r in runs):
        return
    merged, _ = simulate(runs, together=True)
    assert np.array_equal(np.concatenate(merged), np.sort(np.concatenate(runs)), equal_nan=True)
    seen = [set(np.nan_to_num(m, nan=np.inf).tolist()) for m in merged]
    for a in range(len(seen)):
        for b in range(a + 1, len(seen)):
            assert not seen[a] & seen[b]


@given(st.lists(st.integers(0, 9), min_size=1, max_size=6), st.data())
def test_rebalance_counts_move_each_row_to_its_place(held, data):
    p = len(held)
    target = plan.layout_counts(sum(held), (p,), (Shard(0),))
    sends = [plan.rebalance_counts(held, target, r)[0] for r in range(p)]
    recvs = [plan.rebalance_counts(held, target, r)[1] for r in range(p)]
    for r in range(p):
        assert sends[r].sum() == held[r] and recvs[r].sum() == target[r]
        assert all(sends[r][q] == recvs[q][r] for q in range(p))
    rows = np.arange(sum(held))
    have = np.split(rows, np.cumsum(held)[:-1])
    got = [np.concatenate([np.split(have[s], np.cumsum(sends[s])[:-1])[r] for s in range(p)])
           for r in range(p)]
    assert np.array_equal(np.concatenate(got), rows)
    assert [len(g) for g in got] == target.tolist()


@given(st.integers(0, 60), st.integers(1, 12))
def test_sample_positions_are_the_middles_of_equal_parts(n, per_run):
    # part j of k covers [j n / k, (j + 1) n / k): its middle is floor((j + 1/2) n / k)
    k = min(n, per_run)
    pos = plan.sample_positions(n, per_run)
    assert pos.dtype == np.int64
    assert pos.tolist() == [int(Fraction(2 * j + 1, 2 * k) * n) for j in range(k)]


def test_sample_positions_by_hand():
    assert plan.sample_positions(10, 4).tolist() == [1, 3, 6, 8]   # 1.25, 3.75, 6.25, 8.75
    assert plan.sample_positions(3, 5).tolist() == [0, 1, 2]       # fewer elements than samples
    assert plan.sample_positions(0, 3).tolist() == []


def test_sample_owners_lay_samples_out_rank_by_rank():
    ranks, positions = plan.sample_owners([3, 0, 5], 2)
    # run 0: middles of 2 parts of 3 -> 0, 2; run 1 is empty; run 2: of 5 -> 1, 3
    assert ranks.tolist() == [0, 0, 2, 2] and positions.tolist() == [0, 2, 1, 3]
    assert ranks.dtype == np.int64


def test_splitter_picks_by_hand():
    assert plan.splitter_picks(10, 4).tolist() == [2, 5, 7]      # floor(10 j / 4), j = 1..3
    assert plan.splitter_picks(3, 3).tolist() == [1, 2]
    assert plan.splitter_picks(5, 1).tolist() == []
    assert plan.splitter_picks(12, 4).dtype == np.int64


def test_cut_points_by_hand():
    keys = np.array([1, 2, 2, 2, 3])
    values, ranks, positions = np.array([2, 2, 2]), np.array([0, 1, 2]), np.array([0, 2, 0])
    # rank 1 holds the run; an element precedes a splitter when (value, rank, position) is less:
    # the rank-0 splitter follows only the 1, the rank-1 splitter at position 2 follows the 1
    # and the 2 at position 1, the rank-2 splitter follows every 2
    assert plan.cut_points(keys, 1, values, ranks, positions, False).tolist() == [1, 2, 4]
    # together: every 2 follows every splitter of value 2
    assert plan.cut_points(keys, 1, values, ranks, positions, True).tolist() == [1, 1, 1]
    assert plan.bucket_counts(np.array([1, 2, 4]), 5).tolist() == [1, 1, 2, 1]
    assert plan.bucket_counts(np.array([], np.int64), 3).tolist() == [3]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 3), max_size=10), st.integers(0, 3),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 10)),
                min_size=1, max_size=5), st.booleans())
def test_cut_points_count_the_elements_before_each_splitter(run, rank, splitters, together):
    keys = np.sort(np.array(run, dtype=np.int64))
    values, ranks, positions = (np.array(x, dtype=np.int64) for x in zip(*splitters))
    cuts = plan.cut_points(keys, rank, values, ranks, positions, together)
    for j, (v, r, p) in enumerate(splitters):
        before = [(k, rank, i) < (v, r, p) if not together else k < v
                  for i, k in enumerate(keys.tolist())]
        assert cuts[j] == sum(before), (j, keys, (v, r, p))


def test_rebalance_counts_by_hand():
    # rows held 3 | 0 | 5 go to 3 | 3 | 2: rank 2 holds global rows 3..7, keeps 6..7 and
    # sends 3..5 to rank 1; rank 1 receives them
    send, recv = plan.rebalance_counts([3, 0, 5], [3, 3, 2], 2)
    assert send.tolist() == [0, 3, 2] and recv.tolist() == [0, 0, 2]
    send, recv = plan.rebalance_counts([3, 0, 5], [3, 3, 2], 1)
    assert send.tolist() == [0, 0, 0] and recv.tolist() == [0, 0, 3]


def test_rebalance_counts_refuse_mismatched_totals():
    with pytest.raises(ValueError) as info:
        plan.rebalance_counts([3, 2], [2, 2], 0)
    assert str(info.value) == "rebalance: 5 rows held but 4 in the target layout"


def test_layout_counts_dtype_and_replicas():
    counts = plan.layout_counts(5, (2, 3), (Replicate(), Shard(0)))
    assert counts.dtype == np.int64 and counts.tolist() == [2, 2, 1, 2, 2, 1]
