"""The sample sort's plan without MPI: the exchanges are simulated rank by rank."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.ops import sort_plan as plan
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
