"""``np.diff``, ``np.convolve`` and ``np.gradient`` along an axis (``halo_apply``) simulated on
one process (no MPI): the rows each output block reads (``window_of``) against a brute force
over the ops' dependencies, and the op on every mesh coordinate, its operand read through
the chosen window (the rows a halo exchange brings, simulated as ``test_windows`` does) or
with the axis gathered, reassembled against numpy on the whole array, for every dtype,
layout, mode and end rows.
"""
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_windows import simulate as exchange

from mtensor.cost.model import CostModel
from mtensor.ops import RULES, OpCall, Operand
from mtensor.ops.choose import choose_windows
from mtensor.ops.halo import out_length, window_of
from mtensor.ops.windows import blocks, halo_plan, window_rows
from mtensor.placement import Partial, Replicate, Shard, local_shape, local_slices, mesh_coords

R, S0, S1, S2, PS = Replicate(), Shard(0), Shard(1), Shard(2), Partial("sum")
RNG = np.random.default_rng(7)


def ints(*shape, dtype=np.int64):
    """Small integers (differences stay exact); non-negative for unsigned and bool."""
    low = 0 if np.dtype(dtype).kind in "ub" else -9
    return RNG.integers(low, 10, shape).astype(dtype)


@lru_cache(maxsize=None)
def dependencies(kind, params, length):
    """Per output row of diff or convolve, the set of input rows it reads: the nonzero
    columns of the Jacobian of numpy's op (both are linear), padded rows removed."""
    n, before, after = params[:3]
    total = length + before + after
    eye = np.eye(total)
    if kind == "diff":
        jac = np.diff(eye, n, axis=0)
    else:
        # 'valid' convolution with a kernel of n + 1 nonzero taps: row i sums rows i..i+n
        jac = np.array([eye[i:i + n + 1].sum(axis=0) for i in range(total - n)])
    return [{j - before for j in np.flatnonzero(row) if 0 <= j - before < length}
            for row in jac]


@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 8])
def test_each_block_reads_exactly_its_rows_brute_force(p):
    """diff and convolve: the rows an output block's window holds are the span of the rows
    its outputs depend on; gradient: its block and ``edge_order`` rows past either end."""
    for length in range(0, 11):
        for n in range(0, 4):
            for before, after in ((0, 0), (1, 0), (0, 2), (3, 1)):
                for kind in ("diff", "convolve"):
                    params = (n, before, after)
                    deps = dependencies(kind, params, length)
                    window = window_of(kind, params, length)
                    for start, stop in blocks(len(deps), p):
                        rows = set().union(*[deps[i] for i in range(start, stop)])
                        want = (min(rows), max(rows) + 1) if rows else (0, 0)
                        assert window_rows(window, (start, stop), length) == want, (
                            kind, params, length, p, (start, stop))
        for edge_order in (1, 2):
            window = window_of("gradient", (edge_order, 1.0), length)
            for lo, hi in blocks(length, p):
                want = (max(lo - edge_order, 0), min(hi + edge_order, length)) if hi > lo \
                    else (0, 0)
                assert window_rows(window, (lo, hi), length) == want


@pytest.mark.parametrize("kind,length,params,want", [
    ("diff", 7, (1, 0, 0), 6), ("diff", 7, (3, 2, 1), 7), ("diff", 2, (5, 1, 0), 0),
    ("diff", 0, (1, 0, 0), 0), ("convolve", 5, (2, 2, 2), 7), ("convolve", 5, (2, 0, 0), 3),
    ("gradient", 6, (2, 1.0), 6), ("gradient", 6, (1, None), 6),
])
def test_out_length(kind, length, params, want):
    # numpy's lengths: diff of the joined rows loses n; 'full' convolve of 5 with a kernel of 3
    # has 7 rows, 'valid' 3; gradient keeps the length
    assert out_length(kind, length, params) == want


# --- the op simulated ------------------------------------------------------------------------

def _lent(p, axis):
    """Hand-written: extras are whole along the axis and split like ``a`` elsewhere."""
    return p if isinstance(p, Shard) and p.dim != axis else R


