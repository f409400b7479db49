"""The halo exchange of ``np.diff``, ``np.convolve`` and ``np.gradient`` simulated on one
process (no MPI): ``halo_width`` against a brute force over block layouts of which rows each
output block depends on, and the whole pipeline (``halo_edges`` on every block, the edges
gathered along the axis, ``halo_apply`` on every mesh coordinate) reassembled against numpy
on the whole array, for every dtype, layout, mode and end rows.
"""
from functools import lru_cache
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtensor.cost.model import CostModel
from mtensor.ops import RULES, OpCall, Operand, choose
from mtensor.ops.halo import halo_width, out_length
from mtensor.ops.registry import Choice
from mtensor.placement import Partial, Replicate, Shard, local_shape, local_slices, mesh_coords

R, S0, S1, S2, PS = Replicate(), Shard(0), Shard(1), Shard(2), Partial("sum")
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def fresh_halo_width():
    """``halo_width`` is cached: every test computes its answers afresh."""
    halo_width.cache_clear()


def ints(*shape, dtype=np.int64):
    """Small integers (differences stay exact); non-negative for unsigned and bool."""
    low = 0 if np.dtype(dtype).kind in "ub" else -9
    return RNG.integers(low, 10, shape).astype(dtype)


def blocks_of(length, sizes):
    """(start, stop) of each block of an axis split by mesh dims of ``sizes`` in turn, from
    ``local_slices`` on a mesh of those dims (row-major over them)."""
    out = []
    for c in mesh_coords(tuple(sizes)):
        s = local_slices((length,), tuple(sizes), (S0,) * len(sizes), c)[0]
        out.append((s.start, s.stop))
    return out or [(0, length)]


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


def brute_width(kind, params, length, sizes):
    """How far any output block reaches past its input block, brute force.  Gradient: each
    block reads ``edge_order`` rows past either end (the one-sided stencils at the axis' ends
    read rows 0..edge_order; the window's own ends are cut off)."""
    deps = None if kind == "gradient" else dependencies(kind, params, length)
    blocks = blocks_of(length, sizes)
    outs = blocks_of(length if deps is None else len(deps), sizes)
    width = 0
    for (lo, hi), (start, stop) in zip(blocks, outs):
        if deps is None:
            reach = params[0]
            rows = set(range(max(lo - reach, 0), min(hi + reach, length))) if hi > lo else set()
        else:
            rows = set().union(*[deps[i] for i in range(start, stop)])
        if rows:
            width = max(width, lo - min(rows), max(rows) + 1 - hi)
    return width, 2 * width >= max(hi - lo for lo, hi in blocks)


SIZES = [(1,), (2,), (3,), (4,), (2, 2), (3, 2), (2, 3), (5,)]


@pytest.mark.parametrize("sizes", SIZES)
def test_halo_width_diff_convolve_brute_force(sizes):
    for length in range(0, 11):
        for n in range(0, 4):
            for before, after in ((0, 0), (1, 0), (0, 2), (3, 1)):
                for kind in ("diff", "convolve"):
                    params = (n, before, after)
                    assert halo_width(kind, params, length, sizes) == \
                        brute_width(kind, params, length, sizes), (kind, params, length, sizes)


@pytest.mark.parametrize("sizes", SIZES)
def test_halo_width_gradient(sizes):
    for length in range(2, 12):
        for edge_order in (1, 2):
            params = (edge_order, 1.0)
            assert halo_width("gradient", params, length, sizes) == \
                brute_width("gradient", params, length, sizes), (params, length, sizes)


def test_halo_width_hand_worked():
    # 10 rows in 2 blocks (0..5, 5..10), diff n=1 keeps 9 rows: out blocks 0..5, 5..9;
    # out row 4 reads rows 4, 5: block 0 borrows one row, block 1 none
    assert halo_width("diff", (1, 0, 0), 10, (2,)) == (1, False)
    # one prepended row: out rows 0..10 in blocks 0..5, 5..10; out row i reads rows i-1, i,
    # so block 1 (rows 5..10) reads row 4: one row borrowed before
    assert halo_width("diff", (1, 1, 0), 10, (2,)) == (1, False)
    # 4 rows in 4 blocks of one, diff n=2: 2 out rows, in blocks 0..1, 1..2, 2..2, 2..2;
    # out row k (k = 0, 1) reads rows k..k+2: blocks 0 and 1 each borrow two rows after;
    # 2*2 >= 1: gather whole
    assert halo_width("diff", (2, 0, 0), 4, (4,)) == (2, True)
    # gradient with edge_order 2 on 3 blocks of 5: each block reads 2 rows past its ends;
    # 2*2 < 5, 2*2 >= 4
    assert halo_width("gradient", (2, 1.0), 15, (3,)) == (2, False)
    assert halo_width("gradient", (2, 1.0), 12, (3,)) == (2, True)
    # 2*width equal to the longest block (2 rows): gathering the axis is no dearer
    assert halo_width("gradient", (1, 1.0), 4, (2,)) == (1, True)
    assert halo_width("gradient", (1, 1.0), 6, (2,)) == (1, False)
    assert halo_width("diff", (0, 0, 0), 6, (3,)) == (0, False)


