"""The halo plan (``ops.windows``) without MPI: every rank's exchange simulated from the
plan alone gives each rank exactly the rows its window needs, for shifts, clips, periodic
windows and widened ones, on even, uneven and empty blocks; windows reaching past a
neighbour are refused."""
import numpy as np
import pytest

from mtensor.ops.windows import Window, blocks, halo_plan, reach, widened


def simulate(window, length, p):
    """What each rank holds after the exchange the plan describes, as global row numbers."""
    plan = halo_plan(window, length, p)
    if plan is None:
        return None
    owned = [np.arange(lo, hi) for lo, hi in blocks(length, p)]
    out = []
    for k, me in enumerate(plan):
        prev, nxt = plan[(k - 1) % p], plan[(k + 1) % p]
        got_prev = owned[(k - 1) % p][slice(*prev.to_next)]
        got_next = owned[(k + 1) % p][slice(*nxt.to_prev)]
        assert len(got_prev) == me.from_prev and len(got_next) == me.from_next
        out.append(np.concatenate([got_prev, owned[k][slice(*me.own)], got_next]))
    return out


def needed(window, length, p):
    out = []
    for lo, hi in blocks(window.base, p):
        if lo == hi:
            out.append(np.arange(0))
            continue
        rows = np.arange(lo + window.offset - window.widen,
                         hi + window.offset + window.widen + window.grow)
        if window.periodic:
            out.append(rows % length)
        elif window.clamp:
            out.append(np.unique(np.clip(rows, 0, length - 1)) if length else rows[:0])
        else:
            clip = length if window.clip < 0 else window.clip
            out.append(rows[(rows >= 0) & (rows < min(clip, length))])
    return out


def reachable(window, length, p, k):
    """Whether rank k's rows (before wrapping round) lie in its block and its neighbours'
    (the previous of rank 0 is the last block one length earlier, when periodic)."""
    owned = blocks(length, p)
    lo, hi = blocks(window.base, p)[k]
    if lo == hi:
        return True
    rows = set(range(lo + window.offset - window.widen,
                     hi + window.offset + window.widen + window.grow))
    if window.clamp:
        rows = {min(max(r, 0), length - 1) for r in rows}
    elif not window.periodic:
        clip = length if window.clip < 0 else window.clip
        rows = {r for r in rows if 0 <= r < min(clip, length)}
    have = set(range(*owned[k]))
    if k > 0 or window.periodic:
        shift = -length if k == 0 else 0
        have |= {r + shift for r in range(*owned[(k - 1) % p])}
    if k < p - 1 or window.periodic:
        shift = length if k == p - 1 else 0
        have |= {r + shift for r in range(*owned[(k + 1) % p])}
    return rows <= have


CASES = [(n, p, w) for n in (1, 2, 5, 16, 17) for p in (2, 3, 4, 8) for w in (
    Window(0, 0, 0, max(n - 2, 0), 2), Window(0, 0, 0, max(n - 2, 0), 0),
    Window(0, 0, 0, max(n - 2, 0), 1), Window(0, 0, 0, n, -1, n - 1),
    Window(0, 0, 0, n, 1, periodic=True), Window(0, 0, 0, n, -2, periodic=True),
    Window(0, 0, 0, n, 0, widen=1), Window(0, 0, 0, n, 0, periodic=True, widen=2),
    Window(0, 0, 0, max(n - 1, 0), 0, grow=2), Window(0, 0, 0, n + 5, -2, clamp=True),
    Window(0, 0, 0, n + 9, -7, clamp=True), Window(0, 0, 0, n + 4, -1, periodic=True))]


@pytest.mark.parametrize("length, p, window", CASES)
def test_the_exchange_brings_each_rank_its_window(length, p, window):
    got = simulate(window, length, p)
    want = needed(window, length, p)
    if got is None:   # refused: some rank needs rows beyond its neighbours' blocks
        assert any(not reachable(window, length, p, k) for k in range(p))
        return
    for k in range(p):
        assert got[k].tolist() == want[k].tolist(), (k, got[k], want[k])


def test_a_window_past_a_neighbour_is_refused_and_a_narrow_one_is_not():
    assert halo_plan(Window(0, 0, 0, 11, 4), 11, 4) is None      # 3-row blocks, shift 4
    assert halo_plan(Window(0, 0, 0, 11, 3), 11, 4) is not None   # 2-row last block


SHARED = [(n, p, w) for n in (1, 2, 5, 10, 16, 17) for p in (2, 3, 4, 8) for w in (
    Window(0, 0, 0, max(n - 2, 0), 2), Window(0, 0, 0, max(n - 2, 0), 0),
    Window(0, 0, 0, max(n - 2, 0), 1), Window(0, 0, 0, max(n - 1, 0), 1),
    Window(0, 0, 0, n, -1, n - 1), Window(0, 0, 0, max(n - 4, 0), 4))]


@pytest.mark.parametrize("length, p, window", SHARED)
def test_a_window_is_cut_from_the_block_widened_by_its_reach(length, p, window):
    """Every rank's window, cut from its block widened by ``reach`` rows (what the widened
    exchange brings, simulated), is exactly the rows the window needs; where ``widened``
    refuses, the widened exchange itself reaches past a neighbour or the window does."""
    width = reach(window, length, p)
    takes = widened(window, width, length, p)
    wide = Window(0, 0, 0, length, 0, widen=width)
    if takes is None:
        assert simulate(wide, length, p) is None or simulate(window, length, p) is None
        return
    have = simulate(wide, length, p)
    want = needed(window, length, p)
    for k in range(p):
        assert have[k][slice(*takes[k])].tolist() == want[k].tolist(), (k, takes[k])
    if width:      # one row less would not do
        assert widened(window, width - 1, length, p) is None


def test_the_reach_of_shifted_slices():
    assert reach(Window(0, 0, 0, 510, 2), 512, 2) == 1          # U[2:] on 2 ranks
    assert reach(Window(0, 0, 0, 510, 1), 512, 2) == 0          # U[1:-1]: own rows only
    assert reach(Window(0, 0, 0, 8, 0), 10, 4) == 2             # U[:-2] of 3,3,2,2 rows
    assert widened(Window(0, 0, 0, 5, 1, periodic=True), 1, 5, 2) is None   # np.roll's