def reference(kind, x, axis, params, extras):
    ends = dict(extras)
    if kind == "diff":
        return np.diff(x, params[0], axis, **ends)
    if kind == "convolve":
        return ends["want"] if "want" in ends else np.convolve(x, ends["kernel"], ends["mode"])
    spacing = ends.get("coords", params[1])
    return np.gradient(x, spacing, axis=axis, edge_order=params[0])


def block_of(x, layout, mesh_shape, c, axis, windows):
    """This coordinate's block of ``x`` laid out as ``layout``, its rows along ``axis`` the
    ones the window's exchange brings (simulated from the plan) when there is one."""
    where = list(local_slices(x.shape, mesh_shape, layout, c))
    for w in windows:
        rows = exchange(w, x.shape[axis], mesh_shape[w.mesh_dim])[c[w.mesh_dim]]
        where[axis] = rows
    return x[tuple(where[:axis])][(slice(None),) * axis + (where[axis],)][
        (slice(None),) * (axis + 1) + tuple(where[axis + 1:])]


def simulate(kind, x, axis, params, mesh_shape, layout, extras=()):
    """Run ``halo_apply`` at every coordinate and compare with numpy on the whole array, both
    ways: the axis gathered, and (where one fits) read through the window.  ``extras``:
    (role, array) for prepend/append/coords.  Returns whether a window fits."""
    mesh_shape, layout = tuple(mesh_shape), tuple(layout)
    roles, values = ["a"], [x]
    for role, value in extras:
        if role in ("prepend", "append", "coords"):
            roles.append(role)
            values.append(value)
    lent = [tuple(R if r == "coords" else _lent(p, axis) for p in layout) for r in roles[1:]]
    operands = tuple(Operand(v.shape, v.dtype, lay) for v, lay in zip(values, [layout] + lent))
    call = OpCall("halo_apply", operands, (kind, axis, tuple(roles), params), mesh_shape)
    strategy = RULES["halo_apply"](call)
    chosen = choose_windows(call, strategy.choices, CostModel())
    split = [i for i, (p, n) in enumerate(zip(layout, mesh_shape)) if p == Shard(axis) and n > 1]
    window = None
    if len(split) == 1:
        window = window_of(kind, params, x.shape[axis], split[0], axis)
        window = window if halo_plan(window, x.shape[axis], mesh_shape[split[0]]) else None
    assert chosen[3] in ((), (window,))          # a window only where one fits
    gathered = tuple(R if p == Shard(axis) or isinstance(p, Partial) else p for p in layout)
    out_layout = tuple(R if isinstance(p, Partial) else p for p in layout)
    want = reference(kind, x, axis, params, extras)
    assert strategy.out_shape == want.shape
    ways = [((gathered,) + tuple(lent), out_layout, ()), chosen[:2] + (chosen[3],)]
    if window is not None:
        ways.append(((layout,) + tuple(lent), out_layout, (window,)))
    for in_layouts, out_layout, windows in ways:
        got, covered = np.zeros(want.shape, want.dtype), np.zeros(want.shape, bool)
        for c in mesh_coords(mesh_shape):
            mesh = SimpleNamespace(shape=mesh_shape, coordinate=c)
            blocks_in = [block_of(x, in_layouts[0], mesh_shape, c, axis, windows)] + [
                v[local_slices(v.shape, mesh_shape, lay, c)]
                for v, lay in zip(values[1:], in_layouts[1:])]
            out = strategy.bind(in_layouts, out_layout, mesh, windows)(*blocks_in)
            assert out.dtype == want.dtype, (out.dtype, want.dtype)
            assert out.shape == local_shape(want.shape, mesh_shape, out_layout, c)
            where = local_slices(want.shape, mesh_shape, out_layout, c)
            np.testing.assert_array_equal(out, want[where])
            got[where], covered[where] = out, True
        assert covered.all()
        np.testing.assert_array_equal(got, want)
    return window is not None


def diff_case(x, n, axis, prepend=None, append=None):
    rows = [0 if e is None else e.shape[axis] for e in (prepend, append)]
    extras = [(r, e) for r, e in (("prepend", prepend), ("append", append)) if e is not None]
    return (n, *rows), extras


def rows_like(x, axis, k, dtype=None):
    shape = list(x.shape)
    shape[axis] = k
    return ints(*shape, dtype=dtype or x.dtype)