@pytest.mark.parametrize("kind,length,params,want", [
    ("diff", 7, (1, 0, 0), 6), ("diff", 7, (3, 2, 1), 7), ("diff", 2, (5, 1, 0), 0),
    ("diff", 0, (1, 0, 0), 0), ("convolve", 5, (2, 2, 2), 7), ("convolve", 5, (2, 0, 0), 3),
    ("gradient", 6, (2, 1.0), 6), ("gradient", 6, (1, None), 6),
])
def test_out_length(kind, length, params, want):
    # numpy's lengths: diff of the joined rows loses n; 'full' convolve of 5 with a kernel of 3
    # has 7 rows, 'valid' 3; gradient keeps the length
    assert out_length(kind, length, params) == want


# --- the pipeline simulated ------------------------------------------------------------------

def _lent(p, axis):
    """Hand-written: extras are whole along the axis and split like ``a`` elsewhere."""
    return p if isinstance(p, Shard) and p.dim != axis else R


def gathered_edges(x, axis, width, mesh_shape, layout):
    """Each block's edges from ``halo_edges``, placed in its layout: the edges all-gathered."""
    call = OpCall("halo_edges", (Operand(x.shape, x.dtype, layout),), (axis, width), mesh_shape)
    strategy = RULES["halo_edges"](call)
    nblocks = int(np.prod([mesh_shape[i] for i, p in enumerate(layout) if p == Shard(axis)]))
    want = list(x.shape)
    want[axis] = 2 * width * nblocks
    assert strategy.out_shape == tuple(want)
    assert strategy.choices == [Choice((p,), p) for p in dict.fromkeys(layout)]
    out, covered = np.zeros(strategy.out_shape, x.dtype), np.zeros(strategy.out_shape, bool)
    for c in mesh_coords(mesh_shape):
        block = x[local_slices(x.shape, mesh_shape, layout, c)]
        edges = strategy.bind((layout,), layout, SimpleNamespace(shape=mesh_shape, coordinate=c))(
            block)
        assert edges.dtype == x.dtype
        assert edges.shape == local_shape(strategy.out_shape, mesh_shape, layout, c)
        where = local_slices(out.shape, mesh_shape, layout, c)
        out[where], covered[where] = edges, True
    assert covered.all()
    return out


def reference(kind, x, axis, params, extras):
    ends = dict(extras)
    if kind == "diff":
        return np.diff(x, params[0], axis, **ends)
    if kind == "convolve":
        return ends["want"] if "want" in ends else np.convolve(x, ends["kernel"], ends["mode"])
    spacing = ends.get("coords", params[1])
    return np.gradient(x, spacing, axis=axis, edge_order=params[0])