LAYOUTS_1D = [((1,), (S0,)), ((2,), (S0,)), ((3,), (S0,)), ((4,), (S0,)), ((2, 3), (S0, S0)),
              ((2, 2), (R, S0)), ((3, 2), (S0, R)), ((7,), (S0,)), ((2,), (R,))]


@pytest.mark.parametrize("mesh,layout", LAYOUTS_1D)
def test_diff_1d(mesh, layout):
    for length in (1, 2, 5, 14):
        x = ints(length)
        for n in (1, 2, 3):
            params, extras = diff_case(x, n, 0)
            simulate("diff", x, 0, params, mesh, layout, extras)
        for pre, app in ((1, 0), (2, 3), (4, 0)):
            params, extras = diff_case(x, 2, 0, rows_like(x, 0, pre) if pre else None,
                                       rows_like(x, 0, app) if app else None)
            simulate("diff", x, 0, params, mesh, layout, extras)


@pytest.mark.parametrize("mesh,layout,axis", [
    ((2, 3), (S1, S0), 1), ((2, 3), (S0, S1), 1), ((3, 2), (S1, S1), 1), ((2, 2), (S2, S0), 2),
    ((4,), (S0,), 0), ((2, 2), (S0, R), 0), ((3,), (S1,), 0),
])
def test_diff_nd_with_ends(mesh, layout, axis):
    x = ints(5, 7, 3)
    for pre, app in ((0, 0), (1, 0), (0, 2), (3, 1)):
        for n in (1, 2, 4):
            params, extras = diff_case(x, n, axis, rows_like(x, axis, pre) if pre else None,
                                       rows_like(x, axis, app) if app else None)
            simulate("diff", x, axis, params, mesh, layout, extras)


@pytest.mark.parametrize("dtype,end", [(np.int8, np.float32), (np.uint8, np.int16),
                                       (np.float32, np.float64), (np.complex64, np.int8),
                                       (np.int32, None), (np.bool_, np.bool_)])
def test_diff_dtypes(dtype, end):
    # numpy's join of [prepend, a, append] promotes, then subtract keeps the dtype
    x = ints(9, 2, dtype=dtype)
    for pre, app in ((1, 0), (0, 1), (2, 2)) if end else ((0, 0),):
        params, extras = diff_case(x, 1, 0, rows_like(x, 0, pre, end) if pre else None,
                                   rows_like(x, 0, app, end) if app else None)
        simulate("diff", x, 0, params, (3,), (S0,), extras)
        simulate("diff", x, 0, params, (2, 2), (S0, S1), extras)


def test_diff_longer_than_axis_is_empty():
    x = ints(3, 4)
    for n in (3, 4, 6):
        params, extras = diff_case(x, n, 0)
        simulate("diff", x, 0, params, (2,), (S0,))
    params, extras = diff_case(x, 5, 0, rows_like(x, 0, 1))
    simulate("diff", x, 0, params, (3,), (S0,), extras)
    params, extras = diff_case(x, 5, 0, None, rows_like(x, 0, 2))
    simulate("diff", x, 0, params, (4,), (S0,), extras)


def convolve_case(x, v, mode):
    """What ``numpy.differences.convolve`` passes: kernel length - 1 rows of halo, the mode's zero
    padding as prepended/appended rows."""
    m = v.size
    before, after = {"full": (m - 1, m - 1), "same": (m - 1 - (m - 1) // 2, (m - 1) // 2),
                     "valid": (0, 0)}[mode]
    extras = [("kernel", v), ("mode", mode)]
    extras += [(r, np.zeros(k, x.dtype)) for r, k in (("prepend", before), ("append", after)) if k]
    return (m - 1, before, after, v.dtype.str, tuple(v.tolist())), extras


@pytest.mark.parametrize("mesh,layout", LAYOUTS_1D)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve(mesh, layout, mode):
    for length in (4, 13):
        x = ints(length)
        for m in (1, 2, 4):
            v = ints(m)
            params, extras = convolve_case(x, v, mode)
            simulate("convolve", x, 0, params, mesh, layout, extras)


@pytest.mark.parametrize("a_type,v_type", [(np.int16, np.float32), (np.float32, np.int64),
                                           (np.int8, np.int8), (np.float64, np.complex64)])
def test_convolve_dtypes(a_type, v_type):
    x, v = ints(11, dtype=a_type), ints(3, dtype=v_type)
    for mode in ("full", "same", "valid"):
        params, extras = convolve_case(x, v, mode)
        simulate("convolve", x, 0, params, (3,), (S0,), extras)


def test_convolve_single_precision():
    """The kernel keeps its dtype: float32 taps convolve in float32.  Bit for bit, each rank
    computes numpy's 'valid' convolution of the zero-padded array (numpy's 'full' and 'same'
    sum the products at the ends in another order: equal up to rounding)."""
    rng = np.random.default_rng(11)
    x, v = rng.standard_normal(40).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    xc = (rng.standard_normal(30) + 1j * rng.standard_normal(30)).astype(np.complex64)
    for a, k in ((x, v), (xc, v), (xc, v.astype(np.complex64) * 1j)):
        for mode in ("full", "same", "valid"):
            params, extras = convolve_case(a, k, mode)
            ends = dict(extras)
            padded = np.concatenate([ends.get("prepend", a[:0]), a, ends.get("append", a[:0])])
            want = np.convolve(padded, k, "valid")
            np.testing.assert_allclose(want, np.convolve(a, k, mode), rtol=1e-5, atol=1e-5)
            extras.append(("want", want))
            simulate("convolve", a, 0, params, (3,), (S0,), extras)


def floats(*shape):
    return RNG.standard_normal(shape)


@pytest.mark.parametrize("mesh,layout", LAYOUTS_1D)
def test_gradient_1d(mesh, layout):
    for length in (3, 4, 12):
        x = floats(length)
        for edge_order in (1, 2):
            for spacing in (0.5, 3):
                simulate("gradient", x, 0, (edge_order, spacing), mesh, layout, ())


@pytest.mark.parametrize("mesh,layout,axis", [
    ((2, 3), (S1, S0), 1), ((2, 3), (S0, S1), 1), ((2, 2), (S2, S2), 2), ((3,), (S1,), 0),
])
def test_gradient_nd(mesh, layout, axis):
    x = floats(6, 9, 5)
    for edge_order in (1, 2):
        simulate("gradient", x, axis, (edge_order, 2.0), mesh, layout)
        simulate("gradient", x, axis, (edge_order, 2.0), mesh, layout, ())


def test_gradient_integer_input():
    # numpy's gradient of integers is float64
    x = ints(8, 3, dtype=np.int16)
    simulate("gradient", x, 0, (1, 1.0), (3,), (S0,))
    simulate("gradient", x.astype(np.float32), 0, (2, 1.0), (3,), (S0,))


def coords_case(x):
    return [("coords", x)]


@pytest.mark.parametrize("mesh,layout", [((2,), (S1,)), ((3,), (S1,)), ((2, 2), (S1, S1)),
                                         ((4,), (S1,)), ((1,), (S1,)), ((2,), (R,))])
def test_gradient_coordinates(mesh, layout):
    n = 11
    x = floats(2, n)
    uneven = np.cumsum(RNG.uniform(0.5, 2.0, n))
    even_ints = np.arange(n) * 3                    # evenly spaced: numpy's scalar formula
    # evenly spaced except near the ends: the middle windows are evenly spaced, and still
    # use numpy's uneven formula for the whole axis
    piecewise = np.concatenate([[0.0, 0.3, 1.0], np.arange(2.0, 2.0 + n - 5), [n - 2.5, n]])
    piecewise_f32 = piecewise.astype(np.float32)
    for coords in (uneven, even_ints, piecewise, piecewise_f32, np.arange(n, dtype=np.uint8)):
        for edge_order in (1, 2):
            simulate("gradient", x, 1, (edge_order, None), mesh, layout, coords_case(coords))


def test_gradient_coordinates_decreasing_unsigned_and_single_precision():
    # numpy takes integer coordinates as float64: decreasing unsigned ones do not wrap
    x = floats(10)
    down = np.arange(30, 0, -3).astype(np.uint8)
    bumpy = np.array([40, 38, 33, 30, 27, 24, 21, 18, 12, 1], np.uint8)
    for coords in (down, bumpy):
        for mesh, layout in (((3,), (S0,)), ((2, 2), (S0, S0))):
            simulate("gradient", x, 0, (1, None), mesh, layout, coords_case(coords))
            simulate("gradient", x, 0, (2, None), mesh, layout, coords_case(coords))
    # float32 values on float32 coordinates, evenly spaced windows included: the padding row
    # has the coordinates' dtype, so numpy computes in single precision as on the whole axis
    x32 = floats(12).astype(np.float32)
    coords = np.concatenate([np.arange(5.0), [5.5, 7.0], np.arange(8.0, 13.0)]).astype(np.float32)
    for edge_order in (1, 2):
        simulate("gradient", x32, 0, (edge_order, None), (4,), (S0,), coords_case(coords))
        simulate("gradient", x32, 0, (edge_order, None), (3,), (S0,), coords_case(coords))


def test_gradient_coordinates_short_axis_and_windows():
    # two rows: one step; five rows on five blocks: windows of two rows at the ends
    simulate("gradient", floats(2), 0, (1, None), (2,), (S0,), coords_case(np.array([0.0, 3.0])))
    uneven = np.array([0.0, 1.0, 3.0, 3.5, 6.0])
    simulate("gradient", floats(5), 0, (1, None), (5,), (S0,), coords_case(uneven))
    simulate("gradient", floats(5, 2), 0, (1, None), (5,), (S0,), coords_case(uneven))


def test_gradient_more_blocks_than_rows():
    # empty blocks give empty results of numpy's dtype
    for dtype in (np.float32, np.complex64, np.int8):
        x = ints(3, 2, dtype=dtype)
        simulate("gradient", x, 0, (1, 1.0), (5,), (S0,))
        simulate("gradient", x, 0, (2, None), (2, 3), (S0, S0),
                 coords_case(np.array([0.0, 1.0, 3.0])))


def test_gradient_coordinates_keep_the_uneven_formula():
    """Coordinates uneven at one end only: the windows away from it are evenly spaced by 3,
    where numpy's uniform formula ((f[i+1] - f[i-1]) / 6) rounds differently from its uneven
    one (f[i+1] / 6 - f[i-1] / 6), which numpy uses for the whole axis."""
    rng = np.random.default_rng(5)
    steps = np.arange(0.0, 60.0, 3.0)
    uneven_start = np.concatenate([[-4.0, -2.5], steps])
    uneven_end = np.concatenate([steps, [58.5, 61.0]])
    x = rng.standard_normal((2, 22))
    for coords in (uneven_start, uneven_end):
        for edge_order in (1, 2):
            for mesh, layout in (((4,), (S1,)), ((3, 2), (R, S1))):
                simulate("gradient", x, 1, (edge_order, None), mesh, layout, coords_case(coords))
                simulate("gradient", x.T.copy(), 0, (edge_order, None), mesh, (S0,) * len(mesh),
                         coords_case(coords))


def test_gradient_coordinates_evenly_spaced_windows_at_both_ends():
    # 12 rows in 4 blocks of 3: coordinates uneven only in the middle, so the first and the
    # last windows are each evenly spaced (padded on the side that is cut off)
    x = floats(12)
    coords = np.concatenate([np.arange(5.0), [5.5, 7.0], np.arange(8.0, 13.0)])
    for edge_order in (1, 2):
        simulate("gradient", x, 0, (edge_order, None), (4,), (S0,), coords_case(coords))
        simulate("gradient", x, 0, (edge_order, None), (3,), (S0,), coords_case(coords))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(1, 16), st.integers(1, 4), st.integers(0, 3), st.integers(0, 3),
       st.sampled_from(LAYOUTS_1D[:-1]))