def simulate(kind, x, axis, params, mesh_shape, layout, extras=(), whole=None, width=None):
    """Run the halo pipeline at every coordinate and compare with numpy on the whole array.
    ``extras``: (role, array) for prepend/append/coords; ``whole`` and ``width`` override
    ``halo_width``'s answer (any width that covers the reach must give numpy's result)."""
    mesh_shape, layout = tuple(mesh_shape), tuple(layout)
    length = x.shape[axis]
    sizes = tuple(mesh_shape[i] for i, p in enumerate(layout) if p == Shard(axis))
    w, gather = halo_width(kind, params, length, sizes)
    width = w if width is None else width
    gather = gather if whole is None else whole
    roles, values = ["a"], [x]
    if width:
        roles.append("edges")
        values.append(x if gather else gathered_edges(x, axis, width, mesh_shape, layout))
    for role, value in extras:
        if role in ("prepend", "append", "coords"):
            roles.append(role)
            values.append(value)
    operands = tuple(Operand(v.shape, v.dtype, layout if i == 0 else tuple(
        R if r == "coords" else _lent(p, axis) for p in layout))
        for i, (v, r) in enumerate(zip(values, roles)))
    call = OpCall("halo_apply", operands, (kind, axis, width, gather, tuple(roles), params),
                  mesh_shape)
    strategy = RULES["halo_apply"](call)
    in_layouts, out_layout, _ = choose(call, strategy.choices, CostModel())
    assert in_layouts == tuple(o.placements for o in operands)
    assert out_layout == layout
    want = reference(kind, x, axis, params, extras)
    assert strategy.out_shape == want.shape
    got, covered = np.zeros(want.shape, want.dtype), np.zeros(want.shape, bool)
    for c in mesh_coords(mesh_shape):
        blocks = [v[local_slices(v.shape, mesh_shape, lay, c)] for v, lay in zip(values, in_layouts)]
        out = strategy.bind(in_layouts, out_layout, SimpleNamespace(shape=mesh_shape, coordinate=c))(
            *blocks)
        assert out.dtype == want.dtype, (out.dtype, want.dtype)
        assert out.shape == local_shape(want.shape, mesh_shape, layout, c)
        where = local_slices(want.shape, mesh_shape, layout, c)
        np.testing.assert_array_equal(out, want[where])
        got[where], covered[where] = out, True
    assert covered.all()
    np.testing.assert_array_equal(got, want)
    return width, gather


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
@pytest.mark.parametrize("whole", [None, False])
def test_diff_1d(mesh, layout, whole):
    for length in (1, 2, 5, 14):
        x = ints(length)
        for n in (1, 2, 3):
            params, extras = diff_case(x, n, 0)
            simulate("diff", x, 0, params, mesh, layout, extras, whole)
        for pre, app in ((1, 0), (2, 3), (4, 0)):
            params, extras = diff_case(x, 2, 0, rows_like(x, 0, pre) if pre else None,
                                       rows_like(x, 0, app) if app else None)
            simulate("diff", x, 0, params, mesh, layout, extras, whole)


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
            for whole in (None, False, True):
                simulate("diff", x, axis, params, mesh, layout, extras, whole)


@pytest.mark.parametrize("dtype,end", [(np.int8, np.float32), (np.uint8, np.int16),
                                       (np.float32, np.float64), (np.complex64, np.int8),
                                       (np.int32, None), (np.bool_, np.bool_)])
def test_diff_dtypes(dtype, end):
    # numpy's join of [prepend, a, append] promotes, then subtract keeps the dtype
    x = ints(9, 2, dtype=dtype)
    for pre, app in ((1, 0), (0, 1), (2, 2)) if end else ((0, 0),):
        params, extras = diff_case(x, 1, 0, rows_like(x, 0, pre, end) if pre else None,
                                   rows_like(x, 0, app, end) if app else None)
        simulate("diff", x, 0, params, (3,), (S0,), extras, False)
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
            for whole in (None, False):
                simulate("convolve", x, 0, params, mesh, layout, extras, whole)


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
@pytest.mark.parametrize("whole", [None, False])
def test_gradient_1d(mesh, layout, whole):
    for length in (3, 4, 12):
        x = floats(length)
        for edge_order in (1, 2):
            for spacing in (0.5, 3):
                simulate("gradient", x, 0, (edge_order, spacing), mesh, layout, (), whole)


@pytest.mark.parametrize("mesh,layout,axis", [
    ((2, 3), (S1, S0), 1), ((2, 3), (S0, S1), 1), ((2, 2), (S2, S2), 2), ((3,), (S1,), 0),
])
def test_gradient_nd(mesh, layout, axis):
    x = floats(6, 9, 5)
    for edge_order in (1, 2):
        simulate("gradient", x, axis, (edge_order, 2.0), mesh, layout)
        simulate("gradient", x, axis, (edge_order, 2.0), mesh, layout, (), False)


def test_gradient_integer_input():
    # numpy's gradient of integers is float64
    x = ints(8, 3, dtype=np.int16)
    simulate("gradient", x, 0, (1, 1.0), (3,), (S0,))
    simulate("gradient", x.astype(np.float32), 0, (2, 1.0), (3,), (S0,))


def coords_case(x):
    return [("coords", x)]


@pytest.mark.parametrize("mesh,layout", [((2,), (S1,)), ((3,), (S1,)), ((2, 2), (S1, S1)),
                                         ((4,), (S1,)), ((1,), (S1,)), ((2,), (R,))])
@pytest.mark.parametrize("whole", [None, False])
def test_gradient_coordinates(mesh, layout, whole):
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
            simulate("gradient", x, 1, (edge_order, None), mesh, layout, coords_case(coords),
                     whole)


def test_gradient_coordinates_decreasing_unsigned_and_single_precision():
    # numpy takes integer coordinates as float64: decreasing unsigned ones do not wrap
    x = floats(10)
    down = np.arange(30, 0, -3).astype(np.uint8)
    bumpy = np.array([40, 38, 33, 30, 27, 24, 21, 18, 12, 1], np.uint8)
    for coords in (down, bumpy):
        for mesh, layout in (((3,), (S0,)), ((2, 2), (S0, S0))):
            simulate("gradient", x, 0, (1, None), mesh, layout, coords_case(coords))
            simulate("gradient", x, 0, (2, None), mesh, layout, coords_case(coords), False)
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
    simulate("gradient", floats(5), 0, (1, None), (5,), (S0,), coords_case(uneven), False)
    simulate("gradient", floats(5, 2), 0, (1, None), (5,), (S0,), coords_case(uneven), False)


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
                         coords_case(coords), False)