def test_diff_property(length, n, pre, app, mesh_layout):
    """A window where one fits, or the axis gathered, gives numpy's diff."""
    mesh, layout = mesh_layout
    x = ints(length, 2)
    params, extras = diff_case(x, n, 0, rows_like(x, 0, pre) if pre else None,
                               rows_like(x, 0, app) if app else None)
    simulate("diff", x, 0, params, mesh, layout, extras)


# --- the rule's choices ----------------------------------------------------------------------

def test_apply_rule_choices():
    x, pre, coords = ints(6, 4, 3), ints(1, 4, 3), floats(6)
    ops = (Operand(x.shape, x.dtype, (PS, S0, S1, R)), Operand(pre.shape, pre.dtype, None),
           Operand(coords.shape, coords.dtype, None))
    call = OpCall("halo_apply", ops, ("diff", 0, ("a", "prepend", "coords"), (1, 1, 0)),
                  (2, 2, 2, 2))
    strategy = RULES["halo_apply"](call)
    # the operand reduced where Partial, gathered along axis 0 where split along it (the
    # output split there), kept elsewhere; the ends whole along axis 0 and split like the
    # operand along axis 1; coordinates always whole; and a window on mesh dim 1, whose
    # blocks of 3 rows lend the one row the next block reads
    window = window_of("diff", (1, 1, 0), 6, 1, 0)
    assert [(c.inputs, c.output, c.window) for c in strategy.choices] == [
        ((R, R, R), R, None), ((S1, S1, R), S1, None), ((R, R, R), S0, None),
        ((S0, R, R), S0, window)]
    assert strategy.out_shape == (6, 4, 3)
    ops2 = (Operand(x.shape, x.dtype, (S0, S0)),)
    nested = OpCall("halo_apply", ops2, ("gradient", 0, ("a",), (1, 1.0)), (2, 2))
    assert all(c.window is None for c in RULES["halo_apply"](nested).choices)   # gathers
    # 5 rows on 4 ranks (2, 1, 1, 1), n = 3: block 0's output row reads rows 0..3, of which
    # row 3 is beyond its neighbour's block
    narrow = OpCall("halo_apply", (Operand((5, 2), x.dtype, (S0,)),),
                    ("diff", 0, ("a",), (3, 0, 0)), (4,))
    assert all(c.window is None for c in RULES["halo_apply"](narrow).choices)


def test_the_output_is_split_along_the_axis_only_where_the_operand_is():
    """``a`` of partial terms on mesh dim 0 and split along the axis on mesh dim 1 (read
    through a window), its prepended rows split on mesh dim 0 (so a split output there is
    not 'introduced'): gathering and cutting the output along the axis on mesh dim 0 costs
    what keeping it whole does, and would nest under the window's split; the output is
    whole there."""
    x, pre = ints(8, 4), ints(1, 4)
    ops = (Operand(x.shape, x.dtype, (PS, S0)), Operand(pre.shape, pre.dtype, (S1, R)))
    call = OpCall("halo_apply", ops, ("diff", 0, ("a", "prepend"), (1, 1, 0)), (2, 2))
    strategy = RULES["halo_apply"](call)
    in_layouts, out_layout, _, windows = choose_windows(call, strategy.choices, CostModel())
    assert out_layout == (R, S0) and windows == (window_of("diff", (1, 1, 0), 8, 1, 0),)
    assert simulate("diff", x, 0, (1, 1, 0), (2, 2), (R, S0), [("prepend", pre)])


@pytest.mark.parametrize("mode", ["constant", "edge", "wrap"])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 8])
def test_pad_axis_on_every_rank_both_ways(mode, p):
    """``pad_axis`` along a split axis on every rank, read through its window (the rows the
    exchange brings, simulated) and with the axis gathered, against np.pad."""
    for length in (1, 3, 8, 17):
        x = ints(length, 2)
        for before, after in ((0, 1), (2, 0), (3, 5), (12, 1)):
            values = (7, -2)
            call = OpCall("pad_axis", (Operand(x.shape, x.dtype, (S0,)),),
                          (0, before, after, mode, values), (p,))
            strategy = RULES["pad_axis"](call)
            kwargs = {"constant_values": values} if mode == "constant" else {}
            want = np.pad(x, ((before, after), (0, 0)), mode, **kwargs)
            windows = [c.window for c in strategy.choices if c.window is not None]
            for way in [()] + [tuple(windows)] * bool(windows):
                layout = (S0,) if way else (R,)
                parts = [strategy.bind((layout,), (S0,), SimpleNamespace(shape=(p,),
                                                                         coordinate=(k,)), way)(
                    block_of(x, layout, (p,), (k,), 0, way)) for k in range(p)]
                np.testing.assert_array_equal(np.concatenate(parts), want)
            if p > 1 and length // p >= before + after:      # a window fits narrow pads
                assert windows