def test_gradient_coordinates_evenly_spaced_windows_at_both_ends():
    # 12 rows in 4 blocks of 3: coordinates uneven only in the middle, so the first and the
    # last windows are each evenly spaced (padded on the side that is cut off)
    x = floats(12)
    coords = np.concatenate([np.arange(5.0), [5.5, 7.0], np.arange(8.0, 13.0)])
    for edge_order in (1, 2):
        simulate("gradient", x, 0, (edge_order, None), (4,), (S0,), coords_case(coords))
        simulate("gradient", x, 0, (edge_order, None), (3,), (S0,), coords_case(coords), False)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.integers(1, 16), st.integers(1, 4), st.integers(0, 3), st.integers(0, 3),
       st.sampled_from(LAYOUTS_1D[:-1]), st.integers(0, 3), st.booleans())
def test_diff_property(length, n, pre, app, mesh_layout, extra_width, whole):
    """Any width at least the one halo_width finds, edges or whole, gives numpy's diff."""
    mesh, layout = mesh_layout
    x = ints(length, 2)
    params, extras = diff_case(x, n, 0, rows_like(x, 0, pre) if pre else None,
                               rows_like(x, 0, app) if app else None)
    sizes = tuple(mesh[i] for i, p in enumerate(layout) if p == S0)
    width = halo_width("diff", params, length, sizes)[0]
    simulate("diff", x, 0, params, mesh, layout, extras, whole, width and width + extra_width)


# --- the rules' choices ----------------------------------------------------------------------

def test_edges_rule_choices_and_partial():
    x = ints(6, 4)
    call = OpCall("halo_edges", (Operand(x.shape, x.dtype, (PS, S0, S1, R)),), (0, 2),
                  (2, 3, 2, 2))
    strategy = RULES["halo_edges"](call)
    # Partial terms are reduced first (the edges are of the value), kept layouts otherwise;
    # 2 rows each end of the 3 blocks on mesh dim 1
    assert strategy.out_shape == (12, 4)
    assert [(c.inputs, c.output) for c in strategy.choices] == [
        ((R,), R), ((S0,), S0), ((S1,), S1), ((R,), R)]


def test_edges_kernel_pads_short_blocks():
    call = OpCall("halo_edges", (Operand((5, 2), np.dtype(np.int32), (S1,)),), (1, 3), (2,))
    strategy = RULES["halo_edges"](call)
    assert strategy.out_shape == (5, 12)
    block = np.arange(1, 11, dtype=np.int32).reshape(5, 2)
    edges = strategy.kernel(block)
    # a block of 2 columns lends them as its first 3 (padded with a zero column) and as its
    # last 3 (the same two, then a zero column)
    pad = np.zeros((5, 1), np.int32)
    np.testing.assert_array_equal(edges, np.concatenate([block, pad, block, pad], axis=1))
    assert edges.dtype == np.int32
    empty = strategy.kernel(np.zeros((5, 0), np.int32))
    np.testing.assert_array_equal(empty, np.zeros((5, 6), np.int32))
    long = np.arange(40, dtype=np.int32).reshape(5, 8)
    np.testing.assert_array_equal(strategy.kernel(long),
                                  np.concatenate([long[:, :3], long[:, 5:]], axis=1))


def test_apply_rule_choices():
    x, pre, coords = ints(6, 4, 3), ints(1, 4, 3), floats(6)
    ops = (Operand(x.shape, x.dtype, (PS, S0, S1, R)),
           Operand(x.shape, x.dtype, (R, R, S1, R)), Operand(pre.shape, pre.dtype, None),
           Operand(coords.shape, coords.dtype, None))
    call = OpCall("halo_apply", ops, ("diff", 0, 1, True, ("a", "edges", "prepend", "coords"),
                                      (1, 1, 0)), (2, 2, 2, 2))
    strategy = RULES["halo_apply"](call)
    # the operand reduced where Partial; edges and ends whole along axis 0 and split like the
    # operand along axis 1; coordinates always whole
    assert [(c.inputs, c.output) for c in strategy.choices] == [
        ((R, R, R, R), R), ((S0, R, R, R), S0), ((S1, S1, S1, R), S1), ((R, R, R, R), R)]
    assert strategy.out_shape == (6, 4, 3)
